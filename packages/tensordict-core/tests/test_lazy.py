"""LazyStackedTensorDict: stacked reads, write-through, indexing, exclusive keys,
heterogeneous shapes, shape ops, dense conversions, legacy stacking and DataLoader use.

Expected values come from the same operation on the dense ``torch.stack`` of the members
(the stack is only an alternative layout of that tensordict), from the members themselves,
or are written out by hand.
"""

from __future__ import annotations

import pytest
import torch
from core_helpers import assert_same
from hypothesis import given, settings
from hypothesis import strategies as st

import tensordict
from tensordict import (
    LazyStackedTensorDict,
    TensorDict,
    TensorDictBase,
    lazy_legacy,
    lazy_stack,
    maybe_dense_stack,
    set_lazy_legacy,
)


def member(i: float, shape=(3, 4)) -> TensorDict:
    return TensorDict(
        {
            "a": torch.arange(12.0).view(3, 4)[: shape[0], : shape[1]] + 100 * i,
            "n": {"b": torch.full((*shape, 2), float(i))},
        },
        list(shape),
    )


def members(n: int = 5) -> list[TensorDict]:
    return [member(i) for i in range(n)]


def as_dense(td):
    return td.to_tensordict() if isinstance(td, LazyStackedTensorDict) else td


# ---------------------------------------------------------------- construction
@pytest.mark.parametrize("dim,expected", [(0, (5, 3, 4)), (1, (3, 5, 4)), (-1, (3, 4, 5))])
def test_batch_size_inserts_the_stack_dim(dim, expected):
    lazy = lazy_stack(members(), dim)
    assert lazy.batch_size == torch.Size(expected)
    assert lazy.stack_dim == (len(expected) + dim if dim < 0 else dim)
    assert isinstance(lazy, TensorDictBase)
    assert len(lazy.tensordicts) == 5


def test_members_must_share_the_number_of_batch_dims():
    with pytest.raises(RuntimeError, match=r"tensordict 0 has \(3, 4\), tensordict 1 has \(3,\)"):
        lazy_stack([member(0), TensorDict(batch_size=[3])])
    with pytest.raises(TypeError, match="item 1 is a Tensor"):
        LazyStackedTensorDict(member(0), torch.zeros(3, 4))


def test_batch_sizes_that_differ_show_as_minus_one():
    td0, td1 = TensorDict(batch_size=(3, 5)), TensorDict(batch_size=(4, 5))
    assert lazy_stack([td0, td1], -1).batch_size == torch.Size([-1, 5, 2])
    assert lazy_stack([td0, td1], 0).batch_size == torch.Size([2, -1, 5])
    with pytest.raises(RuntimeError, match="strict_shape"):
        lazy_stack([td0, td1], strict_shape=True)


def test_empty_stack_without_batch_size_grows():
    lazy = LazyStackedTensorDict()
    assert lazy.batch_size == torch.Size([0])
    lazy.append(TensorDict(a=torch.zeros(2), batch_size=[2]))
    assert lazy.batch_size == torch.Size([1, 2])
    empty = LazyStackedTensorDict(batch_size=[3])  # the members' batch size, as the reference
    assert empty.batch_size == torch.Size([0, 3])
    assert list(empty.keys()) == []


def test_classmethod_and_to_lazystack():
    tds = members(2)
    assert TensorDict.lazy_stack(tds).tensordicts == tds
    td = TensorDict({"a": torch.zeros(2, 3)}, [2, 3])
    lazy = td.to_lazystack(1)
    assert lazy.stack_dim == 1 and len(lazy.tensordicts) == 3
    lazy.set_("a", torch.arange(6.0).view(2, 3))  # in-place into views of td
    assert torch.equal(td["a"], torch.arange(6.0).view(2, 3))
    assert lazy.to_lazystack(1) is lazy


# ---------------------------------------------------------------- reads
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_get_stacks_member_values(dim):
    tds = members()
    lazy = lazy_stack(tds, dim)
    assert torch.equal(lazy["a"], torch.stack([td["a"] for td in tds], dim))
    assert torch.equal(lazy.get(("n", "b")), torch.stack([td["n", "b"] for td in tds], dim))
    nested = lazy["n"]
    assert isinstance(nested, LazyStackedTensorDict)
    assert nested.tensordicts[3] is tds[3]["n"]
    assert lazy.get("missing", None) is None
    with pytest.raises(KeyError, match="'missing' not found"):
        lazy["missing"]


