"""The TensorDict methods of the misc / state-dict / consolidate mixins on a
LazyStackedTensorDict.

Expected values come from the same method on the dense stack of clones of the members
(``torch.stack``): a lazy stack is another layout of that tensordict. In-place methods
must write into the members themselves; bad input must raise and leave the members as
they were (compared with clones taken before).
"""

from __future__ import annotations

import os
import pickle
import tempfile
from typing import Any

import pytest
import torch
from core_helpers import assert_same

from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    TensorDictBase,
    from_consolidated,
    is_leaf_nontensor,
    lazy_stack,
)
from tensordict._lazy.dense import LazyDenseOps
from tensordict._lazy.index import LazyIndexOps
from tensordict._lazy.ops import LazyMemberOps

METHODS = (
    "bytes consolidate copy_ copy_at_ create_nested data_ptr depth entry_class "
    "from_consolidated get_at get_item_shape is_consolidated load_state_dict pad "
    "param_count replace separates set_at_ sorted_keys split_keys state_dict update_at_ "
    "record_stream to_padded_tensor"
).split()


def make_members(offset: float = 0.0, n: int = 3) -> list[TensorDict]:
    return [
        TensorDict(
            {
                "a": torch.arange(6.0).reshape(3, 2) + 10 * i + offset,
                "n": {"b": torch.full((3, 4), float(i) + offset), "c": torch.arange(3) + i},
                "s": f"x{i}",
                "same": "const",
            },
            batch_size=[3],
        )
        for i in range(n)
    ]


def make(stack_dim: int = 0, offset: float = 0.0) -> tuple[list[TensorDict], Any, TensorDict]:
    """(members, their lazy stack, the dense stack of clones of the members)."""
    members = make_members(offset)
    lazy = lazy_stack(members, stack_dim)
    dense = torch.stack([m.clone() for m in members], stack_dim)
    assert type(dense) is TensorDict
    return members, lazy, dense


# ---------------------------------------------------------------------- surface and MRO
@pytest.mark.parametrize("name", METHODS)
def test_every_method_exists(name):
    attr = getattr(LazyStackedTensorDict, name, None)
    assert callable(attr) or isinstance(attr, property), name


def test_lazy_methods_keep_precedence_over_the_shared_methods():
    # the shared methods are installed on TensorDictBase, after every lazy mixin
    mro = LazyStackedTensorDict.__mro__
    assert mro.index(LazyDenseOps) < mro.index(TensorDictBase)
    assert LazyStackedTensorDict._plan_at is LazyIndexOps._plan_at
    assert LazyStackedTensorDict.update_at_ is TensorDictBase.update_at_
    assert LazyStackedTensorDict.to is LazyMemberOps.to
    assert LazyStackedTensorDict.to_padded_tensor is LazyDenseOps.to_padded_tensor
    assert LazyStackedTensorDict.copy is LazyMemberOps.copy


# ---------------------------------------------------------------------- inspection
@pytest.mark.parametrize("stack_dim", [0, 1])
def test_get_item_shape_matches_the_dense_stack(stack_dim):
    _, lazy, dense = make(stack_dim)
    for key in [*dense.keys(True), "n"]:
        assert lazy.get_item_shape(key) == dense.get_item_shape(key), key


def test_get_item_shape_of_heterogeneous_entries():
    tds = [
        TensorDict({"a": torch.zeros(3, 2, 5)}, [3]),
        TensorDict({"a": torch.zeros(3, 4, 5)}, [3]),
    ]
    assert lazy_stack(tds, 1).get_item_shape("a") == (3, 2, -1, 5)
    outer = TensorDict({"lz": lazy_stack(tds)}, [2])
    assert outer.get_item_shape(("lz", "a")) == (2, 3, -1, 5)
    ragged = lazy_stack(
        [TensorDict({"a": torch.zeros(3)}, [3]), TensorDict({"a": torch.zeros(3, 1)}, [3])]
    )
    with pytest.raises(RuntimeError, match="'a'.*different number of dimensions"):
        ragged.get_item_shape("a")


