"""TensorDictStore / LazyStackedTensorDictStore against a real redis-server."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict

DTYPES = [
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
    torch.complex128, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
    torch.uint16, torch.uint32, torch.uint64, torch.bool, torch.float8_e4m3fn,
    torch.float8_e5m2,
]  # fmt: skip


def store_cls():
    from tensordict.distributed import TensorDictStore

    return TensorDictStore


def sample(n: int = 6) -> TensorDict:
    return TensorDict(
        {
            "obs": torch.arange(n * 3, dtype=torch.float32).reshape(n, 3),
            "nested": {"step": torch.arange(n), "mask": torch.arange(n) % 2 == 0},
            "label": "episode-1",
        },
        [n],
    )


def raw_client(server):
    import redis

    return redis.Redis(host=server.host, port=server.port)


class CountingClient:
    """Wraps a redis client and counts round trips (pipelines executed)."""

    def __init__(self, client):
        self.client = client
        self.round_trips = 0

    def pipeline(self, *args, **kwargs):
        pipe = self.client.pipeline(*args, **kwargs)
        outer = self
        execute = pipe.execute

        def counted(*a, **k):
            outer.round_trips += 1
            return execute(*a, **k)

        pipe.execute = counted
        return pipe

    def __getattr__(self, name):
        return getattr(self.client, name)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_dtype_round_trips_bit_exact(redis_server, dtype):
    raw = torch.randint(
        0, 256, (4, 5, 16), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)
    )
    value = raw.view(dtype)  # every bit pattern, NaN payloads included
    store = store_cls()(host=redis_server.host, port=redis_server.port, batch_size=[4])
    store["x"] = value
    back = store["x"]
    assert back.dtype == dtype and back.shape == value.shape
    assert torch.equal(back.view(torch.uint8), value.view(torch.uint8))
    assert torch.equal(store[1:3]["x"].view(torch.uint8), value[1:3].view(torch.uint8))
    store.clear_redis()


def test_layout_on_the_server_and_reads(redis_server):
    td = sample()
    store = store_cls().from_tensordict(td, host=redis_server.host, port=redis_server.port)
    client = raw_client(redis_server)
    meta = client.hgetall(f"tensordict:{store.td_id}:meta")
    fields = {k.decode(): json.loads(v) for k, v in meta.items()}
    assert fields['["obs"]'] == {"kind": "tensor", "dtype": "float32", "shape": [6, 3]}
    assert fields['["label"]'] == {"kind": "json", "value": "episode-1"}
    raw = client.get(f'tensordict:{store.td_id}:data:["obs"]')
    assert raw == td["obs"].numpy().tobytes()  # raw bytes, C order, no pickle
    assert sorted(map(str, store.keys(True, True))) == sorted(map(str, td.keys(True, True)))
    assert torch.equal(store["obs"], td["obs"])
    assert torch.equal(store["nested", "step"], td["nested", "step"])
    assert store["label"] == "episode-1"
    local = store.to_local()
    assert (local == td).all() and local["label"] == "episode-1"
    assert torch.equal(store["nested"]["mask"], td["nested", "mask"])
    with pytest.raises(KeyError, match="missing"):
        store["missing"]
    store.clear_redis()
    assert list(client.scan_iter(f"tensordict:{store.td_id}:data:*")) == []


def test_rows_written_in_place_one_round_trip(redis_server):
    import redis

    td = sample()
    counting = CountingClient(redis.Redis(host=redis_server.host, port=redis_server.port))
    store = store_cls().from_tensordict(td, client=counting)
    client = raw_client(redis_server)
    key = f'tensordict:{store.td_id}:data:["obs"]'
    before = client.get(key)
    counting.round_trips = 0
    store[2:4] = TensorDict(
        {"obs": torch.full((2, 3), -1.0), "nested": {"step": torch.tensor([7, 7])}}, [2]
    )
    assert counting.round_trips == 1
    after = client.get(key)
    assert len(after) == len(before)
    row = 3 * 4
    assert after[: 2 * row] == before[: 2 * row] and after[4 * row :] == before[4 * row :]
    expected = td["obs"].clone()
    expected[2:4] = -1
    assert torch.equal(store["obs"], expected)
    # scattered rows, a row and a column
    store[torch.tensor([5, 0])] = TensorDict(
        {"obs": torch.stack([torch.full((3,), 5.0), torch.full((3,), 0.5)])}, [2]
    )
    expected[5], expected[0] = 5.0, 0.5
    store[1] = TensorDict({"obs": torch.full((3,), 9.0)}, [])
    expected[1] = 9.0
    assert torch.equal(store["obs"], expected)
    counting.round_trips = 0
    rows = store[[5, 1]]
    assert counting.round_trips == 1
    assert torch.equal(rows["obs"], expected[[5, 1]])
    assert torch.equal(store[4]["nested", "step"], torch.tensor(4))
    assert torch.equal(store[2:4]["nested", "step"], torch.tensor([7, 7]))
    assert torch.equal((store + 1)["obs"], expected + 1)
    # a key the store lacks is created, zeros in the other rows (as in memory)
    store[0] = TensorDict({"new": torch.ones(2)}, [])
    assert torch.equal(store["new"], torch.zeros(6, 2).index_fill_(0, torch.tensor([0]), 1.0))
    store.clear_redis()


def test_bad_values(redis_server):
    store = store_cls()(host=redis_server.host, port=redis_server.port, batch_size=[3])
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        store["a"] = torch.zeros(2)
    with pytest.raises(TypeError, match="JSON"):
        store["b"] = {1, 2}
    with pytest.raises(TypeError, match="JSON"):
        store.set_non_tensor("c", object())
    assert list(store.keys()) == []
    store["n"] = {"x": torch.ones(3, 2)}
    assert torch.equal(store["n", "x"], torch.ones(3, 2))
    store.clear_redis()


def test_unix_socket_and_reconnect(redis_server):
    if redis_server.unix_socket is None:
        pytest.skip("an external redis server (TENSORDICT_TEST_REDIS) has no Unix socket here")
    cls = store_cls()
    store = cls.from_tensordict(sample(), unix_socket_path=redis_server.unix_socket)
    again = cls.from_store(td_id=store.td_id, unix_socket_path=redis_server.unix_socket)
    assert again.td_id == store.td_id and again.batch_size == torch.Size([6])
    assert torch.equal(again["obs"], sample()["obs"])
    with pytest.raises(KeyError, match="no tensordict store"):
        cls.from_store(td_id="does-not-exist", host=redis_server.host, port=redis_server.port)
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        store["obs"]
    again.clear_redis()


def test_two_processes_share_a_store(redis_server):
    store = store_cls().from_tensordict(sample(), host=redis_server.host, port=redis_server.port)
    script = textwrap.dedent(
        f"""
        import torch
        from tensordict import TensorDict
        from tensordict.distributed import TensorDictStore
        s = TensorDictStore.from_store(
            td_id={store.td_id!r}, host={redis_server.host!r}, port={redis_server.port}
        )
        assert torch.equal(s["obs"][0], torch.tensor([0.0, 1.0, 2.0]))
        s[3] = TensorDict({{"obs": torch.full((3,), 42.0)}}, [])
        s["from_child"] = torch.arange(6) * 10
        s.close()
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert torch.equal(store["obs"][3], torch.full((3,), 42.0))
    assert "from_child" not in store.keys()  # cached metadata ...
    assert torch.equal(store.refresh()["from_child"], torch.arange(6) * 10)  # ... refreshed
    store.clear_redis()


