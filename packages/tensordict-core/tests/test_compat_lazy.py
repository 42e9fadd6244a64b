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
