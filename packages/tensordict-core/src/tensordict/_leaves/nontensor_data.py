"""One-value non-tensor leaves: ``NonTensorDataBase``, ``NonTensorData``, ``MetaData``.

* :class:`NonTensorData` wraps one value (a string, a number, any object) shared by every
  element of its batch. Batch-shape operations (indexing, ``reshape``, ``permute``…)
  change its batch size and keep the value; ``expand`` and ``unsqueeze`` give a
  :class:`NonTensorStack` of that value, as the reference library does.
* :class:`MetaData` is a one-value leaf describing the tensordict as a whole: stacking
  identical values keeps one ``MetaData``, and every shape operation keeps the type.
  ``MetaData[int]`` is the subclass that accepts ``int`` values only.
* :class:`NonTensorStack` (:mod:`tensordict._leaves.nontensor_stack`) holds one value per batch
  element; this module reaches it, and the operations of
  :mod:`tensordict._leaves.nontensor_ops`, through :data:`bound` (those modules import this one).

A one-value leaf behaves like a tensor of its batch shape: ``torch.stack``/``torch.cat``
of leaves give a leaf, comparisons give boolean tensors of the batch shape, and calling it
calls the value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from tensordict._keys.shape import parse_batch_size, parse_device
from tensordict._plugins import forwarders as _forwarders

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self

    from tensordict._leaves.nontensor_stack import NonTensorStack

_ZERO = torch.zeros((), dtype=torch.bool)


class _Bound:
    """The stack class and the operations module, bound by the modules defining them
    (they import this module, so it cannot import them)."""

    stack: type[NonTensorStack]
    ops: Any


#: see :class:`_Bound`
bound = _Bound()

#: Exact types of the non-tensor leaves (fast ``type(x) in ...`` checks on hot paths);
#: ``NonTensorStack`` and the ``MetaData[T]`` subclasses are added as they are made.
NON_TENSOR_TYPES: set[type] = set()
#: Exact types of the one-value leaves, read back as their ``.data``.
DATA_TYPES: set[type] = set()


def batch_shape_after(batch_size: torch.Size, op: Callable[[torch.Tensor], Any]) -> Any:
    """``op`` applied to a (memory-free) tensor of shape ``batch_size``: the result's
    shape(s) are those of the batch after the operation.

    >>> import torch
    >>> batch_shape_after(torch.Size([2, 3]), lambda t: t.flatten()).shape
    torch.Size([6])
    """
    return op(_ZERO.expand(batch_size))


@dataclasses.dataclass
class _Fields:
    """The reference's field layout of a non-tensor leaf (:meth:`NonTensorDataBase.fields`)."""

    data: Any
    _metadata: dict[str, Any] | None = None
    _is_non_tensor: bool = True


