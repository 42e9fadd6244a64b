"""``TensorDict``: the dense tensordict, a dict of tensors sharing leading batch dimensions.

Storage is a plain ``dict`` mapping string keys to tensors, nested tensordicts or
:class:`~tensordict.NonTensorData`. Every operation that maps over leaves goes through
:meth:`TensorDict._tree_map` (user functions) or :meth:`TensorDict._map_batch`
(batch-shape operations, whose new batch size is known up front).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from types import EllipsisType
from typing import Any, cast, overload

import numpy as np
import torch

from tensordict._base.client_compat import is_as_lists, items_as_lists
from tensordict._dense.device_ops import DeviceOps
from tensordict._dense.dict_ops import DictOps
from tensordict._dense.first_class_index import index_first_class
from tensordict._dense.shape_ops import DenseShapeOps
from tensordict._engine.tree import TreeMapOps
from tensordict._keys.first_class import has_dim_index, is_first_class
from tensordict._keys.index import index_names, indexed_batch_size, normalize_index
from tensordict._keys.nested import NestedKey, unravel_key
from tensordict._keys.shape import (
    broadcastable_to,
    leads_with,
    nested_fits,
    parse_batch_size,
    parse_device,
)
from tensordict._kinds import kinds as _kinds
from tensordict._kinds import lock as _lock
from tensordict._kinds import nesting as _nesting
from tensordict._kinds.views import (
    ITEMS,
    VALUES,
    FlatKeysView,
    TensorDictKeysView,
    _collect_items,
    _collect_values,
    _sort_key,
    collect,
    expand_later,
)
from tensordict._kinds.writes import write_inplace
from tensordict._leaves.collection import data_of
from tensordict._leaves.nontensor import (
    NON_TENSOR_TYPES,
    NonTensorData,
    NonTensorStack,
    unwrap_non_tensor,
    write_non_tensor,
)
from tensordict._leaves.nontensor_stack import list_entry
from tensordict._leaves.unbatched import UNBATCHED_TYPES, is_carried
from tensordict._util.errors import KeyThroughLeafError, index_write_error, lock_error, missing_key
from tensordict._wire.consolidate import ConsolidatedState
from tensordict.base import NO_DEFAULT, TensorDictBase, _key_tuple

_Tensor = torch.Tensor
_Size = torch.Size
_NUMBER_TYPES = (bool, int, float, complex, np.ndarray, np.number, np.bool_)


def _fmt(key: Any) -> Any:
    """A key as users write it, for error messages."""
    return unravel_key(key) if isinstance(key, tuple) else key


def _expanded_copy(value: Any, batch_size: torch.Size) -> Any:
    """A shallow copy of ``value`` with the longer ``batch_size`` (its batch size is a
    prefix of it), or ``value`` itself when its leaves do not allow it."""
    out = value.copy()
    try:
        out.batch_size = batch_size
    except (RuntimeError, ValueError):
        return value
    return out


class TensorDict(
    ConsolidatedState,
    TreeMapOps,
    DictOps,
    DeviceOps,
    DenseShapeOps,
    TensorDictBase,
):
    """A dictionary of tensors that share leading (batch) dimensions.

    Args:
        source: a mapping of keys to tensors, nested mappings, tensordicts or any
            other value (stored as :class:`~tensordict.NonTensorData`).
        batch_size: the common leading dimensions (default ``[]``).
        device: if given, every value written is cast to this device.
        names: optional names of the batch dimensions.
        non_blocking: passed to device casts.
        lock: lock the tensordict after construction.
        **kwargs: more entries (merged into ``source``).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"obs": torch.zeros(4, 3), "next": {"r": torch.ones(4)}}, batch_size=[4])
    >>> td["next", "r"].shape, td[1:].batch_size
    (torch.Size([4]), torch.Size([3]))
    """

    _tensordict: dict[str, Any]
    _batch_size: torch.Size
    _device: torch.device | None = None  # (class defaults: _new_unsafe sets them only when
    _names: list[str | None] | None = None  # given, fewer writes to replay in compiled code)
    _lock_parents: int = 0  # the locked tensordicts holding this one (see _lock)
    _depth: int = 0  # the nesting level it was stored at (see _nesting)

    def __init__(
        self,
        source: Any = None,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: torch.device | str | int | None = None,
        names: Sequence[str | None] | None = None,
        non_blocking: bool | None = None,
        lock: bool = False,
        **kwargs: Any,
    ) -> None:
        bs = batch_size if type(batch_size) is _Size else parse_batch_size(batch_size)
        self._batch_size = bs
        self._device = None if device is None else parse_device(device)
        self._names = None
        self._is_locked = False
        self._tensordict = store = {}
        if source is None:
            source = kwargs
        else:
            if isinstance(source, TensorDictBase):
                source = dict(source.items())
            elif not hasattr(source, "items"):
                raise TypeError(
                    f"TensorDict source must be a mapping, got {type(source).__name__}."
                )
            if kwargs:
                raise ValueError(
                    f"TensorDict takes its entries either as source= or as keyword arguments, "
                    f"not both (got a source and the keywords {sorted(kwargs)})."
                )
        dev = self._device
        nb = len(bs)
        b0 = bs[0] if nb == 1 else None
        for key, value in source.items():
            if type(key) is str and type(value) is _Tensor:  # subclasses: _validate_value
                if dev is not None and value.device != dev:
                    value = value.to(dev, non_blocking=bool(non_blocking))
                try:  # shape[:nb] != bs, without a torch.Size slice for one batch dim
                    sh = value.shape
                    bad = (not sh or sh[0] != b0) if nb == 1 else (nb != 0 and sh[:nb] != bs)
                except RuntimeError:  # a strided nested tensor has no shape
                    bad = not nested_fits(value, bs)
                if bad:
                    raise self._shape_error(key, value)
                store[key] = value
            elif type(key) is str:
                store[key] = self._validate_value(key, value, bool(non_blocking))
            else:
                self._set_tuple(_key_tuple(key), value, inplace=False, validated=False)
        if names is not None:
            self._check_nested_names(names)
            self.names = names
        if lock:
            self.lock_()

    @classmethod
    def _new_unsafe(
        cls,
        source: dict[str, Any],
        batch_size: torch.Size,
        device: torch.device | None = None,
        names: list[str | None] | None = None,
    ) -> TensorDict:
        """Build without validation (the caller guarantees shapes and devices)."""
        out = cls.__new__(cls)
        out._tensordict = source
        out._batch_size = batch_size
        if device is not None:
            out._device = device
        if names is not None:
            out._names = names
        return out  # _is_locked: the class default, False

    # ------------------------------------------------------------------ metadata
    @property
    def batch_size(self) -> torch.Size:
        """The common leading dimensions of every entry; settable (validated).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2, 3)}, [2, 3])
        >>> td.batch_size = [2]
        >>> td.batch_size
        torch.Size([2])
        """
        return self._batch_size

    @batch_size.setter
    def batch_size(self, new: Sequence[int]) -> None:
        new = parse_batch_size(new)
        nb = len(new)
        for key, value in self._tensordict.items():
            if is_carried(value):
                continue
            if value.shape[:nb] != new:
                raise RuntimeError(
                    f"cannot set batch_size={new}: entry {key!r} has shape {value.shape}, "
                    f"whose leading dimensions must equal the batch size."
                )
        for key, value in self._tensordict.items():
            if is_carried(value):
                self._tensordict[key] = value._with(new)
        if self._names is not None and len(self._names) != nb:
            kept = (list(self._names) + [None] * nb)[:nb]
            self._names = kept if any(n is not None for n in kept) else None
        self._batch_size = new

    @property
    def device(self) -> torch.device | None:
        """The device every entry is cast to on write, or ``None`` (mixed devices allowed)."""
        return self._device

    @device.setter
    def device(self, value: Any) -> None:
        raise RuntimeError(
            "The device of a tensordict cannot be assigned; use td.to(device) to move it "
            "or td.clear_device_() to drop it."
        )

    def clear_device_(self) -> TensorDict:
        """Drop the device (recursively), so entries may live on any device.

        >>> from tensordict import TensorDict
        >>> TensorDict(device="cpu").clear_device_().device is None
        True
        """
        self._device = None
        for value in self._tensordict.values():
            if isinstance(value, TensorDict):
                value.clear_device_()
        return self

    def auto_device_(self) -> TensorDict:
        """Set the device to the one all leaves share, or ``None`` if they differ.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(1)}, [1]).auto_device_().device
        device(type='cpu')
        """
        devices: set[torch.device | None] = set()
        for value in self._tensordict.values():
            if isinstance(value, _Tensor):
                devices.add(value.device)
            elif isinstance(value, TensorDict):
                devices.add(value.auto_device_().device)
        self._device = devices.pop() if len(devices) == 1 else None
        return self

    @property
    def names(self) -> list[str | None]:
        """Names of the batch dimensions (``None`` for unnamed ones); settable.

        >>> from tensordict import TensorDict
        >>> td = TensorDict(batch_size=[2, 3], names=["env", None])
        >>> td.names
        ['env', None]
        """
        names = self._names
        if names is None:
            return [None] * len(self._batch_size)
        return list(names)

    @names.setter
    def names(self, value: Sequence[str | None] | None) -> None:
        self._set_names(value)

    def _set_names(self, value: Sequence[str | None] | None) -> None:
        if value is None:
            self._names = None
            for sub in self._nested_named():
                sub.names = None
            return
        value = list(value)
        nb = len(self._batch_size)
        if len(value) != nb:
            raise ValueError(
                f"names: the length of the dimension names must equate the tensordict "
                f"batch_dims: got {len(value)} names {value} for {nb} batch dimension(s) "
                f"(batch_size={self._batch_size})."
            )
        seen = [n for n in value if n is not None]
        if len(seen) != len(set(seen)):
            raise ValueError(f"dimension names must be unique, got {value}.")
        for n in seen:
            if not isinstance(n, str):
                raise TypeError(f"dimension names must be strings or None, got {n!r}.")
        self._names = value if seen else None
        for sub in self._nested_named():
            sub.names = value + sub.names[nb:]

    def _check_nested_names(self, names: Sequence[str | None]) -> None:
        """Refuse (``RuntimeError``, before any renaming) names that contradict the names
        the caller's nested tensordicts already give the shared dimensions."""
        names = list(names)
        for key, value in self._tensordict.items():
            sub = data_of(value)
            if not isinstance(sub, (TensorDict, _kinds.Lazy)):
                continue
            own = sub.names[: len(names)]
            if any(a is not None and b is not None and a != b for a, b in zip(own, names)):
                raise RuntimeError(
                    f"names={names} contradict the names {own} that the nested tensordict "
                    f"{key!r} gives these dimensions; rename one of them first."
                )

    def _nested_named(self) -> list[Any]:
        """The nested tensordicts (of tensorclasses too) whose leading names follow ours."""
        out = []
        for value in self._tensordict.values():
            sub = data_of(value)
            if isinstance(sub, (TensorDict, _kinds.Lazy)):
                out.append(sub)
        return out

    def _has_names(self) -> bool:
        return self._names is not None

    def refine_names(self, *names: Any) -> TensorDict:
        """Name the batch dimensions in place; ``...`` keeps the current names.

        Existing names cannot be changed (use :meth:`rename_`).

        >>> from tensordict import TensorDict
        >>> TensorDict(batch_size=[2, 3]).refine_names(..., "time").names
        [None, 'time']
        """
        given: list[Any] = (
            list(names[0])
            if len(names) == 1 and isinstance(names[0], (list, tuple))
            else list(names)
        )
        nb = len(self._batch_size)
        if Ellipsis in given:
            i = given.index(Ellipsis)
            fill = nb - (len(given) - 1)
            given[i : i + 1] = self.names[i : i + fill]
        names = tuple(given)
        if len(names) != nb:
            raise ValueError(f"refine_names got {len(names)} names for {nb} batch dimension(s).")
        current = self.names
        for old, new in zip(current, names, strict=False):
            if old is not None and new != old:
                raise RuntimeError(
                    f"refine_names: cannot coerce TensorDict dimension name {old!r} into {new!r}; "
                    "use rename_()."
                )
        self._set_names(names)
        return self

    def rename(self, *names: Any, **rename_map: str) -> TensorDict:
        """A shallow copy with renamed batch dimensions (positional or ``old=new``).

        >>> from tensordict import TensorDict
        >>> td = TensorDict(batch_size=[2], names=["a"])
        >>> td.rename(a="b").names, td.names
        (['b'], ['a'])
        """
        out = self.copy()
        out.rename_(*names, **rename_map)
        return out

    def rename_(self, *names: Any, **rename_map: str) -> TensorDict:
        """Rename the batch dimensions in place (positional names or ``old=new``).

        >>> from tensordict import TensorDict
        >>> TensorDict(batch_size=[2]).rename_("x").names
        ['x']
        """
        if names and rename_map:
            raise ValueError("pass either positional names or a rename map, not both.")
        if rename_map:
            current = self.names
            for old in rename_map:
                if old not in current:
                    raise ValueError(f"no batch dimension is named {old!r} (names: {current}).")
            self._set_names([rename_map.get(n, n) if n is not None else None for n in current])
        else:
            if len(names) == 1 and isinstance(names[0], (list, tuple)):
                names = tuple(names[0])
            self._set_names(list(names) if any(n is not None for n in names) else None)
        return self

    # ------------------------------------------------------------------ validation
    def _shape_error(self, key: Any, value: Any) -> RuntimeError:
        try:
            shape: Any = tuple(value.shape)
        except RuntimeError:  # a strided nested tensor
            shape = f"nested {value.dim()}-d"
        return RuntimeError(
            f"batch dimension mismatch for key {_fmt(key)!r}: the value has shape "
            f"{shape} but its leading dimensions must equal the tensordict's "
            f"batch_size={tuple(self._batch_size)}."
        )

    def _validate_value(
        self, key: Any, value: Any, non_blocking: bool = False, prefix: tuple[str, ...] = ()
    ) -> Any:
        """Return ``value`` as it will be stored under ``key``, or raise a clear error.

        ``key`` (after ``prefix``, for nested updates) only serves error messages.
        """
        if prefix:
            key = prefix + _key_tuple(key)
        bs = self._batch_size
        nb = len(bs)
        if isinstance(value, _Tensor):
            dev = self._device
            if dev is not None and value.device != dev:
                value = value.to(dev, non_blocking=non_blocking)
            if type(value) in UNBATCHED_TYPES:
                return value._with(bs)  # any shape: it has no batch dimension
            try:
                bad = not leads_with(value.shape, bs)
            except RuntimeError:  # a strided nested tensor has no shape
                bad = not nested_fits(value, bs)
            if bad:
                raise self._shape_error(key, value)
            return value
        if isinstance(value, TensorDictBase):
            vbs = value.batch_size
            if len(vbs) < nb and bs[: len(vbs)] == vbs:
                value = _expanded_copy(value, bs)  # as the reference: a copy, expanded
            if value.batch_size[:nb] != bs:
                raise RuntimeError(
                    f"batch dimension mismatch for key {_fmt(key)!r}: the nested tensordict has "
                    f"batch_size={tuple(value.batch_size)} but it must start with the parent's "
                    f"batch_size={tuple(bs)}."
                )
            dev = self._device
            if dev is not None and value.device != dev:
                value = value.to(dev, non_blocking=non_blocking)
            if self._names is None and nb and isinstance(value, TensorDict):
                own = value.names[:nb]
                if all(n is not None for n in own) and not self._tensordict:
                    self.names = own  # an unnamed, empty parent takes its first child's names
            if self._names is not None and isinstance(value, TensorDict):
                sub_names = value.names
                if any(n is not None for n in sub_names[:nb]) and sub_names[:nb] != self._names:
                    raise ValueError(
                        f"names of nested tensordict {_fmt(key)!r} ({sub_names[:nb]}) conflict with "
                        f"the parent's names {self._names}."
                    )
                value._set_names(list(self._names) + sub_names[nb:])
            _nesting.check_nesting(self, key, value)
            if self._is_locked:
                inner = data_of(value)
                if isinstance(inner, TensorDict):
                    _lock.hold(self, inner)
                elif not value._is_locked:
                    value.lock_()
            return value
        if isinstance(value, dict):
            return TensorDict(value, batch_size=bs, device=self._device, names=self._names)
        if isinstance(value, NonTensorData):
            return value._with(bs, self._device)
        if type(value) is NonTensorStack:  # one value per element: shaped like a tensor
            if value.batch_size[:nb] != bs:
                raise self._shape_error(key, value)
            return value._with(bs, self._device)
        if isinstance(value, _NUMBER_TYPES):
            if isinstance(value, np.ndarray) and value.dtype.kind in "OUS":
                return NonTensorData._make(value, bs, self._device)
            tensor = torch.as_tensor(value, device=self._device)
            if tensor.shape[:nb] != bs:
                raise self._shape_error(key, tensor)
            return tensor
        if type(value) is list:  # numbers: a tensor; other values: see set_list_to_stack
            return self._validate_value(key, list_entry(value), non_blocking)
        if is_first_class(value):  # a tensor with first-class dims: a leaf
            if tuple(value.shape[:nb]) != tuple(bs):
                raise self._shape_error(key, value)
            return value
        return NonTensorData._make(value, bs, self._device)

    # ------------------------------------------------------------------ get
    def _get_str(self, key: str, default: Any) -> Any:
        value = self._tensordict.get(key, NO_DEFAULT)
        if value is NO_DEFAULT:
            if default is NO_DEFAULT:
                raise missing_key(key, self)
            return default
        return value

    def _get_tuple(self, key: tuple[str, ...], default: Any) -> Any:
        td: Any = self
        for i, part in enumerate(key):
            store = td._tensordict if isinstance(td, TensorDict) else None
            if store is None:
                if isinstance(td, TensorDictBase):  # a lazy stack: it reads the rest
                    return td._get_tuple(key[i:], default)
                if default is NO_DEFAULT:
                    raise KeyThroughLeafError(
                        f"key {unravel_key(key)!r} not found: {unravel_key(key[:i])!r} is a "
                        f"{type(td).__name__}, not a tensordict."
                    )
                return default
            value = store.get(part, NO_DEFAULT)
            if value is NO_DEFAULT:
                if default is NO_DEFAULT:
                    raise KeyError(
                        f"key {unravel_key(key)!r} not found: {part!r} is not among the keys "
                        f"{sorted(map(str, store))}"
                        + (f" of the nested tensordict at {unravel_key(key[:i])!r}." if i else ".")
                    )
                return default
            td = value
        return td

    @overload
    def __getitem__(self, index: str | tuple[NestedKey, ...]) -> Any: ...
    @overload
    def __getitem__(
        self,
        index: int
        | slice
        | None
        | torch.Tensor
        | list[Any]
        | range
        | tuple[Any, ...]
        | EllipsisType,
    ) -> TensorDict: ...
    def __getitem__(self, index: Any) -> Any:
        """``td[key]`` reads an entry; any other index indexes the batch dimensions.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.arange(6).reshape(2, 3)}, [2, 3])
        >>> td["a"][1], td[1]["a"], td[..., 0]["a"]
        (tensor([3, 4, 5]), tensor([3, 4, 5]), tensor([0, 3]))
        """
        if type(index) is str:
            try:
                value = self._tensordict[index]
            except KeyError:
                raise missing_key(index, self) from None
            if type(value) is _Tensor or type(value) not in NON_TENSOR_TYPES:
                return value
            return unwrap_non_tensor(value)
        if type(index) is tuple:
            try:  # fast path: a flat tuple of strings naming an existing entry
                value = self
                for part in index:
                    value = value._tensordict[part]
            except (KeyError, AttributeError, TypeError):
                if not (index and isinstance(index[0], (str, tuple))):
                    return self._index(index)  # (no key: an index of the batch dims)
                value = self._get_tuple(_key_tuple(index), NO_DEFAULT)
            else:
                if value is self:  # td[()]: the empty index
                    return self._index(index)
            if type(value) is _Tensor or type(value) not in NON_TENSOR_TYPES:
                return value
            return unwrap_non_tensor(value)
        return self._index(index)

    # ------------------------------------------------------------------ set
    def _set_str(
        self,
        key: str,
        value: Any,
        *,
        inplace: bool,
        validated: bool,
        non_blocking: bool = False,
        ignore_lock: bool = False,
    ) -> TensorDict:
        if not validated:
            value = self._validate_value(key, value, non_blocking)
        store = self._tensordict
        if inplace:
            current = store.get(key)
            if current is not None:
                write_inplace(key, current, value, non_blocking)
                return self
        if self._is_locked and not ignore_lock:  # only in-place writes reach a locked one
            raise lock_error(key, "replace" if key in store else "add")
        store[key] = value
        return self

    def _set_tuple(
        self,
        key: tuple[str, ...],
        value: Any,
        *,
        inplace: bool,
        validated: bool,
        non_blocking: bool = False,
    ) -> TensorDict:
        if len(key) == 1:
            return self._set_str(
                key[0], value, inplace=inplace, validated=validated, non_blocking=non_blocking
            )
        sub = self._tensordict.get(key[0])
        if sub is None:
            if self._is_locked:
                raise lock_error(key[0])
            _nesting.check_key_length(self, key)
            sub = TensorDict._new_unsafe(
                {}, self._batch_size, self._device, self._names and list(self._names)
            )
            sub._depth = self._depth + 1
            sub._set_tuple(
                key[1:], value, inplace=inplace, validated=validated, non_blocking=non_blocking
            )
            self._tensordict[key[0]] = sub
            return self
        if not isinstance(sub, TensorDictBase):
            raise KeyError(
                f"cannot write at {unravel_key(key)!r}: the entry at {key[0]!r} is a "
                f"{type(sub).__name__}, not a tensordict."
            )
        sub._set_tuple(
            key[1:], value, inplace=inplace, validated=validated, non_blocking=non_blocking
        )
        return self

    def __setitem__(self, index: Any, value: Any) -> None:
        """``td[key] = value`` writes an entry; ``td[idx] = other`` writes along the batch.

        Writing a tensordict (or dict) at an index of an empty-keyed tensordict
        pre-allocates every missing entry with zeros.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(batch_size=[3])
        >>> for i in range(3):
        ...     td[i] = TensorDict({"x": torch.full((2,), float(i))})
        >>> td["x"][:, 0]
        tensor([0., 1., 2.])
        """
        parent: Any
        last: Any
        if type(index) is str:
            parent, last = self, index
        elif type(index) is tuple:
            try:  # fast path: the parent of a flat string key exists
                parent = self
                for part in index[:-1]:
                    parent = parent._tensordict[part]
                last = index[-1]
            except (KeyError, AttributeError, TypeError, IndexError):
                parent = last = None
            if type(last) is not str or type(parent) is not TensorDict:
                if index and isinstance(index[0], (str, tuple)):
                    self._set_tuple(_key_tuple(index), value, inplace=False, validated=False)
                else:  # no key: an index of the batch dims
                    self._set_at_index(index, value)
                return
        else:
            self._set_at_index(index, value)
            return
        if type(value) is _Tensor:  # the hot path of _set_str/_validate_value, inlined
            dev = parent._device
            if dev is not None and value.device != dev:
                value = value.to(dev)
            bs = parent._batch_size
            nb = len(bs)
            try:  # shape[:nb] != bs, without a torch.Size slice for one batch dim
                sh = value.shape
                bad = (not sh or sh[0] != bs[0]) if nb == 1 else (nb != 0 and sh[:nb] != bs)
            except RuntimeError:  # a strided nested tensor has no shape
                bad = not nested_fits(value, bs)
            if bad:
                raise parent._shape_error(index, value)
        elif parent is self:
            self._set_str(last, value, inplace=False, validated=False)
            return
        else:
            value = parent._validate_value(index, value)
        store = parent._tensordict
        if parent._is_locked:
            raise lock_error(index, "replace" if last in store else "add")
        store[last] = value

    def _set_at_index(self, index: Any, value: Any) -> None:
        idx = normalize_index(index, self._batch_size)
        idx_bs = indexed_batch_size(idx, self._batch_size)
        if isinstance(value, dict):
            value = TensorDict(value, batch_size=idx_bs)
        if isinstance(value, TensorDictBase):
            if value.batch_size != idx_bs:
                try:
                    value = value.expand(idx_bs)
                except RuntimeError:
                    raise index_write_error(value.batch_size, index, idx_bs) from None
            self._check_set_at(idx, idx_bs, value, ())
            self._write_at(idx, idx_bs, value)
            return
        if isinstance(value, (_Tensor, *_NUMBER_TYPES)):
            tensor = torch.as_tensor(value)
            if tensor.shape != idx_bs[len(idx_bs) - tensor.ndim :] and tensor.numel() != 1:
                raise RuntimeError(
                    f"cannot write a tensor of shape {tuple(tensor.shape)} at index {index!r} "
                    f"(selected batch shape {tuple(idx_bs)}); expected a scalar or a tensor of "
                    "that shape."
                )
            for leaf in self.values(True, True):
                if isinstance(leaf, _Tensor):
                    t = tensor.reshape(tensor.shape + (1,) * (leaf.ndim - len(self._batch_size)))
                    leaf[idx] = t
            return
        raise TypeError(
            f"td[index] = value needs a tensordict, a dict, a tensor or a number; got "
            f"{type(value).__name__}."
        )

    def _check_set_at(
        self, idx: Any, idx_bs: torch.Size, value: TensorDictBase, prefix: tuple[str, ...]
    ) -> None:
        nb = len(self._batch_size)
        vnb = value.batch_dims
        items: Any = value._tensordict.items() if isinstance(value, TensorDict) else value.items()
        for key, v in items:
            target = self._tensordict.get(key)
            if target is None:
                if self._is_locked:
                    raise lock_error(unravel_key(prefix + (key,)))
                continue
            if type(target) in UNBATCHED_TYPES:  # the payload is written whole
                if not isinstance(v, _Tensor) or not broadcastable_to(v.shape, target.shape):
                    raise RuntimeError(
                        f"cannot write a {type(v).__name__} of shape "
                        f"{tuple(getattr(v, 'shape', ()))} into the UnbatchedTensor at key "
                        f"{unravel_key(prefix + (key,))!r} (shape {tuple(target.shape)}): an "
                        "unbatched entry is written whole, whatever the index."
                    )
                continue
            if isinstance(target, _Tensor):
                if isinstance(v, TensorDictBase):
                    raise RuntimeError(
                        f"cannot write a {type(v).__name__} into the tensor at key "
                        f"{unravel_key(prefix + (key,))!r}."
                    )
                want = target.shape[nb:]
                got = v.shape[vnb:]
                if got != want and not broadcastable_to(got, want):
                    raise RuntimeError(
                        f"shape mismatch at key {unravel_key(prefix + (key,))!r}: cannot write a "
                        f"value with feature shape {tuple(got)} into an entry with feature shape "
                        f"{tuple(want)} (full shape {tuple(target.shape)})."
                    )
                continue
            full = prefix + (key,)
            if isinstance(target, TensorDictBase) != isinstance(v, TensorDictBase):
                raise RuntimeError(
                    f"cannot write a {type(v).__name__} into the {type(target).__name__} at "
                    f"key {unravel_key(full)!r}."
                )
            if isinstance(target, TensorDict):
                target._check_set_at(idx, idx_bs, v, full)

    def _write_at(self, idx: Any, idx_bs: torch.Size, value: TensorDictBase) -> None:
        bs = self._batch_size
        vnb = value.batch_dims
        store = self._tensordict
        items: Any = value._tensordict.items() if isinstance(value, TensorDict) else value.items()
        for key, v in items:
            target = store.get(key)
            if target is None:
                if isinstance(v, TensorDictBase):
                    target = TensorDict._new_unsafe({}, bs + v.batch_size[vnb:], self._device)
                elif type(v) in UNBATCHED_TYPES:
                    store[key] = v._with(bs)
                    continue
                elif isinstance(v, _Tensor):
                    target = torch.zeros(
                        bs + v.shape[vnb:], dtype=v.dtype, device=self._device or v.device
                    )
                elif isinstance(v, NonTensorStack):  # values for part of the batch
                    target = NonTensorStack._from_parts(
                        [None], torch.zeros(bs, dtype=torch.long), self._device
                    )
                else:  # one value (with the value's own extra dimensions)
                    if isinstance(v, NonTensorData):
                        v = v._with(bs + v.batch_size[vnb:], self._device)
                    store[key] = v
                    continue
                store[key] = target
            if isinstance(target, TensorDict):
                target._write_at(idx, idx_bs, v)
            elif type(target) in UNBATCHED_TYPES:
                cast(_Tensor, target).copy_(v)  # shared by the whole batch: written whole
            elif isinstance(target, _Tensor):
                target[idx] = v
            elif type(target) in NON_TENSOR_TYPES:
                store[key] = write_non_tensor(target, idx, v, bs)
            else:
                target[idx] = v

    # ------------------------------------------------------------------ delete
    def del_(self, key: NestedKey) -> TensorDict:
        """Remove the entry at ``key`` and return the tensordict.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(()), "b": {"c": torch.zeros(())}})
        >>> list(td.del_(("b", "c")).keys(True))
        ['a', 'b']
        """
        key = _key_tuple(key)
        parent = self._get_tuple(key[:-1], NO_DEFAULT) if len(key) > 1 else self
        if not isinstance(parent, TensorDict):  # a lazy stack deletes from its members
            parent.del_(key[-1])
            return self
        if parent._is_locked:
            raise lock_error(unravel_key(key), "delete")
        if key[-1] not in parent._tensordict:
            raise missing_key(unravel_key(key), self)
        del parent._tensordict[key[-1]]
        return self

    def __delitem__(self, key: NestedKey) -> None:
        self.del_(key)

    def keys(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        *,
        sort: bool = False,
    ) -> TensorDictKeysView:
        """A live view of the keys.

        Args:
            include_nested: also yield the keys of nested tensordicts, as tuples.
            leaves_only: only yield keys of leaves: tensors by default, as the reference
                (non-tensor entries are not leaves unless ``is_leaf`` says so).
            is_leaf: a callable on the value's type deciding what is a leaf
                (:func:`~tensordict.is_leaf_nontensor` counts non-tensor entries too).
            sort: yield keys in sorted order.

        >>> import torch
        >>> from tensordict import TensorDict, is_leaf_nontensor
        >>> td = TensorDict({"b": torch.zeros(()), "a": {"c": torch.zeros(())}, "s": "text"})
        >>> list(td.keys(True, True, sort=True))
        [('a', 'c'), 'b']
        >>> list(td.keys(True, True, is_leaf=is_leaf_nontensor, sort=True))
        [('a', 'c'), 'b', 's']
        """
        if not (include_nested or leaves_only or is_leaf or sort):
            return FlatKeysView(self)
        return TensorDictKeysView(self, include_nested, leaves_only, is_leaf, sort)

    def items(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        *,
        sort: bool = False,
    ) -> Iterable[tuple[str | tuple[str, ...], Any]]:
        """Iterate over ``(key, value)`` pairs (see :meth:`keys` for the options); values
        are the stored entries (non-tensor data wrapped).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(1), "b": {"c": torch.ones(1)}}, [1])
        >>> [k for k, _ in td.items(include_nested=True, leaves_only=True)]
        ['a', ('b', 'c')]
        """
        if not (include_nested or leaves_only or sort):
            return self._tensordict.items()
        out: list[Any] = []
        if is_leaf is None:
            later = _collect_items(self._tensordict, (), include_nested, leaves_only, out)
        elif is_as_lists(is_leaf):
            out.extend(items_as_lists(self, include_nested, leaves_only, is_leaf))
            later = False
        else:
            later = collect(self, (), include_nested, leaves_only, is_leaf, ITEMS, out)
        if sort:
            out = list(expand_later(out)) if later else out
            out.sort(key=lambda item: _sort_key(item[0]))
            return out
        return expand_later(out) if later else out

    def values(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        *,
        sort: bool = False,
    ) -> Iterable[Any]:
        """Iterate over the stored values (see :meth:`keys` for the options).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(1), "b": torch.ones(1)}, [1])
        >>> [v.item() for v in td.values()]
        [0.0, 1.0]
        """
        if not (include_nested or leaves_only or sort):
            return self._tensordict.values()
        if sort:
            return (v for _, v in self.items(include_nested, leaves_only, is_leaf, sort=True))
        out: list[Any] = []
        if is_leaf is None:
            later = _collect_values(self._tensordict, include_nested, leaves_only, out)
        elif is_as_lists(is_leaf):
            out.extend(v for _, v in items_as_lists(self, include_nested, leaves_only, is_leaf))
            later = False
        else:
            later = collect(self, (), include_nested, leaves_only, is_leaf, VALUES, out)
        # the entries of a nested lazy stack are read when the iteration reaches them
        return expand_later(out) if later else out

    # ------------------------------------------------------------------ indexing
    def _index(self, index: Any) -> TensorDict:
        bs = self._batch_size
        if has_dim_index(index):
            out: TensorDict = index_first_class(self, index)
            return out
        idx = normalize_index(index, bs)
        return self._index_normalized(idx, index)

    def _index_normalized(self, idx: Any, raw: Any = None) -> TensorDict:
        bs = self._batch_size
        nb = len(bs)
        out: dict[str, Any] = {}
        new_bs: torch.Size | None = None
        pending = []
        for key, value in self._tensordict.items():
            if isinstance(value, _Tensor):
                if type(value) in UNBATCHED_TYPES:
                    pending.append(key)  # carried whole, with the new batch size
                    continue
                try:
                    result = value[idx]
                except IndexError as err:
                    raise IndexError(
                        f"cannot index entry {key!r} (shape {tuple(value.shape)}) of a tensordict "
                        f"with batch_size={tuple(bs)} by {raw if raw is not None else idx!r}: {err}"
                    ) from None
                if new_bs is None:
                    new_bs = result.shape[: result.ndim - (value.ndim - nb)]
                out[key] = result
            elif isinstance(value, NonTensorData):
                pending.append(key)
            else:
                nested = (
                    value._index_normalized(idx, raw)
                    if isinstance(value, TensorDict)
                    else value[idx]
                )
                if new_bs is None:
                    rbs = nested.batch_size
                    new_bs = rbs[: len(rbs) - (value.batch_dims - nb)]
                out[key] = nested
        if new_bs is None:
            new_bs = indexed_batch_size(idx, bs)
        for key in pending:
            out[key] = self._tensordict[key]._with(new_bs)
        names = index_names(idx, self._names, len(new_bs)) if self._names is not None else None
        if names is not None and all(n is None for n in names):
            names = None
        return self._new_unsafe(out, new_bs, self._device, names)

    # ------------------------------------------------------------------ tree map
    @property
    def is_locked(self) -> bool:
        """Whether the tensordict refuses new keys and deletions."""
        return self._is_locked

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        if value:
            self.lock_()
        else:
            self.unlock_()

    def lock_(self) -> TensorDict:
        """Lock the tensordict (and nested ones): keys can no longer be added or removed.

        Usable as a context manager that unlocks on exit.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(())}).lock_()
        >>> try:
        ...     td["b"] = torch.zeros(())
        ... except RuntimeError as err:
        ...     print("locked")
        locked
        >>> with td.unlock_():
        ...     td["b"] = torch.zeros(())
        >>> td.is_locked
        True
        """
        was_locked = self._is_locked
        _lock.lock(self)
        # (name, function, its argument), not a bound method: cheaper, and torch.compile
        # can rebuild it on a tensordict made in the compiled code. Already locked: the
        # context leaves it locked on exit.
        self._last_op = None if was_locked else ("lock_", TensorDict._undo_lock, self)
        return self

    def unlock_(self) -> TensorDict:
        """Unlock the tensordict (and nested ones); as a context manager, re-locks on exit.

        A tensordict nested in a locked one cannot be unlocked on its own (``RuntimeError``):
        unlock the root.
        """
        was_locked = self._is_locked
        _lock.unlock(self)
        self._last_op = ("unlock_", TensorDict._undo_unlock, self) if was_locked else None
        return self

    def _undo_lock(self) -> None:
        if not self._lock_parents:  # still held locked by a parent: stays locked
            _lock.unlock(self)

    def _undo_unlock(self) -> None:
        _lock.lock(self)

    # ------------------------------------------------------------------ batch size
    def auto_batch_size_(
        self, batch_dims: int | None = None, keep_compliant_size: bool = False
    ) -> TensorDict:
        """Set the batch size to the longest leading shape all entries share (at most
        ``batch_dims`` dimensions).

        Nested tensordicts get their own (longer) batch size first; with
        ``keep_compliant_size=True`` one that already has ``batch_dims`` batch dimensions
        or more keeps its batch size.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(3, 4, 5), "b": torch.zeros(3, 4)})
        >>> td.auto_batch_size_().batch_size
        torch.Size([3, 4])
        >>> td.auto_batch_size_(batch_dims=1).batch_size
        torch.Size([3])
        """
        common: list[int] | None = None
        for value in self._tensordict.values():
            if is_carried(value):
                continue
            if isinstance(value, TensorDict):
                if not (
                    keep_compliant_size
                    and batch_dims is not None
                    and len(value._batch_size) >= batch_dims
                ):
                    value.auto_batch_size_(batch_dims, keep_compliant_size)
                shape = list(value._batch_size)
            elif isinstance(value, TensorDictBase):
                shape = list(value.batch_size)
            else:
                shape = list(value.shape)
            if common is None:
                common = shape
            else:
                n = 0
                for a, b in zip(common, shape, strict=False):
                    if a != b:
                        break
                    n += 1
                common = common[:n]
        if common is None:
            common = list(self._batch_size)
        if batch_dims is not None:
            common = common[:batch_dims]
        self.batch_size = common
        return self

    # ------------------------------------------------------------------ device / memory


_kinds.bind(Dense=TensorDict)
