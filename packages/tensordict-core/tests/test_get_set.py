"""Reading and writing entries: get/set/set_/[]/del, update/update_, pop/popitem/setdefault,
clear/copy/empty/is_empty, non-tensor values."""

from __future__ import annotations

import pytest
import torch

from tensordict import (
    NonTensorData,
    NonTensorStack,
    TensorDict,
    get_defaults_to_none,
    set_get_defaults_to_none,
)


@pytest.fixture
def td():
    return TensorDict(
        {"a": torch.arange(3.0), "n": {"b": torch.zeros(3, 2), "m": {"c": torch.ones(3)}}},
        [3],
    )


# ---------------------------------------------------------------- get
def test_get_returns_stored_tensor(td):
    a = dict(td.items())["a"]
    assert td.get("a") is a
    assert td["a"] is a


def test_get_nested(td):
    assert torch.equal(td.get(("n", "m", "c")), torch.ones(3))
    assert td.get(("n", "b")) is td["n"]["b"]


def test_get_missing_without_default_gives_none_and_indexing_raises(td):
    assert td.get("missing") is None  # the reference's default since its 0.7
    with pytest.raises(KeyError, match="missing"):
        td["missing"]


def test_get_missing_nested_gives_none_and_indexing_raises(td):
    assert td.get(("n", "zz")) is None
    with pytest.raises(KeyError, match="zz"):
        td["n", "m", "zz"]


def test_get_through_a_tensor_raises_keyerror_and_valueerror(td):
    with pytest.raises(KeyError):
        td.get(("a", "b"))
    with pytest.raises(ValueError, match="'a' is a Tensor"):
        td.get(("a", "b"))
    assert td.get(("a", "b"), 3) == 3


def test_get_with_default(td):
    sentinel = object()
    assert td.get("missing", sentinel) is sentinel
    assert td.get("missing", None) is None
    assert td.get(("n", "missing"), 5) == 5
    assert td.get("missing", default=7) == 7
    # an existing key ignores the default
    assert td.get("a", None) is td["a"]


def test_get_defaults_to_none_switch(td):
    assert get_defaults_to_none() is True
    try:
        set_get_defaults_to_none(False)
        with pytest.raises(KeyError):
            td.get("missing")
    finally:
        set_get_defaults_to_none(True)
    assert td.get("missing") is None


# ---------------------------------------------------------------- set
def test_set_returns_self_and_stores_same_object(td):
    x = torch.randn(3, 4)
    assert td.set("x", x) is td
    assert td["x"] is x


def test_set_replaces_entry_out_of_place(td):
    old = td["a"]
    new = torch.full((3,), 9.0)
    td.set("a", new)
    assert td["a"] is new
    assert torch.equal(old, torch.arange(3.0))  # old storage untouched


def test_set_inplace_keeps_storage(td):
    old = td["a"]
    ptr = old.data_ptr()
    td.set("a", torch.full((3,), 9.0), inplace=True)
    assert td["a"] is old
    assert td["a"].data_ptr() == ptr
    assert torch.equal(old, torch.full((3,), 9.0))


def test_set_inplace_nested_keeps_storage(td):
    old = td["n", "m", "c"]
    td.set(("n", "m", "c"), torch.full((3,), 4.0), inplace=True)
    assert td["n", "m", "c"] is old
    assert torch.equal(old, torch.full((3,), 4.0))


def test_set_inplace_on_missing_key_creates_it(td):
    x = torch.ones(3)
    td.set("new", x, inplace=True)
    assert torch.equal(td["new"], x)


def test_set_inplace_casts_to_existing_dtype(td):
    c = td["n", "b"]
    td.set(("n", "b"), torch.ones(3, 2, dtype=torch.int64), inplace=True)
    assert td["n", "b"] is c
    assert c.dtype == torch.float32
    assert torch.equal(c, torch.ones(3, 2))


def test_set_nested_creates_intermediate_tensordicts(td):
    td.set(("p", "q", "r"), torch.arange(3))
    assert isinstance(td["p"], TensorDict)
    assert td["p"].batch_size == td.batch_size
    assert td["p", "q"].batch_size == td.batch_size
    assert torch.equal(td["p", "q", "r"], torch.arange(3))


def test_set_a_dict_makes_a_tensordict(td):
    td.set("d", {"e": torch.zeros(3, 5)})
    assert isinstance(td["d"], TensorDict)
    assert td["d"].batch_size == torch.Size([3])
    assert torch.equal(td["d", "e"], torch.zeros(3, 5))


def test_set_tensordict_is_stored(td):
    sub = TensorDict({"x": torch.zeros(3, 2)}, [3, 2])
    td.set("sub", sub)
    assert td["sub"] is sub
    assert td["sub"].batch_size == torch.Size([3, 2])


def test_set_through_tensor_raises(td):
    before = td.clone()
    with pytest.raises(KeyError, match="'a'"):
        td.set(("a", "x"), torch.zeros(3))
    assert torch.equal(td["a"], before["a"])