class NonTensorOps:
    """The comparisons and ``torch`` functions shared by every non-tensor leaf
    (:class:`NonTensorDataBase` and :class:`~tensordict.NonTensorStack`); they are
    implemented in :mod:`tensordict._leaves.nontensor_ops` (reached through ``bound.ops``)."""

    __slots__ = ()

    def __eq__(self, other: object) -> Any:
        return bound.ops.compare(self, other, "eq")

    def __ne__(self, other: object) -> Any:
        return bound.ops.compare(self, other, "ne")

    def __or__(self, other: object) -> Any:
        return bound.ops.compare(self, other, "or")

    def __xor__(self, other: object) -> Any:
        return bound.ops.compare(self, other, "xor")

    def __and__(self, other: object) -> Any:
        return bound.ops.compare(self, other, "and")

    __hash__ = None  # type: ignore[assignment]

    @property
    def dtype(self) -> None:
        """``None``: a non-tensor leaf has no dtype (code that reads ``value.dtype`` of
        every entry sees it is not a tensor).

        >>> from tensordict import NonTensorData
        >>> NonTensorData("a").dtype is None
        True
        """
        return None

    @classmethod
    def __torch_function__(
        cls,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        return bound.ops.torch_function(func, args, kwargs or {})

    def is_memmap(self) -> bool:
        """Whether the value was written to a folder in place (``memmap_``); ``False`` when
        ``tensordict-memmap`` is absent.

        >>> from tensordict import NonTensorData
        >>> NonTensorData("x").is_memmap()
        False
        """
        return _forwarders.is_memmap(self)


class NonTensorDataBase(NonTensorOps):
    """Base of the one-value non-tensor leaves, :class:`NonTensorData` and :class:`MetaData`.

    >>> from tensordict import MetaData, NonTensorData, NonTensorDataBase
    >>> isinstance(NonTensorData("a"), NonTensorDataBase), isinstance(MetaData(1), NonTensorDataBase)
    (True, True)
    """

    _data: Any
    _batch_size: torch.Size
    _device: torch.device | None

    #: the type ``MetaData[T]`` accepts (``None``: any value)
    _value_type: ClassVar[type | None] = None

    if TYPE_CHECKING:  # installed from SHAPE_METHODS / SPLIT_METHODS below

        def view(self, *shape: Any) -> Self: ...
        def reshape(self, *shape: Any) -> Self: ...
        def unflatten(self, dim: int, sizes: Sequence[int]) -> Self: ...
        def squeeze(self, *dim: Any) -> Self: ...
        def permute(self, *dims: Any) -> Self: ...
        def transpose(self, dim0: int, dim1: int) -> Self: ...
        def swapaxes(self, dim0: int, dim1: int) -> Self: ...
        def swapdims(self, dim0: int, dim1: int) -> Self: ...
        def movedim(self, source: Any, destination: Any) -> Self: ...
        def repeat(self, *repeats: Any) -> Self: ...
        def flip(self, *dims: Any) -> Self: ...
        def narrow(self, dim: int, start: int, length: int) -> Self: ...
        def roll(self, shifts: Any, dims: Any = None) -> Self: ...
        def tile(self, *dims: Any) -> Self: ...
        def repeat_interleave(self, repeats: Any, dim: int | None = None) -> Self: ...
        def unbind(self, dim: int = 0) -> tuple[Self, ...]: ...
        def split(self, split_size: Any, dim: int = 0) -> tuple[Self, ...]: ...
        def chunk(self, chunks: int, dim: int = 0) -> tuple[Self, ...]: ...
        def tensor_split(self, indices_or_sections: Any, dim: int = 0) -> tuple[Self, ...]: ...

    def __init__(
        self,
        data: Any,
        _metadata: dict[str, Any] | None = None,
        _is_non_tensor: bool = True,
        *,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: torch.device | str | int | None = None,
        names: Sequence[str | None] | None = None,
    ) -> None:
        if isinstance(data, NonTensorDataBase):
            data = data._data
        self._check_value(data)
        self._data = data
        self._batch_size = parse_batch_size(batch_size)
        self._device = parse_device(device)
        if names is not None:
            names = list(names)
            if len(names) != len(self._batch_size):
                raise ValueError(
                    f"{type(self).__name__}: names={names} must have one entry per batch "
                    f"dimension (batch_size={tuple(self._batch_size)})."
                )
            if any(n is not None for n in names):
                self.__dict__["_names"] = names

    @classmethod
    def _check_value(cls, data: Any) -> None:
        expected = cls._value_type
        if expected is not None and not isinstance(data, expected):
            raise TypeError(
                f"{cls.__name__}: Expected data of type {expected.__name__}, got "
                f"{type(data).__name__}."
            )

    @classmethod
    def _make(cls, data: Any, batch_size: torch.Size, device: torch.device | None) -> Self:
        out = cls.__new__(cls)
        out._data = data
        out._batch_size = batch_size
        out._device = device
        return out

    def _with(self, batch_size: torch.Size, device: torch.device | None = None) -> Self:
        """The same value for a parent of ``batch_size`` (on ``device``), in a new container."""
        return self._make(self._data, batch_size, self._device if device is None else device)

    # ------------------------------------------------------------------ attributes
    @property
    def data(self) -> Any:
        """The value."""
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        if isinstance(value, NonTensorDataBase):
            value = value._data
        self._check_value(value)
        self._data = value

    def get(self, key: str, default: Any = None) -> Any:
        """The value for ``key="data"`` (its one field, as in the reference, where a
        ``NonTensorData`` is a tensorclass), ``default`` for any other key.

        >>> from tensordict import NonTensorData
        >>> NonTensorData("a").get("data"), NonTensorData("a").get("other", 0)
        ('a', 0)
        """
        return self._data if key == "data" else default

    @property
    def batch_size(self) -> torch.Size:
        """The batch size (that of the tensordict holding the value)."""
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Sequence[int] | torch.Size | int) -> None:
        self._batch_size = parse_batch_size(value)
        self.__dict__.pop("_names", None)

    @property
    def shape(self) -> torch.Size:
        """The batch size."""
        return self._batch_size

    @property
    def device(self) -> torch.device | None:
        """The device of the tensordict holding the value (informative only)."""
        return self._device

    @property
    def names(self) -> list[str | None]:
        """The names of the batch dimensions (``None`` when unnamed)."""
        names = self.__dict__.get("_names")
        return list(names) if names is not None else [None] * len(self._batch_size)

    @property
    def batch_dims(self) -> int:
        """Number of batch dimensions."""
        return len(self._batch_size)

    ndim = batch_dims

    def dim(self) -> int:
        """Number of batch dimensions."""
        return len(self._batch_size)

    def numel(self) -> int:
        """Number of elements of the batch."""
        return self._batch_size.numel()

    def __len__(self) -> int:
        return self._batch_size[0] if self._batch_size else 0

    @property
    def is_locked(self) -> bool:
        """Whether :meth:`update` (not in place) is refused."""
        return bool(self.__dict__.get("_locked", False))

    def lock_(self) -> Self:
        """Refuse out-of-place updates (:meth:`update` without ``inplace=True``)."""
        self.__dict__["_locked"] = True
        return self

    def unlock_(self) -> Self:
        """Accept updates again."""
        self.__dict__.pop("_locked", None)
        return self

    # ------------------------------------------------------------------ values
    def tolist(self) -> Any:
        """The value, repeated over the batch dimensions as nested lists.

        >>> from tensordict import NonTensorData
        >>> NonTensorData("x", batch_size=[2]).tolist()
        ['x', 'x']
        """
        out = self._data
        for size in reversed(self._batch_size):
            out = [out] * size
        return out

    def clone(self, recurse: bool = True) -> Self:
        """A new container around the same value."""
        return self._with(self._batch_size)

    def copy(self) -> Self:
        """A new container around the same value."""
        return self._with(self._batch_size)

    def to(self, *args: Any, **kwargs: Any) -> Self:
        """The same value with another (informative) device; other arguments are ignored."""
        device = kwargs.get("device", args[0] if args else None)
        if isinstance(device, (str, int, torch.device)):
            return self._with(self._batch_size, parse_device(device))
        return self._with(self._batch_size)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the value.

        >>> from tensordict import NonTensorData
        >>> NonTensorData(lambda x: x + 1)(1)
        2
        """
        return self._data(*args, **kwargs)

    def maybe_to_stack(self) -> NonTensorDataBase | NonTensorStack:
        """This value as a :class:`NonTensorStack` of the same batch size (a 0-dim leaf,
        which has no element to stack, is returned as is).

        >>> from tensordict import NonTensorData
        >>> NonTensorData("a", batch_size=[2]).maybe_to_stack()
        NonTensorStack(
            ['a', 'a'],
            batch_size=torch.Size([2]),
            device=None)
        """
        if not self._batch_size:
            return self
        return bound.stack._from_parts(
            [self._data], torch.zeros(self._batch_size, dtype=torch.long), self._device
        )

    # ------------------------------------------------------------------ writes
    def _write(self, value: Any) -> None:
        self._check_value(value)
        self._data = value
        link = self.__dict__.get("_link")
        if link is not None:  # an element read from a stack: write it back
            stack, index = link
            stack[index] = value

    def __setitem__(self, index: Any, value: Any) -> None:
        """Write ``value`` (a value, a leaf or a stack of one value) over the elements at
        ``index``: a one-value leaf can only take a new value for its whole batch.

        >>> from tensordict import NonTensorData
        >>> d = NonTensorData("a", batch_size=[2])
        >>> d[:] = "b"
        >>> d.data
        'b'
        """
        new = _single_value(value, "write")
        if _same_value(new, self._data):
            return
        selected = batch_shape_after(self._batch_size, lambda t: t[index])
        if selected.numel() != self._batch_size.numel():
            raise ValueError(
                f"a {type(self).__name__} holds one value for its whole batch "
                f"(batch_size={tuple(self._batch_size)}): it cannot take another value at "
                f"index {index!r} only. Call maybe_to_stack() to get a NonTensorStack, "
                "which holds one value per element."
            )
        self._write(new)

    def update(
        self,
        input_dict_or_td: Any,
        clone: bool = False,
        inplace: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Sequence[Any] | None = None,
        is_leaf: Callable[[type], bool] | None = None,
        update_batch_size: bool = False,
        ignore_lock: bool = False,
    ) -> Self:
        """Take the value of ``input_dict_or_td`` (a one-value leaf, or a dict with a
        ``"data"`` entry). A locked leaf takes it only with ``inplace=True``.

        >>> from tensordict import NonTensorData
        >>> NonTensorData(0).update(NonTensorData(1)).data
        1
        """
        new = _update_value(self, input_dict_or_td)
        if self.is_locked and not (inplace or ignore_lock):
            raise RuntimeError(
                f"cannot update a locked {type(self).__name__} out of place: pass "
                "inplace=True (or use update_()) to write its value."
            )
        self._write(new)
        return self

    def update_(
        self,
        input_dict_or_td: Any,
        clone: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Sequence[Any] | None = None,
    ) -> Self:
        """Take the value of ``input_dict_or_td`` in place (locked leaves too).

        >>> from tensordict import NonTensorData
        >>> NonTensorData(0).lock_().update_(NonTensorData(1)).data
        1
        """
        self._write(_update_value(self, input_dict_or_td))
        return self

    def extend(self, tensordict: Any) -> None:
        """Grow the first batch dimension by the elements of ``tensordict`` (one-value
        leaves, or a list of them), which must hold this same value.

        >>> from tensordict import NonTensorData
        >>> d = NonTensorData("a", batch_size=[2])
        >>> d.extend(NonTensorData("a", batch_size=[1]))
        >>> d.batch_size
        torch.Size([3])
        """
        items = tensordict if isinstance(tensordict, (list, tuple)) else [tensordict]
        if not self._batch_size:
            raise RuntimeError(f"cannot extend a {type(self).__name__} without batch dimension.")
        size = self._batch_size[0]
        for item in items:
            if not isinstance(item, NonTensorDataBase) or not _same_value(item._data, self._data):
                raise ValueError(
                    f"extend(): a {type(self).__name__} holding {self._data!r} can only be "
                    f"extended with leaves holding the same value, got {item!r}; use "
                    "torch.cat to build a NonTensorStack of different values."
                )
            if item._batch_size[1:] != self._batch_size[1:]:
                raise RuntimeError(
                    f"extend(): batch_size={tuple(item._batch_size)} does not match "
                    f"{tuple(self._batch_size)} beyond the first dimension."
                )
            size += item._batch_size[0] if item._batch_size else 1
        self._batch_size = torch.Size((size, *self._batch_size[1:]))

    # ------------------------------------------------------------------ dataclass view
    @classmethod
    def fields(cls) -> tuple[dataclasses.Field[Any], ...]:
        """The fields of the leaf, as :func:`dataclasses.fields` lists them
        (``data`` and two private ones).

        >>> from tensordict import NonTensorData
        >>> [f.name for f in NonTensorData.fields()][:1]
        ['data']
        """
        return dataclasses.fields(_Fields)

    @classmethod
    def from_tensordict(
        cls,
        tensordict: Any,
        non_tensordict: dict[str, Any] | None = None,
        safe: bool | None = None,
    ) -> Self:
        """A leaf with the batch size and device of ``tensordict`` and the value
        ``non_tensordict["data"]``.

        >>> from tensordict import NonTensorData, TensorDict
        >>> NonTensorData.from_tensordict(TensorDict(batch_size=[2]), {"data": "x"})
        NonTensorData(data=x, batch_size=torch.Size([2]), device=None)
        """
        data = (non_tensordict or {}).get("data")
        return cls(data, batch_size=tensordict.batch_size, device=tensordict.device)

    # ------------------------------------------------------------------ shape
    def __getitem__(self, index: Any) -> Self:
        out = self._with(batch_shape_after(self._batch_size, lambda t: t[index]).shape)
        return out

    def expand(self, *shape: Any) -> NonTensorDataBase | NonTensorStack:
        """The value over an expanded batch: a :class:`NonTensorStack` holding it at every
        element (a ``MetaData`` stays one ``MetaData``).

        >>> from tensordict import NonTensorData
        >>> NonTensorData(0, batch_size=[3]).expand(2, 3).tolist()
        [[0, 0, 0], [0, 0, 0]]
        """
        new = batch_shape_after(self._batch_size, lambda t: t.expand(*shape)).shape
        return self._spread(new)

    def unsqueeze(self, dim: int) -> NonTensorDataBase | NonTensorStack:
        """The value with a new dimension of size one: a :class:`NonTensorStack` (a
        ``MetaData`` stays one ``MetaData``)."""
        new = batch_shape_after(self._batch_size, lambda t: t.unsqueeze(dim)).shape
        return self._spread(new)

    def _spread(self, batch_size: torch.Size) -> NonTensorDataBase | NonTensorStack:
        return bound.stack._from_parts(
            [self._data], torch.zeros(batch_size, dtype=torch.long), self._device
        )

    def flatten(self, start_dim: int | None = 0, end_dim: int | None = -1) -> Self:
        """The value over the batch with dimensions ``start_dim..end_dim`` merged
        (``None``: the first / last); a 0-dim batch becomes ``[1]``.

        >>> from tensordict import NonTensorData
        >>> NonTensorData(0, batch_size=[2, 3]).flatten().batch_size
        torch.Size([6])
        """
        start = 0 if start_dim is None else start_dim
        end = -1 if end_dim is None else end_dim
        return self._with(
            batch_shape_after(self._batch_size, lambda t: t.flatten(start, end)).shape
        )

    def contiguous(self, canonical: bool = False) -> Self:
        """A new container around the same value (a leaf is always contiguous)."""
        return self._with(self._batch_size)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(data={self._data}, batch_size={self._batch_size}, "
            f"device={self._device})"
        )


def _shape_method(name: str) -> Any:
    def method(self: NonTensorDataBase, *args: Any, **kwargs: Any) -> Any:
        shape = batch_shape_after(self._batch_size, lambda t: getattr(t, name)(*args, **kwargs))
        return self._with(shape.shape)

    method.__name__ = name
    method.__doc__ = f"``Tensor.{name}`` applied to the batch shape; the value is kept."
    return method


def _split_method(name: str) -> Any:
    def method(self: NonTensorDataBase, *args: Any, **kwargs: Any) -> Any:
        parts = batch_shape_after(self._batch_size, lambda t: getattr(t, name)(*args, **kwargs))
        return tuple(self._with(p.shape) for p in parts)

    method.__name__ = name
    method.__doc__ = f"``Tensor.{name}`` along the batch shape; a tuple of leaves."
    return method


#: Batch-shape methods of every non-tensor leaf: the tensor method on the batch shape.
SHAPE_METHODS: tuple[str, ...] = (
    "view",
    "reshape",
    "unflatten",
    "squeeze",
    "permute",
    "transpose",
    "swapaxes",
    "swapdims",
    "movedim",
    "repeat",
    "flip",
    "narrow",
    "roll",
    "tile",
    "repeat_interleave",
)
#: Methods splitting the batch into a tuple of leaves.
SPLIT_METHODS: tuple[str, ...] = ("unbind", "split", "chunk", "tensor_split")

for _name in SHAPE_METHODS:
    setattr(NonTensorDataBase, _name, _shape_method(_name))
for _name in SPLIT_METHODS:
    setattr(NonTensorDataBase, _name, _split_method(_name))


class NonTensorData(NonTensorDataBase):
    """A non-tensor value stored in a tensordict, with the batch size of its parent.

    ``td[key]`` reads the value, ``td.get(key)`` the ``NonTensorData`` itself.

    >>> from tensordict import NonTensorData, TensorDict
    >>> td = TensorDict({"label": "cat"}, batch_size=[3])
    >>> td["label"], td[1:]["label"], td.get("label")
    ('cat', 'cat', NonTensorData(data=cat, batch_size=torch.Size([3]), device=None))
    >>> NonTensorData("cat", batch_size=[2])
    NonTensorData(data=cat, batch_size=torch.Size([2]), device=None)
    """


class MetaData(NonTensorData):
    """A non-tensor value describing a tensordict as a whole, not each of its elements.

    It behaves like :class:`NonTensorData`, except that shape operations (``expand`` and
    ``unsqueeze`` included) keep one ``MetaData``, and that stacking identical values
    keeps one ``MetaData`` (different values give a :class:`NonTensorStack`).
    ``MetaData[T]`` is the subclass that only accepts values of type ``T``.

    >>> import torch
    >>> from tensordict import MetaData, TensorDict
    >>> tds = [TensorDict({"run": MetaData("run-0")}, []) for _ in range(2)]
    >>> torch.stack(tds).get("run")
    MetaData(data=run-0, batch_size=torch.Size([2]), device=None)
    >>> MetaData[int](3).data
    3
    """

    _typed: ClassVar[dict[type, type[MetaData]]] = {}

    def _spread(self, batch_size: torch.Size) -> Self:
        return self._with(batch_size)

    def __class_getitem__(cls, value_type: Any) -> type[MetaData]:
        """``MetaData[T]``: the (cached) subclass accepting values of type ``T`` only.

        >>> from tensordict import MetaData
        >>> MetaData[int] is MetaData[int], issubclass(MetaData[int], MetaData)
        (True, True)
        """
        if not isinstance(value_type, type):
            raise TypeError(f"MetaData[...] takes a type, got {value_type!r}.")
        typed = MetaData._typed.get(value_type)
        if typed is None:
            typed = type(
                f"MetaData[{value_type.__name__}]",
                (MetaData,),
                {"_value_type": value_type, "__module__": __name__, "__reduce__": _reduce_typed},
            )
            MetaData._typed[value_type] = typed
            NON_TENSOR_TYPES.add(typed)
            DATA_TYPES.add(typed)
        return typed


def _typed_metadata(value_type: type, data: Any, batch_size: torch.Size, device: Any) -> MetaData:
    return MetaData.__class_getitem__(value_type)._make(data, batch_size, device)


def _reduce_typed(self: MetaData) -> tuple[Any, ...]:
    return (_typed_metadata, (self._value_type, self._data, self._batch_size, self._device))


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


def _single_value(value: Any, what: str) -> Any:
    """The one value that ``value`` (a raw value, a one-value leaf or a stack) holds."""
    if isinstance(value, NonTensorDataBase):
        return value._data
    if isinstance(value, bound.stack):
        missing = object()
        common = value._common_value(missing)
        if common is missing:
            raise ValueError(
                f"cannot {what} a NonTensorStack of different values into a one-value leaf; "
                "call maybe_to_stack() on the leaf first."
            )
        return common
    return value


def _update_value(target: NonTensorDataBase, source: Any) -> Any:
    if isinstance(source, bound.stack):
        raise ValueError(
            f"cannot update a {type(target).__name__} (one value for its whole batch) with a "
            "NonTensorStack: call maybe_to_stack() on it first, then update the stack."
        )
    if isinstance(source, NonTensorDataBase):
        return source._data
    if isinstance(source, dict) and "data" in source:
        return _single_value(source["data"], "update")
    raise TypeError(
        f"{type(target).__name__}.update() takes a non-tensor leaf or a dict with a 'data' "
        f"entry, got {type(source).__name__}."
    )


NON_TENSOR_TYPES.update((NonTensorData, MetaData))
DATA_TYPES.update((NonTensorData, MetaData))