def test_get_item_shape_and_entry_class_missing_keys():
    lazy = lazy_stack([TensorDict({"a": 0, "x": 1}), TensorDict({"a": 2})])
    with pytest.raises(KeyError, match="'x' is only in some"):
        lazy.get_item_shape("x")
    with pytest.raises(KeyError, match="'nope'"):
        lazy.entry_class("nope")
    with pytest.raises(KeyError, match="nope"):
        lazy.get_item_shape(("a", "nope"))


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_entry_class(stack_dim):
    _, lazy, dense = make(stack_dim)
    for key in ["a", ("n", "b"), "s", "same"]:
        assert lazy.entry_class(key) is dense.entry_class(key), key
    assert lazy.entry_class("s") is NonTensorStack
    # identical values of the members are stacked too (NonTensorStack.data reads the value)
    assert lazy.entry_class("same") is NonTensorStack and lazy.get("same").data == "const"
    assert lazy.entry_class("n") is LazyStackedTensorDict  # a nested lazy stack is read
    hetero = lazy_stack([TensorDict({"a": torch.zeros(2)}), TensorDict({"a": torch.zeros(3)})])
    assert hetero.entry_class("a") is torch.Tensor  # without stacking
    assert TensorDict({"h": hetero}).entry_class(("h", "a")) is torch.Tensor


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_sorted_keys_and_depth(stack_dim):
    _, lazy, dense = make(stack_dim)
    assert lazy.sorted_keys == dense.sorted_keys == ["a", "n", "s", "same"]
    assert lazy.depth == dense.depth == 1
    deep = lazy_stack([TensorDict({"x": {"y": {"w": 0}}, "z": 0}) for _ in range(2)])
    assert deep.depth == 2
    # nested tensordicts without leaves do not count (as the reference)
    assert lazy_stack([TensorDict({"x": {"y": {}}, "z": 0}) for _ in range(2)]).depth == 0
    assert lazy_stack([TensorDict({"z": 0})] * 2).depth == 0
    hetero = lazy_stack([TensorDict({"a": torch.zeros(2)}), TensorDict({"a": torch.zeros(3)})])
    assert hetero.depth == 0 and hetero.sorted_keys == ["a"]


# ---------------------------------------------------------------------- memory
@pytest.mark.parametrize("stack_dim", [0, 1])
def test_bytes_and_param_count_match_the_dense_stack(stack_dim):
    _, lazy, dense = make(stack_dim)
    assert lazy.param_count() == dense.param_count() == 3 * (6 + 12 + 3)
    assert lazy.bytes() == dense.bytes()
    assert lazy.bytes(count_duplicates=True) == dense.bytes(count_duplicates=True)


def test_bytes_count_members_and_their_exclusive_keys():
    td = TensorDict({"a": torch.zeros(3, 2)}, [3])
    shared = lazy_stack([td, td])  # one member twice: its tensor is stored once
    assert shared.bytes() == td.bytes() == 24
    assert shared.bytes(count_duplicates=True) == 48
    assert shared.param_count(count_duplicates=False) == 6
    excl = lazy_stack([TensorDict({"a": torch.zeros(2), "x": torch.zeros(2, 5)}, [2]), td[:2]])
    assert excl.param_count() == 2 + 10 + 4


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_data_ptr_one_entry_per_member(stack_dim):
    members, lazy, _ = make(stack_dim)
    ptrs = lazy.data_ptr()
    assert ptrs.batch_size == () and sorted(ptrs.keys()) == ["0", "1", "2"]
    for i, m in enumerate(members):
        assert_same(ptrs[str(i)], m.data_ptr())
        assert ptrs[str(i), "a"].item() == m["a"].data_ptr()
    storage = lazy.data_ptr(storage=True)
    assert storage["1", "n", "b"].item() == members[1]["n", "b"].untyped_storage().data_ptr()
    outer = TensorDict({"lz": lazy, "w": torch.zeros(len(members))}, [lazy.batch_size[0]])
    assert outer.data_ptr()["lz", "2", "a"].item() == members[2]["a"].data_ptr()