def test_set_underscore_writes_in_place(td):
    old = td["n", "b"]
    ptr = old.data_ptr()
    assert td.set_(("n", "b"), torch.full((3, 2), 3.0)) is td
    assert td["n", "b"] is old and old.data_ptr() == ptr
    assert torch.equal(old, torch.full((3, 2), 3.0))


def test_set_underscore_missing_key_raises(td):
    with pytest.raises(KeyError, match="missing"):
        td.set_("missing", torch.zeros(3))
    assert "missing" not in td.keys()


# ---------------------------------------------------------------- __setitem__/__getitem__/__delitem__
def test_setitem_getitem_str_and_nested(td):
    td["x"] = torch.arange(3)
    td["n", "y"] = torch.arange(3) * 2
    assert torch.equal(td["x"], torch.arange(3))
    assert torch.equal(td["n"]["y"], torch.tensor([0, 2, 4]))


def test_setitem_out_of_place_does_not_touch_old_tensor(td):
    old = td["a"]
    td["a"] = torch.zeros(3)
    assert torch.equal(old, torch.arange(3.0))
    assert torch.equal(td["a"], torch.zeros(3))


def test_delitem(td):
    del td["a"]
    assert "a" not in td.keys()
    del td["n", "m", "c"]
    assert ("n", "m", "c") not in td.keys(True)
    assert ("n", "m") in td.keys(True)


def test_delitem_missing_raises(td):
    with pytest.raises(KeyError, match="missing"):
        del td["missing"]


def test_del_(td):
    assert td.del_(("n", "b")) is td
    assert set(td.keys(True, True)) == {"a", ("n", "m", "c")}


# ---------------------------------------------------------------- non-tensor values
def test_non_tensor_round_trip(td):
    td["s"] = "a string"
    assert td["s"] == "a string"
    assert isinstance(td.get("s"), NonTensorData) and td.get("s").data == "a string"
    obj = object()
    td["n", "s2"] = obj  # any Python object
    assert td["n", "s2"] is obj


def test_non_tensor_survives_indexing_reshape_clone():
    td = TensorDict({"a": torch.zeros(2, 3), "s": "hello"}, [2, 3])
    assert td[0]["s"] == "hello"
    assert td[:, 1:]["s"] == "hello"
    assert td[..., None]["s"] == "hello"
    assert td.reshape(-1)["s"] == "hello"
    assert td.reshape(6).batch_size == torch.Size([6])
    assert td.clone()["s"] == "hello"
    assert td.unsqueeze(0).get("s").data == "hello"  # a stack of the value, as the reference
    assert td.permute(1, 0)["s"] == "hello"
    assert all(t["s"] == "hello" for t in td.unbind(1))
    assert dict(td.clone().items())["s"].batch_size == td.batch_size
    assert dict(td[0].items())["s"].batch_size == torch.Size([3])


def test_non_tensor_set_underscore_and_update(td):
    td["s"] = "x"
    td.set_("s", "y")
    assert td["s"] == "y"
    td.update({"s": "z"})
    assert td["s"] == "z"


# ---------------------------------------------------------------- update / update_
def test_update_merges_nested(td):
    c = td["n", "m", "c"]
    out = td.update({"n": {"m": {"d": torch.zeros(3)}}, "new": torch.ones(3)})
    assert out is td
    assert td["n", "m", "c"] is c  # untouched
    assert torch.equal(td["n", "m", "d"], torch.zeros(3))
    assert torch.equal(td["new"], torch.ones(3))


def test_update_replaces_existing_out_of_place(td):
    old = td["a"]
    new = torch.full((3,), 5.0)
    td.update({"a": new})
    assert td["a"] is new
    assert torch.equal(old, torch.arange(3.0))


def test_update_inplace_keeps_storage(td):
    old = td["a"]
    td.update({"a": torch.full((3,), 5.0)}, inplace=True)
    assert td["a"] is old
    assert torch.equal(old, torch.full((3,), 5.0))


def test_update_from_tensordict_and_clone(td):
    src = TensorDict({"a": torch.full((3,), 7.0), "n": {"b": torch.ones(3, 2)}}, [3])
    td.update(src, clone=True)
    assert torch.equal(td["a"], src["a"]) and td["a"] is not src["a"]
    assert torch.equal(td["n", "b"], torch.ones(3, 2))
    assert td["n", "m", "c"].shape == (3,)  # sibling kept


def test_update_keys_to_update(td):
    td.update(
        {"a": torch.full((3,), 7.0), "n": {"b": torch.ones(3, 2)}},
        keys_to_update=[("n", "b")],
    )
    assert torch.equal(td["a"], torch.arange(3.0))
    assert torch.equal(td["n", "b"], torch.ones(3, 2))


def test_update_underscore_in_place(td):
    a, b = td["a"], td["n", "b"]
    td.update_({"a": torch.full((3,), 2.0), "n": {"b": torch.full((3, 2), 4.0)}})
    assert td["a"] is a and td["n", "b"] is b
    assert torch.equal(a, torch.full((3,), 2.0))
    assert torch.equal(b, torch.full((3, 2), 4.0))


