"""``NonTensorStack``: one non-tensor value per batch element.

A stack behaves like a tensor of its batch shape: it is a flat list of values plus an
integer tensor of that shape whose entries index the list, so every batch-shape operation
(indexing, reshape, permute, unbind, stack, cat…) is the same operation on the index
tensor. Writes copy the index tensor first, so that stacks derived from one another never
see each other's writes; the value list only grows, so it can be shared.

Writing a list to a tensordict goes through :func:`list_entry`. Stacking leaves, comparing
them and the ``torch`` functions they answer are in :mod:`tensordict._leaves.nontensor_ops`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from tensordict._keys.shape import normalize_dim, parse_batch_size, parse_device
from tensordict._leaves.nontensor_data import (
    NON_TENSOR_TYPES,
    NonTensorData,
    NonTensorDataBase,
    NonTensorOps,
    _same_value,
    bound,
)
from tensordict._util import modes as _modes
from tensordict._util.linked_list import LinkedList

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self

#: keyword arguments the constructor accepts (those of ``LazyStackedTensorDict``)
_INIT_KEYWORDS = frozenset(
    {"stack_dim", "device", "batch_size", "names", "stack_dim_name", "strict_shape"}
)
_IGNORED_KEYWORDS = frozenset({"hook_out", "hook_in"})


def _lookup(index: Any, values: list[Any]) -> Any:
    """``index`` (an int or nested lists of ints) with every int replaced by its value."""
    if type(index) is list:
        return [_lookup(i, values) for i in index]
    return values[index]


def _item_value(item: Any) -> Any:
    """A value given to a stack: ``NonTensorData`` items are unwrapped."""
    return item._data if isinstance(item, NonTensorDataBase) else item


class NonTensorStack(NonTensorOps):
    """One non-tensor value per batch element: the result of stacking values.

    Built by :func:`torch.stack`/:func:`torch.cat` (or :func:`~tensordict.lazy_stack`)
    from non-tensor leaves or tensordicts holding them — every value is kept, in order —
    or directly from values, :class:`NonTensorData` or other stacks sharing a batch size.
    ``td[key]`` returns its values as a :class:`~tensordict.utils.LinkedList`;
    ``td.get(key)`` returns the stack itself.

    It behaves like a tensor of shape :attr:`batch_size`: indexing, ``reshape``,
    ``permute``, ``unbind``, ``expand``… return a stack (or, when a single stored value is
    left, a :class:`NonTensorData`); comparisons give boolean tensors.

    Args:
        *args: the values to stack (``NonTensorData``, ``NonTensorStack`` or any object,
            wrapped with an empty batch size).

    Keyword Args:
        stack_dim (int): the new dimension (default 0).
        device: informative device (defaults to the first item's).
        batch_size: the expected batch size (checked).
        names, stack_dim_name, strict_shape: accepted as ``LazyStackedTensorDict`` does.

    >>> import torch
    >>> from tensordict import NonTensorStack, TensorDict
    >>> td = torch.stack([TensorDict({"s": "a"}), TensorDict({"s": "b"})])
    >>> td.get("s")
    NonTensorStack(
        ['a', 'b'],
        batch_size=torch.Size([2]),
        device=None)
    >>> td["s"], td[1]["s"], td.get("s").tolist()
    (LinkedList(['a', 'b']), 'b', ['a', 'b'])
    """

    # _memmap_prefix: the folder tensordict-memmap wrote this stack to (memmap_), if any
    __slots__ = ("_values", "_index", "_device", "stack_dim", "_memmap_prefix", "__weakref__")

    _values: list[Any]
    _index: torch.Tensor
    _device: torch.device | None
    stack_dim: int

    if TYPE_CHECKING:  # installed from STACK_SHAPE_METHODS / STACK_SPLIT_METHODS below

        def view(self, *shape: Any) -> NonTensorDataBase | NonTensorStack: ...
        def reshape(self, *shape: Any) -> NonTensorDataBase | NonTensorStack: ...
        def unflatten(
            self, dim: int, sizes: Sequence[int]
        ) -> NonTensorDataBase | NonTensorStack: ...
        def squeeze(self, *dim: Any) -> NonTensorDataBase | NonTensorStack: ...
        def unsqueeze(self, dim: int) -> NonTensorDataBase | NonTensorStack: ...
        def permute(self, *dims: Any) -> NonTensorDataBase | NonTensorStack: ...
        def transpose(self, dim0: int, dim1: int) -> NonTensorDataBase | NonTensorStack: ...
        def swapaxes(self, dim0: int, dim1: int) -> NonTensorDataBase | NonTensorStack: ...
        def swapdims(self, dim0: int, dim1: int) -> NonTensorDataBase | NonTensorStack: ...
        def movedim(self, source: Any, destination: Any) -> NonTensorDataBase | NonTensorStack: ...
        def expand(self, *shape: Any) -> NonTensorDataBase | NonTensorStack: ...
        def repeat(self, *repeats: Any) -> NonTensorDataBase | NonTensorStack: ...
        def flip(self, *dims: Any) -> NonTensorDataBase | NonTensorStack: ...
        def narrow(
            self, dim: int, start: int, length: int
        ) -> NonTensorDataBase | NonTensorStack: ...
        def roll(self, shifts: Any, dims: Any = None) -> NonTensorDataBase | NonTensorStack: ...
        def tile(self, *dims: Any) -> NonTensorDataBase | NonTensorStack: ...
        def repeat_interleave(
            self, repeats: Any, dim: int | None = None
        ) -> NonTensorDataBase | NonTensorStack: ...
        def split(
            self, split_size: Any, dim: int = 0
        ) -> tuple[NonTensorDataBase | NonTensorStack, ...]: ...
        def chunk(
            self, chunks: int, dim: int = 0
        ) -> tuple[NonTensorDataBase | NonTensorStack, ...]: ...
        def tensor_split(
            self, indices_or_sections: Any, dim: int = 0
        ) -> tuple[NonTensorDataBase | NonTensorStack, ...]: ...

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        unknown = set(kwargs) - _INIT_KEYWORDS - _IGNORED_KEYWORDS
        if unknown:
            raise TypeError(
                f"NonTensorStack() got unexpected keyword argument(s) {sorted(unknown)}."
            )
        stack_dim = kwargs.get("stack_dim", 0)
        device = kwargs.get("device")
        wrapped: list[NonTensorDataBase | NonTensorStack] = [
            it if isinstance(it, (NonTensorDataBase, NonTensorStack)) else NonTensorData(it)
            for it in args
        ]
        if wrapped:
            bs = wrapped[0].batch_size
            for i, it in enumerate(wrapped[1:], 1):
                if it.batch_size != bs:
                    raise RuntimeError(
                        f"NonTensorStack: item {i} has batch_size={tuple(it.batch_size)} but "
                        f"item 0 has batch_size={tuple(bs)}; stacked items must share their "
                        "batch size."
                    )
            d = normalize_dim(stack_dim, len(bs), "stack_dim", extra=1)
            self._values, self._index = _join(wrapped, d, torch.stack)
            first_device = wrapped[0].device
        else:
            d = 0
            self._values, self._index = [], torch.zeros(0, dtype=torch.long)
            first_device = None
        self._device = parse_device(device) if device is not None else first_device
        self.stack_dim = d
        expected = kwargs.get("batch_size")
        if expected is not None and parse_batch_size(expected) != self._index.shape:
            raise RuntimeError(
                f"NonTensorStack: batch_size={tuple(parse_batch_size(expected))} was given "
                f"but the stacked items make a batch of {tuple(self._index.shape)}."
            )

    @classmethod
    def _from_parts(
        cls,
        values: list[Any],
        index: torch.Tensor,
        device: torch.device | None,
        stack_dim: int = 0,
    ) -> NonTensorStack:
        out = cls.__new__(cls)
        out._values = values
        out._index = index
        out._device = device
        out.stack_dim = stack_dim if stack_dim < max(index.ndim, 1) else 0
        return out

    @classmethod
    def from_list(
        cls,
        data: list[Any],
        device: torch.device | str | int | None = None,
        ndim: int | None = None,
    ) -> NonTensorStack:
        """Build a stack from (nested) lists; ``ndim`` caps the number of list levels used.
        ``NonTensorData`` items are unwrapped.

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack.from_list([["a", "b"], ["c", "d"]]).batch_size
        torch.Size([2, 2])
        >>> NonTensorStack.from_list([["a", "b"], ["c", "d"]], ndim=1)[0].data
        ['a', 'b']
        """
        shape, level = nested_list_shape(data, ndim)
        if ndim is not None and len(shape) != ndim:
            raise ValueError(
                f"NonTensorStack.from_list: asked for ndim={ndim} but the lists only give a "
                f"regular shape {shape}."
            )
        index = torch.arange(len(level)).reshape(shape)
        return cls._from_parts([_item_value(v) for v in level], index, parse_device(device))

    @classmethod
    def from_nontensordata(cls, non_tensor: NonTensorData) -> NonTensorStack:
        """Deprecated: use :meth:`NonTensorData.maybe_to_stack`.

        >>> import warnings
        >>> from tensordict import NonTensorData, NonTensorStack
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     NonTensorStack.from_nontensordata(NonTensorData("a", batch_size=[2])).tolist()
        ['a', 'a']
        """
        warnings.warn(
            "NonTensorStack.from_nontensordata() is deprecated: use "
            "NonTensorData.maybe_to_stack().",
            DeprecationWarning,
            stacklevel=2,
        )
        return cls._from_parts(
            [non_tensor.data],
            torch.zeros(non_tensor.batch_size, dtype=torch.long),
            non_tensor.device,
        )

    def maybe_to_stack(self) -> Self:
        """The stack itself (see :meth:`NonTensorData.maybe_to_stack`)."""
        return self

    # ------------------------------------------------------------------ shape info
    @property
    def batch_size(self) -> torch.Size:
        """The batch shape (one value per element)."""
        return self._index.shape

    shape = batch_size

    @property
    def batch_dims(self) -> int:
        """Number of batch dimensions."""
        return self._index.ndim

    ndim = batch_dims

    @property
    def names(self) -> list[str | None]:
        """The names of the batch dimensions (stacks are unnamed)."""
        return [None] * self._index.ndim

    def dim(self) -> int:
        """Number of batch dimensions."""
        return self._index.ndim

    def numel(self) -> int:
        """Number of elements."""
        return self._index.numel()

    def __len__(self) -> int:
        return self._index.shape[0] if self._index.ndim else 0

    @property
    def device(self) -> torch.device | None:
        """The device of the tensordict holding the values (informative only)."""
        return self._device

    # ------------------------------------------------------------------ values
    def tolist(self, **kwargs: Any) -> Any:
        """The values as nested lists of the batch shape (a
        :class:`~tensordict.utils.LinkedList` with ``as_linked_list=True``).

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack("a", "b", "c").tolist()
        ['a', 'b', 'c']
        """
        if kwargs.get("as_linked_list"):
            return self._linked_list()
        return _lookup(self._index.tolist(), self._values)

    def _linked_list(self) -> LinkedList:
        return LinkedList(_lookup(self._index.tolist(), self._values), td=self)

    @property
    def data(self) -> Any:
        """The value every element holds; an ``AttributeError`` when they differ.

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack("a", "a").data
        'a'
        """
        missing = object()
        value = self._common_value(missing)
        if value is missing:
            raise AttributeError(
                f"this NonTensorStack holds different values ({self.tolist()!r}): it has no "
                "single .data; read them with .tolist()."
            )
        return value

    @property
    def tensordicts(self) -> list[NonTensorDataBase | NonTensorStack]:
        """The stacked items, along :attr:`stack_dim`.

        >>> from tensordict import NonTensorStack
        >>> [item.data for item in NonTensorStack("a", "b").tensordicts]
        ['a', 'b']
        """
        if not self._index.ndim:
            return []
        return list(self.unbind(self.stack_dim))

    def __iter__(self) -> Any:
        if not self._index.ndim:
            raise TypeError("iteration over a 0-d NonTensorStack.")
        return iter(self.unbind(0))

    def unbind(self, dim: int = 0) -> tuple[NonTensorDataBase | NonTensorStack, ...]:
        """Split along ``dim`` (as :meth:`torch.Tensor.unbind`).

        >>> from tensordict import NonTensorStack
        >>> [x.data for x in NonTensorStack("a", "b").unbind(0)]
        ['a', 'b']
        """
        member = (dim % self._index.ndim if self._index.ndim else 0) == self.stack_dim
        return tuple(self._wrap(part, member=member) for part in self._index.unbind(dim))

    def _wrap(
        self, index: torch.Tensor, stack_dim: int | None = None, member: bool = False
    ) -> NonTensorDataBase | NonTensorStack:
        """A stack over ``index`` (derived from ours), or a ``NonTensorData``: for one
        element (``index`` 0-dim), or when ``member`` (the selection took one position of
        the stack dimension, i.e. one stacked member, as in the reference) and that member
        was one value (every element points at the same stored value). Any other
        selection stays a stack, whatever its values."""
        if not index.ndim:
            return NonTensorData._make(self._values[int(index)], index.shape, self._device)
        if member:
            flat = index.reshape(-1)
            if flat.numel() and bool((flat == flat[0]).all()):
                return NonTensorData._make(self._values[int(flat[0])], index.shape, self._device)
        return NonTensorStack._from_parts(
            self._values, index, self._device, self.stack_dim if stack_dim is None else stack_dim
        )

    def __getitem__(self, index: Any) -> NonTensorDataBase | NonTensorStack:
        member = _takes_one_position(index, self.stack_dim, self._index.ndim)
        out = self._wrap(self._index[index], member=member)
        if isinstance(out, NonTensorDataBase) and not out._batch_size:
            out.__dict__["_link"] = (self, index)  # writes to the element reach the stack
        return out

    def __setitem__(self, index: Any, value: Any) -> None:
        """Write ``value`` at ``index``, in place: a value, a ``NonTensorData``, a stack,
        or (for several elements) a list of one value per element.

        >>> from tensordict import NonTensorStack
        >>> s = NonTensorStack("a", "b", "c")
        >>> s[1:] = "z"
        >>> s.tolist()
        ['a', 'z', 'z']
        >>> s[:2] = ["x", "y"]
        >>> s.tolist()
        ['x', 'y', 'z']
        """
        target_shape = self._index[index].shape
        if type(value) is list and len(target_shape):
            value = NonTensorStack.from_list(value, ndim=min(len(target_shape), _depth(value)))
        offset = len(self._values)
        if isinstance(value, NonTensorStack):
            if not _broadcastable(value.batch_size, target_shape):
                raise RuntimeError(
                    f"cannot write a NonTensorStack of batch_size={tuple(value.batch_size)} at "
                    f"index {index!r}, which selects a batch of shape {tuple(target_shape)}."
                )
            new_index: Any = value._index + offset
            new_values = value._values
        else:
            new_index = offset
            new_values = [value.data if isinstance(value, NonTensorDataBase) else value]
        # Copy on write: stacks derived from this one (indexed, reshaped, cloned
        # tensordicts) keep their values, and an expanded index gets its own memory. The
        # values list only grows, so sharing it stays safe.
        written = self._index.clone()
        written[index] = new_index
        self._index = written
        self._values.extend(new_values)

    def _common_value(self, default: Any) -> Any:
        """The value every element holds (compared by ``_same_value``), else ``default``.

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack("a", "a")._common_value(None), NonTensorStack("a", "b")._common_value(None)
        ('a', None)
        """
        used = [self._values[i] for i in torch.unique(self._index).tolist()]
        if used and all(_same_value(v, used[0]) for v in used[1:]):
            return used[0]
        return default

    def _assign(self, value: Any) -> None:
        """Replace every value, in place (``set_``/``update_`` on a stack entry)."""
        self[...] = value

    def update(self, input_dict_or_td: Any, *args: Any, **kwargs: Any) -> Self:
        """Write the value(s) of ``input_dict_or_td`` (a leaf or a stack) over the batch.

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack("a", "b").update(NonTensorStack("c", "d")).tolist()
        ['c', 'd']
        """
        self[...] = input_dict_or_td
        return self

    def update_(self, input_dict_or_td: Any, *args: Any, **kwargs: Any) -> Self:
        """In-place :meth:`update`."""
        self[...] = input_dict_or_td
        return self

    def update_at_(self, input_dict_or_td: Any, idx: Any, **kwargs: Any) -> Self:
        """Write the value(s) of ``input_dict_or_td`` at ``idx``.

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack("a", "b").update_at_("z", 1).tolist()
        ['a', 'z']
        """
        self[idx] = input_dict_or_td
        return self

    def where(
        self, condition: torch.Tensor, other: Any, *, out: Any = None, pad: Any = None
    ) -> NonTensorStack:
        """The values of ``self`` where ``condition`` holds and those of ``other`` elsewhere
        (``other`` a stack, a leaf or a value). ``out`` receives the result when given.

        >>> import torch
        >>> from tensordict import NonTensorStack
        >>> s = NonTensorStack("a", "b")
        >>> s.where(torch.tensor([True, False]), NonTensorStack("x", "y")).tolist()
        ['a', 'y']
        """
        result: NonTensorStack = bound.ops.where(self, condition, other, out)
        return result

    # ------------------------------------------------------------------ copies
    def clone(self, recurse: bool = True) -> NonTensorStack:
        """A compact copy (only the values still referenced are kept).

        >>> from tensordict import NonTensorStack
        >>> s = NonTensorStack("a", "b")
        >>> s.clone().tolist(), s.clone() is s
        (['a', 'b'], False)
        """
        used, inverse = torch.unique(self._index, return_inverse=True)
        values = [self._values[i] for i in used.tolist()]
        return NonTensorStack._from_parts(
            values, inverse.reshape(self._index.shape), self._device, self.stack_dim
        )

    copy = clone

    def flatten(
        self, start_dim: int | None = 0, end_dim: int | None = -1
    ) -> NonTensorDataBase | NonTensorStack:
        """The batch dimensions ``start_dim..end_dim`` merged (``None``: the first / last).

        >>> from tensordict import NonTensorStack
        >>> NonTensorStack.from_list([["a", "b"], ["c", "d"]]).flatten().tolist()
        ['a', 'b', 'c', 'd']
        """
        start = 0 if start_dim is None else start_dim
        end = -1 if end_dim is None else end_dim
        return self._wrap(self._index.flatten(start, end))

    def contiguous(self, canonical: bool = False) -> Self:
        """The stack itself: it is its own contiguous form."""
        return self

    def _with(self, batch_size: torch.Size, device: torch.device | None = None) -> NonTensorStack:
        """This stack for a parent of ``batch_size`` (a prefix of its own), on ``device``."""
        shape = self._index.shape
        if shape[: len(batch_size)] != batch_size:
            raise RuntimeError(
                f"a NonTensorStack of batch_size={tuple(shape)} cannot take the batch size "
                f"{tuple(batch_size)}: a stack holds one value per element, so its leading "
                "dimensions must match."
            )
        return NonTensorStack._from_parts(
            self._values, self._index, self._device if device is None else device, self.stack_dim
        )

    def to(self, *args: Any, **kwargs: Any) -> NonTensorStack:
        """The same values with another (informative) device; other arguments are ignored."""
        device = kwargs.get("device", args[0] if args else None)
        if isinstance(device, (str, int, torch.device)):
            return self._with(self.batch_size, parse_device(device))
        return self._with(self.batch_size)

    def __repr__(self) -> str:
        return (
            f"NonTensorStack(\n    {self.tolist()},\n    batch_size={self.batch_size},\n"
            f"    device={self._device})"
        )


def _depth(value: Any) -> int:
    depth = 0
    while type(value) is list and value:
        depth += 1
        value = value[0]
    return depth


def nested_list_shape(data: list[Any], ndim: int | None = None) -> tuple[list[int], list[Any]]:
    """The regular shape of nested lists (at most ``ndim`` levels) and their items, flat.

    >>> nested_list_shape([["a", "b"], ["c", "d"]])
    ([2, 2], ['a', 'b', 'c', 'd'])
    >>> nested_list_shape([["a", "b"], ["c"]])
    ([2], [['a', 'b'], ['c']])
    """
    shape: list[int] = []
    level: list[Any] = [data]
    while ndim is None or len(shape) < ndim:
        if not all(type(x) is list for x in level):
            break
        n = len(level[0])
        if any(len(x) != n for x in level):
            break
        shape.append(n)
        level = [y for x in level for y in x]
        if not n:
            break
    return shape, level


_SCALARS = (bool, int, float, complex, np.number, np.bool_)


def _all_scalars(value: Any) -> bool:
    """Whether the nested lists ``value`` hold numbers (or booleans) only."""
    if type(value) is list:
        return all(_all_scalars(v) for v in value)
    return isinstance(value, _SCALARS)


def list_entry(value: list[Any]) -> Any:
    """What a list written to a tensordict becomes: a tensor for (nested) numbers or for
    tensors of one shape; otherwise, with :func:`~tensordict.list_to_stack` on (the
    default), a :class:`NonTensorStack` of one value per element (nested lists of one
    length give several dimensions), else one :class:`NonTensorData` holding the list.

    >>> list_entry([1, 2]), list_entry([[0.5], [1.5]]).shape
    (tensor([1, 2]), torch.Size([2, 1]))
    >>> list_entry(["a", "b"]).tolist()
    ['a', 'b']
    """
    if _all_scalars(value):
        try:
            return torch.tensor(value)
        except (ValueError, TypeError, RuntimeError):  # ragged nested lists
            pass
    elif value and all(isinstance(v, torch.Tensor) for v in value):
        if all(v.shape == value[0].shape for v in value[1:]):
            return torch.stack(value)
    if _modes.list_to_stack():
        return NonTensorStack.from_list(value)
    return NonTensorData(value)


def _takes_one_position(index: Any, dim: int, ndim: int) -> bool:
    """Whether ``index`` picks a single position of dimension ``dim`` (an int there), so
    that the result is one stacked member.

    >>> _takes_one_position(1, 0, 2), _takes_one_position((slice(None), 0), 0, 2)
    (True, False)
    >>> _takes_one_position((..., 1), 1, 2), _takes_one_position(slice(0, 1), 0, 1)
    (True, False)
    """
    items = index if type(index) is tuple else (index,)
    if any(item is Ellipsis for item in items):
        at = next(i for i, item in enumerate(items) if item is Ellipsis)
        explicit = sum(1 for item in items if item is not None and item is not Ellipsis)
        items = items[:at] + (slice(None),) * max(ndim - explicit, 0) + items[at + 1 :]
    position = 0
    for item in items:
        if item is None:
            continue
        if position == dim:
            if isinstance(item, torch.Tensor):
                return item.ndim == 0 and item.dtype is not torch.bool
            return isinstance(item, int) and not isinstance(item, bool)
        position += 1
    return False


def _broadcastable(src: Sequence[int], dst: Sequence[int]) -> bool:
    if len(src) > len(dst):
        return False
    return all(s in (1, d) for s, d in zip(reversed(src), reversed(dst), strict=False))


def _shape_method(name: str) -> Callable[..., Any]:
    def method(self: NonTensorStack, *args: Any, **kwargs: Any) -> Any:
        return self._wrap(getattr(self._index, name)(*args, **kwargs))

    method.__name__ = name
    method.__doc__ = f"``Tensor.{name}`` applied to the batch shape of the stack."
    return method


def _split_method(name: str) -> Callable[..., Any]:
    def method(self: NonTensorStack, *args: Any, **kwargs: Any) -> Any:
        return tuple(self._wrap(part) for part in getattr(self._index, name)(*args, **kwargs))

    method.__name__ = name
    method.__doc__ = f"``Tensor.{name}`` along the batch shape; a tuple of stacks or data."
    return method


#: Batch-shape methods of :class:`NonTensorStack`: the tensor method on the index tensor.
STACK_SHAPE_METHODS: tuple[str, ...] = (
    "view",
    "reshape",
    "unflatten",
    "squeeze",
    "unsqueeze",
    "permute",
    "transpose",
    "swapaxes",
    "swapdims",
    "movedim",
    "expand",
    "repeat",
    "flip",
    "narrow",
    "roll",
    "tile",
    "repeat_interleave",
)
STACK_SPLIT_METHODS: tuple[str, ...] = ("split", "chunk", "tensor_split")

for _name in STACK_SHAPE_METHODS:
    setattr(NonTensorStack, _name, _shape_method(_name))
for _name in STACK_SPLIT_METHODS:
    setattr(NonTensorStack, _name, _split_method(_name))


def _join(
    items: Sequence[NonTensorDataBase | NonTensorStack], dim: int, fn: Any
) -> tuple[list[Any], torch.Tensor]:
    """The values and index tensor of ``fn(items' index tensors, dim)`` (stack or cat)."""
    values: list[Any] = []
    indices = []
    for it in items:
        if isinstance(it, NonTensorDataBase):
            indices.append(torch.full(it.batch_size, len(values), dtype=torch.long))
            values.append(it.data)
        else:
            indices.append(it._index + len(values))
            values.extend(it._values)
    return values, fn(indices, dim)


bound.stack = NonTensorStack
NON_TENSOR_TYPES.add(NonTensorStack)


__all__ = ["NonTensorStack", "list_entry", "nested_list_shape"]
