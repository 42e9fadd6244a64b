"""Non-tensor leaves: Python values carried through tensordict operations.

* :class:`NonTensorData` wraps one value (a string, a number, any object) shared by every
  element of the tensordict's batch. Shape operations change its batch size and leave the
  value as it is.
* :class:`MetaData` is a ``NonTensorData`` describing the tensordict as a whole: stacking
  or concatenating keeps the first value instead of collecting one value per element.
* :class:`NonTensorStack` holds one value per batch element. It behaves like a tensor of
  the batch shape: a flat list of values plus an integer tensor of that shape whose
  entries index the list, so every batch-shape operation (indexing, reshape, permute,
  unbind, stack, cat…) is the same operation on the index tensor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from tensordict._shape import normalize_dim, parse_batch_size, parse_device


class NonTensorData:
    """A non-tensor value stored in a tensordict, with the batch size of its parent.

    >>> from tensordict import TensorDict
    >>> td = TensorDict({"label": "cat"}, batch_size=[3])
    >>> td["label"]
    'cat'
    >>> td[1:]["label"], td.get_non_tensor("label")
    ('cat', 'cat')
    >>> NonTensorData("cat", batch_size=[2])
    NonTensorData(data=cat, batch_size=torch.Size([2]), device=None)
    """

    __slots__ = ("data", "_batch_size", "_device")

    data: Any
    _batch_size: torch.Size
    _device: torch.device | None

    def __init__(
        self,
        data: Any,
        *,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: torch.device | str | int | None = None,
        names: Sequence[str | None] | None = None,
    ) -> None:
        if isinstance(data, NonTensorData):
            data = data.data
        self.data = data
        self._batch_size = parse_batch_size(batch_size)
        self._device = parse_device(device)

    @classmethod
    def _make(cls, data: Any, batch_size: torch.Size, device: torch.device | None) -> NonTensorData:
        out = cls.__new__(cls)
        out.data = data
        out._batch_size = batch_size
        out._device = device
        return out

    @property
    def batch_size(self) -> torch.Size:
        """The batch size (that of the tensordict holding the value)."""
        return self._batch_size

    shape = batch_size

    @property
    def device(self) -> torch.device | None:
        """The device of the tensordict holding the value (informative only)."""
        return self._device

    @property
    def batch_dims(self) -> int:
        """Number of batch dimensions."""
        return len(self._batch_size)

    def tolist(self) -> Any:
        """The value, repeated over the batch dimensions as nested lists.

        >>> NonTensorData("x", batch_size=[2]).tolist()
        ['x', 'x']
        """
        out = self.data
        for size in reversed(self._batch_size):
            out = [out] * size
        return out

    def _with(self, batch_size: torch.Size, device: torch.device | None = None) -> NonTensorData:
        return self._make(self.data, batch_size, self._device if device is None else device)

    def clone(self, recurse: bool = True) -> NonTensorData:
        """A new wrapper around the same value."""
        return self._with(self._batch_size)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NonTensorData):
            return bool(self.data == other.data and self._batch_size == other._batch_size)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(data={self.data}, batch_size={self._batch_size}, "
            f"device={self._device})"
        )


def is_non_tensor(data: Any) -> bool:
    """Whether ``data`` (an instance or a class) is a non-tensor leaf.

    >>> is_non_tensor(NonTensorData("a")), is_non_tensor(NonTensorStack("a", "b"))
    (True, True)
    >>> is_non_tensor(1), is_non_tensor(MetaData)
    (False, True)
    """
    cls = data if isinstance(data, type) else type(data)
    return issubclass(cls, NON_TENSOR)


class MetaData(NonTensorData):
    """A non-tensor value describing a tensordict as a whole, not each of its elements.

    It behaves like :class:`NonTensorData` (indexing and shape operations keep the one
    value), except that stacking or concatenating tensordicts keeps the first value
    instead of collecting one value per element in a :class:`NonTensorStack`.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> tds = [TensorDict({"run": MetaData(f"run-{i}")}, []) for i in range(2)]
    >>> torch.stack(tds)["run"]
    'run-0'
    >>> tds[0].get("run"), type(dict(tds[0].items())["run"]).__name__
    ('run-0', 'MetaData')
    """

    __slots__ = ()


def _lookup(index: Any, values: list[Any]) -> Any:
    """``index`` (an int or nested lists of ints) with every int replaced by its value."""
    if type(index) is list:
        return [_lookup(i, values) for i in index]
    return values[index]


def _same_value(a: Any, b: Any) -> bool:
    """Whether two non-tensor values are the same (types must match: ``1 != True`` here)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - arrays, tensors…: no single truth value
        return False


