"""The method families beyond plain tensors: gradients through them (``backward``,
``zero_grad``), ``torch.compile`` of table methods without graph breaks, non-tensor
entries and lazy stacks carried through reductions, batch ops and ``new_*``
constructors."""

from __future__ import annotations

import pytest
import torch
from core_helpers import (
    TABLE_BS,
    TABLE_MASK,
    TABLE_WARNINGS,
    assert_leaf_close,
    make_table_td,
    tensor_leaves,
)
from core_helpers import table_check_leafwise as check_leafwise

from tensordict import TensorDict

pytestmark = TABLE_WARNINGS


# --------------------------------------------------------------------------- autograd
def test_backward_grad_zero_grad():
    w = torch.ones(2, 3, requires_grad=True)
    td = TensorDict(
        {"a": w * 2, "n": {"b": (w * w).unsqueeze(-1)}, "i": torch.ones(2, 3)}, TABLE_BS
    )
    # as the reference: a gradient tensordict for non-scalar leaves ...
    td.backward(td.apply(torch.ones_like), retain_graph=True)
    torch.testing.assert_close(w.grad, torch.full((2, 3), 4.0))
    w.grad = None
    td.backward(td.apply(lambda x: torch.full_like(x, 2.0)), retain_graph=True, inputs=[w])
    torch.testing.assert_close(w.grad, torch.full((2, 3), 8.0))
    with pytest.raises(RuntimeError, match=r"'a' has shape \(2, 3\)"):
        td.backward()
    with pytest.raises(KeyError, match="'a'"):
        td.backward(td.exclude("a"))
    # ... and none for leaves of one element
    w.grad = None
    TensorDict({"a": (w * 2).sum(), "b": (w * w).sum()}).backward()
    torch.testing.assert_close(w.grad, torch.full((2, 3), 4.0))
    params = TensorDict({"w": w, "n": {"v": torch.zeros(2, 3), "u": w}}, TABLE_BS)
    grads = params.grad
    assert set(grads.keys(True, True)) == {"w", ("n", "u")}
    torch.testing.assert_close(grads["w"], w.grad)
    assert params.zero_grad(set_to_none=False) is params
    assert torch.equal(w.grad, torch.zeros(2, 3))
    params.zero_grad()
    assert w.grad is None
    with pytest.raises(RuntimeError, match="requires grad"):
        make_table_td().backward()


def test_as_tensor():
    td = make_table_td()
    check_leafwise(td.as_tensor(), td, lambda k, x: x)


# --------------------------------------------------------------------------- torch.compile
def test_table_methods_compile_without_graph_breaks():
    def f(td, mask):
        return (
            td.sum(0),
            td.std(dim="feature"),
            td.max(1).indices,
            td.mean(reduce=True),
            td.where(mask, 0.0),
            td.roll(1, 0).softmax(1),
            td.gather(1, torch.zeros(2, 1, dtype=torch.long)),
        )

    td = make_table_td()
    compiled = torch.compile(f, fullgraph=True, backend="eager")
    for got, want in zip(compiled(td, TABLE_MASK), f(td, TABLE_MASK)):
        if isinstance(want, torch.Tensor):
            assert_leaf_close(got, want)
        else:
            assert got.batch_size == want.batch_size
            for k, v in tensor_leaves(want).items():
                assert_leaf_close(got.get(k), v)


# --------------------------------------------------------------------------- non-tensor stacks, lazy stacks
def _stacked_with_text():
    a = TensorDict({"x": torch.ones(3), "s": "a", "m": "same"}, [3])
    b = TensorDict({"x": torch.zeros(3), "s": "b", "m": "same"}, [3])
    return torch.stack([a, b])  # "s" is a NonTensorStack, "m" one value


def test_reductions_carry_non_tensor_entries():
    td = _stacked_with_text()
    assert td.sum(1).get_non_tensor("s") == ["a", "b"]  # the same all along dim 1: kept
    assert td.sum(1, keepdim=True).get_non_tensor("s") == [["a"], ["b"]]
    assert td.max(1).values.get_non_tensor("s") == ["a", "b"]
    for out in (td.sum(0), td.sum(), td.mean((0, 1))):  # values differ: left out
        assert "s" not in out.keys() and out.get_non_tensor("m") == "same"
    assert td.sum(dim="feature").get_non_tensor("s") == td.get_non_tensor("s")
    assert td.cummax(0).values.get_non_tensor("s") == td.get_non_tensor("s")


@pytest.mark.parametrize(
    "call, expected",
    [
        (lambda td: td.rot90(), lambda s: [list(r) for r in zip(*s)][::-1]),
        (lambda td: td.roll(1, 1), lambda s: [r[-1:] + r[:-1] for r in s]),
        (lambda td: td.gather(1, torch.tensor([[2], [0]])), lambda s: [[s[0][2]], [s[1][0]]]),
        (lambda td: td.softmax(0), lambda s: s),
        (lambda td: td.where(torch.tensor([True, False]), 0.0), lambda s: s),
        (lambda td: td.masked_fill(torch.tensor([True, False]), 0.0), lambda s: s),
    ],
)
def test_batch_ops_move_non_tensor_stacks(call, expected):
    values = [["a", "b", "c"], ["d", "e", "f"]]
    td = torch.stack(
        [
            torch.stack([TensorDict({"x": torch.tensor(1.0), "s": v}, []) for v in row])
            for row in values
        ]
    )
    assert td.batch_size == (2, 3)
    assert call(td).get_non_tensor("s") == expected(values)


def test_new_constructors_with_non_tensor_stacks():
    td = _stacked_with_text()
    out = td.new_zeros(4)
    # a stack of the new shape, of one value (not meant to be read before it is written)
    assert out.batch_size == (4,) and out.get("s").batch_size == (4,)
    assert out.get("m").data == "same"


def test_lazy_stacks():
    from tensordict import lazy_stack

    members = [make_table_td(seed=i) for i in range(2)]
    lazy = lazy_stack(members, 0)
    dense = torch.stack(members, 0)
    for call in (
        lambda t: t.sum(0),
        lambda t: t.mean(dim="feature"),
        lambda t: t.max(1).indices,
        lambda t: t.roll(1, 1),
        lambda t: t.where(torch.ones(2, 2, 3, dtype=torch.bool), 0.0),
        lambda t: t.masked_fill(torch.tensor([True, False]), 0.0),
    ):
        check_leafwise(call(lazy), call(dense), lambda k, x: x)
    assert_leaf_close(lazy.std(reduce=True), dense.std(reduce=True))
    nested = TensorDict({"l": lazy}, [2, 2])
    want = TensorDict({"l": dense}, [2, 2]).sum("feature", reduce=True)
    assert_leaf_close(nested.sum(dim="feature", reduce=True), want)
    lazy.masked_fill_(torch.tensor([True, False]), -1.0)
    assert (members[0]["a"] == -1).all() and (members[1]["a"] != -1).all()