def test_server_restart_with_and_without_persistence(own_redis_server):
    redis_server = own_redis_server
    from tensordict.distributed._redis import StoreDataLostError

    store = store_cls().from_tensordict(sample(), host=redis_server.host, port=redis_server.port)
    redis_server.stop(save=True)
    with pytest.raises(ConnectionError, match="cannot reach the server"):
        store["obs"]
    redis_server.start(persistent=True)
    assert torch.equal(store["obs"], sample()["obs"])  # reconnects, data kept
    store[0] = TensorDict({"obs": torch.full((3,), 8.0)}, [])
    redis_server.restart(keep_data=False)  # everything lost on the server
    with pytest.raises(StoreDataLostError, match="restarted without persistence"):
        store["obs"]
    with pytest.raises(StoreDataLostError, match="nothing was written"):
        store[1] = TensorDict({"obs": torch.zeros(3)}, [])
    client = raw_client(redis_server)
    assert client.exists(f'tensordict:{store.td_id}:data:["obs"]') == 0  # not recreated
    with pytest.raises(StoreDataLostError):
        store["new"] = torch.zeros(6)  # the write lands, but the loss is reported
    store.clear_redis()


def test_lazy_stacked_store(redis_server):
    from tensordict.distributed import LazyStackedTensorDictStore

    local = LazyStackedTensorDict(
        TensorDict({"x": torch.zeros(3), "tag": "a"}, []),
        TensorDict({"x": torch.ones(5), "tag": "a"}, []),
    )
    store = store_cls().from_tensordict(local, host=redis_server.host, port=redis_server.port)
    assert isinstance(store, LazyStackedTensorDictStore) and store.batch_size == torch.Size([2])
    assert torch.equal(store[0]["x"], torch.zeros(3)) and torch.equal(store[1]["x"], torch.ones(5))
    client = raw_client(redis_server)
    assert len(list(client.scan_iter(f"tensordict:{store.td_id}:data:*"))) == 1  # one string
    store[1] = TensorDict({"x": torch.full((5,), 2.0), "tag": "a"}, [])  # in place
    store[0] = TensorDict({"x": torch.full((2,), 3.0), "tag": "a"}, [])  # new shape
    again = store_cls().from_store(
        td_id=store.td_id, host=redis_server.host, port=redis_server.port
    )
    assert isinstance(again, LazyStackedTensorDictStore)
    back = again.to_local()
    assert torch.equal(back[0]["x"], torch.full((2,), 3.0))
    assert torch.equal(back[1]["x"], torch.full((5,), 2.0))
    with pytest.raises(RuntimeError, match="batch size"):
        store[0] = TensorDict({"x": torch.zeros(2, 2)}, [2])
    empty = LazyStackedTensorDictStore(
        host=redis_server.host, port=redis_server.port, count=3, inner_batch_size=[2]
    )
    assert empty.batch_size == torch.Size([3, 2])
    store.clear_redis()
    empty.clear_redis()


