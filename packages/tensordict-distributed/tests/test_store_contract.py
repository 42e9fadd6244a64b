"""The storage-backed contract (``tensordict._plugins.api.backed_contract``) on the Redis
stores, against a real redis-server: every call gives what the same call gives on the
in-memory ``TensorDict`` (a lazy stack of its rows for the lazy store), every write leaves
both holding the same content, no public ``TensorDictBase`` method is missing, and a
second handle opened from the server sees what was written."""

from __future__ import annotations

import pytest

from tensordict import LazyStackedTensorDict
from tensordict._plugins.api import BackedTensorDict, backed_contract

pytest.importorskip("redis")

READS = dict(backed_contract.READS)
WRITES = dict(backed_contract.WRITES)


def _classes():
    from tensordict.distributed import LazyStackedTensorDictStore, TensorDictStore

    return TensorDictStore, LazyStackedTensorDictStore


@pytest.fixture
def make_store(redis_server):
    made = []

    def make(td):
        store = _classes()[0].from_tensordict(td, host=redis_server.host, port=redis_server.port)
        made.append(store)
        return store

    yield make
    for store in made:
        store.clear_redis()
        store.close()


@pytest.mark.parametrize("index", [0, 1])
def test_every_public_method_is_there(index):
    cls = _classes()[index]
    assert issubclass(cls, BackedTensorDict)
    assert backed_contract.missing_methods(cls) == []


@pytest.mark.parametrize("name", sorted(READS))
def test_reads_match_the_in_memory_tensordict(name, make_store):
    oracle = backed_contract.sample()
    store = make_store(oracle.clone())
    expected = backed_contract.outcome(READS[name], oracle)
    got = backed_contract.outcome(READS[name], store)
    assert got[0] == expected[0], (got, expected)
    assert backed_contract.same(got[1], expected[1]), (got, expected)
    assert backed_contract.same(store.to_tensordict(), oracle)


@pytest.mark.parametrize("name", sorted(WRITES))
def test_writes_match_the_in_memory_tensordict(name, make_store):
    oracle = backed_contract.sample()
    store = make_store(oracle.clone())
    expected = backed_contract.outcome(WRITES[name], oracle)
    got = backed_contract.outcome(WRITES[name], store)
    assert got[0] == expected[0], (got, expected)
    assert backed_contract.same(store.to_tensordict(), oracle.unlock_())
    assert store.names == oracle.names
    # what the server holds, through a second handle
    again = type(store).from_store(td_id=store.td_id, **store._connection_kwargs())
    assert backed_contract.same(again.to_tensordict(), oracle)


@pytest.mark.parametrize(
    "name", ["view", "permute", "unsqueeze", "squeeze", "transpose", "movedim"]
)
def test_views_are_refused(name, make_store):
    store = make_store(backed_contract.sample())
    args = {"view": (-1,), "permute": (1, 0), "unsqueeze": (0,), "squeeze": (),
            "transpose": (0, 1), "movedim": (0, 1)}[name]  # fmt: skip
    with pytest.raises(RuntimeError, match=rf"Cannot call `{name}` on a TensorDictStore"):
        getattr(store, name)(*args)


@pytest.mark.parametrize("name", sorted(["get", "get_nested", "rows", "row", "to_tensordict",
                                         "select", "keys_nested_leaves", "sum", "apply"]))  # fmt: skip
def test_lazy_store_reads_match_a_lazy_stack(name, redis_server):
    lazy_store_cls = _classes()[1]
    rows = list(backed_contract.sample().unbind(0))
    oracle = LazyStackedTensorDict.lazy_stack(rows, 0)
    store = lazy_store_cls.from_lazy_stack(oracle, host=redis_server.host, port=redis_server.port)
    try:
        expected = backed_contract.outcome(READS[name], oracle)
        got = backed_contract.outcome(READS[name], store)
        assert got[0] == expected[0], (got, expected)
        assert backed_contract.same(got[1], expected[1]), (got, expected)
    finally:
        store.clear_redis()
        store.close()
