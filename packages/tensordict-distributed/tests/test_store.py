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
    with pytest.raises(KeyError, match="unknown key"):
        store[0] = TensorDict({"nope": torch.zeros(())}, [])
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
