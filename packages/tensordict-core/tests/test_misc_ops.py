"""Small methods (entry inspection, memory accounting, key-set surgery, indexed in-place
writes, record_stream, to_padded_tensor) and merge_tensordicts / dense_stack_tds /
is_tensorclass."""

from __future__ import annotations

import pytest
import torch

from tensordict import (
    NonTensorData,
    TensorDict,
    dense_stack_tds,
    is_leaf_nontensor,
    is_tensorclass,
    merge_tensordicts,
)


@pytest.fixture
def td():
    return TensorDict(
        {
            "a": torch.arange(6.0).reshape(2, 3),
            "b": {"c": torch.arange(2), "d": {"e": torch.zeros(2, 4, 5)}},
            "s": "text",
        },
        batch_size=[2],
    )


# ---------------------------------------------------------------------- inspection
def test_get_item_shape_and_entry_class(td):
    assert td.get_item_shape("a") == (2, 3)
    assert td.get_item_shape(("b", "d")) == (2,)
    assert td.get_item_shape(("b", "d", "e")) == (2, 4, 5)
    assert td.get_item_shape("s") == (2,)
    assert td.entry_class("a") is torch.Tensor
    assert td.entry_class("b") is TensorDict
    assert td.entry_class("s") is NonTensorData
    with pytest.raises(KeyError, match="zz"):
        td.get_item_shape("zz")


def test_sorted_keys_and_depth(td):
    assert TensorDict({"z": 1, "a": 2, "m": {}}).sorted_keys == ["a", "m", "z"]
    assert td.depth == 2
    assert TensorDict({"x": torch.zeros(())}).depth == 0
    assert TensorDict().depth == 0
    # nested tensordicts without leaves do not count (as the reference)
    assert TensorDict({"a": {"b": {}}}).depth == 0
    assert TensorDict({"a": {"b": {}, "c": 0}}).depth == 1


# ---------------------------------------------------------------------- memory
def test_data_ptr(td):
    ptrs = td.data_ptr()
    assert ptrs.batch_size == () and set(ptrs.keys(True, True)) == {
        "a",
        ("b", "c"),
        ("b", "d", "e"),
    }
    assert ptrs["a"].item() == td["a"].data_ptr()
    x = torch.arange(10.0)
    shared = TensorDict({"p": x[:5], "q": x[5:]}, [5])
    sp = shared.data_ptr(storage=True)
    assert sp["p"].item() == sp["q"].item() == x.untyped_storage().data_ptr()
    assert shared.data_ptr()["q"].item() == x.data_ptr() + 5 * 4


def test_param_count_and_bytes():
    x = torch.zeros(2, 3)
    td = TensorDict(
        {"a": x, "b": {"c": torch.zeros(2, dtype=torch.float64)}, "d": x, "s": "t"}, [2]
    )
    assert td.param_count() == 6 + 2 + 6
    assert td.param_count(count_duplicates=False) == 6 + 2
    assert td.bytes() == 6 * 4 + 2 * 8
    assert td.bytes(count_duplicates=True) == 6 * 4 + 2 * 8 + 6 * 4
    assert TensorDict().param_count() == 0 and TensorDict().bytes() == 0


# ---------------------------------------------------------------------- separates / split_keys
def test_separates_moves_keys(td):
    c = td["b", "c"]
    out = td.separates(("b", "c"), "a")
    assert out["b", "c"] is c and out.batch_size == (2,)
    assert set(out.keys(True, True)) == {"a", ("b", "c")}
    assert set(td.keys(True, True, is_leaf=is_leaf_nontensor)) == {("b", "d", "e"), "s"}


def test_separates_filters_emptied_nested():
    td = TensorDict({"a": {"b": torch.zeros(())}, "e": {}, "d": torch.zeros(())})
    td.separates(("a", "b"))
    assert set(td.keys()) == {"e", "d"}  # "a" emptied and removed; "e" was empty before
    td2 = TensorDict({"a": {"b": torch.zeros(())}})
    td2.separates(("a", "b"), filter_empty=False)
    assert set(td2.keys()) == {"a"}