def test_int_index_at_stack_dim_returns_member_itself():
    tds = members()
    lazy = lazy_stack(tds)
    assert lazy[2] is tds[2]
    assert lazy[-1] is tds[-1]
    sub = lazy[1:4]
    assert isinstance(sub, LazyStackedTensorDict)
    assert all(a is b for a, b in zip(sub.tensordicts, tds[1:4], strict=True))
    assert lazy.unbind(0)[3] is tds[3]
    assert [t is m for t, m in zip(lazy, tds, strict=True)] == [True] * 5


INDICES = [
    0,
    -1,
    slice(1, 4),
    slice(None, None, 2),
    (slice(None), 1),
    (..., 2),
    (None, 0),
    [1, 0],
    (0, 1),
    (slice(None), slice(None), 0),
    (slice(None), None, slice(1, None)),
]


@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("index", INDICES, ids=repr)
def test_indexing_matches_dense(dim, index):
    tds = members()
    assert_same(lazy_stack(tds, dim)[index], torch.stack(tds, dim)[index])


@pytest.mark.parametrize("dim", [0, 1])
def test_tensor_and_mask_indices_match_dense(dim):
    tds = members()
    lazy, dense = lazy_stack(tds, dim), torch.stack(tds, dim)
    gen = torch.Generator().manual_seed(0)
    for index in (
        torch.tensor([0, 2]),
        (slice(None), torch.tensor([1, 0])),
        torch.rand(lazy.batch_size[0], generator=gen) > 0.5,
        torch.rand(lazy.batch_size[:2], generator=gen) > 0.5,  # spans the stack dim
        (1, slice(None), torch.tensor([0, 2])),
    ):
        assert_same(lazy[index], dense[index])


# ---------------------------------------------------------------- writes
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_set_by_key_writes_through(dim):
    tds = members()
    lazy = lazy_stack(tds, dim)
    value = torch.randn(lazy.batch_size + (2,))
    lazy["c"] = value
    for i, td in enumerate(tds):
        assert torch.equal(td["c"], value.select(dim, i))
    lazy["n", "d"] = value
    assert torch.equal(tds[1]["n", "d"], value.select(dim, 1))
    lazy.set("e", {"f": value})
    assert torch.equal(lazy["e", "f"], value)


def test_set_inplace_keeps_member_storage():
    tds = members(3)
    storages = [td["a"] for td in tds]
    lazy = lazy_stack(tds)
    lazy.set_("a", torch.zeros(3, 3, 4))
    assert all(td["a"] is s and not s.any() for td, s in zip(tds, storages, strict=True))
    with pytest.raises(KeyError, match="'zz'"):
        lazy.set_("zz", torch.zeros(3, 3, 4))


def test_set_bad_shape_leaves_members_unchanged():
    tds = members(3)
    lazy = lazy_stack(tds)
    with pytest.raises(RuntimeError, match=r"key 'c'.*shape \(3, 2\).*batch_size=\(3, 3, 4\)"):
        lazy["c"] = torch.zeros(3, 2)
    assert all("c" not in td.keys() for td in tds)


def test_set_on_locked_member_refused_before_any_write():
    tds = members(3)
    tds[2].lock_()
    lazy = lazy_stack(tds)
    with pytest.raises(RuntimeError, match="locked"):
        lazy["c"] = torch.zeros(3, 3, 4)
    assert all("c" not in td.keys() for td in tds)
    lazy.unlock_()
    with lazy.lock_():
        assert lazy.is_locked and all(td.is_locked for td in tds)
    assert not lazy.is_locked


@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize(
    "index",
    [0, -1, slice(1, 4), (slice(None), 1), (..., 2), torch.tensor([0, 2]), [1, 0], (0, 1)],
    ids=repr,
)
def test_index_writes_match_dense(dim, index):
    tds = members()
    lazy = lazy_stack([td.clone() for td in tds], dim)
    dense = torch.stack(tds, dim)
    value = dense[index].apply(lambda x: -x - 1)
    dense[index] = value
    lazy[index] = value
    assert_same(lazy, dense)


