"""Lazy stacks as the reference 0.15 offers them: an empty stack that grows with
``append``/``insert``/``extend``, ragged reads (``as_list``/``as_padded_tensor``/
``as_nested_tensor``, ``get_nestedtensor``), ``hook_in``/``hook_out``, batch sizes that
differ across members, and ``lazy_stack`` of tensors."""

from __future__ import annotations

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, lazy_stack


def _row(value: float, n: int = 3) -> TensorDict:
    return TensorDict(a=torch.full((n,), value), batch_size=[n])


def test_empty_stack_grows_like_a_list() -> None:
    lazy = LazyStackedTensorDict(stack_dim=0)
    assert lazy.batch_size == torch.Size([0])
    lazy.append(_row(0.0))
    lazy.insert(0, _row(1.0))
    lazy.extend([_row(2.0)])
    lazy.extend(lazy_stack([_row(3.0)]))
    lazy.extend(TensorDict(a=torch.full((2, 3), 4.0), batch_size=[2, 3]))
    assert lazy.batch_size == torch.Size([6, 3])
    assert lazy["a"][:, 0].tolist() == [1.0, 0.0, 2.0, 3.0, 4.0, 4.0]
    lazy.insert(-1, _row(9.0))  # as list.insert: before the last one
    assert lazy["a"][:, 0].tolist() == [1.0, 0.0, 2.0, 3.0, 4.0, 9.0, 4.0]


def test_empty_stack_along_another_dim() -> None:
    lazy = LazyStackedTensorDict(stack_dim=1)
    lazy.append(_row(0.0))
    lazy.append(_row(1.0))
    assert lazy.batch_size == torch.Size([3, 2])
    assert torch.equal(lazy["a"], torch.stack([torch.zeros(3), torch.ones(3)], 1))


def test_growth_errors_leave_the_stack_unchanged() -> None:
    lazy = lazy_stack([_row(0.0)])
    with pytest.raises(ValueError, match="batch_size"):
        lazy.extend([_row(1.0), _row(2.0, n=4)])
    assert lazy.batch_size == torch.Size([1, 3])
    with pytest.raises(TypeError, match="Tensor"):
        lazy.insert(0, torch.zeros(3))  # type: ignore[arg-type]
    lazy.lock_()
    with pytest.raises(RuntimeError, match="locked"):
        lazy.append(_row(1.0))
    assert len(lazy.tensordicts) == 1


def test_ragged_reads() -> None:
    lazy = lazy_stack([TensorDict(x=torch.ones(1)), TensorDict(x=torch.full((3,), 2.0))])
    xs = lazy.get("x", as_list=True)
    assert [t.tolist() for t in xs] == [[1.0], [2.0, 2.0, 2.0]]
    padded = lazy.get("x", as_padded_tensor=True, padding_value=-1.0)
    assert torch.equal(padded, torch.tensor([[1.0, -1.0, -1.0], [2.0, 2.0, 2.0]]))
    left = lazy.get("x", as_padded_tensor=True, padding_side="left")
    assert torch.equal(left, torch.tensor([[0.0, 0.0, 1.0], [2.0, 2.0, 2.0]]))
    nested = lazy.get("x", as_nested_tensor=True)
    assert nested.is_nested and nested.layout == torch.jagged
    assert [t.tolist() for t in nested.unbind()] == [[1.0], [2.0, 2.0, 2.0]]
    assert lazy.get("missing", 5, as_list=True) == 5
    with pytest.raises(KeyError):
        lazy.get("missing", as_list=True)
    with pytest.raises(ValueError, match="exclusive"):
        lazy.get("x", as_list=True, as_padded_tensor=True)