def test_separates_missing_keys(td):
    before = set(td.keys(True, True))
    with pytest.raises(KeyError, match="missing.*nothing was moved"):
        td.separates("a", "missing")
    assert set(td.keys(True, True)) == before
    out = td.separates("a", "missing", strict=False)
    assert list(out.keys()) == ["a"]
    out = td.separates("missing", default=torch.ones(2))
    assert torch.equal(out["missing"], torch.ones(2))


def test_separates_locked(td):
    td.lock_()
    with pytest.raises(RuntimeError, match="locked"):
        td.separates("a")
    assert "a" in td.keys()


def test_split_keys(td):
    a, bc, rest = td.split_keys(["a"], {("b", "c"): "c"})
    assert list(a.keys()) == ["a"] and list(bc.keys()) == ["c"]
    assert bc["c"] is td["b", "c"]
    assert set(rest.keys(True, True, is_leaf=is_leaf_nontensor)) == {("b", "d", "e"), "s"}
    assert set(td.keys(True, True, is_leaf=is_leaf_nontensor)) == {
        "a",
        ("b", "c"),
        ("b", "d", "e"),
        "s",
    }  # untouched


def test_split_keys_inplace_and_struct(td):
    a, rest = td.split_keys(["a"], inplace=True, reproduce_struct=True)
    assert rest is td and "a" not in td.keys()
    assert set(a.keys(True)) == {"a", "b", ("b", "d")}


def test_split_keys_missing(td):
    with pytest.raises(KeyError, match="'nope'.*nothing was split"):
        td.split_keys(["a"], ["nope"], inplace=True)
    assert "a" in td.keys()
    (x, rest) = td.split_keys(["nope"], default=torch.zeros(2))
    assert torch.equal(x["nope"], torch.zeros(2))
    (x, rest) = td.split_keys(["nope", "a"], strict=False)
    assert list(x.keys()) == ["a"]


# ---------------------------------------------------------------------- create_nested / replace
def test_create_nested(td):
    named = TensorDict({"x": {"y": torch.zeros(2, 3)}}, [2], names=["n"])
    named["x"].batch_size = [2, 3]
    named.create_nested(("x", "z"))
    assert named["x", "z"].batch_size == (2, 3) and named["x", "z"].names == ["n", None]
    td.create_nested("b")  # overwrites
    assert td["b"].is_empty() and td["b"].batch_size == (2,)
    td.create_nested(("new", "deep"))
    assert td["new", "deep"].batch_size == (2,)
    with pytest.raises(KeyError, match="'a'.*not a tensordict"):
        td.create_nested(("a", "x"))
    td.lock_()
    with pytest.raises(RuntimeError, match="locked"):
        td.create_nested("other")


def test_replace(td):
    assert td.replace() is td
    out = td.replace({"a": torch.ones(2, 3)}, s="new")
    assert torch.equal(out["a"], torch.ones(2, 3)) and out["s"] == "new"
    assert torch.equal(td["a"], torch.arange(6.0).reshape(2, 3)) and td["s"] == "text"
    assert out["b", "c"] is td["b", "c"]
    nested = td.replace({"b": {"c": torch.ones(2, dtype=torch.int64)}})
    assert torch.equal(td["b", "c"], torch.arange(2))
    assert torch.equal(nested["b", "c"], torch.ones(2, dtype=torch.int64))
    assert ("b", "d", "e") in nested.keys(True, True)
    with pytest.raises(TypeError, match="at most one"):
        td.replace({}, {})
    with pytest.raises(RuntimeError, match="'a'"):
        td.replace(a=torch.zeros(3))
    assert td["a"].shape == (2, 3)


# ---------------------------------------------------------------------- indexed writes
def test_get_at(td):
    assert torch.equal(td.get_at("a", 1), torch.tensor([3.0, 4.0, 5.0]))
    assert td.get_at(("b", "c"), 0) == 0
    assert td.get_at("missing", 0, default="d") == "d"
    assert td.get_at("b", 1).batch_size == ()
    with pytest.raises(KeyError):
        td.get_at("missing", 0)


