"""The TensorDict methods of the stores, against a real redis-server.

Each method is compared with the same method on a local TensorDict holding the same data
(the independent expectation), and in-place methods are checked on the server through a
second handle opened with ``from_store``.
"""

from __future__ import annotations

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict


def store_classes():
    from tensordict.distributed import LazyStackedTensorDictStore, TensorDictStore

    return TensorDictStore, LazyStackedTensorDictStore


def sample() -> TensorDict:
    return TensorDict(
        {
            "obs": torch.arange(24, dtype=torch.float32).reshape(4, 3, 2),
            "nested": {"step": torch.arange(12).reshape(4, 3)},
            "label": "run-1",
        },
        [4, 3],
    )


@pytest.fixture
def store(redis_server):
    TensorDictStore, _ = store_classes()
    s = TensorDictStore.from_tensordict(sample(), host=redis_server.host, port=redis_server.port)
    yield s
    s.clear_redis()
    s.close()


def reopen(store):
    TensorDictStore, _ = store_classes()
    return TensorDictStore.from_store(td_id=store.td_id, **store._connection_kwargs())


def assert_same(a, b):
    assert type(a) is type(b) or not isinstance(a, torch.Tensor)
    assert a.batch_size == b.batch_size
    assert sorted(map(str, a.keys(True, True))) == sorted(map(str, b.keys(True, True)))
    for key in b.keys(True, True):
        value = b.get(key)
        if isinstance(value, torch.Tensor):
            assert torch.equal(a.get(key), value), key
        else:  # non-tensor entries: their values (get() gives the stored leaf)
            assert a[key] == b[key], key


@pytest.mark.parametrize(
    "call",
    [
        lambda td: td.reshape(12),
        lambda td: td.flatten(0, 1),
        lambda td: td.unflatten(0, (2, 2)),
        lambda td: td.expand(2, 4, 3),
        lambda td: td.flip(0),
        lambda td: td.narrow(1, 1, 2),
        lambda td: td.repeat(2, 1),
        lambda td: td.pad([1, 0]),
        lambda td: td.to(torch.float64),
        lambda td: td.cpu(),
        lambda td: td.flatten_keys(),
        lambda td: td.empty(recurse=True),
        lambda td: td.consolidate(),
        lambda td: td.replace(obs=torch.zeros(4, 3, 2)),
        lambda td: td.select("obs"),
        lambda td: td.exclude("obs"),
        lambda td: td.select(("nested", "step")),
        lambda td: td.rename("a", "b"),
    ],
)
def test_methods_that_make_new_data_match_a_local_tensordict(store, call):
    expected = call(sample())
    got = call(store)
    assert isinstance(got, TensorDict)
    assert_same(got, expected)
    assert got.names == expected.names
    assert_same(store.to_local(), sample())  # the store is unchanged


@pytest.mark.parametrize(
    "call",
    [
        lambda td: td.split(2),
        lambda td: td.chunk(2, dim=1),
        lambda td: td.unbind(1),
        lambda td: td.tensor_split(3),
    ],
)
def test_methods_returning_several_tensordicts(store, call):
    expected, got = call(sample()), call(store)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert_same(g, e)


def test_state_dict_matches(store):
    expected, got = sample().state_dict(), store.state_dict()
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(got[key], value)


def test_metadata_questions_download_nothing(store, redis_server):
    import redis

    client = redis.Redis(host=redis_server.host, port=redis_server.port)
    for key in client.scan_iter(f"tensordict:{store.td_id}:data:*"):
        client.delete(key)  # only the metadata is left: reading data now fails
    from tensordict.distributed import StoreDataLostError

    with pytest.raises(StoreDataLostError):
        store.to_local()
    local = sample()
    assert store.get_item_shape("obs") == local.get_item_shape("obs") == torch.Size([4, 3, 2])
    assert store.entry_class("obs") is torch.Tensor
    # a nested entry is a store on the same data, as store["nested"] gives it
    assert store.entry_class("nested") is type(store) is type(store["nested"])
    assert store.bytes() == local.bytes()
    assert store.param_count() == local.param_count()
    assert store.sorted_keys == local.sorted_keys
    assert store.depth == local.depth == 1
    assert not store.is_empty()
    client.close()