class NonTensorStack:
    """One non-tensor value per batch element: the result of stacking different values.

    Built by :func:`torch.stack`/:func:`torch.cat` (or :func:`~tensordict.lazy_stack`)
    from tensordicts whose non-tensor entries differ — every value is kept, in order — or
    directly from values, :class:`NonTensorData` or other stacks sharing a batch size.
    ``td[key]`` returns :meth:`tolist`; ``td.get(key)`` returns the stack itself.

    It behaves like a tensor of shape :attr:`batch_size`: indexing, ``reshape``,
    ``permute``, ``unbind``, ``expand``… return a stack (or, when all the selected
    elements hold one stored value, a :class:`NonTensorData`).

    Args:
        *items: the values to stack (``NonTensorData``, ``NonTensorStack`` or any object,
            wrapped with an empty batch size).
        stack_dim: the new dimension.
        device: informative device (defaults to the first item's).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = torch.stack([TensorDict({"s": "a"}), TensorDict({"s": "b"})])
    >>> td.get("s")
    NonTensorStack(
        ['a', 'b'],
        batch_size=torch.Size([2]),
        device=None)
    >>> td["s"], td[1]["s"], td.get("s").tolist()
    (['a', 'b'], 'b', ['a', 'b'])
    """

    __slots__ = ("_values", "_index", "_device", "stack_dim")

    _values: list[Any]
    _index: torch.Tensor
    _device: torch.device | None
    stack_dim: int

    def __init__(
        self,
        *items: Any,
        stack_dim: int = 0,
        device: torch.device | str | int | None = None,
    ) -> None:
        wrapped: list[NonTensorData | NonTensorStack] = [
            it if isinstance(it, (NonTensorData, NonTensorStack)) else NonTensorData(it)
            for it in items
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

        >>> NonTensorStack.from_list([["a", "b"], ["c", "d"]]).batch_size
        torch.Size([2, 2])
        >>> NonTensorStack.from_list([["a", "b"], ["c", "d"]], ndim=1)[0].data
        ['a', 'b']
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
        if ndim is not None and len(shape) != ndim:
            raise ValueError(
                f"NonTensorStack.from_list: asked for ndim={ndim} but the lists only give a "
                f"regular shape {shape}."
            )
        index = torch.arange(len(level)).reshape(shape)
        return cls._from_parts(level, index, parse_device(device))

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
    def tolist(self) -> Any:
        """The values as nested lists of the batch shape.

        >>> NonTensorStack("a", "b", "c").tolist()
        ['a', 'b', 'c']
        """
        return _lookup(self._index.tolist(), self._values)

    @property
    def tensordicts(self) -> list[NonTensorData | NonTensorStack]:
        """The stacked items, along :attr:`stack_dim`.

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

    def unbind(self, dim: int = 0) -> tuple[NonTensorData | NonTensorStack, ...]:
        """Split along ``dim`` (as :meth:`torch.Tensor.unbind`).

        >>> [x.data for x in NonTensorStack("a", "b").unbind(0)]
        ['a', 'b']
        """
        return tuple(self._wrap(part) for part in self._index.unbind(dim))

    def _wrap(
        self, index: torch.Tensor, stack_dim: int | None = None
    ) -> NonTensorData | NonTensorStack:
        """A stack over ``index`` (derived from ours), or one ``NonTensorData`` when every
        element points at the same stored value."""
        flat = index.reshape(-1)
        if flat.numel() and bool((flat == flat[0]).all()):
            return NonTensorData._make(self._values[int(flat[0])], index.shape, self._device)
        return NonTensorStack._from_parts(
            self._values, index, self._device, self.stack_dim if stack_dim is None else stack_dim
        )

    def __getitem__(self, index: Any) -> NonTensorData | NonTensorStack:
        return self._wrap(self._index[index])

    def __setitem__(self, index: Any, value: Any) -> None:
        """Write ``value`` (a value, a ``NonTensorData`` or a stack) at ``index``, in place.

        >>> s = NonTensorStack("a", "b", "c")
        >>> s[1:] = "z"
        >>> s.tolist()
        ['a', 'z', 'z']
        """
        target_shape = self._index[index].shape
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
            new_values = [value.data if isinstance(value, NonTensorData) else value]
        # Copy on write: stacks derived from this one (indexed, reshaped, cloned
        # tensordicts) keep their values, and an expanded index gets its own memory. The
        # values list only grows, so sharing it stays safe.
        written = self._index.clone()
        written[index] = new_index
        self._index = written
        self._values.extend(new_values)

    def _common_value(self, default: Any) -> Any:
        """The value every element holds (compared by :func:`_same_value`), else ``default``.

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

    # ------------------------------------------------------------------ copies
    def clone(self, recurse: bool = True) -> NonTensorStack:
        """A compact copy (only the values still referenced are kept).

        >>> s = NonTensorStack("a", "b")
        >>> s.clone().tolist(), s.clone() is s
        (['a', 'b'], False)
        """
        used, inverse = torch.unique(self._index, return_inverse=True)
        values = [self._values[i] for i in used.tolist()]
        return NonTensorStack._from_parts(
            values, inverse.reshape(self._index.shape), self._device, self.stack_dim
        )

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

    def to(self, device: torch.device | str | int | None) -> NonTensorStack:
        """The same values with another (informative) device."""
        return self._with(self.batch_size, parse_device(device))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NonTensorStack):
            return bool(self.batch_size == other.batch_size and self.tolist() == other.tolist())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"NonTensorStack(\n    {self.tolist()},\n    batch_size={self.batch_size},\n"
            f"    device={self._device})"
        )