def test_set_at_(td):
    a = td["a"]
    td.set_at_("a", torch.tensor([9.0, 9.0, 9.0]), 0)
    assert td["a"] is a and a[0].tolist() == [9.0, 9.0, 9.0] and a[1].tolist() == [3, 4, 5]
    td.set_at_(("b", "c"), 7, (slice(None),))
    assert td["b", "c"].tolist() == [7, 7]
    with pytest.raises(KeyError, match="nope"):
        td.set_at_("nope", 1, 0)
    with pytest.raises(RuntimeError, match=r"shape \(4,\).*'a'.*\(3,\)"):
        td.set_at_("a", torch.ones(4), 0)
    with pytest.raises(IndexError, match="'a'"):
        td.set_at_("a", 1.0, 5)
    assert a[0].tolist() == [9.0, 9.0, 9.0]


def test_copy_at_fast_refuses_a_non_tensor_becoming_a_stack():
    td = TensorDict({"x": torch.zeros(6), "val": NonTensorData(0, batch_size=[6])}, [6])
    new = TensorDict({"x": torch.ones(3), "val": NonTensorData(1, batch_size=[3])}, [3])
    with pytest.raises(RuntimeError, match="fast=True"):
        td.copy_at_(new, slice(1, None, 2))
    assert td.get("val").tolist() == [0] * 6 and not td["x"].any()  # nothing written
    same = TensorDict({"x": torch.ones(3), "val": NonTensorData(0, batch_size=[3])}, [3])
    with pytest.raises(RuntimeError, match="fast=True"):  # an indexed write makes a stack
        td.copy_at_(same, slice(1, None, 2))
    assert type(td.get("val")) is NonTensorData and not td["x"].any()
    td.copy_at_(TensorDict({"x": torch.ones(3)}, [3]), slice(1, None, 2))  # tensors only
    assert td["x"].tolist() == [0, 1, 0, 1, 0, 1] and type(td.get("val")) is NonTensorData
    td.copy_at_(new, slice(1, None, 2), fast=False)
    assert td.get("val").tolist() == [0, 1] * 3
    with pytest.warns(FutureWarning, match="fast=None"):
        td.copy_at_(new, slice(0, None, 2), fast=None)
    assert td.get("val").tolist() == [1] * 6


def test_update_at_checks_everything_first(td):
    before = td.clone()
    with pytest.raises(RuntimeError, match=r"\('b', 'c'\)"):
        td.update_at_({"a": torch.ones(3), "b": {"c": torch.ones(5)}}, 1)
    assert torch.equal(td["a"], before["a"])
    with pytest.raises(KeyError, match="zz"):
        td.update_at_({"a": torch.ones(3), "zz": torch.ones(3)}, 1)
    assert torch.equal(td["a"], before["a"])
    td.update_at_(TensorDict({"a": torch.ones(3), "b": {"c": torch.tensor(5)}}), 1)
    assert td["a"][1].tolist() == [1, 1, 1] and td["b", "c"].tolist() == [0, 5]
    td.update_at_(
        {"a": torch.full((3,), 2.0), "b": {"c": torch.tensor(9)}}, 0, keys_to_update=["a"]
    )
    assert td["a"][0].tolist() == [2, 2, 2] and td["b", "c"][0] == 0


def test_copy_and_copy_at(td):
    a = td["a"]
    src = td.clone().apply(lambda x: x + 1)
    td.copy_(src)
    assert td["a"] is a and torch.equal(a, src["a"])
    sub = TensorDict({"a": torch.zeros(1, 3)}, [1])
    td.copy_at_(sub, slice(1, 2))
    assert a[1].tolist() == [0, 0, 0] and a[0].tolist() == [1, 2, 3]


# ---------------------------------------------------------------------- devices and nested tensors
def test_record_stream_needs_cuda(td):
    with pytest.raises(RuntimeError, match="record_stream needs CUDA tensors, but 'a' is on cpu"):
        td.record_stream(None)  # type: ignore[arg-type]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_record_stream_cuda(td):
    gpu = td.to("cuda")
    stream = torch.cuda.Stream()
    assert gpu.record_stream(stream) is gpu


