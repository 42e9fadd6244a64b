"""One rule for non-tensor entries across every family of operations.

* Value maps, copies, shape and batch operations (everything in ``FAMILIES``): a result
  never shares a non-tensor container (``NonTensorData`` / ``NonTensorStack``) with its
  input, so writing into a result's labels leaves the input's untouched.
* Structural operations, which hand out the input's own entries rearranged by key
  (``STRUCTURAL``: select, exclude, flatten_keys, unflatten_keys, split_keys): their result
  holds the input's non-tensor containers, as it holds its tensors, so a write through the
  result reaches the input alike for both (the reference does the same for select, exclude
  and flatten_keys).

Every family runs over every kind of the ``any_td`` fixture (dense, nested, lazy stacks on
dims 0 and 1, an indexed view). The only sharing allowed is that of a lazy stack's members
handed out whole (``lazy[i]``, ``lazy.unbind(stack_dim)``): those are views by design and
the checks below skip members that *are* the input's members.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from core_helpers import ANY_BS, leaves, non_tensor_containers

from tensordict import LazyStackedTensorDict, TensorDictBase
from tensordict._engine.ops import BINARY, BINARY_NO_INPLACE, CASTS, PREDICATES, UNARY
from tensordict._engine.ops_reduce import CUMULATIVE, REDUCTIONS

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*degrees of freedom:UserWarning"),
    pytest.mark.filterwarnings("ignore:ComplexHalf support:UserWarning"),
]

MASK = torch.tensor([[True, False, True], [False, True, True]])
_INT_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor"}
_TWO_OPERANDS = {"lerp": (0.5,), "addcmul": (), "addcdiv": ()}


def _binary(name: str) -> Callable[[Any], Any]:
    if name in _TWO_OPERANDS:
        extra = _TWO_OPERANDS[name]
        return lambda td: getattr(td, name)(td, td if not extra else extra[0])
    if name in ("maximum", "minimum") or name.startswith("logical_"):
        return lambda td: getattr(td, name)(td)
    return lambda td: getattr(td, name)(2)


def _reduction(name: str, dim: Any) -> Callable[[Any], Any]:
    args = (0.5,) if REDUCTIONS[name].positional else ()
    return lambda td: getattr(td, name)(*args, dim=dim)


FAMILIES: dict[str, Callable[[Any], Any]] = {
    # tree map
    "apply": lambda td: td.apply(lambda x: x + 1),
    "apply with others": lambda td: td.apply(lambda x, y: x * y, td),
    "apply batch_size": lambda td: td.apply(lambda x: x, batch_size=[2]),
    "named_apply": lambda td: td.named_apply(lambda k, x: x * 2, nested_keys=True),
    # operators
    "td + 1": lambda td: td + 1,
    "1 - td": lambda td: 1 - td,
    "-td": lambda td: -td,
    "abs(td)": lambda td: abs(td),
    "td == td": lambda td: td == td,
    # pytree maps and densify are value maps too
    "tree_map": lambda td: torch.utils._pytree.tree_map(lambda x: x, td),
    "tree_unflatten": lambda td: torch.utils._pytree.tree_unflatten(
        *torch.utils._pytree.tree_flatten(td)
    ),
    "clone(recurse=False)": lambda td: td.clone(recurse=False),
    # device, copies, dtype
    "clone": lambda td: td.clone(),
    "copy": lambda td: td.copy(),
    "to(float64)": lambda td: td.to(torch.float64),
    "type": lambda td: td.type(torch.float64),
    "detach": lambda td: td.detach(),
    "data": lambda td: td.data,
    "as_tensor": lambda td: td.as_tensor(),
    "contiguous": lambda td: td.contiguous(),
    "to_tensordict": lambda td: td.to_tensordict(),
    # shape operations
    "reshape": lambda td: td.reshape(6),
    "view": lambda td: td.view(3, 2),
    "flatten": lambda td: td.flatten(),
    "unflatten": lambda td: td.unflatten(1, (3, 1)),
    "permute": lambda td: td.permute(1, 0),
    "transpose": lambda td: td.transpose(0, 1),
    "unsqueeze": lambda td: td.unsqueeze(0),
    "squeeze": lambda td: td.unsqueeze(2).squeeze(2),
    "expand": lambda td: td.expand(4, 2, 3),
    "repeat": lambda td: td.repeat(2, 1),
    "flip": lambda td: td.flip(1),
    "unbind(0)": lambda td: td.unbind(0),
    "unbind(1)": lambda td: td.unbind(1),
    "split": lambda td: td.split(1, 1),
    "chunk": lambda td: td.chunk(2, 0),
    "narrow": lambda td: td.narrow(1, 0, 2),
    # indexing
    "index slices": lambda td: td[:1, :2],
    "index tensor": lambda td: td[torch.tensor([1, 0]), :2],
    "index mask": lambda td: td[MASK],
    "masked_select": lambda td: td.masked_select(MASK),
    # batch operations
    "roll": lambda td: td.roll(1, 1),
    "rot90": lambda td: td.rot90(),
    "tile": lambda td: td.tile(2),
    "repeat_interleave": lambda td: td.repeat_interleave(2, dim=1),
    "atleast_3d": lambda td: td.atleast_3d(),
    "softmax": lambda td: td.softmax(1),
    "gather": lambda td: td.gather(1, torch.tensor([[0, 2], [1, 1]])),
    "masked_fill": lambda td: td.masked_fill(MASK, 0.0),
    "where": lambda td: td.where(MASK, 0.0),
    "where td": lambda td: td.where(MASK, td * 2),
    "scatter": lambda td: td.scatter(1, torch.tensor([[0, 2], [1, 1]]), 0.0),
    "new_zeros": lambda td: td.new_zeros(2, 3),
    "new_full": lambda td: td.new_full((2,), 7.0),
    "new_tensor": lambda td: td.new_tensor([1.0, 2.0]),
    "zeros_like": lambda td: torch.zeros_like(td),
    "clamp": lambda td: td.clamp(0.6, 0.9),
    "rsub": lambda td: td.rsub(1),
    # several tensordicts
    "torch.stack": lambda td: torch.stack([td, td], 0),
    "torch.cat": lambda td: torch.cat([td, td], 1),
    "max with indices": lambda td: td.max(dim=1),
    **{f"{name}(0)": (lambda td, n=name: getattr(td, n)(0)) for name in CUMULATIVE},
}
FAMILIES.update({name: (lambda td, n=name: getattr(td, n)()) for name in UNARY})
FAMILIES.update(
    {name: _binary(name) for name in [*BINARY, *BINARY_NO_INPLACE] if name not in _INT_ONLY}
)
FAMILIES.update({name: (lambda td, n=name: getattr(td, n)()) for name in CASTS})
FAMILIES.update({name: (lambda td, n=name: getattr(td, n)()) for name in PREDICATES})
FAMILIES.update({f"{name}(dim=1)": _reduction(name, 1) for name in REDUCTIONS})
FAMILIES.update({f"{name}('feature')": _reduction(name, "feature") for name in REDUCTIONS})
FAMILIES.update({f"{name}()": _reduction(name, None) for name in REDUCTIONS})


def _results(out: Any) -> list[TensorDictBase]:
    if isinstance(out, TensorDictBase):
        return [out]
    if isinstance(out, (tuple, list)):
        return [r for item in out for r in _results(item)]
    return []


def _containers(result: TensorDictBase, views: set[int]) -> dict[int, tuple[str, ...]]:
    """The non-tensor containers of ``result``, leaving out lazy-stack members that are the
    input's own members (views by design)."""
    if isinstance(result, LazyStackedTensorDict):
        out: dict[int, tuple[str, ...]] = {}
        for member in result.tensordicts:
            if id(member) not in views:
                out.update(_containers(member, views))
        return out
    return non_tensor_containers(result)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_no_result_shares_a_non_tensor_container_with_its_input(any_td, family):
    if family == "apply batch_size" and (
        isinstance(any_td, LazyStackedTensorDict) or any_td.get("n", any_td).batch_dims > 2
    ):
        pytest.skip("keeps the stack dimension / the nested batch dims: another batch_size")
    inputs = non_tensor_containers(any_td)
    assert inputs, "the fixture holds non-tensor entries"
    before = {k: v for k, v in leaves(any_td).items() if not isinstance(v, torch.Tensor)}
    views = {id(m) for m in getattr(any_td, "tensordicts", ())}
    results = _results(FAMILIES[family](any_td))
    assert results, family
    for result in results:
        assert result is not any_td, family
        if id(result) in views:  # a lazy stack's member handed out whole: a view
            continue
        shared = {key for i, key in _containers(result, views).items() if i in inputs}
        assert not shared, f"{family}: the result shares the input's non-tensor entries {shared}"
    # and the input still holds its labels
    after = {k: v for k, v in leaves(any_td).items() if not isinstance(v, torch.Tensor)}
    assert after == before