@pytest.mark.parametrize("view", ["view", "permute", "unsqueeze", "squeeze", "transpose"])
def test_views_raise(store, view):
    args = {"view": (12,), "permute": (1, 0), "unsqueeze": (0,), "squeeze": (), "transpose": (0, 1)}
    with pytest.raises(
        RuntimeError, match=rf"Cannot call `{view}` on a TensorDictStore.*to_tensordict"
    ):
        getattr(store, view)(*args[view])


def test_in_place_methods_write_to_the_server(store):
    local = sample()
    store.rename_key_("obs", "observation")
    local.rename_key_("obs", "observation")
    assert_same(reopen(store).to_local(), local)

    new_obs = torch.full((4, 3, 2), 7.0)
    store.update_({"observation": new_obs})
    local.update_({"observation": new_obs})
    assert_same(reopen(store).to_local(), local)
    with pytest.raises(KeyError):
        store.update_({"missing": new_obs})
    assert_same(reopen(store).to_local(), local)  # nothing written

    other = sample().rename_key_("obs", "observation").apply(lambda t: t * 2)
    store.copy_(other)
    local.copy_(other)
    assert_same(reopen(store).to_local(), local)

    popped = store.separates(("nested", "step"))
    expected = local.separates(("nested", "step"))
    assert_same(popped, expected)
    assert_same(reopen(store).to_local(), local)

    store.load_state_dict(local.state_dict())
    assert_same(reopen(store).to_local(), local)

    store.clear()
    assert list(reopen(store).keys()) == []
    assert store.batch_size == torch.Size([4, 3])


def test_row_writes_in_place(store):
    local = sample()
    store.set_at_("obs", torch.full((3, 2), -1.0), 2)
    local.set_at_("obs", torch.full((3, 2), -1.0), 2)
    store.update_at_({("nested", "step"): torch.full((2, 3), 100)}, slice(0, 2))
    local.update_at_({("nested", "step"): torch.full((2, 3), 100)}, slice(0, 2))
    row = sample()[1].exclude("label").apply(lambda t: t + 1000)
    store.copy_at_(row, 3)
    local.copy_at_(row, 3)
    assert_same(reopen(store).to_local(), local)
    assert torch.equal(store.get_at("obs", 2), local.get_at("obs", 2))
    with pytest.raises(KeyError):
        store.set_at_("missing", torch.zeros(3, 2), 0)


def test_clone_and_copy(store):
    clone = store.clone()
    assert clone.td_id != store.td_id
    assert_same(clone.to_local(), sample())
    clone["obs"] = torch.zeros(4, 3, 2)  # a separate copy on the server
    assert torch.equal(store["obs"], sample()["obs"])
    shallow = store.copy()
    assert shallow.td_id == store.td_id
    shallow["obs"] = torch.ones(4, 3, 2)  # the same data
    assert torch.equal(store["obs"], torch.ones(4, 3, 2))
    clone.clear_redis()


def test_lock_names_and_batch_size(store):
    store.lock_()
    with pytest.raises(RuntimeError, match="locked"):
        store["new"] = torch.zeros(4, 3)
    with pytest.raises(RuntimeError, match="locked"):
        del store["obs"]
    with pytest.raises(RuntimeError, match="locked"):  # replacing, as for a TensorDict
        store["obs"] = torch.zeros(4, 3, 2)
    store.set_("obs", torch.zeros(4, 3, 2))  # existing entries can still be written in place
    store.add_(1)
    assert (store["obs"] == 1).all()
    store.unlock_()
    store["new"] = torch.zeros(4, 3)
    assert "new" in store.keys()

    store.refine_names("batch", None)
    assert store.names == ["batch", None]
    store.rename_(None, "time")
    assert reopen(store).names == [None, "time"]  # kept on the server
    with pytest.raises(ValueError):
        store.names = ["only-one"]

    store.batch_size = [4]
    assert reopen(store).batch_size == torch.Size([4])
    with pytest.raises(RuntimeError):
        store.batch_size = [5]
    assert store.auto_batch_size_().batch_size == torch.Size([4, 3])