def test_ragged_reads_through_a_parent_tensordict() -> None:
    lazy = lazy_stack([TensorDict(x=torch.ones(1)), TensorDict(x=torch.full((3,), 2.0))])
    td = TensorDict(inner=lazy, batch_size=[2])
    with pytest.raises(RuntimeError, match="shape differs"):
        td.get(("inner", "x"))
    padded = td.get(("inner", "x"), as_padded_tensor=True, padding_value=-1.0)
    assert torch.equal(padded, torch.tensor([[1.0, -1.0, -1.0], [2.0, 2.0, 2.0]]))
    assert [t.tolist() for t in td.get(("inner", "x"), as_list=True)] == [[1.0], [2.0] * 3]
    assert td.get(("inner", "x"), as_nested_tensor=True).is_nested
    assert td.get(("missing", "x"), 5, as_list=True) == 5


def test_ragged_reads_of_a_stack_of_stacks() -> None:
    inner = lazy_stack([TensorDict(x=torch.ones(2)), TensorDict(x=torch.ones(3))])
    outer = lazy_stack([inner, inner.clone()], 1)
    assert outer.get("x", as_padded_tensor=True).shape == torch.Size([2, 2, 3])
    lists = outer.get("x", as_list=True)
    assert [[t.shape[0] for t in row] for row in lists] == [[2, 3], [2, 3]]
    with pytest.raises(ValueError, match="nested"):
        outer.get("x", as_nested_tensor=True)


def test_get_nestedtensor_default() -> None:
    lazy = lazy_stack([TensorDict(a=torch.zeros(4), b=torch.zeros(4)), TensorDict(a=torch.ones(5))])
    nested = lazy.get_nestedtensor("a")
    assert nested.layout == torch.strided
    assert [t.shape[0] for t in nested.unbind()] == [4, 5]
    b = lazy.get_nestedtensor("b", default=torch.ones(4))
    assert b.unbind()[1].tolist() == [1.0] * 4
    assert lazy.get_nestedtensor("b", None) is None
    assert list(lazy.valid_keys()) == list(lazy.keys())


def test_hooks() -> None:
    lazy = LazyStackedTensorDict(
        TensorDict(a=torch.zeros(2)),
        TensorDict(a=torch.ones(2)),
        hook_out=lambda x: x + 10,
        hook_in=lambda x: x * 2,
    )
    assert torch.equal(lazy["a"], torch.tensor([[10.0, 10.0], [11.0, 11.0]]))
    assert torch.equal(lazy.get("a"), lazy["a"])
    lazy["b"] = torch.ones(2, 2)
    assert lazy.tensordicts[0]["b"].tolist() == [2.0, 2.0]


def test_batch_sizes_that_differ() -> None:
    td0, td1 = TensorDict(batch_size=(3, 4)), TensorDict(batch_size=(3, 5))
    lazy = LazyStackedTensorDict(td0, td1, stack_dim=1)
    assert lazy.batch_size == torch.Size([3, 2, -1])
    with pytest.raises(RuntimeError, match="strict_shape"):
        LazyStackedTensorDict(td0, td1, strict_shape=True)
    with pytest.raises(RuntimeError):
        lazy_stack([td0, td1], -4)


def test_lazy_stack_of_tensors() -> None:
    xs = [torch.ones(1), torch.ones(2)]
    assert lazy_stack(xs, as_list=True) == xs
    assert torch.equal(
        lazy_stack(xs, as_padded_tensor=True), torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    )
    assert torch.equal(
        lazy_stack([torch.zeros(2), torch.ones(2)], 1), torch.tensor([[0.0, 1.0]] * 2)
    )


def _het() -> LazyStackedTensorDict:
    return lazy_stack([TensorDict(a=torch.zeros(2)), TensorDict(a=torch.ones(3))])