def test_set_in_place_keeps_shape_and_dtype_as_in_memory(redis_server):
    """set_/update_ write into the entry as a TensorDict in memory does (the oracle): a
    value that broadcasts is cast and broadcast, another shape or complex into real raises
    InplaceWriteError (ValueError and RuntimeError) and the server keeps its data."""
    from tensordict.distributed import LazyStackedTensorDictStore

    local = sample(3)
    store = store_cls().from_tensordict(local, host=redis_server.host, port=redis_server.port)
    lazy_local = LazyStackedTensorDict(*sample(2).unbind(0))
    lazy = LazyStackedTensorDictStore.from_lazy_stack(
        lazy_local, host=redis_server.host, port=redis_server.port
    )
    for remote, oracle in ((store, local), (lazy, lazy_local)):
        n = oracle.batch_size[0]
        for key, bad in (
            ("obs", torch.ones(n, 5)),
            (("nested", "step"), torch.ones(n + 1)),
        ):
            with pytest.raises((ValueError, RuntimeError)) as expected:
                oracle.clone().set_(key, bad)
            with pytest.raises(RuntimeError, match="nothing was written|batch dim") as got:
                remote.set_(key, bad)
            assert isinstance(got.value, type(expected.value))
            assert str(key if isinstance(key, str) else key[-1]) in str(got.value)
            with pytest.raises(RuntimeError):  # update_'s own check, as in memory
                remote.update_({key: bad} if isinstance(key, str) else {"nested": {"step": bad}})
            assert (remote.to_tensordict() == oracle).all()
        # what broadcasts is written, cast to the entry's dtype (complex: torch warns once)
        row = torch.tensor([1.5, 2.5, 3.5], dtype=torch.float64).expand(n, 3)
        oracle.set_("obs", row)
        remote.set_("obs", row)
        assert remote["obs"].dtype == torch.float32 and remote["obs"].shape == (n, 3)
        assert torch.equal(remote["obs"], oracle["obs"])
        steps = torch.full((n,), 7.0 + 1j)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            oracle.set_(("nested", "step"), steps)
            remote.set_(("nested", "step"), steps)
        assert remote["nested", "step"].dtype == torch.int64
        assert torch.equal(remote["nested", "step"], oracle["nested", "step"])
    store.clear_redis()
    lazy.clear_redis()


# ---------------------------------------------------------------------- oracle helpers
def leaves(td):
    from tensordict import is_leaf_nontensor

    return sorted(
        (k if isinstance(k, tuple) else (k,))
        for k in td.keys(include_nested=True, leaves_only=True, is_leaf=is_leaf_nontensor)
    )


def assert_same_td(got, expected):
    """``got`` (a store, a view or a local result) holds what ``expected`` holds: the same
    batch size, leaves, tensors and non-tensor values (one or one per row)."""
    from tensordict import NonTensorStack

    assert got.batch_size == expected.batch_size
    assert leaves(got) == leaves(expected)
    for key in leaves(expected):
        value, want = got.get(key), expected.get(key)
        if isinstance(want, torch.Tensor):
            assert isinstance(value, torch.Tensor), key
            assert value.dtype == want.dtype and torch.equal(value.cpu(), want.cpu()), key
        else:
            assert isinstance(value, NonTensorStack) == isinstance(want, NonTensorStack), key
            assert value.tolist() == want.tolist(), key