def _broadcastable(src: Sequence[int], dst: Sequence[int]) -> bool:
    if len(src) > len(dst):
        return False
    return all(s in (1, d) for s, d in zip(reversed(src), reversed(dst), strict=False))


def _shape_method(name: str) -> Any:
    def method(self: NonTensorStack, *args: Any, **kwargs: Any) -> Any:
        return self._wrap(getattr(self._index, name)(*args, **kwargs))

    method.__name__ = name
    method.__doc__ = f"``Tensor.{name}`` applied to the batch shape of the stack."
    return method


def _split_method(name: str) -> Any:
    def method(self: NonTensorStack, *args: Any, **kwargs: Any) -> Any:
        return tuple(self._wrap(part) for part in getattr(self._index, name)(*args, **kwargs))

    method.__name__ = name
    method.__doc__ = f"``Tensor.{name}`` along the batch shape; a tuple of stacks or data."
    return method


#: Batch-shape methods of :class:`NonTensorStack`: the tensor method on the index tensor.
STACK_SHAPE_METHODS: tuple[str, ...] = (
    "view",
    "reshape",
    "flatten",
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
    "contiguous",
)
STACK_SPLIT_METHODS: tuple[str, ...] = ("split", "chunk", "tensor_split")

for _name in STACK_SHAPE_METHODS:
    setattr(NonTensorStack, _name, _shape_method(_name))
for _name in STACK_SPLIT_METHODS:
    setattr(NonTensorStack, _name, _split_method(_name))

#: Every non-tensor leaf type (``MetaData`` is a ``NonTensorData``).
NON_TENSOR: tuple[type[NonTensorData], type[NonTensorStack]] = (NonTensorData, NonTensorStack)


def unwrap_non_tensor(value: Any) -> Any:
    """The Python value(s) of a non-tensor leaf (a list for stacks); other values as is.

    >>> unwrap_non_tensor(NonTensorData("a")), unwrap_non_tensor(NonTensorStack("a", "b"))
    ('a', ['a', 'b'])
    """
    if isinstance(value, NonTensorData):
        return value.data
    if type(value) is NonTensorStack:
        return value.tolist()
    return value


