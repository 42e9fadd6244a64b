"""Operations of the non-tensor leaves as tensors of their batch shape.

* :func:`compare` — ``==``, ``!=``, ``|``, ``^`` and ``&`` element by element, giving a
  boolean tensor of the broadcast batch shape (a value compared with a tensor: the value
  broadcast over the batch);
* :func:`where` — ``torch.where`` over stacks: one value per element from either side;
* :func:`torch_function` — the torch functions a leaf answers through
  ``__torch_function__``: ``torch.stack``/``torch.cat`` of leaves, the batch-shape
  functions (``torch.unbind``, ``torch.squeeze``…) and comparisons with tensors;
* :func:`stack_non_tensor`, :func:`cat_non_tensor` — stacking/concatenating leaves: a
  stack, or one leaf where the rules of :class:`~tensordict.set_capture_non_tensor_stack`
  and :class:`~tensordict.MetaData` say so; :func:`write_non_tensor` — an indexed write.

The leaf classes call these through ``tensordict._leaves.nontensor_data.bound``, bound here.
"""

from __future__ import annotations

import numbers
import operator
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch

from tensordict._keys.shape import normalize_dim
from tensordict._leaves.nontensor_data import (
    MetaData,
    NonTensorData,
    NonTensorDataBase,
    _same_value,
    _single_value,
    bound,
)
from tensordict._leaves.nontensor_ragged import RaggedNonTensorStack, makes_ragged
from tensordict._leaves.nontensor_stack import NonTensorStack, _join
from tensordict._util import modes as _modes

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
        shape = torch.broadcast_shapes(index_a.shape, index_b.shape)  # type: ignore[no-untyped-call]
        flat_a = index_a.expand(shape).reshape(-1).tolist()
        flat_b = index_b.expand(shape).reshape(-1).tolist()
        element = ELEMENT_OPS[op]
        cache: dict[tuple[int, int], bool] = {}
        out = []
        for i, j in zip(flat_a, flat_b, strict=True):
            one = cache.get((i, j))
            if one is None:
                one = cache[(i, j)] = element(values_a[i], values_b[j])
            out.append(one)
        return torch.tensor(out, dtype=torch.bool).reshape(shape)
    if isinstance(other, torch.Tensor) and isinstance(leaf, NonTensorDataBase):
        data = leaf.data
        if isinstance(data, (numbers.Number, torch.Tensor)):
            result = TENSOR_OPS[op](other, torch.as_tensor(data))
            shape = torch.broadcast_shapes(result.shape, leaf.batch_size)  # type: ignore[no-untyped-call]
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


def _all_same(items: Sequence[Any], kind: type[Any]) -> bool:
    """Whether every item is a one-value leaf of exactly type ``kind`` holding one value."""
    first: Any = items[0]
    if type(first) is not kind:
        return False
    data = first.data
    return all(type(v) is kind and _same_value(v.data, data) for v in items[1:])


def stack_non_tensor(
    items: Sequence[NonTensorDataBase | NonTensorStack], dim: int, batch_size: torch.Size
) -> NonTensorDataBase | NonTensorStack:
    """Stack non-tensor leaves: a :class:`NonTensorStack` keeping every value, except for
    identical :class:`MetaData` (one ``MetaData``) and, with
    :class:`~tensordict.set_capture_non_tensor_stack` on, identical ``NonTensorData``.

    >>> import torch
    >>> from tensordict import MetaData, NonTensorData
    >>> stack_non_tensor([NonTensorData("a"), NonTensorData("a")], 0, torch.Size([2])).tolist()
    ['a', 'a']
    >>> stack_non_tensor([MetaData("a"), MetaData("a")], 0, torch.Size([2]))
    MetaData(data=a, batch_size=torch.Size([2]), device=None)
    """
    first = items[0]
    if makes_ragged(items):  # leaves of different batch sizes: a ragged stack keeps them
        return RaggedNonTensorStack._of(items, dim, first.device)
    if isinstance(first, MetaData) and _all_same(items, type(first)):
        return first._with(batch_size)
    if _modes.CAPTURE_NON_TENSOR_STACK[0] and _all_same(items, NonTensorData):
        return first._with(batch_size)
    values, index = _join(items, dim, torch.stack)
    return NonTensorStack._from_parts(values, index, first.device, dim)


def cat_non_tensor(
    items: Sequence[NonTensorDataBase | NonTensorStack], dim: int, batch_size: torch.Size
) -> NonTensorDataBase | NonTensorStack:
    """Concatenate non-tensor leaves along ``dim``: one leaf when they are one-value leaves
    of one type holding the same value, a :class:`NonTensorStack` otherwise.

    >>> import torch
    >>> from tensordict import NonTensorData
    >>> a = NonTensorData("a", batch_size=[2])
    >>> cat_non_tensor([a, NonTensorData("b", batch_size=[1])], 0, torch.Size([3])).tolist()
    ['a', 'a', 'b']
    """
    first = items[0]
    if isinstance(first, NonTensorDataBase) and _all_same(items, type(first)):
        return first._with(batch_size)
    values, index = _join(items, dim, torch.cat)
    stack_dim = first.stack_dim if isinstance(first, NonTensorStack) else 0
    return NonTensorStack._from_parts(values, index, first.device, stack_dim)


def write_non_tensor(
    target: NonTensorDataBase | NonTensorStack, index: Any, value: Any, batch_size: torch.Size
) -> NonTensorDataBase | NonTensorStack:
    """The leaf to store after writing ``value`` at ``index`` of the non-tensor ``target``
    (the leaf of a tensordict of ``batch_size``).

    A value differing from a ``NonTensorData`` on part of the batch turns it into a
    :class:`NonTensorStack`; a stack is written in place. ``MetaData`` is replaced.

    >>> import torch
    >>> from tensordict import NonTensorData
    >>> target = NonTensorData("a", batch_size=[3])
    >>> out = write_non_tensor(target, 1, NonTensorData("b"), torch.Size([3]))
    >>> out.tolist()
    ['a', 'b', 'a']
    """
    if isinstance(target, MetaData):
        return target._make(_single_value(value, "write"), target.batch_size, target.device)
    if isinstance(target, NonTensorDataBase):
        same = value.data if isinstance(value, NonTensorDataBase) else value
        if not isinstance(value, NonTensorStack) and _same_value(same, target.data):
            return target  # the value every element already holds: nothing to write
        stack = NonTensorStack._from_parts(  # the leaf's own batch size: extra dims kept
            [target.data], torch.zeros(target.batch_size, dtype=torch.long), target.device
        )
    else:
        stack = target
    stack[index] = value
    out = stack._wrap(stack._index)  # one NonTensorData again if every element agrees
    return out if isinstance(out, NonTensorDataBase) or stack is not target else stack


def _stack_like(fn: Callable[..., Any], joiner: Any) -> Callable[..., Any]:
    def handler(items: Any, dim: int = 0, *, out: Any = None) -> Any:
        items = list(items)
        if not items or not all(isinstance(x, _Leaf) for x in items):
            return NotImplemented
        if fn is torch.stack and makes_ragged(items):  # leaves of different batch sizes
            d = normalize_dim(dim, len(items[0].batch_size), "dim", extra=1)
            result = stack_non_tensor(items, d, torch.Size())
            if out is not None:
                out[...] = result
                return out
            return result
        ragged = next((x for x in items if type(x) is RaggedNonTensorStack), None)
        if ragged is not None:
            ragged._refuse(f"torch.{fn.__name__}")
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


bound.ops = sys.modules[__name__]