def connect(redis_server):
    return {"host": redis_server.host, "port": redis_server.port}


def server_snapshot(redis_server, store):
    """Everything the server holds for ``store`` (to check that nothing was written)."""
    client = raw_client(redis_server)
    out = {}
    for key in sorted(client.scan_iter(f"tensordict:{store.td_id}:*")):
        kind = client.type(key)
        out[key] = client.hgetall(key) if kind == b"hash" else client.get(key)
    client.close()
    return out


def deep_sample(n: int = 4) -> TensorDict:
    return TensorDict(
        {
            "a": {"b": {"c": torch.arange(n, dtype=torch.float32), "tag": "deep"}},
            "x": torch.arange(n * 2).reshape(n, 2),
            "label": "dog",
        },
        [n],
    )


# ---------------------------------------------------------------------- nested keys
def test_nested_keys_at_any_depth_as_in_memory(redis_server):
    oracle = deep_sample()
    store = store_cls().from_tensordict(oracle, **connect(redis_server))
    for td in (oracle, store):
        td["a", "b", "d"] = torch.ones(4, 3)
        td.set(("q", "r", "s", "t"), torch.full((4,), 2.0))
        td["a", "e"] = torch.zeros(4, dtype=torch.int8)
        td.del_(("a", "b", "c"))
        del td["q", "r", "s", "t"]  # the only leaf of q: q goes (see the next test)
    del oracle["q"]  # in memory the emptied nested tensordicts stay; the store has none
    for include_nested in (False, True):
        for leaves_only in (False, True):
            assert sorted(map(str, store.keys(include_nested, leaves_only))) == sorted(
                map(str, oracle.keys(include_nested, leaves_only))
            ), (include_nested, leaves_only)
    assert_same_td(store, oracle)
    assert ("a", "b", "d") in store.keys(include_nested=True)
    assert ("a", "b", "c") not in store.keys(include_nested=True)
    assert torch.equal(store["a", "b", "d"], oracle["a", "b", "d"])
    assert_same_td(store[0]["a", "b"], oracle[0]["a", "b"])
    assert torch.equal(store["a", "b", "d"][1:3], oracle["a", "b", "d"][1:3])
    assert torch.equal(store[1:3]["a", "e"], oracle[1:3]["a", "e"])
    assert store["a", "b", "tag"] == oracle["a", "b", "tag"] == "deep"
    with pytest.raises(KeyError):
        store["a", "missing"]
    with pytest.raises(KeyError):
        store.del_(("a", "missing"))
    # another handle sees the same tree
    again = store_cls().from_store(td_id=store.td_id, **connect(redis_server))
    assert_same_td(again, oracle)
    store.clear_redis()


def test_deleting_the_last_leaf_of_a_nested_entry_removes_it(redis_server):
    """A store keeps leaves only, as the reference's: a nested entry with no leaf left
    is gone from keys() (in memory an empty TensorDict would stay)."""
    store = store_cls().from_tensordict(deep_sample(), **connect(redis_server))
    del store["a", "b", "c"]
    del store["a", "b", "tag"]
    assert "a" not in store.keys()
    assert sorted(map(str, store.keys(True))) == ["label", "x"]
    store.clear_redis()


def test_nested_entry_is_a_store_that_reads_and_writes_through(redis_server):
    import gc
    import pickle

    cls = store_cls()
    oracle = deep_sample()
    store = cls.from_tensordict(oracle, **connect(redis_server))
    sub = store["a"]
    assert isinstance(sub, cls) and sub.td_id == store.td_id
    assert sub.batch_size == store.batch_size
    assert "path='a'" in repr(sub)
    assert_same_td(sub, oracle["a"])
    assert_same_td(sub.to_local(), oracle["a"])
    for td in (oracle["a"], sub):
        td["b", "e"] = torch.full((4, 2), 3.0)  # written through the view
        td[1:3] = {"b": {"c": torch.tensor([7.0, 8.0])}}  # rows, through the view
        td["b"]["f"] = torch.arange(4)  # a view of a view
        td.del_(("b", "tag"))
    assert_same_td(store, oracle)
    reopened = cls.from_store(td_id=store.td_id, **connect(redis_server))
    assert_same_td(reopened, oracle)
    assert_same_td(store["a"][2], oracle["a"][2])
    # the view outlives its store's handle; pickled, it reconnects to the same entry
    view = cls.from_store(td_id=store.td_id, **connect(redis_server))["a", "b"]
    gc.collect()
    assert torch.equal(view["c"], oracle["a", "b", "c"])
    back = pickle.loads(pickle.dumps(view))
    assert_same_td(back, oracle["a", "b"])
    # pop returns a local copy of the nested entry
    popped = store.pop("a")
    expected = oracle.pop("a")
    assert isinstance(popped, TensorDict)
    assert_same_td(popped, expected)
    assert_same_td(store, oracle)
    store.clear_redis()