# ---------------------------------------------------------------------- separates
@pytest.mark.parametrize("stack_dim", [0, 1])
def test_separates_moves_member_entries(stack_dim):
    members, lazy, dense = make(stack_dim)
    a_objs = [m["a"] for m in members]
    out = lazy.separates("a", ("n", "b"))
    expected = dense.separates("a", ("n", "b"))
    assert isinstance(out, LazyStackedTensorDict) and out.stack_dim == stack_dim
    assert_same(out, expected)
    assert_same(lazy, dense)
    for m, o, a in zip(members, out.tensordicts, a_objs, strict=True):
        assert o["a"] is a  # moved, not copied
        assert set(m.keys(True, True, is_leaf=is_leaf_nontensor)) == {("n", "c"), "s", "same"}


def test_separates_filters_emptied_nested_in_every_member():
    members, lazy, _ = make()
    lazy.separates(("n", "b"), ("n", "c"))
    assert all("n" not in m.keys() for m in members)
    members, lazy, _ = make()
    lazy.separates(("n", "b"), ("n", "c"), filter_empty=False)
    assert all(m["n"].is_empty() for m in members)


def test_separates_bad_input_leaves_members_unchanged():
    members, lazy, _ = make()
    before = [m.clone() for m in members]
    with pytest.raises(KeyError, match="missing.*nothing was moved"):
        lazy.separates("a", "missing")
    assert_same(members, before)
    members[0]["only0"] = torch.zeros(3)  # an exclusive key is not a key of the stack
    with pytest.raises(KeyError, match="only0"):
        lazy.separates("only0")
    out = lazy.separates("missing", "a", strict=False)
    assert list(out.keys()) == ["a"]
    out = lazy.separates("missing", default=torch.ones(3, 3))
    assert torch.equal(out["missing"], torch.ones(3, 3))
    members, lazy, _ = make()
    before = [m.clone() for m in members]
    lazy.lock_()
    with pytest.raises(RuntimeError, match="locked"):
        lazy.separates("a")
    assert_same(members, before)


# ---------------------------------------------------------------------- split_keys
@pytest.mark.parametrize("stack_dim", [0, 1])
def test_split_keys_gives_lazy_stacks_sharing_the_members_entries(stack_dim):
    members, lazy, dense = make(stack_dim)
    got = lazy.split_keys(["a"], {("n", "b"): "B", "s": "s"})
    want = dense.split_keys(["a"], {("n", "b"): "B", "s": "s"})
    assert len(got) == 3
    for g, w in zip(got, want, strict=True):
        assert isinstance(g, LazyStackedTensorDict) and g.stack_dim == stack_dim
        assert_same(g, w)
    assert all(
        g.tensordicts[i]["B"] is m["n", "b"] for i, m in enumerate(members) for g in got[1:2]
    )
    assert_same(lazy, dense)  # not in place


def test_split_keys_inplace_and_errors():
    members, lazy, dense = make()
    a, rest = lazy.split_keys(["a"], inplace=True, reproduce_struct=True)
    da, drest = dense.split_keys(["a"], inplace=True, reproduce_struct=True)
    assert rest is lazy and all("a" not in m.keys() for m in members)
    assert_same(a, da)
    assert set(a.keys(True)) == set(da.keys(True))
    members, lazy, _ = make()
    before = [m.clone() for m in members]
    with pytest.raises(KeyError, match="'nope'.*nothing was split"):
        lazy.split_keys(["a"], ["nope"], inplace=True)
    assert_same(members, before)
    lazy.lock_()
    with pytest.raises(RuntimeError, match="locked"):
        lazy.split_keys(["a"], inplace=True)
    assert_same(members, before)
    (x, _rest) = lazy.split_keys(["nope"], default=torch.zeros(3, 3))
    assert torch.equal(x["nope"], torch.zeros(3, 3))


# ---------------------------------------------------------------------- create_nested / replace
@pytest.mark.parametrize("stack_dim", [0, 1])
def test_create_nested_writes_into_the_members(stack_dim):
    members, lazy, dense = make(stack_dim)
    assert lazy.create_nested(("n", "new")) is lazy
    dense.create_nested(("n", "new"))
    lazy.create_nested("top")
    dense.create_nested("top")
    assert set(lazy.keys(True)) == set(dense.keys(True))
    assert lazy["top"].batch_size == dense["top"].batch_size == lazy.batch_size
    for m in members:
        assert m["n", "new"].batch_size == (3,) and m["top"].is_empty()