def test_index_write_goes_into_members_in_place():
    tds = members(3)
    a1 = tds[1]["a"]
    lazy = lazy_stack(tds)
    lazy[1] = TensorDict({"a": torch.zeros(3, 4)}, [3, 4])
    assert tds[1]["a"] is a1 and not a1.any()
    lazy[:, 0] = TensorDict({"a": torch.full((3, 4), 9.0)}, [3, 4])
    assert (tds[2]["a"][0] == 9).all() and (tds[2]["a"][1] != 9).all()
    lazy[0:2] = 5.0
    assert (tds[0]["n", "b"] == 5).all() and (tds[2]["n", "b"] == 2).all()


def test_bad_index_write_leaves_every_member_unchanged():
    tds = members(3)
    lazy = lazy_stack(tds)
    before = torch.stack([td.clone() for td in tds])
    bad = TensorDict({"a": torch.zeros(2, 3, 7)}, [2, 3])  # wrong feature shape
    with pytest.raises(RuntimeError, match="'a'"):
        lazy[0:2, :, 0] = bad
    assert_same(torch.stack(tds), before)


def test_advanced_index_writes_spanning_the_stack_dimension_match_dense():
    gen = torch.Generator().manual_seed(0)
    for index in (
        torch.rand(3, 3, generator=gen) > 0.5,
        (torch.tensor([0, 2, 1]), torch.tensor([1, 1, 0])),
        (slice(None), torch.tensor([0, 2]), None),
    ):
        lazy, dense = lazy_stack(members(3)), torch.stack(members(3))
        value = dense[index].apply(lambda x: -x - 1)
        lazy[index] = value
        dense[index] = value
        assert_same(lazy.to_tensordict(), dense)
        lazy[index] = 0.5
        dense[index] = 0.5
        assert_same(lazy.to_tensordict(), dense)


# ---------------------------------------------------------------- exclusive keys
def test_exclusive_keys_are_reported():
    tds = members(3)
    tds[1]["only"] = torch.ones(3, 4)
    lazy = lazy_stack(tds)
    assert "only" not in lazy.keys()
    assert set(lazy.keys()) == {"a", "n"}
    assert lazy.get("only", "default") == "default"
    with pytest.raises(KeyError, match=r"tensordict\(s\) \[0, 2\] of 3 lack it"):
        lazy["only"]
    text = repr(lazy)
    assert "exclusive_fields={\n        1 ->\n            only: Tensor(" in text
    lazy["only"] = torch.zeros(3, 3, 4)  # writing makes it common
    assert "only" in lazy.keys()
    lazy.del_("only")
    assert all("only" not in td.keys() for td in tds)


def test_del_exclusive_key_and_missing_key():
    tds = members(2)
    tds[0]["x"] = torch.zeros(3, 4)
    lazy = lazy_stack(tds)
    lazy.del_("x")
    assert "x" not in tds[0].keys()
    with pytest.raises(KeyError, match="'x'"):
        lazy.del_("x")


# ---------------------------------------------------------------- heterogeneous shapes
def hetero() -> LazyStackedTensorDict:
    return lazy_stack(
        [
            TensorDict({"x": torch.ones(2, 3), "y": torch.zeros(1)}),
            TensorDict({"x": torch.full((4, 3), 2.0), "y": torch.ones(1)}),
        ]
    )


def test_heterogeneous_entry_read_raises_clearly_members_still_work():
    lazy = hetero()
    with pytest.raises(RuntimeError, match=r"'x'.*\{0: \(2, 3\), 1: \(4, 3\)\}.*to_padded_tensor"):
        lazy["x"]
    assert torch.equal(lazy["y"], torch.tensor([[0.0], [1.0]]))
    assert [td["x"].shape[0] for td in lazy] == [2, 4]
    assert lazy[1]["x"].shape == (4, 3)
    assert "shape=torch.Size([2, -1, 3])" in repr(lazy)
    with pytest.raises(RuntimeError, match="densify"):
        lazy.contiguous()


def test_to_padded_tensor_pads_and_masks():
    out = hetero().to_padded_tensor(padding=-1.0, mask_key="mask")
    assert isinstance(out, TensorDict)
    expected = torch.full((2, 4, 3), -1.0)
    expected[0, :2] = 1.0
    expected[1] = 2.0
    assert torch.equal(out["x"], expected)
    assert torch.equal(out["mask", "x"], expected != -1)
    assert out["mask", "y"].all()


def test_densify_gives_nested_tensors():
    dense = hetero().densify(layout=torch.jagged)
    assert isinstance(dense, TensorDict)
    assert dense["x"].is_nested
    assert [t.shape for t in dense["x"].unbind()] == [(2, 3), (4, 3)]
    assert torch.equal(dense["y"], torch.tensor([[0.0], [1.0]]))