def test_update_merges_nested_entries_as_in_memory(redis_server):
    oracle = deep_sample()
    store = store_cls().from_tensordict(oracle, **connect(redis_server))
    for td in (oracle, store):
        td.update({"a": {"b": {"c": torch.full((4,), 5.0)}}})  # ("a","b","tag") kept
        td.update({"x": {"new": torch.ones(4)}})  # a nested entry replaces the leaf
        td.update({"label": "cat"})
    assert_same_td(store, oracle)
    for td in (oracle, store):
        td.update({"a": torch.zeros(4)})  # a leaf replaces the nested entry
        td["x"] = {"other": torch.zeros(4, 1)}  # set replaces the whole nested entry
    assert_same_td(store, oracle)
    store.clear_redis()


# ---------------------------------------------------------------------- pickling
def test_pickled_store_reconnects_without_locks_or_connections(redis_server):
    import pickle
    import pickletools

    import redis

    from tensordict.distributed import LazyStackedTensorDictStore

    cls = store_cls()
    oracle = deep_sample()
    store = cls.from_tensordict(oracle, **connect(redis_server))
    client = redis.Redis(**connect(redis_server))
    with_client = cls.from_store(td_id=store.td_id, client=client)
    lazy = LazyStackedTensorDictStore.from_lazy_stack(
        LazyStackedTensorDict(TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(3))),
        **connect(redis_server),
    )
    store.lock_()
    for handle in (store, with_client, lazy, store["a"]):
        data = pickle.dumps(handle)
        text = " ".join(str(arg) for _, arg, _ in pickletools.genops(data))
        for forbidden in ("RLock", "_thread", "Connection", "redis.", "Script"):
            assert forbidden not in text, (forbidden, handle)
        back = pickle.loads(data)
        assert type(back) is type(handle) and back.td_id == handle.td_id
        assert back.is_locked == handle.is_locked
        if handle is lazy:
            assert [m["x"].tolist() for m in back.to_local().tensordicts] == [[0, 0], [1, 1, 1]]
        else:
            assert_same_td(back.to_local(), handle.to_local())
    back = pickle.loads(pickle.dumps(with_client))
    back["x"] = torch.zeros(4, 2, dtype=torch.int64)  # writes reach the same data
    assert not store["x"].any()
    assert back._conn.client is not client  # its own client on the same server
    client.close()
    store.clear_redis()
    lazy.clear_redis()


WORKER = """
import torch
from tensordict import TensorDict
store = queue.get() if store is None else store
assert torch.equal(store["a", "b", "c"], torch.arange(4, dtype=torch.float32))
assert store[1]["label"] == "dog"
store[2] = {"x": torch.tensor([-1, -2]), "label": "from-child"}
store["a", "child"] = torch.full((4,), 9.0)
store["a"]["b", "c"] = torch.zeros(4)
"""


@pytest.mark.parametrize("method", ["spawn", "fork", "fork-queue"])
def test_store_sent_to_a_worker_process(redis_server, method):
    """A child process reads and writes the store it was given (pickled for spawn and
    through a queue; inherited with fork); the parent sees the child's writes."""
    import multiprocessing as mp

    start = method.split("-")[0]
    if start not in mp.get_all_start_methods():
        pytest.skip(f"no {start} start method here")
    ctx = mp.get_context(start)
    oracle = deep_sample()
    store = store_cls().from_tensordict(oracle, **connect(redis_server))
    store["x"]  # the parent has used its connection before the child starts
    queue = ctx.Queue() if method == "fork-queue" else None
    scope = {"store": None if queue is not None else store, "queue": queue}
    proc = ctx.Process(target=exec, args=(WORKER, scope))
    proc.start()
    if queue is not None:
        queue.put(store)
    proc.join(120)
    assert proc.exitcode == 0
    oracle[2] = {"x": torch.tensor([-1, -2]), "label": "from-child"}
    oracle["a", "child"] = torch.full((4,), 9.0)
    oracle["a", "b", "c"] = torch.zeros(4)
    assert_same_td(store.refresh(), oracle)
    store.clear_redis()