def test_update_underscore_from_tensordict(td):
    a = td["a"]
    td.update_(TensorDict({"a": torch.full((3,), 2.0)}, [3]))
    assert td["a"] is a and torch.equal(a, torch.full((3,), 2.0))


# ---------------------------------------------------------------- pop / popitem / setdefault
def test_pop(td):
    a = td["a"]
    assert td.pop("a") is a
    assert "a" not in td.keys()


def test_pop_nested(td):
    c = td["n", "m", "c"]
    assert td.pop(("n", "m", "c")) is c
    assert ("n", "m", "c") not in td.keys(True)


def test_pop_missing(td):
    assert td.pop("missing", 42) == 42
    with pytest.raises(KeyError, match="missing"):
        td.pop("missing")


def test_pop_non_tensor_returns_data(td):
    td["s"] = "text"
    assert td.pop("s") == "text"


def test_popitem_is_last_inserted(td):
    td["last"] = torch.ones(3)
    key, value = td.popitem()
    assert key == "last"
    assert torch.equal(value, torch.ones(3))
    assert list(td.keys()) == ["a", "n"]


def test_popitem_empty_raises():
    with pytest.raises(KeyError):
        TensorDict().popitem()


def test_setdefault_missing_writes(td):
    x = torch.ones(3)
    assert td.setdefault("x", x) is x
    assert td["x"] is x


def test_setdefault_existing_keeps(td):
    a = td["a"]
    assert td.setdefault("a", torch.zeros(3)) is a
    assert torch.equal(td["a"], torch.arange(3.0))


def test_setdefault_nested(td):
    y = torch.zeros(3)
    assert td.setdefault(("n", "y"), y) is y
    assert td.setdefault(("n", "y"), torch.ones(3)) is y


# ---------------------------------------------------------------- clear / copy / empty / is_empty
def test_clear(td):
    assert td.clear() is td
    assert list(td.keys()) == []
    assert td.batch_size == torch.Size([3])


def test_copy_is_shallow(td):
    cp = td.copy()
    assert cp is not td
    assert cp["a"] is td["a"]
    assert cp["n", "m", "c"] is td["n", "m", "c"]
    cp["extra"] = torch.zeros(3)
    cp["n", "extra"] = torch.zeros(3)
    assert "extra" not in td.keys()
    assert ("n", "extra") not in td.keys(True)


def test_empty_keeps_metadata_drops_entries(td):
    out = td.empty()
    assert list(out.keys()) == []
    assert out.batch_size == td.batch_size
    assert out.device == td.device
    assert set(td.keys(True, True)) == {"a", ("n", "b"), ("n", "m", "c")}


def test_empty_recurse_keeps_structure(td):
    out = td.empty(recurse=True)
    assert set(out.keys(True)) == {"n", ("n", "m")}
    assert list(out.keys(True, True)) == []


def test_empty_recurse_keeps_the_non_tensor_entries():
    td = TensorDict(
        x=torch.zeros(3), s=NonTensorStack("a", "b", "c"), n=TensorDict(t="v", y=torch.ones(3)),
        batch_size=[3],
    )  # fmt: skip
    out = td.empty(recurse=True)
    assert set(out.keys(True)) == {"s", "n", ("n", "t")}
    assert out["s"] == ["a", "b", "c"] and out["n", "t"] == "v"
    out["n", "t"] = "w"  # a container of its own
    assert td["n", "t"] == "v"
    assert td.empty().is_empty() and list(td.empty().keys()) == []  # without recurse: none
    assert out.get("s").batch_size == (3,)
    assert td.empty(recurse=True, batch_size=[]).get("s").batch_size == (3,)  # a prefix


def test_empty_recurse_refuses_a_batch_size_a_non_tensor_stack_cannot_take():
    td = TensorDict(s=NonTensorStack("a", "b", "c"), batch_size=[3])
    with pytest.raises(RuntimeError, match="'s' of batch_size=\\(3,\\)"):
        td.empty(recurse=True, batch_size=[2])
    assert td["s"] == ["a", "b", "c"]


def test_copy_keeps_the_shape_of_a_non_tensor_entry():
    # an element of a stack of one value per row keeps its feature dim
    rows = NonTensorStack("a", "b").unsqueeze(-1)
    td = TensorDict(n=TensorDict(s=rows, batch_size=[2]), batch_size=[2])[1]
    assert td.get(("n", "s")).batch_size == (1,)
    assert td.copy().get(("n", "s")).batch_size == (1,)
    assert td.copy().get(("n", "s")).tolist() == ["b"]


def test_empty_new_batch_size(td):
    assert td.empty(batch_size=[]).batch_size == torch.Size([])


def test_is_empty():
    assert TensorDict().is_empty()
    assert TensorDict({"a": {"b": {}}}).is_empty()
    assert not TensorDict({"a": {"b": torch.zeros(())}}).is_empty()
    assert not TensorDict({"s": "text"}).is_empty()