# ---------------------------------------------------------------- shape ops
SHAPE_OPS = [
    ("unsqueeze", (0,)),
    ("unsqueeze", (-1,)),
    ("unsqueeze", (2,)),
    ("permute", (2, 0, 1)),
    ("transpose", (0, 2)),
    ("movedim", (0, 2)),
    ("expand", (2, -1, -1, -1)),
    ("flip", (0,)),
    ("flip", (1, 2)),
    ("reshape", (-1,)),
    ("flatten", (0, 1)),
    ("flatten", (1, 2)),
    ("repeat", (2, 1, 1)),
    ("repeat", (1, 2, 1)),
    ("squeeze", ()),
    ("narrow", (1, 1, 2)),
]


@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("name,args", SHAPE_OPS, ids=lambda x: str(x))
def test_shape_ops_match_dense(dim, name, args):
    tds = members()
    assert_same(
        getattr(lazy_stack(tds, dim), name)(*args), getattr(torch.stack(tds, dim), name)(*args)
    )


def test_shape_ops_stay_lazy_and_share_members():
    tds = members(2)
    lazy = lazy_stack(tds)
    out = lazy.unsqueeze(-1)
    assert isinstance(out, LazyStackedTensorDict) and out.stack_dim == 0
    out = lazy.permute(1, 2, 0)
    assert out.stack_dim == 2
    out.set_("a", torch.zeros(out.batch_size))  # permuted member views: in place
    assert not tds[0]["a"].any()
    assert lazy_stack([TensorDict(batch_size=[3])]).squeeze(0).batch_size == (3,)


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_split_unbind_chunk_match_dense(dim):
    tds = members()
    lazy, dense = lazy_stack(tds, dim), torch.stack(tds, dim)
    for d in range(3):
        for a, b in zip(lazy.unbind(d), dense.unbind(d), strict=True):
            assert_same(a, b)
        for a, b in zip(lazy.split(2, d), dense.split(2, d), strict=True):
            assert_same(a, b)
        for a, b in zip(lazy.chunk(2, d), dense.chunk(2, d), strict=True):
            assert_same(a, b)


# ---------------------------------------------------------------- tensor ops, apply
def test_table_ops_and_apply_match_dense():
    tds = members(3)
    lazy, dense = lazy_stack(tds, 1), torch.stack(tds, 1)
    assert_same(lazy + 1, dense + 1)
    assert_same(lazy * lazy, dense * dense)
    assert_same(lazy.abs(), dense.abs())
    assert_same(lazy.apply(lambda x: x * 2 + 1), dense.apply(lambda x: x * 2 + 1))
    assert (lazy == dense).all()
    assert isinstance(lazy.float(), LazyStackedTensorDict)
    assert lazy.to(torch.float64)["a"].dtype == torch.float64
    out = lazy.named_apply(lambda k, v: v * 0 + len(k), nested_keys=True)
    assert (out["n", "b"] == 2).all() and (out["a"] == 1).all()


def test_apply_inplace_and_clone():
    tds = members(3)
    lazy = lazy_stack(tds)
    clone = lazy.clone()
    assert all(c["a"] is not m["a"] for c, m in zip(clone.tensordicts, tds, strict=True))
    lazy.apply_(lambda x: x.zero_() + 1)
    assert all((td["a"] == 1).all() for td in tds)
    assert not (clone["a"] == 1).all()
    lazy.zero_()
    assert not any(td["a"].any() for td in tds)


def test_apply_over_heterogeneous_members():
    out = hetero().apply(lambda x: x * 10)
    assert torch.equal(out[1]["x"], torch.full((4, 3), 20.0))


# ---------------------------------------------------------------- dict-like
def test_update_select_exclude_rename():
    tds = members(3)
    lazy = lazy_stack(tds)
    lazy.update({"c": torch.ones(3, 3, 4)})
    assert all(torch.equal(td["c"], torch.ones(3, 4)) for td in tds)
    assert list(lazy.select("a").keys()) == ["a"]
    assert "a" not in lazy.exclude("a").keys() and "a" in lazy.keys()
    lazy.rename_key_("c", "d")
    assert all("d" in td.keys() and "c" not in td.keys() for td in tds)
    with pytest.raises(KeyError, match="'zz'"):
        lazy.rename_key_("zz", "e")
    before = [td["a"].clone() for td in tds]
    with pytest.raises(RuntimeError, match="shape"):
        lazy.update_({"a": torch.zeros(3, 3, 5)})
    assert all(torch.equal(td["a"], b) for td, b in zip(tds, before, strict=True))
    lazy.update_({"a": torch.zeros(3, 3, 4)})
    assert not any(td["a"].any() for td in tds)