# ---------------------------------------------------------------------- non-tensor rows
def test_non_tensor_rows_become_a_stack_as_in_memory(redis_server):
    from tensordict import NonTensorStack

    oracle = TensorDict(
        {"x": torch.arange(4.0), "label": "dog", "n": {"tag": "t"}, "same": "s"}, [4]
    )
    store = store_cls().from_tensordict(oracle, **connect(redis_server))
    steps = [
        (1, {"label": "cat"}),
        (slice(2, 4), TensorDict({"label": NonTensorStack("a", "b"), "x": torch.zeros(2)}, [2])),
        (torch.tensor([0, 3]), {"n": {"tag": "u"}}),
        (slice(None), {"same": "s"}),  # the same value: stays one value
        (2, 5.0),  # a number: the non-tensor entries are left unchanged
    ]
    for index, value in steps:
        if isinstance(value, float):
            store[index] = value
            oracle.exclude("label", "same", ("n", "tag"))[index] = value
        else:
            store[index] = value
            oracle[index] = value
        assert_same_td(store, oracle)
    assert type(store.get("same")).__name__ == "NonTensorData"
    assert store["label"] == oracle["label"] == ["dog", "cat", "a", "b"]
    for index in (0, 1, slice(1, 3), [3, 0], torch.tensor([True, False, True, False])):
        assert_same_td(store[index], oracle[index])
    assert [row["label"] for row in store] == ["dog", "cat", "a", "b"]
    assert_same_td(store.to_local(), oracle)
    again = store_cls().from_store(td_id=store.td_id, **connect(redis_server))
    assert_same_td(again, oracle)
    # a stack written back whole, and set over
    store["label"] = "one"
    oracle["label"] = "one"
    assert_same_td(store, oracle)
    store.clear_redis()


def test_non_tensor_rows_with_two_batch_dims(redis_server):
    oracle = TensorDict({"x": torch.zeros(3, 2), "label": "dog"}, [3, 2])
    store = store_cls().from_tensordict(oracle, **connect(redis_server))
    for td in (oracle, store):
        td[1] = {"label": "cat"}
        td[2, 1:] = {"label": "bird"}
    assert_same_td(store, oracle)
    assert store[2, 1]["label"] == "bird"
    assert_same_td(store[1:], oracle[1:])
    store.clear_redis()


def test_tensorclass_entry_rows_as_in_memory(redis_server):
    from tensordict import tensorclass

    @tensorclass
    class Item:
        a: torch.Tensor
        tag: str

    oracle = TensorDict({"x": torch.zeros(4)}, [4])
    store = store_cls().from_tensordict(oracle, **connect(redis_server))
    for td in (oracle, store):
        td["item"] = Item(a=torch.zeros(4, 2), tag="t0", batch_size=[4])
        td[2] = {"item": Item(a=torch.ones(2), tag="t2", batch_size=[])}
    expected = oracle.get("item")._tensordict
    assert_same_td(store["item"], expected)
    assert store["item", "tag"] == ["t0", "t0", "t2", "t0"]
    assert store[2]["item", "tag"] == "t2"
    assert torch.equal(store[2]["item", "a"], torch.ones(2))
    store.clear_redis()


def test_bad_non_tensor_rows_raise_and_leave_the_server_unchanged(redis_server):
    from tensordict import NonTensorStack

    oracle = TensorDict({"x": torch.arange(4.0), "label": "dog"}, [4])
    store = store_cls().from_tensordict(oracle, **connect(redis_server))
    store[0] = {"label": "cat"}
    before = server_snapshot(redis_server, store)
    with pytest.raises(RuntimeError, match="'label'.*batch of shape \\(2,\\)"):
        store[1:3] = TensorDict({"label": NonTensorStack("a", "b", "c")}, [3])
    with pytest.raises(TypeError, match="'label'.*not JSON"):
        store[1] = {"label": object()}
    with pytest.raises(TypeError, match="'x'"):  # a string into a tensor entry
        store[1] = {"x": "text", "label": "ok"}
    with pytest.raises(RuntimeError, match="shape \\(5,\\).*'x'"):
        store[1] = {"x": torch.ones(5), "label": "ok"}
    assert server_snapshot(redis_server, store) == before
    store.clear_redis()