def test_create_nested_bad_input():
    members, lazy, _ = make()
    before = [m.clone() for m in members]
    with pytest.raises(KeyError, match="'a'.*not a tensordict"):
        lazy.create_nested(("a", "x"))
    lazy.lock_()
    with pytest.raises(RuntimeError, match="locked"):
        lazy.create_nested("other")
    assert_same(members, before)
    assert all("other" not in m.keys() for m in members)


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_replace_gives_a_lazy_shallow_copy(stack_dim):
    members, lazy, dense = make(stack_dim)
    before = [m.clone() for m in members]
    new_a = torch.ones(lazy.get_item_shape("a"))
    out = lazy.replace({"a": new_a}, s="new")
    assert isinstance(out, LazyStackedTensorDict)
    assert_same(out, dense.replace({"a": new_a}, s="new"))
    assert_same(members, before)
    assert out.tensordicts[1]["n", "b"] is members[1]["n", "b"]
    assert lazy.replace() is lazy
    with pytest.raises(RuntimeError, match="'a'"):
        lazy.replace(a=torch.zeros(7))
    assert_same(members, before)


# ---------------------------------------------------------------------- get_at / set_at_ / update_at_
INDICES = [
    0,
    -1,
    slice(0, 2),
    (slice(None), 1),
    (1, slice(1, None)),
    torch.tensor([2, 0]),
    torch.tensor([True, False, True]),
    (Ellipsis, 1),  # for "a": its last feature dim; for "s": the last batch dim
    (0, 1, 0),  # reaches into the feature dims of "a"
]


@pytest.mark.parametrize("stack_dim", [0, 1])
@pytest.mark.parametrize("index", INDICES, ids=repr)
def test_get_at_matches_the_dense_stack(stack_dim, index):
    _, lazy, dense = make(stack_dim)
    assert torch.equal(lazy.get_at("a", index), dense.get_at("a", index))
    if not (isinstance(index, tuple) and len(index) == 3):
        assert lazy.get_at("s", index) == dense.get_at("s", index)
    assert lazy.get_at("missing", index, default="d") == "d"


@pytest.mark.parametrize("stack_dim", [0, 1])
@pytest.mark.parametrize("index", INDICES, ids=repr)
def test_set_at_writes_through_to_the_members(stack_dim, index):
    members, lazy, dense = make(stack_dim)
    a_objs = [m["a"] for m in members]
    value = torch.arange(float(dense["a"][index].numel())).reshape(dense["a"][index].shape) + 50
    assert lazy.set_at_("a", value, index) is lazy
    dense.set_at_("a", value, index)
    assert_same(lazy, dense)
    assert all(m["a"] is a for m, a in zip(members, a_objs, strict=True))
    lazy.set_at_(("n", "c"), -7, index[:2] if isinstance(index, tuple) else index)
    dense.set_at_(("n", "c"), -7, index[:2] if isinstance(index, tuple) else index)
    assert_same(lazy, dense)


@pytest.mark.parametrize("stack_dim", [0, 1])
@pytest.mark.parametrize(
    "index", [1, slice(0, 2), (slice(None), 2), torch.tensor([2, 0])], ids=repr
)
def test_set_at_non_tensor_entries(stack_dim, index):
    members, lazy, dense = make(stack_dim)
    lazy.set_at_("s", "new", index)
    dense.set_at_("s", "new", index)
    lazy.set_at_("same", "other", index)
    dense.set_at_("same", "other", index)
    assert_same(lazy, dense)
    assert lazy.get("s").tolist() == dense.get("s").tolist()
    assert any("new" in str(m.get("s")) for m in members)