def test_cat_keeps_lazy_stacks_lazy() -> None:
    het = _het()
    out = torch.cat([het, het.clone()], 0)
    assert isinstance(out, LazyStackedTensorDict)
    assert [td["a"].shape[0] for td in out.tensordicts] == [2, 3, 2, 3]
    lazy = lazy_stack(
        [TensorDict(a=torch.full((2, 3), float(i)), batch_size=[2, 3]) for i in range(2)]
    )
    dense = TensorDict(a=torch.arange(18.0).reshape(2, 3, 3), batch_size=[2, 3, 3])
    mixed = torch.cat([lazy, dense], dim=1)
    assert isinstance(mixed, LazyStackedTensorDict) and mixed.stack_dim == 0
    assert torch.equal(mixed["a"], torch.cat([lazy["a"], dense["a"]], 1))
    chained = torch.cat([dense[:, :2], lazy], dim=0)
    assert len(chained.tensordicts) == 4
    assert torch.equal(chained["a"], torch.cat([dense["a"][:, :2], lazy["a"]], 0))
    with pytest.raises(RuntimeError, match="same number of stacked tensordicts"):
        torch.cat([lazy, TensorDict(a=torch.zeros(3, 3, 3), batch_size=[3, 3, 3])], 1)
    target = het.clone()
    ptrs = [td["a"].data_ptr() for td in target.tensordicts]
    assert torch.cat([het], 0, out=target) is target
    assert [td["a"].data_ptr() for td in target.tensordicts] == ptrs


def test_assert_allclose_compares_lazy_stacks_member_by_member() -> None:
    from tensordict import assert_allclose_td

    het = _het()
    assert assert_allclose_td(het, het.clone())
    assert assert_allclose_td(
        TensorDict(n=het, batch_size=[2]), TensorDict(n=het.clone(), batch_size=[2])
    )
    other = het.clone()
    other.tensordicts[1]["a"][0] = 5.0
    with pytest.raises(AssertionError, match="'a'"):
        assert_allclose_td(het, other)
    with pytest.raises(AssertionError, match=r"\('root', 'a'\)"):
        assert_allclose_td(het, other, prefix="root")
    small = TensorDict(a=torch.zeros(2), b=torch.ones(2), batch_size=[2])
    assert assert_allclose_td(small, small.exclude("b"), intersection=True)


def test_empty_stack_with_the_members_batch_size_and_device() -> None:
    lazy = LazyStackedTensorDict(stack_dim=1, batch_size=[1, 2], device="cpu")
    assert lazy.batch_size == torch.Size([1, 0, 2]) and lazy.device == torch.device("cpu")
    lazy.append(TensorDict(a=torch.zeros(1, 2, 3), batch_size=[1, 2], device="cpu"))
    assert lazy.batch_size == torch.Size([1, 1, 2])
    with pytest.raises(ValueError, match="batch_size"):
        lazy.append(TensorDict(batch_size=[2, 2], device="cpu"))
    assert LazyStackedTensorDict(stack_dim=-1, batch_size=[3]).batch_size == torch.Size([3, 0])


def test_membership_of_a_member_is_identity() -> None:
    td = TensorDict(a=torch.zeros(2), batch_size=[2])
    lazy = lazy_stack([td, td.clone()])
    assert td in lazy and lazy.tensordicts[1] in lazy
    assert td.clone() not in lazy
    assert "a" in lazy and "b" not in lazy


@pytest.mark.parametrize("stack_dim", [0, 1])
def test_view_splits_and_merges_the_stack_dimension_lazily(stack_dim: int) -> None:
    n = 12
    members = [TensorDict(a=torch.full((2,), float(i)), batch_size=[2]) for i in range(n)]
    lazy = lazy_stack(members, stack_dim)
    dense = torch.stack(members, stack_dim)
    shape = [3, 4, 2] if stack_dim == 0 else [2, 3, 4]
    view = lazy.view(*shape)
    assert isinstance(view, LazyStackedTensorDict) and view.batch_size == torch.Size(shape)
    assert torch.equal(view["a"], dense.view(*shape)["a"])
    assert isinstance(view[0], LazyStackedTensorDict)
    assert isinstance(view[(slice(None),) * stack_dim + (0,)], LazyStackedTensorDict)
    group = view.tensordicts[1]  # the members themselves, regrouped
    assert all(x is y for x, y in zip(group.tensordicts, members[4:8], strict=True))
    back = view.view(lazy.batch_size)
    assert isinstance(back, LazyStackedTensorDict)
    assert all(x is y for x, y in zip(back.tensordicts, members, strict=True))
    assert (view.flatten(stack_dim, stack_dim + 1) == lazy).all()
    assert (lazy.unflatten(stack_dim, (3, 4)) == view).all()