def test_lazy_store_elements_keep_their_own_non_tensor_values(redis_server):
    from tensordict.distributed import LazyStackedTensorDictStore

    oracle = LazyStackedTensorDict(
        TensorDict(x=torch.zeros(2), lab="a"),
        TensorDict(x=torch.zeros(3), lab="b"),
        TensorDict(x=torch.zeros(3), lab="b"),
    )
    store = store_cls().from_tensordict(oracle, **connect(redis_server))
    assert isinstance(store, LazyStackedTensorDictStore)
    assert store["lab"] == ["a", "b", "b"]
    store[0] = TensorDict(x=torch.ones(2), lab="z")
    oracle[0] = TensorDict(x=torch.ones(2), lab="z")
    store[1:3] = LazyStackedTensorDict(
        TensorDict(x=torch.ones(3), lab="p"), TensorDict(x=torch.ones(3), lab="q")
    )
    oracle[1:3] = LazyStackedTensorDict(
        TensorDict(x=torch.ones(3), lab="p"), TensorDict(x=torch.ones(3), lab="q")
    )
    back = store_cls().from_store(td_id=store.td_id, **connect(redis_server)).to_local()
    assert [m["lab"] for m in back.tensordicts] == [m["lab"] for m in oracle.tensordicts]
    assert [m["lab"] for m in back.tensordicts] == ["z", "p", "q"]
    assert store[2]["lab"] == "q"
    store["tag"] = "all"  # one value for every element
    assert store["tag"] == ["all"] * 3
    store.clear_redis()


# ---------------------------------------------------------------------- empty store rows
def test_rows_written_into_an_empty_store_create_the_keys(redis_server):
    oracle = TensorDict(batch_size=[4])
    store = store_cls()(batch_size=[4], **connect(redis_server))
    for td in (oracle, store):
        td[0] = TensorDict({"y": torch.ones(3), "n": {"z": torch.ones((), dtype=torch.int32)}}, [])
        td[2:4] = {"y": torch.full((2, 3), 2.0)}
        td[torch.tensor([1])] = TensorDict({"w": torch.ones(1, 2, dtype=torch.bool)}, [1])
    assert_same_td(store, oracle)
    again = store_cls().from_store(td_id=store.td_id, **connect(redis_server))
    assert_same_td(again, oracle)
    # two batch dims
    oracle2 = TensorDict(batch_size=[2, 3])
    store2 = store_cls()(batch_size=[2, 3], **connect(redis_server))
    for td in (oracle2, store2):
        td[1] = {"z": torch.ones(3, 5)}
    assert_same_td(store2, oracle2)
    store.clear_redis()
    store2.clear_redis()


def test_non_tensor_rows_into_an_empty_store(redis_server):
    """As the reference's store: the rows not written hold None."""
    from tensordict import NonTensorStack

    store = store_cls()(batch_size=[4], **connect(redis_server))
    store[1] = {"lab": "q"}
    assert store["lab"] == [None, "q", None, None]
    store[2:4] = TensorDict({"other": NonTensorStack("a", "b")}, [2])
    oracle = TensorDict(batch_size=[4])
    oracle[2:4] = TensorDict({"other": NonTensorStack("a", "b")}, [2])
    assert store["other"] == oracle["other"] == [None, None, "a", "b"]
    store.clear_redis()


def test_bad_rows_into_an_empty_store_create_nothing(redis_server):
    store = store_cls()(batch_size=[4], **connect(redis_server))
    before = server_snapshot(redis_server, store)
    with pytest.raises(RuntimeError, match="'y'.*\\(3, 1\\)"):
        store[1:3] = {"y": torch.ones(3, 1), "ok": torch.ones(2)}
    with pytest.raises(TypeError, match="'bad'"):
        store[1] = {"ok": torch.ones(()), "bad": object()}
    assert server_snapshot(redis_server, store) == before
    assert list(store.keys()) == []
    store.lock_()
    with pytest.raises(RuntimeError, match="locked"):
        store[0] = {"y": torch.ones(())}
    assert list(store.refresh().keys()) == []
    store.clear_redis()


