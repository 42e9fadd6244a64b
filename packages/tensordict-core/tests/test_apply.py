"""apply / apply_ / named_apply: one function over the leaves of one or several tensordicts."""

from __future__ import annotations

import pytest
import torch
from core_helpers import assert_same, assert_unchanged, check_leafwise, snapshot, tensor_leaves

from tensordict import TensorDict


def make_td():
    return TensorDict(
        {
            "a": torch.arange(6.0).reshape(2, 3),
            "i": torch.arange(6).reshape(2, 3),
            "n": {"b": torch.arange(24.0).reshape(2, 3, 4), "m": {"c": torch.ones(2, 3, 1)}},
        },
        [2, 3],
    )


def tensor_items(td):
    return [(k, v) for k, v in td.items(True, True) if isinstance(v, torch.Tensor)]


def test_apply_leafwise():
    td = make_td()
    out = td.apply(lambda x: x * 2 + 1)
    assert out is not td
    assert out.batch_size == td.batch_size
    for key, value in tensor_items(td):
        assert torch.equal(out[key], value * 2 + 1), key
    # the input is unchanged
    assert torch.equal(td["a"], torch.arange(6.0).reshape(2, 3))


def test_apply_keeps_structure_and_nested_batch_size():
    td = make_td()
    out = td.apply(torch.neg)
    assert set(out.keys(True)) == set(td.keys(True))
    assert out["n"].batch_size == td["n"].batch_size
    assert out["n", "m"].batch_size == td["n", "m"].batch_size


def test_apply_with_several_tensordicts():
    td = make_td()
    other = td.apply(lambda x: x + 10)
    third = td.apply(lambda x: x * 0 + 3)
    out = td.apply(lambda x, y, z: x + y * z, other, third)
    for key, value in tensor_items(td):
        assert torch.equal(out[key], value + (value + 10) * 3), key


def test_apply_others_matched_by_key_not_order():
    td = TensorDict({"x": torch.ones(2), "y": torch.full((2,), 2.0)}, [2])
    other = TensorDict({"y": torch.full((2,), 20.0), "x": torch.full((2,), 10.0)}, [2])
    out = td.apply(lambda a, b: a + b, other)
    assert torch.equal(out["x"], torch.full((2,), 11.0))
    assert torch.equal(out["y"], torch.full((2,), 22.0))


def test_apply_other_missing_key_raises():
    td = make_td()
    with pytest.raises(KeyError):
        td.apply(lambda x, y: x + y, td.select("a"))


def test_apply_default_fills_missing_leaf():
    td = TensorDict({"a": torch.ones(2), "n": {"b": torch.ones(2), "c": torch.ones(2)}}, [2])
    other = TensorDict({"a": torch.ones(2), "n": {"b": torch.ones(2)}}, [2])
    out = td.apply(lambda x, y: x + y, other, default=10)
    assert torch.equal(out["a"], torch.full((2,), 2.0))
    assert torch.equal(out["n", "b"], torch.full((2,), 2.0))
    assert torch.equal(out["n", "c"], torch.full((2,), 11.0))


def test_apply_default_fills_missing_nested_tensordict():
    td = TensorDict({"a": torch.ones(2), "n": {"b": torch.ones(2)}}, [2])
    other = TensorDict({"a": torch.ones(2)}, [2])
    out = td.apply(lambda x, y: x + y, other, default=10)
    assert torch.equal(out["a"], torch.full((2,), 2.0))
    assert torch.equal(out["n", "b"], torch.full((2,), 11.0))


def test_apply_none_drops_entries():
    td = make_td()
    out = td.apply(lambda x: x if x.is_floating_point() else None)
    assert "i" not in out.keys()
    assert set(out.keys(True, True)) == {"a", ("n", "b"), ("n", "m", "c")}


def test_apply_none_readme_filter():
    data = TensorDict(
        {"a": torch.tensor(1.0, dtype=torch.float), "b": torch.tensor(1, dtype=torch.int64)}, []
    )
    data_float = data.apply(lambda x: x if x.dtype == torch.float else None)
    assert "b" not in data_float
    assert "a" in data_float


def test_apply_filter_empty_drops_emptied_nested():
    td = make_td()
    out = td.apply(lambda x: x if x.ndim == 2 else None, filter_empty=True)
    assert set(out.keys(True)) == {"a", "i"}


def test_apply_with_batch_size():
    td = make_td()
    out = td.apply(lambda x: x[:, 0], batch_size=[2])
    assert out.batch_size == torch.Size([2])
    assert out["n"].batch_size == torch.Size([2])
    for key, value in tensor_items(td):
        assert torch.equal(out[key], value[:, 0]), key


def test_apply_with_batch_size_and_names():
    td = make_td()
    out = td.apply(lambda x: x.sum(0), batch_size=[3], names=["z"])
    assert out.batch_size == torch.Size([3])
    assert out.names == ["z"]
    assert out["n"].names == ["z"]
    assert torch.equal(out["a"], td["a"].sum(0))