@pytest.mark.parametrize("stack_dim", [0, 1, 2])
@pytest.mark.parametrize("mask_dim", [0, 1])
def test_write_through_a_mask_spanning_the_stack_dimension(stack_dim: int, mask_dim: int) -> None:
    base = TensorDict(a=torch.arange(60.0).view(3, 4, 5), batch_size=[3, 4, 5])
    dense = torch.stack([base + i for i in range(4)], stack_dim)
    lazy = lazy_stack([base + i for i in range(4)], stack_dim)
    gen = torch.Generator().manual_seed(stack_dim * 3 + mask_dim)
    mask = torch.rand(dense.shape[mask_dim : mask_dim + 2], generator=gen) > 0.5
    mask.view(-1)[0] = True
    index = (slice(None),) * mask_dim + (mask,)
    shape = dense["a"][index].shape
    value = TensorDict(a=-torch.arange(float(shape.numel())).view(shape), batch_size=shape)
    dense[index] = value
    lazy[index] = value
    assert torch.equal(lazy["a"], dense["a"])
    lazy[index] = 7.0
    dense[index] = 7.0
    assert torch.equal(lazy["a"], dense["a"])


def test_bad_write_through_a_mask_changes_no_member() -> None:
    lazy = lazy_stack([TensorDict(a=torch.zeros(3), batch_size=[3]) for _ in range(2)])
    mask = torch.tensor([[True, False, True], [False, True, True]])
    bad = TensorDict(a=torch.ones(4, 2), batch_size=[4])  # the entry has no feature dim
    with pytest.raises(RuntimeError):
        lazy[mask] = bad
    assert torch.equal(lazy["a"], torch.zeros(2, 3))


def test_update_in_place_reaches_a_nested_lazy_stack() -> None:
    inner = lazy_stack([TensorDict(a=torch.zeros(3)), TensorDict(a=torch.zeros(3))])
    td = TensorDict(n=inner, batch_size=[2])
    td.update_({"n": {"a": torch.ones(2, 3)}})
    assert inner.tensordicts[0]["a"].tolist() == [1.0] * 3  # not a stacked copy
    ragged = lazy_stack([TensorDict(x=torch.zeros(2)), TensorDict(x=torch.zeros(3))])
    holder = TensorDict(n=ragged, batch_size=[2])
    holder.update_({"n": lazy_stack([TensorDict(x=torch.ones(2)), TensorDict(x=torch.ones(3))])})
    assert [t["x"].tolist() for t in ragged.tensordicts] == [[1.0] * 2, [1.0] * 3]


def test_update_in_place_checks_every_write_first() -> None:
    grad = torch.zeros(2, requires_grad=True)
    td = TensorDict(a=torch.zeros(2), g=grad, n={"x": torch.zeros(2)}, batch_size=[2])
    before = {k: v.clone() for k, v in td.detach().items(True, True)}
    cases = [
        ({"a": torch.ones(2), "g": torch.ones(2)}, RuntimeError, "'g'"),  # a leaf requiring grad
        ({"a": torch.ones(2), "n": torch.ones(2)}, TypeError, "'n'"),
        ({"a": torch.ones(2), "missing": torch.ones(2)}, KeyError, "missing"),
        ({"a": torch.ones(2), "n": {"x": torch.ones(3)}}, RuntimeError, "'n', 'x'"),
    ]
    for source, error, text in cases:
        with pytest.raises(error, match=text):
            td.update_(source)
        assert all(torch.equal(td.detach()[k], v) for k, v in before.items())