def test_names():
    lazy = lazy_stack([TensorDict(batch_size=[3]) for _ in range(2)], 1)
    lazy.names = ["x", "s"]
    assert lazy.names == ["x", "s"]
    assert lazy.tensordicts[0].names == ["x"]
    with pytest.raises(ValueError, match="unique"):
        lazy.names = ["s", "s"]


def test_rename_refine_and_auto_batch_size():
    lazy = lazy_stack([TensorDict({"a": torch.zeros(3, 4)}), TensorDict({"a": torch.ones(3, 5)})])
    assert lazy.auto_batch_size_().batch_size == (2, 3)
    assert [td.batch_size for td in lazy.tensordicts] == [torch.Size([3])] * 2
    assert lazy.refine_names("s", ...).names == ["s", None]
    renamed = lazy.rename(s="t")
    assert renamed.names == ["t", None] and lazy.names == ["s", None]
    with pytest.raises(RuntimeError, match="rename_"):
        lazy.refine_names("x", None)
    assert lazy.auto_batch_size_(batch_dims=1).batch_size == (2,)


# ---------------------------------------------------------------- dense forms, repr
def test_densify_contiguous_to_tensordict_are_dense_copies():
    tds = members(3)
    lazy = lazy_stack(tds, 2)
    dense = torch.stack(tds, 2)
    for out in (lazy.contiguous(), lazy.to_tensordict(), lazy.densify()):
        assert type(out) is TensorDict
        assert_same(out, dense)
    out = lazy.contiguous()
    out["a"].zero_()
    assert tds[0]["a"].any()
    nested = TensorDict({"l": lazy}, lazy.batch_size)
    assert type(nested.densify()["l"]) is TensorDict


def test_repr_follows_reference_layout():
    lazy = lazy_stack([TensorDict({"a": torch.zeros(3)}, [3])] * 2)
    assert repr(lazy) == (
        "LazyStackedTensorDict(\n"
        "    fields={\n"
        "        a: Tensor(shape=torch.Size([2, 3]), device=cpu, dtype=torch.float32, is_shared=False)},\n"
        "    exclusive_fields={\n"
        "    },\n"
        "    batch_size=torch.Size([2, 3]),\n"
        "    device=None,\n"
        "    is_shared=False,\n"
        "    stack_dim=0)"
    )


def test_lazy_stack_nested_in_dense_tensordict():
    tds = members(2)
    outer = TensorDict({"l": lazy_stack(tds), "t": torch.zeros(2)}, [2])
    assert set(outer.keys(True, True)) == {"t", ("l", "a"), ("l", "n", "b")}
    assert ("l", "n", "b") in outer.keys(True, True)
    assert torch.equal(outer["l", "a"], torch.stack([td["a"] for td in tds]))
    outer["l", "c"] = torch.ones(2, 3, 4)
    assert torch.equal(tds[1]["c"], torch.ones(3, 4))
    assert isinstance(outer[1]["l"], TensorDict)
    assert isinstance(outer.unsqueeze(0)["l"], LazyStackedTensorDict)
    assert_same((outer + 1)["l"], torch.stack(tds) + 1)
    assert "l: LazyStackedTensorDict(" in repr(outer)
    del outer["l", "c"]
    assert "c" not in tds[0].keys()
    assert set(outer.select(("l", "a"), "t").keys(True, True)) == {"t", ("l", "a")}
    assert set(outer.exclude(("l", "a")).keys(True, True)) == {"t", ("l", "n", "b")}
    assert "a" in tds[0].keys()  # exclude works on copies


# ---------------------------------------------------------------- stacking functions
def test_maybe_dense_stack():
    same = members(2)
    assert type(maybe_dense_stack(same)) is TensorDict
    assert type(TensorDict.maybe_dense_stack(same, 1)) is TensorDict
    other = [member(0), member(1)]
    other[1]["extra"] = torch.zeros(3, 4)
    assert type(maybe_dense_stack(other)) is LazyStackedTensorDict
    shapes = [TensorDict({"x": torch.zeros(2)}), TensorDict({"x": torch.zeros(3)})]
    assert type(maybe_dense_stack(shapes)) is LazyStackedTensorDict