def test_set_at_bad_input_leaves_members_unchanged():
    members, lazy, _ = make()
    before = [m.clone() for m in members]
    with pytest.raises(KeyError, match="set_at_.*'nope'"):
        lazy.set_at_("nope", 1.0, 0)
    with pytest.raises(RuntimeError, match="shape"):
        lazy.set_at_("a", torch.ones(5), (slice(None), 0))
    with pytest.raises(RuntimeError, match="stack dimension"):
        lazy.set_at_("a", torch.ones(2, 3, 2), slice(None))  # 2 values for 3 members
    with pytest.raises(IndexError, match="'a'"):
        lazy.set_at_("a", 1.0, 7)
    with pytest.raises(IndexError, match="'s'"):
        lazy.set_at_("s", "z", (0, 0, 0))
    assert_same(members, before)
    members[1]["only1"] = torch.zeros(3)  # an exclusive key is not a key of the stack
    with pytest.raises(KeyError, match="only1"):
        lazy.set_at_("only1", 1.0, 1)
    assert torch.equal(members[1]["only1"], torch.zeros(3))


@pytest.mark.parametrize("stack_dim", [0, 1])
@pytest.mark.parametrize(
    "index", [1, slice(1, 3), (slice(None), 0), torch.tensor([0, 2]), (0, 1, 0)], ids=repr
)
def test_update_at_and_copy_at_write_through(stack_dim, index):
    members, lazy, dense = make(stack_dim)
    src_lazy = lazy_stack(make_members(100.0), stack_dim)
    src = src_lazy[index] if not (isinstance(index, tuple) and len(index) == 3) else None
    if src is None:  # an index into feature dims: write tensors of the indexed shape
        src = {"a": torch.tensor(-1.0)}
    objs = [(m["a"], m["n", "b"]) for m in members]
    lazy.update_at_(src, index)
    dense.update_at_(src, index)
    assert_same(lazy, dense)
    assert all(m["a"] is a and m["n", "b"] is b for m, (a, b) in zip(members, objs, strict=True))
    members, lazy, dense = make(stack_dim)
    if isinstance(src, dict):
        return
    assert lazy.copy_at_(src, index) is lazy
    dense.copy_at_(src, index)
    assert_same(lazy, dense)


def test_copy_at_with_a_string_per_member():
    # each member has its own string: copy_at_ writes strings at the index as well
    members, lazy, dense = make()
    src = TensorDict(
        {
            "a": torch.ones(3, 2),
            "n": {"b": torch.zeros(3, 4), "c": torch.zeros(3, dtype=torch.int64)},
            "s": "w",
            "same": "const",
        },
        [3],
    )
    lazy.copy_at_(src, 1)
    dense.copy_at_(src, 1)
    assert_same(lazy, dense)
    # member 1's string was written at every element: a stack of "w" (a partial write
    # turns a value into a stack, as in the reference), member 0 untouched
    assert members[1]["s"] == ["w", "w", "w"] and members[0]["s"] == "x0"
    two = lazy_stack(make_members(5.0)[:2])
    lazy.copy_at_(two, slice(0, 2))
    dense.copy_at_(two, slice(0, 2))
    assert_same(lazy, dense)
    assert members[0]["s"] == "x0" and members[1]["s"] == ["x1", "x1", "x1"]
    assert members[0]["a"][0, 0].item() == 5.0


def test_update_at_checks_every_member_first():
    members, lazy, _ = make()
    before = [m.clone() for m in members]
    bad = {"a": torch.ones(3, 3, 2), "n": {"b": torch.ones(3, 3, 5)}}  # "n.b" has 4 features
    with pytest.raises(RuntimeError, match=r"\('n', 'b'\)"):
        lazy.update_at_(bad, slice(None))
    with pytest.raises(KeyError, match="update_at_.*zz"):
        lazy.update_at_({"a": torch.ones(2), "zz": torch.ones(2)}, 0)
    assert_same(members, before)
    lazy.update_at_({"a": torch.ones(3, 2), "n": {"b": torch.zeros(3, 4)}}, 1, keys_to_update=["a"])
    assert torch.equal(members[1]["a"], torch.ones(3, 2))
    assert torch.equal(members[1]["n", "b"], before[1]["n", "b"])