def test_memory_methods_raise(store):
    with pytest.raises(NotImplementedError):
        store.share_memory_()
    with pytest.raises(RuntimeError):
        store.pin_memory()
    assert not store.is_consolidated()


def test_lazy_store_methods(redis_server):
    _, LazyStore = store_classes()
    members = [TensorDict({"x": torch.arange(n, dtype=torch.float32)}, []) for n in (2, 3, 2)]
    local = LazyStackedTensorDict(*members, stack_dim=0)
    store = LazyStore.from_lazy_stack(local, host=redis_server.host, port=redis_server.port)
    assert isinstance(store.select("x"), LazyStackedTensorDict)
    assert [m["x"].tolist() for m in store.unbind(0)] == [[0.0, 1.0], [0.0, 1.0, 2.0], [0.0, 1.0]]
    store.rename_key_("x", "y")
    local.rename_key_("x", "y")
    back = reopen(store).to_local()
    assert isinstance(back, LazyStackedTensorDict)
    assert [m["y"].tolist() for m in back.tensordicts] == [
        m["y"].tolist() for m in local.tensordicts
    ]
    with pytest.raises(RuntimeError):
        store.batch_size = [3]
    store.clear_redis()


def test_to_store(redis_server):
    TensorDictStore, LazyStore = store_classes()
    td = sample()
    store = td.to_store(host=redis_server.host, port=redis_server.port, prefix="to-store")
    assert isinstance(store, TensorDictStore)
    again = TensorDictStore.from_store(
        td_id=store.td_id, host=redis_server.host, port=redis_server.port, prefix="to-store"
    )
    assert_same(again.to_local(), td)
    lazy = LazyStackedTensorDict(TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(3)))
    lazy_store = lazy.to_store(host=redis_server.host, port=redis_server.port)
    assert isinstance(lazy_store, LazyStore)
    assert [m["x"].tolist() for m in lazy_store.to_local().tensordicts] == [[0, 0], [1, 1, 1]]
    store.clear_redis()
    lazy_store.clear_redis()


def test_from_schema_on_a_redis_server(redis_server):
    TensorDictStore, _ = store_classes()
    store = TensorDict.from_schema(
        {"obs": ([4], torch.uint8), ("n", "r"): ([], torch.float64)},
        batch_size=[3],
        storage="redis",
        host=redis_server.host,
        port=redis_server.port,
        prefix="schema",
    )
    assert isinstance(store, TensorDictStore)
    again = TensorDictStore.from_store(
        td_id=store.td_id, host=redis_server.host, port=redis_server.port, prefix="schema"
    ).to_local()
    assert again["obs"].dtype == torch.uint8 and again["obs"].shape == (3, 4)
    assert again["n", "r"].dtype == torch.float64 and again["n", "r"].shape == (3,)
    assert not again["obs"].any() and not again["n", "r"].any()
    store.clear_redis()


def test_in_place_ops_write_back_non_tensor_values(store):
    # update_/copy_ change non-tensor values in place on the local copy: they still reach
    # the server (the oracle: the same calls on a local TensorDict)
    local = sample()
    store.update_({"label": "run-2"})
    local.update_({"label": "run-2"})
    assert reopen(store)["label"] == local["label"] == "run-2"
    source = sample()
    source.set_non_tensor("label", "run-3")
    store.copy_(source)
    local.copy_(source)
    assert reopen(store)["label"] == local["label"] == "run-3"