def _join(
    items: Sequence[NonTensorData | NonTensorStack], dim: int, fn: Any
) -> tuple[list[Any], torch.Tensor]:
    """The values and index tensor of ``fn(items' index tensors, dim)`` (stack or cat)."""
    values: list[Any] = []
    indices = []
    for it in items:
        if isinstance(it, NonTensorData):
            indices.append(torch.full(it.batch_size, len(values), dtype=torch.long))
            values.append(it.data)
        else:
            indices.append(it._index + len(values))
            values.extend(it._values)
    return values, fn(indices, dim)


def _all_same(items: Sequence[Any]) -> bool:
    first = items[0]
    if type(first) is not NonTensorData:
        return False
    data = first.data
    return all(type(v) is NonTensorData and _same_value(v.data, data) for v in items[1:])


def stack_non_tensor(
    items: Sequence[NonTensorData | NonTensorStack], dim: int, batch_size: torch.Size
) -> NonTensorData | NonTensorStack:
    """Stack non-tensor leaves: one ``NonTensorData`` when they hold the same value (or
    the first is :class:`MetaData`), a :class:`NonTensorStack` keeping every value otherwise.

    >>> import torch
    >>> stack_non_tensor([NonTensorData("a"), NonTensorData("a")], 0, torch.Size([2]))
    NonTensorData(data=a, batch_size=torch.Size([2]), device=None)
    >>> stack_non_tensor([NonTensorData("a"), NonTensorData("b")], 0, torch.Size([2])).tolist()
    ['a', 'b']
    """
    first = items[0]
    if isinstance(first, MetaData) or _all_same(items):
        return first._with(batch_size)
    values, index = _join(items, dim, torch.stack)
    return NonTensorStack._from_parts(values, index, first.device, dim)


def cat_non_tensor(
    items: Sequence[NonTensorData | NonTensorStack], dim: int, batch_size: torch.Size
) -> NonTensorData | NonTensorStack:
    """Concatenate non-tensor leaves along ``dim`` (same rules as :func:`stack_non_tensor`).

    >>> import torch
    >>> a = NonTensorData("a", batch_size=[2])
    >>> cat_non_tensor([a, NonTensorData("b", batch_size=[1])], 0, torch.Size([3])).tolist()
    ['a', 'a', 'b']
    """
    first = items[0]
    if isinstance(first, MetaData) or _all_same(items):
        return first._with(batch_size)
    values, index = _join(items, dim, torch.cat)
    stack_dim = first.stack_dim if isinstance(first, NonTensorStack) else 0
    return NonTensorStack._from_parts(values, index, first.device, stack_dim)


#: Exact types of the non-tensor leaves (fast ``type(x) in ...`` checks on hot paths).
NON_TENSOR_TYPES: frozenset[type] = frozenset({NonTensorData, MetaData, NonTensorStack})
#: Exact types of the one-value leaves, read back as their ``.data``.
DATA_TYPES: frozenset[type] = frozenset({NonTensorData, MetaData})


def write_non_tensor(
    target: NonTensorData | NonTensorStack, index: Any, value: Any, batch_size: torch.Size
) -> NonTensorData | NonTensorStack:
    """The leaf to store after writing ``value`` at ``index`` of the non-tensor ``target``
    (the leaf of a tensordict of ``batch_size``).

    A value differing from a ``NonTensorData`` on part of the batch turns it into a
    :class:`NonTensorStack`; a stack is written in place. ``MetaData`` is replaced.

    >>> import torch
    >>> target = NonTensorData("a", batch_size=[3])
    >>> out = write_non_tensor(target, 1, NonTensorData("b"), torch.Size([3]))
    >>> out.tolist()
    ['a', 'b', 'a']
    """
    if isinstance(target, MetaData):
        return target._make(unwrap_non_tensor(value), batch_size, target.device)
    if isinstance(target, NonTensorData):
        if isinstance(value, NonTensorData) and _same_value(value.data, target.data):
            return target
        stack = NonTensorStack._from_parts(
            [target.data], torch.zeros(batch_size, dtype=torch.long), target.device
        )
    else:
        stack = target
    stack[index] = value
    out = stack._wrap(stack._index)  # one NonTensorData again if every element agrees
    return out if isinstance(out, NonTensorData) or stack is not target else stack