def test_update_at_on_heterogeneous_members():
    tds = [TensorDict({"a": torch.zeros(2, 2)}, [2]), TensorDict({"a": torch.zeros(2, 5)}, [2])]
    lazy = lazy_stack(tds)
    lazy.update_at_({"a": torch.ones(5)}, (1, 0))  # one member: its own shapes apply
    assert tds[1]["a"][0].tolist() == [1.0] * 5 and tds[0]["a"].sum() == 0
    with pytest.raises(RuntimeError, match="'a'"):
        lazy.set_at_("a", 1.0, (0, 1, 0))  # needs a stacked read of "a"
    outer = TensorDict({"h": lazy}, [2])
    outer.set_at_(("h", "a"), torch.full((2,), 3.0), (0, 1))
    assert tds[0]["a"][1].tolist() == [3.0, 3.0]


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_copy_writes_through(stack_dim):
    members, lazy, dense = make(stack_dim)
    objs = [m["a"] for m in members]
    src_members = make_members(1.0)
    for i, m in enumerate(src_members):
        m["s"] = f"y{i}"
    src = lazy_stack(src_members, stack_dim)
    assert lazy.copy_(src) is lazy
    dense.copy_(src.to_tensordict().exclude("s"))
    assert_same(lazy.exclude("s"), dense.exclude("s"))
    assert [m["s"] for m in members] == ["y0", "y1", "y2"]
    assert all(m["a"] is a for m, a in zip(members, objs, strict=True))
    before = [m.clone() for m in members]
    with pytest.raises(KeyError, match="zz"):
        lazy.copy_(
            TensorDict(
                {"a": torch.zeros(lazy.get_item_shape("a")), "zz": torch.zeros(lazy.batch_size)},
                lazy.batch_size,
            )
        )
    assert_same(members, before)


# ---------------------------------------------------------------------- pad / record_stream
@pytest.mark.parametrize("stack_dim", [0, 1])
def test_pad_gives_the_padded_dense_stack(stack_dim):
    members, lazy, dense = make(stack_dim)
    lazy.names = ["x", "y"]
    dense.names = ["x", "y"]
    out = lazy.pad([1, 0, 0, 2], value=-1.0)
    assert type(out) is TensorDict and out.names == ["x", "y"]
    assert_same(out, dense.pad([1, 0, 0, 2], value=-1.0))
    hetero = lazy_stack([TensorDict({"a": torch.zeros(2)}), TensorDict({"a": torch.zeros(3)})])
    with pytest.raises(RuntimeError, match="'a'"):
        hetero.pad([1, 1])


def test_record_stream_needs_cuda_tensors():
    _, lazy, _ = make()
    with pytest.raises(RuntimeError, match="record_stream needs CUDA tensors, but 'a' is on cpu"):
        lazy.record_stream(None)  # type: ignore[arg-type]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_record_stream_cuda():
    _, lazy, _ = make()
    gpu = lazy.to("cuda")
    assert gpu.record_stream(torch.cuda.Stream()) is gpu


def test_to_padded_tensor_still_lazy_specific():
    lazy = lazy_stack([TensorDict({"a": torch.ones(1)}), TensorDict({"a": torch.ones(3)})])
    assert lazy.to_padded_tensor()["a"].tolist() == [[1, 0, 0], [1, 1, 1]]


# ---------------------------------------------------------------------- state_dict
def assert_state_dicts_equal(got: Any, want: Any) -> None:
    assert list(got) == list(want)
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(got[key], value), key
        elif isinstance(value, dict):
            assert_state_dicts_equal(got[key], value)
        else:
            assert got[key] == value, key