def test_to_padded_tensor():
    nt = torch.nested.nested_tensor(
        [torch.arange(2.0).reshape(1, 2), torch.arange(6.0).reshape(3, 2)], layout=torch.jagged
    )
    td = TensorDict({"x": nt, "y": torch.ones(2)}, [2])
    out = td.to_padded_tensor(padding=-1.0, mask_key=("m", "mask"))
    assert out["x"].tolist() == [[[0, 1], [-1, -1], [-1, -1]], [[0, 1], [2, 3], [4, 5]]]
    assert out["y"] is td["y"]
    assert out["m", "mask"].tolist() == [[True, False, False], [True, True, True]]
    other = torch.nested.nested_tensor([torch.ones(2, 2), torch.ones(2, 2)], layout=torch.jagged)
    with pytest.raises(ValueError, match="'x'.*'z'.*different ragged lengths"):
        TensorDict({"x": nt, "z": other}, [2]).to_padded_tensor(mask_key="m")


# ---------------------------------------------------------------------- functions
def test_merge_tensordicts():
    td0 = TensorDict({"a": {"b0": 0}, "c": {"d": {"e": 0}}, "common": 0})
    td1 = TensorDict({"a": {"b1": 1}, "f": {"g": {"h": 1}}, "common": 1})
    td2 = TensorDict({"common": 2})
    out = merge_tensordicts(td0, td1, td2)
    assert set(out.keys(True, True)) == {
        ("a", "b0"),
        ("a", "b1"),
        ("c", "d", "e"),
        ("f", "g", "h"),
        "common",
    }
    assert out["common"] == 0  # first value wins without a callback
    out = merge_tensordicts(td0, td1, td2, callback_exist=lambda *v: torch.stack(v))
    assert out["common"].tolist() == [0, 1, 2]
    out = merge_tensordicts(td0, td1, callback_exist={"a": {}, "common": lambda x, y: x + y + 10})
    assert out["common"] == 11
    assert td0["a"].keys() == {"b0"}  # inputs untouched


def test_merge_tensordicts_batch_sizes_and_errors():
    out = merge_tensordicts(
        TensorDict({"a": torch.zeros(2, 3)}, [2, 3]), TensorDict({"b": torch.zeros(2)}, [2])
    )
    assert out.batch_size == (2,)
    with pytest.raises(RuntimeError, match="at least 2"):
        merge_tensordicts(TensorDict())
    with pytest.raises(TypeError, match="argument 1"):
        merge_tensordicts(TensorDict(), {"a": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'x'"):
        merge_tensordicts(TensorDict({"x": {}}), TensorDict({"x": 1}))


def test_dense_stack_tds():
    tds = [
        TensorDict({"a": torch.full((2,), float(i)), "n": {"b": torch.ones(2, 1) * i}}, [2])
        for i in range(3)
    ]
    out = dense_stack_tds(tds, dim=1)
    assert type(out) is TensorDict and out.batch_size == (2, 3)
    assert torch.equal(out["a"], torch.stack([t["a"] for t in tds], 1))
    assert torch.equal(out["n", "b"], torch.stack([t["n", "b"] for t in tds], 1))
    out0 = dense_stack_tds(tds, dim=-2)
    assert out0.batch_size == (3, 2)
    with pytest.raises(ValueError, match="dim="):
        dense_stack_tds(tds)
    with pytest.raises(RuntimeError, match=r"tensordict 1 has batch size \(3,\)"):
        dense_stack_tds([TensorDict(batch_size=[2]), TensorDict(batch_size=[3])], 0)
    with pytest.raises(IndexError, match="out of range"):
        dense_stack_tds(tds, dim=3)


def test_is_tensorclass():
    class Marked:
        _is_tensorclass = True

    assert is_tensorclass(Marked) and is_tensorclass(Marked())
    assert not is_tensorclass(TensorDict()) and not is_tensorclass(TensorDict)
    assert not is_tensorclass(1)