def test_apply_changing_batch_without_batch_size_raises():
    td = make_td()
    with pytest.raises(RuntimeError, match="batch_size"):
        td.apply(lambda x: x[0])


def test_apply_can_change_dtype():
    out = make_td().apply(lambda x: x.to(torch.float16))
    assert all(v.dtype == torch.float16 for _, v in tensor_items(out))


def test_apply_keeps_non_tensor():
    td = TensorDict({"a": torch.zeros(2), "s": "text"}, [2])
    out = td.apply(lambda x: x + 1)
    assert out["s"] == "text"
    assert torch.equal(out["a"], torch.ones(2))


def test_apply_keeps_names():
    td = make_td()
    td.names = ["x", "y"]
    assert td.apply(lambda x: x + 1).names == ["x", "y"]


def test_apply_device_argument():
    out = make_td().apply(lambda x: x, device="cpu")
    assert out.device == torch.device("cpu")
    assert out["n"].device == torch.device("cpu")


# ---------------------------------------------------------------- apply_
def test_apply__writes_in_place_and_keeps_storage():
    td = make_td()
    before = {k: (v, v.data_ptr(), v.clone()) for k, v in tensor_items(td)}
    out = td.apply_(lambda x: x * 3)
    assert out is td
    for key, (tensor, ptr, orig) in before.items():
        assert td[key] is tensor, key
        assert td[key].data_ptr() == ptr, key
        assert torch.equal(td[key], orig * 3), key


def test_apply__with_others():
    td = make_td()
    other = td.clone()
    a = td["a"]
    td.apply_(lambda x, y: x + y, other)
    assert td["a"] is a
    for key, value in tensor_items(other):
        assert torch.equal(td[key], value * 2), key


# ---------------------------------------------------------------- named_apply
def test_named_apply_gets_leaf_names():
    td = make_td()
    seen = []

    def fn(key, value):
        seen.append(key)
        return value * 0 + len(key)

    out = td.named_apply(fn)
    assert sorted(seen) == sorted(["a", "i", "b", "c"])
    assert (out["a"] == 1).all() and (out["n", "b"] == 1).all()


def test_named_apply_nested_keys():
    td = make_td()
    seen = []

    def fn(key, value):
        seen.append(key)
        return value

    td.named_apply(fn, nested_keys=True)
    assert set(seen) == {"a", "i", ("n", "b"), ("n", "m", "c")}


def test_named_apply_with_other_and_none():
    td = make_td()
    other = td.apply(lambda x: x + 1)
    out = td.named_apply(lambda k, x, y: None if k == "i" else y - x, other)
    assert "i" not in out.keys()
    assert (out["a"] == 1).all() and (out["n", "m", "c"] == 1).all()


def test_readme_apply_uniform():
    data = TensorDict({"key 1": torch.ones(3, 4, 5)}, batch_size=[3, 4])
    out = data.apply(lambda tensor: tensor.uniform_())
    assert ((out["key 1"] >= 0) & (out["key 1"] < 1)).all()


# ---------------------------------------------------------------- every kind of tensordict
def test_apply_over_every_kind(any_td):
    out = any_td.apply(lambda x: x * 2 + 1)
    check_leafwise(out, any_td, lambda x: x * 2 + 1)
    assert type(out) is type(any_td)
    check_leafwise(any_td.apply(lambda x, y: x - y, any_td), any_td, torch.zeros_like)
    dropped = any_td.apply(lambda x: x if x.dtype == torch.float64 else None)
    assert set(tensor_leaves(dropped)) == {("b",)}
    assert dropped.get("tag").data == "t"


def test_apply_inplace_over_every_kind(any_td):
    before = any_td.clone()
    assert any_td.apply_(lambda x: x.mul(3)) is any_td
    check_leafwise(any_td, before, lambda x: x * 3)


def test_apply_inplace_bad_result_leaves_every_kind_unchanged(any_td):
    snap = snapshot(any_td)

    def bad(x):
        return x if x.dtype == torch.float32 else x.new_zeros(7)

    with pytest.raises(RuntimeError):
        any_td.apply_(bad)

    assert_unchanged(any_td, snap)


def test_named_apply_over_every_kind(any_td):
    seen = []

    def fn(key, x):
        seen.append(key)
        return x + len(key)

    out = any_td.named_apply(fn, nested_keys=True)
    check_leafwise(out, any_td, lambda k, x: x + len(k if len(k) > 1 else k[0]), keyed=True)
    assert set(seen) >= {k if len(k) > 1 else k[0] for k in tensor_leaves(any_td)}


def test_apply_result_equals_the_dense_result(any_td):
    """A lazy stack or an indexed view maps like its dense copy."""
    dense = any_td.to_tensordict()
    assert_same(any_td.apply(torch.exp), dense.apply(torch.exp))
