"""Operations of the non-tensor leaves as tensors of their batch shape.

* :func:`compare` — ``==``, ``!=``, ``|``, ``^`` and ``&`` element by element, giving a
  boolean tensor of the broadcast batch shape (a value compared with a tensor: the value
  broadcast over the batch);
* :func:`where` — ``torch.where`` over stacks: one value per element from either side;
* :func:`torch_function` — the torch functions a leaf answers through
  ``__torch_function__``: ``torch.stack``/``torch.cat`` of leaves, the batch-shape
  functions (``torch.unbind``, ``torch.squeeze``…) and comparisons with tensors.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Callable
from typing import Any

import torch

from tensordict._nontensor import NonTensorDataBase, _same_value
from tensordict._nontensor_stack import NonTensorStack, cat_non_tensor, stack_non_tensor

_Leaf = (NonTensorDataBase, NonTensorStack)


def _values_equal(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - arrays, tensors…: no single truth value
        return _same_value(a, b)


#: the element-wise operation of each comparison, on two Python values
ELEMENT_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": _values_equal,
    "ne": lambda a, b: not _values_equal(a, b),
    "or": lambda a, b: bool(operator.or_(a, b)),
    "xor": lambda a, b: bool(operator.xor(a, b)),
    "and": lambda a, b: bool(operator.and_(a, b)),
}
#: the torch function of each comparison, for a value compared with a tensor
TENSOR_OPS: dict[str, Callable[[Any, Any], torch.Tensor]] = {
    "eq": torch.eq,
    "ne": torch.ne,
    "or": torch.logical_or,
    "xor": torch.logical_xor,
    "and": torch.logical_and,
}


def _parts(leaf: Any) -> tuple[list[Any], torch.Tensor]:
    """The values of a leaf and the index tensor (of its batch shape) pointing at them."""
    if isinstance(leaf, NonTensorStack):
        return leaf._values, leaf._index
    return [leaf.data], torch.zeros((), dtype=torch.long).expand(leaf.batch_size)


def compare(leaf: Any, other: Any, op: str) -> Any:
    """``leaf <op> other`` element by element: a boolean tensor of the broadcast batch
    shape. ``other`` is a leaf or a tensor (a number-valued leaf only); anything else
    returns ``NotImplemented``.

    >>> from tensordict import NonTensorData, NonTensorStack
    >>> compare(NonTensorStack("a", "b"), NonTensorData("a", batch_size=[2]), "eq")
    tensor([ True, False])
    """
    if isinstance(other, _Leaf):
        values_a, index_a = _parts(leaf)
        values_b, index_b = _parts(other)
        shape = torch.broadcast_shapes(index_a.shape, index_b.shape)
        flat_a = index_a.expand(shape).reshape(-1).tolist()
        flat_b = index_b.expand(shape).reshape(-1).tolist()
        element = ELEMENT_OPS[op]
        cache: dict[tuple[int, int], bool] = {}
        out = []
        for i, j in zip(flat_a, flat_b, strict=True):
            result = cache.get((i, j))
            if result is None:
                result = cache[(i, j)] = element(values_a[i], values_b[j])
            out.append(result)
        return torch.tensor(out, dtype=torch.bool).reshape(shape)
    if isinstance(other, torch.Tensor) and isinstance(leaf, NonTensorDataBase):
        data = leaf.data
        if isinstance(data, (numbers.Number, torch.Tensor)):
            result = TENSOR_OPS[op](other, torch.as_tensor(data))
            shape = torch.broadcast_shapes(result.shape, leaf.batch_size)
            return result.expand(shape)
    return NotImplemented


def where(stack: NonTensorStack, condition: torch.Tensor, other: Any, out: Any) -> Any:
    """The values of ``stack`` where ``condition`` holds, of ``other`` elsewhere.

    ``condition`` is aligned with the leading batch dimensions; ``out`` (a stack)
    receives the result when given.

    >>> import torch
    >>> from tensordict import NonTensorStack
    >>> where(NonTensorStack("a", "b"), torch.tensor([False, True]), "z", None).tolist()
    ['z', 'b']
    """
    if not isinstance(other, _Leaf):
        other = NonTensorStack._from_parts(
            [other], torch.zeros(stack.batch_size, dtype=torch.long), stack.device
        )
    shape = stack.batch_size
    condition = torch.as_tensor(condition, dtype=torch.bool)
    if condition.ndim < len(shape):
        condition = condition.reshape(*condition.shape, *(1,) * (len(shape) - condition.ndim))
    values_a, index_a = _parts(stack)
    values_b, index_b = _parts(other)
    index = torch.where(condition, index_a, index_b + len(values_a))
    result = NonTensorStack._from_parts(
        list(values_a) + list(values_b), index, stack.device, stack.stack_dim
    )
    if out is None:
        return result
    out[...] = result
    return out


def _stack_like(fn: Callable[..., Any], joiner: Any) -> Callable[..., Any]:
    def handler(items: Any, dim: int = 0, *, out: Any = None) -> Any:
        items = list(items)
        if not items or not all(isinstance(x, _Leaf) for x in items):
            return NotImplemented
        shape = fn([torch.empty(x.batch_size, device="meta") for x in items], dim).shape
        d = dim if dim >= 0 else dim + len(shape)
        result = joiner(items, d, shape)
        if out is not None:
            out[...] = result
            return out
        return result

    return handler


def _method_handler(name: str) -> Callable[..., Any]:
    def handler(leaf: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(leaf, name)(*args, **kwargs)

    return handler


def _compare_handler(op: str) -> Callable[..., Any]:
    def handler(a: Any, b: Any) -> Any:
        if isinstance(a, _Leaf):
            return compare(a, b, op)
        return compare(b, a, op)  # every comparison here is symmetric

    return handler


#: torch functions answered by the non-tensor leaves
TORCH_FUNCTIONS: dict[Any, Callable[..., Any]] = {
    torch.stack: _stack_like(torch.stack, stack_non_tensor),
    torch.cat: _stack_like(torch.cat, cat_non_tensor),
    torch.concat: _stack_like(torch.cat, cat_non_tensor),
    torch.concatenate: _stack_like(torch.cat, cat_non_tensor),
    **{
        getattr(torch, name): _method_handler(name)
        for name in (
            "unbind",
            "squeeze",
            "unsqueeze",
            "flatten",
            "unflatten",
            "permute",
            "transpose",
            "reshape",
            "split",
            "chunk",
            "tensor_split",
            "movedim",
            "flip",
            "roll",
            "clone",
        )
    },
    **{
        fn: _compare_handler(op)
        for op, fns in {
            "eq": (torch.eq, torch.Tensor.__eq__, torch.Tensor.eq),
            "ne": (torch.ne, torch.Tensor.__ne__, torch.Tensor.ne),
            "or": (torch.Tensor.__or__, torch.Tensor.__ror__),
            "xor": (torch.Tensor.__xor__, torch.Tensor.__rxor__),
            "and": (torch.Tensor.__and__, torch.Tensor.__rand__),
        }.items()
        for fn in fns
    },
}


def torch_function(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The answer of a non-tensor leaf to ``func(*args, **kwargs)`` (``NotImplemented``
    for a function it does not take part in).

    >>> import torch
    >>> from tensordict import NonTensorData
    >>> torch.stack([NonTensorData("a"), NonTensorData("b")]).tolist()
    ['a', 'b']
    """
    handler = TORCH_FUNCTIONS.get(func)
    if handler is None:
        return NotImplemented
    return handler(*args, **kwargs)