def test_update_with_a_lazy_stack_makes_the_entry_lazy() -> None:
    # a dense entry updated (not in place) by a lazy stack becomes a lazy stack of its
    # slices, each updated by its member: entries of different shapes are kept
    td0 = TensorDict({("b", "c"): torch.ones(3, 4), "common": torch.ones(3)}, [3])
    td1 = TensorDict({("b", "c"): torch.full((3, 5), 2.0), "common": torch.full((3,), 2.0)}, [3])
    td = TensorDict(parent=lazy_stack([td0, td1]), batch_size=[2])
    void = TensorDict(
        {("parent", "b", "c"): torch.zeros(2, 3, 4), ("parent", "b", "e"): torch.zeros(2, 3)},
        [2],
    )
    void.update(td)
    parent = void["parent"]
    assert isinstance(parent, LazyStackedTensorDict) and parent.stack_dim == 0
    assert parent[0]["b", "c"].shape == (3, 4) and parent[1]["b", "c"].shape == (3, 5)
    assert parent[1]["b", "c"].eq(2).all() and parent["b", "e"].eq(0).all()
    assert torch.equal(parent["common"], torch.stack([td0["common"], td1["common"]]))


@pytest.mark.parametrize("source_is_lazy", [True, False])
def test_update_batch_size_changes_the_number_of_members(source_is_lazy: bool) -> None:
    lazy = TensorDict(a=torch.zeros(3, 4), batch_size=[3, 4]).to_lazystack(0)
    first = lazy.tensordicts[0]
    fewer = TensorDict(a=torch.ones(2, 4), batch_size=[2, 4])
    more = TensorDict(a=torch.full((5, 4), 2.0), batch_size=[5, 4])
    if source_is_lazy:
        fewer, more = fewer.to_lazystack(0), more.to_lazystack(0)
    lazy.update(fewer, update_batch_size=True)
    assert lazy.batch_size == (2, 4) and lazy.tensordicts[0] is first
    assert torch.equal(lazy["a"], torch.ones(2, 4))
    lazy.update(more, update_batch_size=True)
    assert lazy.batch_size == (5, 4) and torch.equal(lazy["a"], torch.full((5, 4), 2.0))
    lazy["b"] = torch.zeros(5, 4)
    with pytest.raises(RuntimeError, match="'b'"):  # b would be lost
        lazy.update(fewer, update_batch_size=True)
    assert lazy.batch_size == (5, 4) and len(lazy.tensordicts) == 5


def test_maybe_dense_stack_is_dense_where_the_entries_agree() -> None:
    td0 = TensorDict(
        {"a": torch.zeros(2, 3), "b": TensorDict(c=torch.ones(2), batch_size=[2])}, [2]
    )
    td1 = TensorDict({"a": torch.ones(2, 3), "b": TensorDict(d=torch.ones(2), batch_size=[2])}, [2])
    out = TensorDict.maybe_dense_stack([td0, td1], 1)
    assert type(out) is TensorDict and out.batch_size == (2, 2)
    assert torch.equal(out["a"], torch.stack([td0["a"], td1["a"]], 1))
    nested = out.get("b")
    assert isinstance(nested, LazyStackedTensorDict) and nested.stack_dim == 1
    assert nested.tensordicts[0] is td0["b"]  # the nested tensordicts themselves
    ragged = TensorDict({"a": torch.zeros(4)}, [])  # a top-level entry of another shape
    assert isinstance(TensorDict.maybe_dense_stack([td0[0], ragged]), LazyStackedTensorDict)


def test_a_list_laid_out_as_the_batch_goes_to_the_members() -> None:
    lazy = LazyStackedTensorDict(TensorDict(), TensorDict())
    lazy["b"] = [torch.full((2,), 2.0), torch.ones(1)]  # one tensor per member
    assert [m["b"].tolist() for m in lazy.tensordicts] == [[2.0, 2.0], [1.0]]
    grid = lazy_stack([lazy_stack([TensorDict() for _ in range(2)]) for _ in range(3)], 1)
    grid["a"] = [[torch.ones(i * 3 + j + 1) for j in range(3)] for i in range(2)]
    assert [[grid[i, j]["a"].shape[0] for j in range(3)] for i in range(2)] == [
        [1, 2, 3],
        [4, 5, 6],
    ]