@pytest.mark.parametrize("family", ["abs", "add", "apply", "float", "clone", "copy"])
def test_writing_a_results_labels_leaves_the_inputs(any_td, family):
    """The bug this rule fixes: ``out = td.abs(); out[0] = ...`` changed ``td``'s labels."""
    before = any_td.get("label").tolist()
    out = FAMILIES[family](any_td)
    out.set_at_("label", "changed", (0, 0))
    assert out.get("label").tolist()[0][0] == "changed"
    assert any_td.get("label").tolist() == before
    assert any_td.batch_size == ANY_BS


STRUCTURAL: dict[str, Callable[[Any], Any]] = {
    "select": lambda td: td.select("label", "x", ("n", "y"), strict=False),
    "exclude": lambda td: td.exclude("nothing-of-that-name"),
    "flatten_keys": lambda td: td.flatten_keys("."),
    "unflatten_keys": lambda td: td.flatten_keys(".").unflatten_keys("."),
    "split_keys": lambda td: td.split_keys(["label"])[0],
}


@pytest.mark.parametrize("family", list(STRUCTURAL))
def test_structural_results_hold_the_inputs_non_tensor_entries(any_td, family):
    inputs = {key for key in non_tensor_containers(any_td)}
    out = STRUCTURAL[family](any_td)
    held = set(non_tensor_containers(out))
    assert "label" in out.keys()
    assert held and held <= inputs, f"{family}: the result's non-tensor entries are copies"
    # a write through the result reaches the input, for a label as for a tensor (a lazy
    # stack's members hold one value each, NonTensorData: writing one element of it makes
    # a new stack in the result's member, in the reference too)
    if not isinstance(any_td, LazyStackedTensorDict):
        out.set_at_("label", "changed", (0, 0))
        assert any_td.get("label").tolist()[0][0] == "changed"