@pytest.mark.parametrize("stack_dim", [0, 1])
@pytest.mark.parametrize("flatten", [False, True])
def test_state_dict_is_the_dense_stacks(stack_dim, flatten):
    _, lazy, dense = make(stack_dim)
    sd = lazy.state_dict(flatten=flatten)
    assert_state_dicts_equal(sd, dense.state_dict(flatten=flatten))
    sd["a"].add_(1)  # a copy
    assert_same(lazy, dense)
    assert sd._metadata == dense.state_dict(flatten=flatten)._metadata
    kept = lazy.state_dict(keep_vars=True, prefix="p.")
    assert "p.a" in kept and kept._metadata["p"]["batch_size"] == lazy.batch_size


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_load_state_dict_round_trip_into_the_members(stack_dim):
    _, src, dense = make(stack_dim)
    members, lazy, _ = make(stack_dim, offset=50.0)
    members[0]["s"] = "changed"
    objs = [(m["a"], m["n", "c"]) for m in members]
    assert lazy.load_state_dict(src.state_dict()) is lazy
    assert_same(lazy, dense)
    assert all(m["a"] is a and m["n", "c"] is c for m, (a, c) in zip(members, objs, strict=True))
    assert [m["s"] for m in members] == ["x0", "x1", "x2"]
    assert all(type(m.get("same")) is not NonTensorStack for m in members)
    assert type(members[0]._tensordict["s"]) is NonTensorData  # one value per member again
    # the flat form and the dense stack's own state dict load the same way
    members, lazy, _ = make(stack_dim, offset=50.0)
    lazy.load_state_dict(dense.state_dict(flatten=True), from_flatten=True)
    assert_same(lazy, dense)
    dense2 = dense.clone().zero_()
    dense2.load_state_dict(lazy.state_dict())
    assert_same(dense2, dense)


def test_load_state_dict_assign_and_exclusive_keys():
    _, src, dense = make()
    members, lazy, _ = make(offset=5.0)
    members[2]["extra"] = torch.zeros(3)  # exclusive: not in the state dict, kept
    old = members[0]["a"]
    lazy.load_state_dict(src.state_dict(), assign=True)
    assert members[0]["a"] is not old and torch.equal(members[0]["a"], dense["a"][0])
    assert "extra" in members[2].keys()


def test_load_state_dict_bad_input_leaves_members_unchanged():
    _, src, _ = make()
    members, lazy, _ = make(offset=5.0)
    before = [m.clone() for m in members]
    sd = src.state_dict(flatten=False)  # non-tensor values as entries: dict() keeps them
    wrong = dict(sd, a=torch.zeros(3, 3, 7))
    with pytest.raises(RuntimeError, match="'a'"):
        lazy.load_state_dict(wrong)
    extra = dict(sd, z=torch.zeros(3, 3))
    with pytest.raises(RuntimeError, match="only in the state dict: \\['z'\\]"):
        lazy.load_state_dict(extra)
    missing = {k: v for k, v in sd.items() if k != "a"}
    with pytest.raises(RuntimeError, match="only in the tensordict: \\['a'\\]"):
        lazy.load_state_dict(missing)
    resized = dict(sd, __batch_size=torch.Size([2, 3]))
    with pytest.raises(RuntimeError, match="number of stacked"):
        lazy.load_state_dict(resized)
    with pytest.raises(RuntimeError, match="nested lists"):
        lazy.load_state_dict(dict(sd, s=["a", "b"]))
    assert_same(members, before)
    lazy.lock_()
    with pytest.raises(RuntimeError, match="locked"):
        lazy.load_state_dict(dict(extra, n=dict(sd["n"], new=torch.zeros(3, 3))), strict=False)
    assert_same(members, before)
    hetero = lazy_stack([TensorDict({"a": torch.zeros(2)}), TensorDict({"a": torch.zeros(3)})])
    with pytest.raises(RuntimeError, match="'a'"):
        hetero.state_dict()


def test_load_state_dict_new_keys_with_strict_false():
    _, lazy, _ = make()
    sd = {"new": {"t": torch.ones(3, 3)}, "flag": "on"}
    lazy.load_state_dict(sd, strict=False)
    assert all(torch.equal(m["new", "t"], torch.ones(3)) for m in lazy.tensordicts)
    assert [m["flag"] for m in lazy.tensordicts] == ["on"] * 3


def test_state_dict_of_a_lazy_stack_nested_in_a_tensordict():
    members, lazy, dense = make(1)
    outer = TensorDict({"lz": lazy, "w": torch.arange(3.0)}, [3])
    expected = TensorDict({"lz": dense, "w": torch.arange(3.0)}, [3])
    sd = outer.state_dict()
    assert_state_dicts_equal(sd, expected.state_dict())
    target_members, target_lazy, _ = make(1, offset=9.0)
    target = TensorDict({"lz": target_lazy, "w": torch.zeros(3)}, [3])
    objs = [m["a"] for m in target_members]
    target.load_state_dict(sd)
    assert_same(target, expected)
    assert all(m["a"] is a for m, a in zip(target_members, objs, strict=True))
    assert_same(target_members[2], members[2])