# ---------------------------------------------------------------------- constructors
def test_from_dict_with_the_store_keywords(redis_server):
    cls = store_cls()
    data = {"a": torch.zeros(3, 2), "b": {"c": torch.ones(3, 2, 4)}, "s": "text"}
    store = cls.from_dict(
        data, backend="dragonfly", batch_size=[3, 2], names=["n", "m"], **connect(redis_server)
    )
    oracle = TensorDict.from_dict(data, batch_size=[3, 2], names=["n", "m"])
    assert isinstance(store, cls) and store.backend == "dragonfly"
    assert store.names == ["n", "m"]
    assert_same_td(store, oracle)
    auto = cls.from_dict(data, auto_batch_size=True, batch_dims=1, **connect(redis_server))
    assert auto.batch_size == torch.Size([3])
    on_cpu = cls.from_dict(data, batch_size=[3], device="cpu", prefix="p2", **connect(redis_server))
    assert on_cpu.device == torch.device("cpu")
    assert cls.from_store(td_id=on_cpu.td_id, prefix="p2", **connect(redis_server)).device == (
        torch.device("cpu")
    )
    with pytest.raises(RuntimeError, match="batch"):
        cls.from_dict(data, batch_size=[4], **connect(redis_server))
    from tensordict.distributed import LazyStackedTensorDictStore

    with pytest.raises(NotImplementedError, match="from_lazy_stack"):
        LazyStackedTensorDictStore.from_dict(data, batch_size=[3], **connect(redis_server))
    for s in (store, auto, on_cpu):
        s.clear_redis()


def test_from_schema_and_from_store_with_a_tensorclass(redis_server):
    from tensordict import tensorclass

    @tensorclass
    class Pair:
        left: torch.Tensor
        right: torch.Tensor

    cls = store_cls()
    store = cls.from_schema(
        {"left": ([2], torch.float32), "right": ([], torch.int64)},
        batch_size=[5],
        **connect(redis_server),
    )
    assert isinstance(store, cls) and store["left"].shape == (5, 2)
    wrapped = cls.from_store(td_id=store.td_id, tensorclass_cls=Pair, **connect(redis_server))
    assert isinstance(wrapped, Pair)
    assert torch.equal(wrapped.right, torch.zeros(5, dtype=torch.int64))
    with pytest.raises(TypeError, match="tensorclass"):
        cls.from_store(td_id=store.td_id, tensorclass_cls=dict, **connect(redis_server))
    store.clear_redis()


def test_device_kept_through_from_tensordict(redis_server):
    import pickle

    cls = store_cls()
    devices = ["cpu"] + (["cuda:0"] if torch.cuda.is_available() else [])
    for device in devices:
        td = deep_sample().to(device)
        store = cls.from_tensordict(td, **connect(redis_server))
        assert store.device == torch.device(device)
        assert store["x"].device == torch.device(device)
        assert store[1:3]["a", "b", "c"].device == torch.device(device)
        assert store.to_local().device == torch.device(device)
        again = cls.from_store(td_id=store.td_id, **connect(redis_server))
        assert again.device == torch.device(device)
        assert pickle.loads(pickle.dumps(store)).device == torch.device(device)
        forced = cls.from_tensordict(td, device="cpu", **connect(redis_server))
        assert forced.device == torch.device("cpu") and forced["x"].device.type == "cpu"
        lazy = cls.from_tensordict(
            LazyStackedTensorDict(*deep_sample().unbind(0)).to(device), **connect(redis_server)
        )
        assert lazy.device == torch.device(device)
        assert lazy[0]["x"].device == torch.device(device)
        for s in (store, forced, lazy):
            s.clear_redis()


def test_contiguous_and_repr(redis_server):
    cls = store_cls()
    oracle = deep_sample()
    store = cls.from_tensordict(oracle, backend="dragonfly", **connect(redis_server))
    assert store.is_contiguous() is False
    local = store.contiguous()
    assert isinstance(local, TensorDict)
    assert_same_td(local, oracle)
    text = repr(store)
    for part in (
        "TensorDictStore(",
        "backend='dragonfly'",
        f"{redis_server.host}:{redis_server.port}",
        store.td_id,
        "batch_size=torch.Size([4])",
        "keys=['a', 'label', 'x']",
    ):
        assert part in text, part
    lazy_local = LazyStackedTensorDict(TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(3)))
    lazy = cls.from_tensordict(lazy_local, **connect(redis_server))
    assert "count=2" in repr(lazy) and "backend='redis'" in repr(lazy)
    assert lazy.is_contiguous() is False
    with pytest.raises(RuntimeError):  # as lazy_local.contiguous(): shapes differ
        lazy.contiguous()
    even = cls.from_tensordict(
        LazyStackedTensorDict(TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(2))),
        **connect(redis_server),
    )
    assert torch.equal(even.contiguous()["x"], torch.stack([torch.zeros(2), torch.ones(2)]))
    store.close()
    assert "td_id=" in repr(store)  # a closed store still has a repr
    for s in (lazy, even):
        s.clear_redis()
    cls.from_store(td_id=store.td_id, **connect(redis_server)).clear_redis()
