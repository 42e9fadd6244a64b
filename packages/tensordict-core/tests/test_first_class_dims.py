"""Indexing tensordicts with torch's first-class dimensions (``functorch.dim``).

The oracle is functorch itself: each leaf of ``td[index]`` is the leaf indexed with the
same first-class dims, and ``order`` gives the original tensor back."""

from __future__ import annotations

import pytest
import torch
from functorch import dim as ftdim

import tensordict
from tensordict import TensorDict, UnbatchedTensor


def make_td(names=None) -> TensorDict:
    return TensorDict(
        {
            "a": torch.randn(3, 4, 5, 2),
            "n": {"b": torch.randn(3, 4, 5)},
            "label": "x",
            "table": UnbatchedTensor(torch.arange(6.0)),
        },
        batch_size=[3, 4, 5],
        names=names,
    )


def dims(n):
    return ftdim.dims(n) if n > 1 else (ftdim.dims(1),)


CASES = {
    # name: (make the index from fresh dims, bound batch dims)
    "d0": (lambda d: d[0], [0]),
    "d0,d1": (lambda d: (d[0], d[1]), [0, 1]),
    ":,d0": (lambda d: (slice(None), d[0]), [1]),
    "...,d0": (lambda d: (..., d[0]), [2]),
    "d0,...,d1": (lambda d: (d[0], ..., d[1]), [0, 2]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_leaves_are_indexed_by_functorch_and_bound_dims_leave_the_batch(case):
    make_index, bound = CASES[case]
    td = make_td(names=["env", "time", "agent"])
    d = dims(2)
    index = make_index(d)
    out = td[index]
    kept = [i for i in range(3) if i not in bound]
    assert out.batch_size == torch.Size([td.batch_size[i] for i in kept])
    assert out.names == [td.names[i] for i in kept]
    bound_dims = tuple(d[: len(bound)])
    for key in ("a", ("n", "b")):
        leaf = out[key]
        assert leaf.dims == bound_dims
        # "..." reaches batch dims only (as in td[..., 0]): spell it out for the tensor
        full = (slice(None),) * 3
        positional = [x for x in (index if isinstance(index, tuple) else (index,))]
        if any(x is Ellipsis for x in positional):
            at = next(i for i, x in enumerate(positional) if x is Ellipsis)
            positional = (
                positional[:at] + list(full[: 3 - len(positional) + 1]) + positional[at + 1 :]
            )
        expected = td[key][tuple(positional)]
        assert tuple(leaf.shape) == tuple(expected.shape)
        # back to positional dims: the original tensor with the bound dims moved first
        order = leaf.order(*bound_dims)
        assert torch.equal(
            order, td[key].permute(*bound, *[i for i in range(td[key].ndim) if i not in bound])
        )
    assert out["label"] == "x"
    assert torch.equal(out.get("table"), td.get("table"))
    assert out.get("table").batch_size == out.batch_size


def test_nested_tensordict_is_indexed_with_its_parent():
    td = make_td()
    (d0,) = dims(1)
    out = td[d0]
    assert out["n"].batch_size == (4, 5)
    assert out["n", "b"].dims == (d0,)


def test_first_class_dim_tensors_are_stored_as_leaves():
    td = make_td()
    (d0,) = dims(1)
    out = td[d0]
    out.set("double", out["a"] * 2)
    assert out["double"].dims == (d0,)
    torch.testing.assert_close(out["double"].order(d0), td["a"] * 2)
    with pytest.raises(RuntimeError, match="'bad'"):
        out.set("bad", td["a"][:, :2][d0])  # batch dims [2, ...] against [4, 5]


@pytest.mark.parametrize("stack_dim", [0, 1, 2])
def test_lazy_stack_binds_its_members_dims_not_its_stack_dim(stack_dim):
    members = [TensorDict(a=torch.randn(4, 5, 2), batch_size=[4, 5]) for _ in range(3)]
    lazy = tensordict.lazy_stack(members, stack_dim)
    (d0,) = dims(1)
    if stack_dim == 0:
        with pytest.raises(ValueError, match="Cannot index a LazyStackedTensorDict"):
            lazy[d0]
        return
    out = lazy[d0]
    assert isinstance(out, tensordict.LazyStackedTensorDict)
    assert out.batch_size == lazy.batch_size[1:]
    assert out.stack_dim == stack_dim - 1
    for member, original in zip(out.tensordicts, members, strict=True):
        assert member["a"].dims == (d0,)
        assert torch.equal(member["a"].order(d0), original["a"])


@pytest.mark.parametrize(
    "index", [lambda d: (d, slice(0, 2)), lambda d: (d, [0, 1]), lambda d: (d, d, d, d)]
)
def test_an_index_first_class_dims_cannot_combine_with_raises_index_error(index):
    td = make_td()
    (d0,) = dims(1)
    with pytest.raises(IndexError):
        td[index(d0)]