# ---------------------------------------------------------------------- consolidate
def storages(td: Any) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in td._flat_tensors([])}


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_consolidate_gives_one_buffer(stack_dim):
    members, lazy, dense = make(stack_dim)
    lazy.names = ["x", "y"]
    out = lazy.consolidate()
    assert isinstance(out, LazyStackedTensorDict) and out.stack_dim == stack_dim
    assert out.is_consolidated() and not lazy.is_consolidated()
    buffer = out._consolidated["storage"]
    assert storages(out) == {buffer.untyped_storage().data_ptr()}
    assert_same(out, dense)
    assert out.names == ["x", "y"]
    assert all(not set(storages(m)) & storages(out) for m in members)  # a copy
    out.tensordicts[0]["a"].add_(1)  # views of the buffer: still consolidated
    assert out.is_consolidated()
    out.unlock_().tensordicts[0]["new"] = torch.zeros(3)  # a tensor from elsewhere
    assert not out.is_consolidated()


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_consolidated_lazy_stack_pickles_as_one_buffer(stack_dim):
    _, lazy, dense = make(stack_dim)
    out = lazy.consolidate()
    back = pickle.loads(pickle.dumps(out))
    assert isinstance(back, LazyStackedTensorDict) and back.is_consolidated()
    assert_same(back, dense)
    assert len(storages(back)) == 1
    reduced = out.__reduce_ex__(4)
    assert isinstance(reduced[1][0], torch.Tensor) and reduced[1][0].dtype == torch.uint8


def test_from_consolidated_round_trips():
    _, lazy, dense = make(1)
    out = lazy.consolidate()
    buffer, meta = out._consolidated["storage"], out._consolidated["metadata"]
    for back in (
        LazyStackedTensorDict.from_consolidated(buffer, meta),
        from_consolidated(buffer, meta),
        TensorDict.from_consolidated(lazy.consolidate(metadata=True)._consolidated["storage"]),
    ):
        assert isinstance(back, LazyStackedTensorDict) and back.stack_dim == 1
        assert back.is_consolidated()
        assert_same(back, dense)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "lazy.bin")
        lazy.consolidate(path)
        back = LazyStackedTensorDict.from_consolidated(path)
        assert isinstance(back, LazyStackedTensorDict)
        assert_same(back, dense)
        del back


def test_consolidate_inplace_keeps_the_members():
    members, lazy, dense = make()
    assert lazy.consolidate(inplace=True) is lazy
    assert lazy.is_consolidated() and all(a is b for a, b in zip(lazy.tensordicts, members))
    assert len(storages(lazy)) == 1
    assert_same(lazy, dense)


def test_consolidated_lazy_stack_moves_as_one_buffer():
    _, lazy, _ = make()
    out = lazy.consolidate()
    moved = out.to("meta")
    assert isinstance(moved, LazyStackedTensorDict) and moved.is_consolidated()
    assert moved["a"].device.type == "meta"
    assert moved._consolidated["storage"].device.type == "meta"
    plain = lazy.to("meta")  # not consolidated: member by member
    assert not plain.is_consolidated() and plain["a"].device.type == "meta"


def test_non_consolidated_lazy_stack_pickles():
    members, lazy, dense = make(1)
    members[0]["only0"] = torch.zeros(3)
    lazy.names = ["x", "y"]
    lazy.lock_()
    back = pickle.loads(pickle.dumps(lazy))
    assert isinstance(back, LazyStackedTensorDict) and back.stack_dim == 1
    assert back.is_locked and back.names == ["x", "y"] and not back.is_consolidated()
    assert_same(back, dense)
    assert "only0" in back.tensordicts[0].keys()
    hetero = lazy_stack([TensorDict({"a": torch.zeros(2)}), TensorDict({"a": torch.ones(3)})])
    back = pickle.loads(pickle.dumps(hetero))
    assert [t["a"].tolist() for t in back.tensordicts] == [[0, 0], [1, 1, 1]]