def test_torch_stack_follows_lazy_legacy():
    tds = members(2)
    assert lazy_legacy() is False
    assert type(torch.stack(tds)) is TensorDict
    with set_lazy_legacy(True):
        assert lazy_legacy() is True
        out = torch.stack(tds, 1)
        assert type(out) is LazyStackedTensorDict and out.stack_dim == 1
    assert lazy_legacy() is False

    @set_lazy_legacy(True)
    def stack_them():
        return torch.stack(tds)

    assert type(stack_them()) is LazyStackedTensorDict
    assert lazy_legacy() is False
    try:
        set_lazy_legacy(True).set()
        assert type(tensordict.stack(tds)) is LazyStackedTensorDict
    finally:
        set_lazy_legacy(False).set()


def test_torch_stack_of_lazy_stacks_stacks_their_members():
    # as the reference: member i of the result is the dense stack of the inputs' members i
    tds = members(4)
    out = torch.stack([lazy_stack(tds[:2]), lazy_stack(tds[2:])])
    assert type(out) is LazyStackedTensorDict and out.stack_dim == 1
    assert all(type(m) is TensorDict for m in out.tensordicts)
    assert_same(out.tensordicts[1], torch.stack([tds[1], tds[3]]))
    assert_same(out.to_tensordict(), torch.stack([torch.stack(tds[:2]), torch.stack(tds[2:])]))


def test_stack_of_lazy_stacks_with_ragged_members():
    # members whose entries differ in shape are never read as one tensor
    a = lazy_stack([TensorDict(x=torch.zeros(2)), TensorDict(x=torch.zeros(3))])
    b = a.clone().apply_(lambda t: t + 1)
    for dim in (0, 1):
        out = torch.stack([a, b], dim)
        assert out.batch_size == (2, 2) and out.stack_dim == 1 - dim
        for i in range(2):
            assert_same(out.tensordicts[i], torch.stack([a[i], b[i]]))
    lazy_of_lazies = TensorDict.maybe_dense_stack([a, b.exclude("x")])  # keys differ
    assert lazy_of_lazies.tensordicts[0] is a


# ---------------------------------------------------------------- DataLoader
def test_dataloader_dataset_and_collate():
    items = [
        TensorDict({"obs": torch.full((3,), float(i)), "label": torch.tensor(i)}, [])
        for i in range(10)
    ]
    dataset = lazy_stack(items)
    assert len(dataset) == 10 and dataset[4] is items[4]
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, collate_fn=lazy_stack)
    batches = list(loader)
    assert [type(b) for b in batches] == [LazyStackedTensorDict] * 3
    assert [b.batch_size for b in batches] == [torch.Size([4]), torch.Size([4]), torch.Size([2])]
    assert torch.equal(torch.cat([b["label"] for b in batches]), torch.arange(10))
    assert torch.equal(batches[1]["obs"][:, 0], torch.tensor([4.0, 5.0, 6.0, 7.0]))


def test_dataloader_heterogeneous_items_with_workers():
    items = [TensorDict({"seq": torch.arange(float(i + 1)), "name": f"s{i}"}) for i in range(6)]
    loader = torch.utils.data.DataLoader(
        lazy_stack(items), batch_size=3, collate_fn=lazy_stack, num_workers=2
    )
    batches = list(loader)
    assert [b["name"] for b in batches] == [["s0", "s1", "s2"], ["s3", "s4", "s5"]]
    padded = batches[1].to_padded_tensor()
    assert padded["seq"].shape == (3, 6)
    assert torch.equal(padded["seq"][0], torch.tensor([0.0, 1, 2, 3, 0, 0]))


# ---------------------------------------------------------------- properties
@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 4),
    shape=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    dim=st.integers(0, 2),
    data=st.data(),
)
def test_lazy_equals_dense_and_unbinds_to_members(n, shape, dim, data):
    dim = min(dim, len(shape))
    tds = [TensorDict({"x": torch.randn(*shape, 2)}, shape) for _ in range(n)]
    lazy = lazy_stack(tds, dim)
    dense = torch.stack(tds, dim)
    assert_same(lazy, dense)
    assert all(a is b for a, b in zip(lazy.unbind(dim), tds, strict=True))
    i = data.draw(st.integers(-n, n - 1))
    index = (slice(None),) * dim + (i,)
    assert_same(lazy[index], dense[index])
