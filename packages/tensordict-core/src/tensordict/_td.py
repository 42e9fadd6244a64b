"""``TensorDict``: the dense tensordict, a dict of tensors sharing leading batch dimensions.

Storage is a plain ``dict`` mapping string keys to tensors, nested tensordicts or
:class:`~tensordict.NonTensorData`. Every operation that maps over leaves goes through
:meth:`TensorDict._apply_nest` (user functions) or :meth:`TensorDict._map_batch`
(batch-shape operations, whose new batch size is known up front).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch

from tensordict._index import index_names, indexed_batch_size, normalize_index
from tensordict._keys import NestedKey, TensorDictKeysView, unravel_key
from tensordict._nontensor import NonTensorData
from tensordict._shape import parse_batch_size, parse_device
from tensordict._shape_ops import DenseShapeOps
from tensordict.base import NO_DEFAULT, TensorDictBase, _key_tuple

_Tensor = torch.Tensor
_Size = torch.Size
_NUMBER_TYPES = (bool, int, float, complex, np.ndarray, np.number, np.bool_)


def _lock_error(key: Any, what: str = "add") -> RuntimeError:
    return RuntimeError(
        f"Cannot {what} key {key!r}: the tensordict is locked. Unlock it with "
        "td.unlock_() (or `with td.unlock_(): ...`), or write existing entries in place "
        "with td.set_()."
    )


def _missing_key(key: Any, td: TensorDictBase) -> KeyError:
    return KeyError(
        f"key {key!r} not found in {type(td).__name__} with keys {sorted(map(str, td.keys()))}."
    )


class TensorDict(DenseShapeOps, TensorDictBase):
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
                source = {**source, **kwargs}
        dev = self._device
        nb = len(bs)
        for key, value in source.items():
            if type(key) is str and isinstance(value, _Tensor):
                if dev is not None and value.device != dev:
                    value = value.to(dev, non_blocking=bool(non_blocking))
                if value.shape[:nb] != bs:
                    raise self._shape_error(key, value)
                store[key] = value
            elif type(key) is str:
                store[key] = self._validate_value(key, value, bool(non_blocking))
            else:
                self._set_tuple(_key_tuple(key), value, inplace=False, validated=False)
        if names is not None:
            self.names = names
        if lock:
            self.lock_()

    @classmethod
    def _new_unsafe(
        cls,
        source: dict,
        batch_size: torch.Size,
        device: torch.device | None = None,
        names: list | None = None,
    ) -> TensorDict:
        """Build without validation (the caller guarantees shapes and devices)."""
        out = cls.__new__(cls)
        out._tensordict = source
        out._batch_size = batch_size
        out._device = device
        out._names = names
        out._is_locked = False
        return out

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
            if type(value) is NonTensorData:
                continue
            if value.shape[:nb] != new:
                raise RuntimeError(
                    f"cannot set batch_size={new}: entry {key!r} has shape {value.shape}, "
                    f"whose leading dimensions must equal the batch size."
                )
        for key, value in self._tensordict.items():
            if type(value) is NonTensorData:
                self._tensordict[key] = value._with(new)
        if self._names is not None and len(self._names) != nb:
            self._names = None
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
        devices = set()
        for value in self._tensordict.values():
            if isinstance(value, _Tensor):
                devices.add(value.device)
            elif isinstance(value, TensorDict):
                devices.add(value.auto_device_().device)
        self._device = devices.pop() if len(devices) == 1 else None
        return self

    @property
    def names(self) -> list:
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
            for sub in self._tensordict.values():
                if isinstance(sub, TensorDict) and sub._names is not None:
                    sub._set_names(None)
            return
        value = list(value)
        nb = len(self._batch_size)
        if len(value) != nb:
            raise ValueError(
                f"got {len(value)} names {value} for a tensordict with {nb} batch "
                f"dimension(s) (batch_size={self._batch_size})."
            )
        seen = [n for n in value if n is not None]
        if len(seen) != len(set(seen)):
            raise ValueError(f"dimension names must be unique, got {value}.")
        for n in seen:
            if not isinstance(n, str):
                raise TypeError(f"dimension names must be strings or None, got {n!r}.")
        self._names = value if seen else None
        for sub in self._tensordict.values():
            if isinstance(sub, TensorDict):
                sub._set_names(value + sub.names[nb:])

    def _has_names(self) -> bool:
        return self._names is not None

    def refine_names(self, *names: str | None) -> TensorDict:
        """Name the batch dimensions in place; ``...`` keeps the current names.

        Existing names cannot be changed (use :meth:`rename_`).

        >>> from tensordict import TensorDict
        >>> TensorDict(batch_size=[2, 3]).refine_names(..., "time").names
        [None, 'time']
        """
        names = list(names[0]) if len(names) == 1 and isinstance(names[0], (list, tuple)) else list(names)
        nb = len(self._batch_size)
        if Ellipsis in names:
            i = names.index(Ellipsis)
            fill = nb - (len(names) - 1)
            names[i : i + 1] = self.names[i : i + fill]
        if len(names) != nb:
            raise ValueError(f"refine_names got {len(names)} names for {nb} batch dimension(s).")
        current = self.names
        for old, new in zip(current, names):
            if old is not None and new != old:
                raise RuntimeError(
                    f"cannot refine dimension name {old!r} into {new!r}; use rename_()."
                )
        self._set_names(names)
        return self

    def rename(self, *names: str | None, **rename_map: str) -> TensorDict:
        """A shallow copy with renamed batch dimensions (positional or ``old=new``).

        >>> from tensordict import TensorDict
        >>> td = TensorDict(batch_size=[2], names=["a"])
        >>> td.rename(a="b").names, td.names
        (['b'], ['a'])
        """
        out = self.copy()
        out.rename_(*names, **rename_map)
        return out

    def rename_(self, *names: str | None, **rename_map: str) -> TensorDict:
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
        return RuntimeError(
            f"batch dimension mismatch for key {key!r}: the value has shape "
            f"{tuple(value.shape)} but its leading dimensions must equal the tensordict's "
            f"batch_size={tuple(self._batch_size)}."
        )

    def _validate_value(self, key: Any, value: Any, non_blocking: bool = False) -> Any:
        """Return ``value`` as it will be stored under ``key``, or raise a clear error."""
        bs = self._batch_size
        nb = len(bs)
        if isinstance(value, _Tensor):
            dev = self._device
            if dev is not None and value.device != dev:
                value = value.to(dev, non_blocking=non_blocking)
            if value.shape[:nb] != bs:
                raise self._shape_error(key, value)
            return value
        if isinstance(value, TensorDictBase):
            if value.batch_size[:nb] != bs:
                raise RuntimeError(
                    f"batch dimension mismatch for key {key!r}: the nested tensordict has "
                    f"batch_size={tuple(value.batch_size)} but it must start with the parent's "
                    f"batch_size={tuple(bs)}."
                )
            dev = self._device
            if dev is not None and value.device != dev:
                value = value.to(dev, non_blocking=non_blocking)
            if self._names is not None and isinstance(value, TensorDict):
                sub_names = value.names
                if any(n is not None for n in sub_names[:nb]) and sub_names[:nb] != self._names:
                    raise ValueError(
                        f"names of nested tensordict {key!r} ({sub_names[:nb]}) conflict with "
                        f"the parent's names {self._names}."
                    )
                value._set_names(list(self._names) + sub_names[nb:])
            if self._is_locked and not value._is_locked:
                value.lock_()
            return value
        if isinstance(value, dict):
            return TensorDict(value, batch_size=bs, device=self._device, names=self._names)
        if type(value) is NonTensorData:
            return value._with(bs, self._device)
        if isinstance(value, _NUMBER_TYPES):
            if isinstance(value, np.ndarray) and value.dtype.kind in "OUS":
                return NonTensorData._make(value, bs, self._device)
            tensor = torch.as_tensor(value, device=self._device)
            if tensor.shape[:nb] != bs:
                raise self._shape_error(key, tensor)
            return tensor
        return NonTensorData._make(value, bs, self._device)

    # ------------------------------------------------------------------ get
    def _get_str(self, key: str, default: Any) -> Any:
        value = self._tensordict.get(key, NO_DEFAULT)
        if value is NO_DEFAULT:
            if default is NO_DEFAULT:
                raise _missing_key(key, self)
            return default
        return value

    def _get_tuple(self, key: tuple, default: Any) -> Any:
        td = self
        for i, part in enumerate(key):
            store = getattr(td, "_tensordict", None)
            if store is None:
                if default is NO_DEFAULT:
                    raise KeyError(
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
                raise _missing_key(index, self) from None
            if type(value) is NonTensorData:
                return value.data
            return value
        if type(index) is tuple and index and isinstance(index[0], (str, tuple)):
            value = self._get_tuple(_key_tuple(index), NO_DEFAULT)
            if type(value) is NonTensorData:
                return value.data
            return value
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
                _write_inplace(key, current, value, non_blocking)
                return self
        if self._is_locked and not ignore_lock and key not in store:
            raise _lock_error(key)
        store[key] = value
        return self

    def _set_tuple(
        self,
        key: tuple,
        value: Any,
        *,
        inplace: bool,
        validated: bool,
        non_blocking: bool = False,
    ) -> TensorDict:
        if len(key) == 1:
            return self._set_str(key[0], value, inplace=inplace, validated=validated, non_blocking=non_blocking)
        sub = self._tensordict.get(key[0])
        if sub is None:
            if self._is_locked:
                raise _lock_error(key[0])
            sub = TensorDict._new_unsafe({}, self._batch_size, self._device, self._names and list(self._names))
            sub._set_tuple(key[1:], value, inplace=inplace, validated=validated, non_blocking=non_blocking)
            self._tensordict[key[0]] = sub
            return self
        if not isinstance(sub, TensorDictBase):
            raise KeyError(
                f"cannot write at {unravel_key(key)!r}: the entry at {key[0]!r} is a "
                f"{type(sub).__name__}, not a tensordict."
            )
        sub._set_tuple(key[1:], value, inplace=inplace, validated=validated, non_blocking=non_blocking)
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
        if type(index) is str:
            self._set_str(index, value, inplace=False, validated=False)
        elif type(index) is tuple and index and isinstance(index[0], (str, tuple)):
            self._set_tuple(_key_tuple(index), value, inplace=False, validated=False)
        else:
            self._set_at_index(index, value)

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
                    raise RuntimeError(
                        f"cannot write a tensordict of batch_size={tuple(value.batch_size)} at "
                        f"index {index!r}, which selects a batch of shape {tuple(idx_bs)}."
                    ) from None
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

    def _check_set_at(self, idx: Any, idx_bs: torch.Size, value: TensorDictBase, prefix: tuple) -> None:
        nb = len(self._batch_size)
        vnb = value.batch_dims
        for key, v in value.items():
            full = prefix + (key,)
            target = self._tensordict.get(key)
            if target is None:
                if self._is_locked:
                    raise _lock_error(unravel_key(full))
                continue
            if isinstance(target, TensorDictBase) != isinstance(v, TensorDictBase):
                raise RuntimeError(
                    f"cannot write a {type(v).__name__} into the {type(target).__name__} at "
                    f"key {unravel_key(full)!r}."
                )
            if isinstance(target, TensorDict):
                target._check_set_at(idx, idx_bs, v, full)
            elif isinstance(target, _Tensor):
                want = target.shape[nb:]
                got = v.shape[vnb:]
                try:
                    ok = torch.broadcast_shapes(got, want) == want
                except RuntimeError:
                    ok = False
                if not ok:
                    raise RuntimeError(
                        f"shape mismatch at key {unravel_key(full)!r}: cannot write a value with "
                        f"feature shape {tuple(got)} into an entry with feature shape "
                        f"{tuple(want)} (full shape {tuple(target.shape)})."
                    )

    def _write_at(self, idx: Any, idx_bs: torch.Size, value: TensorDictBase) -> None:
        bs = self._batch_size
        vnb = value.batch_dims
        store = self._tensordict
        for key, v in value.items():
            target = store.get(key)
            if target is None:
                if isinstance(v, TensorDictBase):
                    target = TensorDict._new_unsafe({}, bs + v.batch_size[vnb:], self._device)
                elif isinstance(v, _Tensor):
                    target = torch.zeros(
                        bs + v.shape[vnb:], dtype=v.dtype, device=self._device or v.device
                    )
                else:
                    store[key] = v._with(bs, self._device) if type(v) is NonTensorData else v
                    continue
                store[key] = target
            if isinstance(target, TensorDict):
                target._write_at(idx, idx_bs, v)
            elif isinstance(target, _Tensor):
                target[idx] = v
            elif type(target) is NonTensorData:
                if target.data != v.data:
                    if idx_bs == bs and idx_bs.numel() > 0:
                        store[key] = v._with(bs, self._device)
                    else:
                        raise NotImplementedError(
                            f"writing the non-tensor value {v.data!r} into part of the batch "
                            f"at key {key!r} (which holds {target.data!r}) needs a "
                            "NonTensorStack, which is not supported yet."
                        )
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
        if parent._is_locked:
            raise _lock_error(unravel_key(key), "delete")
        if key[-1] not in parent._tensordict:
            raise _missing_key(unravel_key(key), self)
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
            leaves_only: only yield keys of leaves (tensors and non-tensor values).
            is_leaf: a callable on the value's type deciding what is a leaf.
            sort: yield keys in sorted order.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"b": torch.zeros(()), "a": {"c": torch.zeros(())}})
        >>> list(td.keys(True, True, sort=True))
        [('a', 'c'), 'b']
        """
        return TensorDictKeysView(self, include_nested, leaves_only, is_leaf, sort)

    # ------------------------------------------------------------------ indexing
    def _index(self, index: Any) -> TensorDict:
        bs = self._batch_size
        idx = normalize_index(index, bs)
        return self._index_normalized(idx, index)

    def _index_normalized(self, idx: Any, raw: Any = None) -> TensorDict:
        bs = self._batch_size
        nb = len(bs)
        out = {}
        new_bs = None
        pending = []
        for key, value in self._tensordict.items():
            if isinstance(value, _Tensor):
                try:
                    result = value[idx]
                except IndexError as err:
                    raise IndexError(
                        f"cannot index entry {key!r} (shape {tuple(value.shape)}) of a tensordict "
                        f"with batch_size={tuple(bs)} by {raw if raw is not None else idx!r}: {err}"
                    ) from None
                if new_bs is None:
                    new_bs = result.shape[: result.ndim - (value.ndim - nb)]
            elif type(value) is NonTensorData:
                pending.append(key)
                continue
            else:
                result = value._index_normalized(idx, raw) if isinstance(value, TensorDict) else value[idx]
                if new_bs is None:
                    rbs = result.batch_size
                    new_bs = rbs[: len(rbs) - (value.batch_dims - nb)]
            out[key] = result
        if new_bs is None:
            new_bs = indexed_batch_size(idx, bs)
        for key in pending:
            out[key] = self._tensordict[key]._with(new_bs)
        names = index_names(idx, self._names, len(new_bs)) if self._names is not None else None
        if names is not None and all(n is None for n in names):
            names = None
        return TensorDict._new_unsafe(out, new_bs, self._device, names)

    # ------------------------------------------------------------------ tree map
    def _map_batch(self, fn: Callable[[Any], Any], batch_size: torch.Size, names: list | None = None) -> TensorDict:
        """Apply a batch-shape operation ``fn`` to every tensor and nested tensordict.

        ``fn`` receives tensors and nested tensordicts alike (both expose ``.shape``);
        non-tensor values only get the new ``batch_size``.
        """
        out = {}
        for key, value in self._tensordict.items():
            if type(value) is NonTensorData:
                out[key] = value._with(batch_size)
            else:
                out[key] = fn(value)
        if names is not None and all(n is None for n in names):
            names = None
        return TensorDict._new_unsafe(out, batch_size, self._device, names)

    def _map_tensors(self, fn: Callable[[_Tensor], _Tensor], device: Any = NO_DEFAULT) -> TensorDict:
        """Apply a shape-preserving ``fn`` to every tensor leaf (no validation)."""
        out = {}
        for key, value in self._tensordict.items():
            if isinstance(value, _Tensor):
                out[key] = fn(value)
            elif type(value) is NonTensorData:
                out[key] = value if device is NO_DEFAULT else value._with(value._batch_size, device)
            else:
                out[key] = value._map_tensors(fn, device)
        return TensorDict._new_unsafe(
            out, self._batch_size, self._device if device is NO_DEFAULT else device, self._names
        )

    def _flat_tensors(self, out: list) -> list:
        """Append every tensor leaf, depth first, to ``out`` (see :meth:`_rebuild`)."""
        for value in self._tensordict.values():
            if isinstance(value, _Tensor):
                out.append(value)
            elif isinstance(value, TensorDict):
                value._flat_tensors(out)
            elif isinstance(value, TensorDictBase):
                out.extend(value.values(True, True))
        return out

    def _rebuild(self, it: Any) -> TensorDict:
        """Inverse of :meth:`_flat_tensors`: same structure, tensors taken from ``it``."""
        out = {}
        for key, value in self._tensordict.items():
            if isinstance(value, _Tensor):
                out[key] = next(it)
            elif isinstance(value, TensorDict):
                out[key] = value._rebuild(it)
            else:
                out[key] = value
        return TensorDict._new_unsafe(out, self._batch_size, self._device, self._names)

    def _write_flat(self, it: Any) -> None:
        """Rebind every tensor leaf to the next tensor of ``it`` (in-place results)."""
        store = self._tensordict
        for key, value in store.items():
            if isinstance(value, _Tensor):
                store[key] = next(it)
            elif isinstance(value, TensorDict):
                value._write_flat(it)

    def _aligned_tensors(self, other: Any, default: Any, out: list | None = None, prefix: tuple = ()) -> list:
        """The entries of ``other`` matching :meth:`_flat_tensors` order, looked up by key."""
        if out is None:
            out = []
        store = getattr(other, "_tensordict", None)
        if store is None:
            if not isinstance(other, TensorDictBase):
                for value in self._flat_tensors([]):
                    out.append(other)
                return out
            store = {k: other._get_str(k, NO_DEFAULT) for k in other.keys()}
        if default is None and len(store) != len(self._tensordict):
            extra = sorted(map(str, set(store) - set(self._tensordict)))
            missing = sorted(map(str, set(self._tensordict) - set(store)))
            raise KeyError(
                f"the tensordicts have different keys{' at ' + repr(unravel_key(prefix)) if prefix else ''}: "
                f"missing from the other: {missing}; only in the other: {extra}."
            )
        for key, value in self._tensordict.items():
            if isinstance(value, _Tensor):
                o = store.get(key, NO_DEFAULT)
                if o is NO_DEFAULT:
                    if default is None:
                        raise KeyError(f"key {unravel_key(prefix + (key,))!r} is missing from the other tensordict.")
                    o = default
                out.append(o)
            elif isinstance(value, TensorDict):
                sub = store.get(key, NO_DEFAULT)
                if sub is NO_DEFAULT:
                    if default is None:
                        raise KeyError(f"key {unravel_key(prefix + (key,))!r} is missing from the other tensordict.")
                    sub = default
                value._aligned_tensors(sub, default, out, prefix + (key,))
        return out

    def _apply_nest(
        self,
        fn: Callable,
        *others: TensorDictBase,
        batch_size: Sequence[int] | None = None,
        device: Any = NO_DEFAULT,
        names: Any = NO_DEFAULT,
        inplace: bool = False,
        checked: bool = False,
        call_on_nested: bool = False,
        default: Any = NO_DEFAULT,
        named: bool = False,
        nested_keys: bool = False,
        prefix: tuple = (),
        filter_empty: bool | None = None,
        is_leaf: Callable | None = None,
        out: TensorDictBase | None = None,
    ) -> TensorDict | None:
        if inplace:
            result = self if out is None else out
        else:
            new_bs = self._batch_size if batch_size is None else parse_batch_size(batch_size)
            new_dev = self._device if device is NO_DEFAULT else parse_device(device)
            result = TensorDict._new_unsafe({}, new_bs, new_dev)
            if names is NO_DEFAULT:
                if batch_size is None or len(new_bs) == len(self._batch_size):
                    result._names = self._names
            elif names is not None:
                result._names = list(names)
        nb = len(self._batch_size)
        any_kept = False
        for key, value in self._tensordict.items():
            if others:
                vals = []
                for other in others:
                    v = other._get_str(key, default)
                    vals.append(v)
            else:
                vals = ()
            leaf = (is_leaf(type(value)) if is_leaf is not None else not isinstance(value, TensorDictBase))
            if type(value) is NonTensorData:
                if not inplace:
                    result._tensordict[key] = value._with(result._batch_size, result._device)
                    any_kept = True
                continue
            if leaf or call_on_nested:
                if named:
                    name = prefix + (key,) if nested_keys else key
                    if nested_keys and len(name) == 1:
                        name = name[0]
                    r = fn(name, value, *vals)
                else:
                    r = fn(value, *vals)
            else:
                sub_out = result._tensordict.get(key) if inplace else None
                r = value._apply_nest(
                    fn,
                    *vals,
                    batch_size=None if batch_size is None or inplace else list(result._batch_size) + list(value.batch_size[nb:]),
                    device=device,
                    names=NO_DEFAULT,
                    inplace=inplace,
                    checked=checked,
                    call_on_nested=call_on_nested,
                    default=default,
                    named=named,
                    nested_keys=nested_keys,
                    prefix=prefix + (key,),
                    filter_empty=filter_empty,
                    is_leaf=is_leaf,
                    out=sub_out,
                )
                if inplace:
                    continue
                if r is None or (filter_empty and r.is_empty()):
                    continue
            if r is None:
                continue
            any_kept = True
            if inplace:
                current = result._tensordict.get(key)
                if r is not current:
                    if current is None:
                        result._set_str(key, r, inplace=False, validated=False)
                    else:
                        _write_inplace(key, current, r, False)
            elif checked:
                result._tensordict[key] = r
            elif isinstance(r, _Tensor):
                rbs = result._batch_size
                if r.shape[: len(rbs)] != rbs:
                    raise RuntimeError(
                        f"apply: the function returned a tensor of shape {tuple(r.shape)} for key "
                        f"{unravel_key(prefix + (key,))!r}, whose leading dimensions do not match "
                        f"the result's batch_size={tuple(rbs)}; pass batch_size= to apply()."
                    )
                if result._device is not None and r.device != result._device:
                    if device is NO_DEFAULT:
                        result._device = None
                    else:
                        r = r.to(result._device)
                result._tensordict[key] = r
            else:
                result._set_str(key, r, inplace=False, validated=False)
        if inplace:
            return self if out is None else out
        if filter_empty and not any_kept and prefix:
            return None
        return result

    def apply(self, fn: Callable, *others: TensorDictBase, batch_size: Sequence[int] | None = None, device: Any = NO_DEFAULT, names: Any = NO_DEFAULT, inplace: bool = False, default: Any = NO_DEFAULT, filter_empty: bool | None = None, call_on_nested: bool = False, out: TensorDictBase | None = None, **constructor_kwargs: Any) -> TensorDict | None:
        """Apply ``fn`` to every leaf (and the matching leaves of ``others``).

        Entries for which ``fn`` returns ``None`` are dropped. ``batch_size``/``names``
        describe the result when ``fn`` changes the batch shape; ``default`` fills keys
        missing from ``others``; ``call_on_nested`` passes nested tensordicts to ``fn``
        instead of recursing.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.ones(2), "b": torch.ones(2, dtype=torch.int64)}, [2])
        >>> td.apply(lambda x: x * 2)["a"]
        tensor([2., 2.])
        >>> list(td.apply(lambda x: x if x.is_floating_point() else None).keys())
        ['a']
        >>> td.apply(lambda x, y: x + y, td)["b"]
        tensor([2, 2])
        """
        if constructor_kwargs:
            raise TypeError(f"apply() got unexpected keyword arguments {sorted(constructor_kwargs)}.")
        return self._apply_nest(fn, *others, batch_size=batch_size, device=device, names=names, inplace=inplace, default=default, filter_empty=filter_empty, call_on_nested=call_on_nested, out=out)

    def apply_(self, fn: Callable, *others: TensorDictBase, **kwargs: Any) -> TensorDict:
        """Apply ``fn`` to every leaf and write the results in place.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> a = torch.ones(2)
        >>> _ = TensorDict({"a": a}, [2]).apply_(lambda x: x * 3)
        >>> a
        tensor([3., 3.])
        """
        return self._apply_nest(fn, *others, inplace=True, **kwargs)

    def named_apply(self, fn: Callable, *others: TensorDictBase, nested_keys: bool = False, batch_size: Sequence[int] | None = None, device: Any = NO_DEFAULT, names: Any = NO_DEFAULT, inplace: bool = False, default: Any = NO_DEFAULT, filter_empty: bool | None = None, call_on_nested: bool = False, out: TensorDictBase | None = None, prefix: tuple = ()) -> TensorDict | None:
        """Like :meth:`apply`, but ``fn(key, value, *other_values)`` also gets the key.

        With ``nested_keys=True`` the key is the full nested key.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(()), "b": {"c": torch.zeros(())}})
        >>> out = td.named_apply(lambda k, v: v + len(k), nested_keys=True)
        >>> out["a"], out["b", "c"]
        (tensor(1.), tensor(2.))
        """
        return self._apply_nest(fn, *others, named=True, nested_keys=nested_keys, batch_size=batch_size, device=device, names=names, inplace=inplace, default=default, filter_empty=filter_empty, call_on_nested=call_on_nested, out=out, prefix=prefix)

    # ------------------------------------------------------------------ dict-like ops
    def update(self, input_dict_or_td: Any, clone: bool = False, inplace: bool = False, *, non_blocking: bool = False, keys_to_update: Sequence[NestedKey] | None = None, is_leaf: Callable | None = None, update_batch_size: bool = False, ignore_lock: bool = False) -> TensorDict:
        """Write every entry of a dict or tensordict into this one; nested ones merge.

        All values are validated before anything is written, so a bad value leaves the
        tensordict unchanged.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": {"b": torch.zeros(2)}}, [2])
        >>> _ = td.update({"a": {"c": torch.ones(2)}, "d": torch.ones(2)})
        >>> sorted(td.keys(True, True))
        [('a', 'b'), ('a', 'c'), 'd']
        """
        if update_batch_size and isinstance(input_dict_or_td, TensorDictBase):
            self.batch_size = input_dict_or_td.batch_size
        wanted = None if keys_to_update is None else {_key_tuple(k) for k in keys_to_update}
        plan: list = []
        self._plan_update(input_dict_or_td, clone, wanted, (), plan, ignore_lock)
        for target, key, value in plan:
            if inplace and key in target._tensordict:
                _write_inplace(key, target._tensordict[key], value, non_blocking)
            else:
                target._tensordict[key] = value
        return self

    def _plan_update(self, source: Any, clone: bool, wanted: set | None, prefix: tuple, plan: list, ignore_lock: bool) -> None:
        items = source.items() if isinstance(source, TensorDictBase) else source.items()
        for key, value in items:
            path = prefix + _key_tuple(key)
            if wanted is not None and not any(w[: len(path)] == path or path[: len(w)] == w for w in wanted):
                continue
            target = self
            for part in path[len(prefix) : -1]:
                sub = target._tensordict.get(part)
                if sub is None:
                    sub = TensorDict._new_unsafe({}, target._batch_size, target._device, target._names)
                    plan.append((target, part, sub))
                    target._validate_value(part, sub)
                target = sub
            last = path[-1]
            current = target._tensordict.get(last)
            if isinstance(value, (dict, TensorDictBase)) and not (type(value) is NonTensorData) and isinstance(current, TensorDict):
                current._plan_update(value, clone, wanted, path, plan, ignore_lock)
                continue
            if clone and isinstance(value, (_Tensor, TensorDictBase)):
                value = value.clone()
            if target._is_locked and not ignore_lock and current is None:
                raise _lock_error(unravel_key(path))
            plan.append((target, last, target._validate_value(unravel_key(path), value)))

    def update_(self, input_dict_or_td: Any, clone: bool = False, *, non_blocking: bool = False, keys_to_update: Sequence[NestedKey] | None = None) -> TensorDict:
        """Copy every entry of ``input_dict_or_td`` in place into existing entries.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> a = torch.zeros(2)
        >>> _ = TensorDict({"a": a}, [2]).update_({"a": torch.ones(2)})
        >>> a
        tensor([1., 1.])
        """
        source = input_dict_or_td
        keys = source.keys(True, True) if isinstance(source, TensorDictBase) else _dict_leaf_keys(source)
        wanted = None if keys_to_update is None else {_key_tuple(k) for k in keys_to_update}
        pairs = []
        for key in keys:
            path = _key_tuple(key)
            if wanted is not None and path not in wanted:
                continue
            target = self._get_tuple(path, None)
            if target is None:
                raise KeyError(
                    f"update_() writes in place, but key {unravel_key(path)!r} is not in the "
                    f"tensordict (keys: {sorted(map(str, self.keys(True, True)))})."
                )
            value = source[key] if isinstance(source, TensorDictBase) else _dict_get(source, path)
            pairs.append((path, target, value))
        for path, target, value in pairs:
            if isinstance(target, _Tensor):
                value = torch.as_tensor(value) if not isinstance(value, _Tensor) else value
                try:
                    torch.broadcast_shapes(value.shape, target.shape)
                except RuntimeError:
                    raise RuntimeError(
                        f"update_(): value for {unravel_key(path)!r} has shape {tuple(value.shape)}, "
                        f"which cannot be written into the entry of shape {tuple(target.shape)}."
                    ) from None
        for path, target, value in pairs:
            if clone and isinstance(value, _Tensor):
                value = value.clone()
            _write_inplace(unravel_key(path), target, value, non_blocking)
        return self

    def select(self, *keys: NestedKey, inplace: bool = False, strict: bool = True) -> TensorDict:
        """A tensordict with only ``keys`` (entries are shared, not copied).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(()), "b": {"c": torch.zeros(()), "d": torch.zeros(())}})
        >>> list(td.select("a", ("b", "c")).keys(True))
        ['a', 'b', ('b', 'c')]
        """
        if len(keys) == 1 and isinstance(keys[0], list):
            keys = tuple(keys[0])
        tree: dict = {}
        for key in keys:
            path = _key_tuple(key)
            node = tree
            for part in path[:-1]:
                node = node.setdefault(part, {})
                if node is True:
                    break
            else:
                node[path[-1]] = True
        out = self._select_tree(tree, strict)
        if inplace:
            if self._is_locked:
                raise _lock_error(keys, "remove keys other than")
            self._tensordict = out._tensordict
            return self
        return out

    def _select_tree(self, tree: dict, strict: bool) -> TensorDict:
        out = {}
        for key, sub in tree.items():
            value = self._tensordict.get(key)
            if value is None:
                if strict:
                    raise _missing_key(key, self)
                continue
            if sub is True:
                out[key] = value
            elif isinstance(value, TensorDict):
                out[key] = value._select_tree(sub, strict)
            elif strict:
                raise KeyError(f"cannot select inside {key!r}: it is a {type(value).__name__}, not a tensordict.")
        return TensorDict._new_unsafe(out, self._batch_size, self._device, self._names)

    def exclude(self, *keys: NestedKey, inplace: bool = False) -> TensorDict:
        """A tensordict without ``keys`` (missing keys are ignored; entries are shared).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(()), "b": {"c": torch.zeros(())}})
        >>> list(td.exclude(("b", "c")).keys(True))
        ['a', 'b']
        """
        if len(keys) == 1 and isinstance(keys[0], list):
            keys = tuple(keys[0])
        if inplace and self._is_locked:
            raise _lock_error(keys, "delete")
        out = self if inplace else self.copy()
        for key in keys:
            path = _key_tuple(key)
            parent = out._get_tuple(path[:-1], None) if len(path) > 1 else out
            if isinstance(parent, TensorDict):
                parent._tensordict.pop(path[-1], None)
        return out

    def rename_key_(self, old_key: NestedKey, new_key: NestedKey, safe: bool = False) -> TensorDict:
        """Move the entry at ``old_key`` to ``new_key``; ``safe=True`` refuses to overwrite.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> list(TensorDict({"a": torch.zeros(())}).rename_key_("a", ("b", "c")).keys(True))
        ['b', ('b', 'c')]
        """
        old, new = _key_tuple(old_key), _key_tuple(new_key)
        if self._is_locked:
            raise _lock_error(unravel_key(old), "rename")
        value = self._get_tuple(old, NO_DEFAULT)
        if safe and self._get_tuple(new, None) is not None:
            raise KeyError(f"rename_key_(safe=True): key {unravel_key(new)!r} already exists.")
        self._set_tuple(new, value, inplace=False, validated=True)
        if old != new:
            self.del_(old)
        return self

    def flatten_keys(self, separator: str = ".", inplace: bool = False, is_leaf: Callable | None = None) -> TensorDict:
        """Turn nested keys into flat ``"a.b"`` keys.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> list(TensorDict({"a": {"b": torch.zeros(())}}).flatten_keys().keys())
        ['a.b']
        """
        out: dict = {}
        self._flatten_into(out, "", separator, is_leaf)
        if inplace:
            if self._is_locked:
                raise _lock_error(list(out), "flatten keys of")
            self._tensordict = out
            return self
        return TensorDict._new_unsafe(out, self._batch_size, self._device, self._names)

    def _flatten_into(self, out: dict, prefix: str, separator: str, is_leaf: Callable | None) -> None:
        for key, value in self._tensordict.items():
            name = prefix + key
            leaf = is_leaf(type(value)) if is_leaf is not None else not isinstance(value, TensorDict)
            if leaf or value.is_empty():
                if name in out:
                    raise KeyError(f"flatten_keys: flattened key {name!r} already exists.")
                out[name] = value
            else:
                value._flatten_into(out, name + separator, separator, is_leaf)

    def unflatten_keys(self, separator: str = ".", inplace: bool = False) -> TensorDict:
        """Turn flat ``"a.b"`` keys back into nested ones.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> list(TensorDict({"a.b": torch.zeros(())}).unflatten_keys().keys(True))
        ['a', ('a', 'b')]
        """
        out = TensorDict._new_unsafe({}, self._batch_size, self._device, self._names)
        for key, value in self._tensordict.items():
            if isinstance(value, TensorDict):
                value = value.unflatten_keys(separator)
            path = tuple(key.split(separator))
            existing = out._get_tuple(path, None)
            if isinstance(existing, TensorDict) and isinstance(value, TensorDict):
                existing.update(value)
            else:
                out._set_tuple(path, value, inplace=False, validated=True)
        if inplace:
            if self._is_locked:
                raise _lock_error(list(self._tensordict), "unflatten keys of")
            self._tensordict = out._tensordict
            return self
        return out

    def clear(self) -> TensorDict:
        """Remove every entry.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(())}).clear().is_empty()
        True
        """
        if self._is_locked:
            raise _lock_error(list(self._tensordict), "delete")
        self._tensordict.clear()
        return self

    def copy(self) -> TensorDict:
        """A shallow copy: new (nested) containers, the same tensors.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(())})
        >>> td.copy()["a"] is td["a"]
        True
        """
        return self.clone(recurse=False)

    def clone(self, recurse: bool = True, **kwargs: Any) -> TensorDict:
        """A copy; with ``recurse=False`` the tensors are shared (see :meth:`copy`).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(())})
        >>> td.clone()["a"] is td["a"]
        False
        """
        if recurse:
            return self._map_tensors(torch.clone)
        out = {}
        for key, value in self._tensordict.items():
            out[key] = value.clone(recurse=False) if isinstance(value, TensorDictBase) else value
        return TensorDict._new_unsafe(out, self._batch_size, self._device, self._names and list(self._names))

    def empty(self, recurse: bool = False, *, batch_size: Sequence[int] | None = None, device: Any = NO_DEFAULT, names: Any = None) -> TensorDict:
        """A tensordict with the same metadata and no entries (``recurse`` keeps nested ones).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.zeros(2)}}, [2])
        >>> list(td.empty(recurse=True).keys(True))
        ['b']
        """
        bs = self._batch_size if batch_size is None else parse_batch_size(batch_size)
        dev = self._device if device is NO_DEFAULT else parse_device(device)
        out = {}
        if recurse:
            for key, value in self._tensordict.items():
                if isinstance(value, TensorDict):
                    out[key] = value.empty(recurse=True, batch_size=bs + value._batch_size[len(self._batch_size):] if batch_size is not None else None, device=device)
        keep_names = names if names is not None else (self._names if len(bs) == len(self._batch_size) else None)
        return TensorDict._new_unsafe(out, bs, dev, keep_names and list(keep_names))

    def is_empty(self) -> bool:
        """Whether there is no leaf (nested tensordicts without leaves count as empty).

        >>> from tensordict import TensorDict
        >>> TensorDict({"a": {}}).is_empty()
        True
        """
        for value in self._tensordict.values():
            if not isinstance(value, TensorDictBase) or not value.is_empty():
                return False
        return True

    # ------------------------------------------------------------------ lock
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
        self._propagate_lock(True)
        self._last_op = ("lock_", self._undo_lock)
        return self

    def unlock_(self) -> TensorDict:
        """Unlock the tensordict (and nested ones); as a context manager, re-locks on exit."""
        self._propagate_lock(False)
        self._last_op = ("unlock_", self._undo_unlock)
        return self

    def _undo_lock(self) -> None:
        self._propagate_lock(False)

    def _undo_unlock(self) -> None:
        self._propagate_lock(True)

    def _propagate_lock(self, locked: bool) -> None:
        self._is_locked = locked
        for value in self._tensordict.values():
            if isinstance(value, TensorDict):
                value._propagate_lock(locked)
            elif isinstance(value, TensorDictBase):
                value.lock_() if locked else value.unlock_()

    # ------------------------------------------------------------------ batch size
    def auto_batch_size_(self, batch_dims: int | None = None) -> TensorDict:
        """Set the batch size to the longest leading shape all entries share.

        Nested tensordicts get their own (longer) batch size first.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(3, 4, 5), "b": torch.zeros(3, 4)})
        >>> td.auto_batch_size_().batch_size
        torch.Size([3, 4])
        >>> td.auto_batch_size_(batch_dims=1).batch_size
        torch.Size([3])
        """
        common: list | None = None
        for value in self._tensordict.values():
            if type(value) is NonTensorData:
                continue
            if isinstance(value, TensorDict):
                value.auto_batch_size_(batch_dims)
                shape = list(value._batch_size)
            elif isinstance(value, TensorDictBase):
                shape = list(value.batch_size)
            else:
                shape = list(value.shape)
            if common is None:
                common = shape
            else:
                n = 0
                for a, b in zip(common, shape):
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
    def to(self, *args: Any, **kwargs: Any) -> TensorDict:
        """Move and/or cast every leaf, like :meth:`torch.Tensor.to`.

        Accepts a device, a dtype, a tensor or a tensordict (whose device is used), and
        ``non_blocking``/``batch_size`` keywords. Returns ``self`` when nothing changes.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2)}, [2])
        >>> td.to(torch.float64)["a"].dtype, td.to("cpu").device
        (torch.float64, device(type='cpu'))
        """
        batch_size = kwargs.pop("batch_size", None)
        non_blocking = kwargs.pop("non_blocking", False)
        if args and isinstance(args[0], TensorDictBase):
            device, dtype = args[0].device, None
            args = args[1:]
            if args or kwargs:
                raise TypeError("to(other_tensordict) takes no further arguments.")
        else:
            device, dtype, nb, _ = torch._C._nn._parse_to(*args, **kwargs)
            non_blocking = non_blocking or nb
        result = self
        if dtype is not None:
            result = result._map_tensors(lambda x: x.to(dtype=dtype, non_blocking=non_blocking))
        if device is not None:
            device = parse_device(device)
            if device != result._device or any(
                v.device != device for v in result._flat_tensors([])
            ):
                result = result._map_tensors(lambda x: x.to(device, non_blocking=non_blocking), device=device)
            if result is self:
                result = self
        if batch_size is not None:
            if result is self:
                result = self.copy()
            result.batch_size = batch_size
        return result

    def cpu(self, **kwargs: Any) -> TensorDict:
        """Move every leaf to the CPU."""
        return self.to("cpu", **kwargs)

    def cuda(self, device: int | torch.device | None = None, **kwargs: Any) -> TensorDict:
        """Move every leaf to a CUDA device."""
        if device is None:
            device = "cuda"
        elif isinstance(device, int):
            device = torch.device("cuda", device)
        return self.to(device, **kwargs)

    def share_memory_(self) -> TensorDict:
        """Move every leaf to shared memory (for inter-process use); locks the tensordict.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(2)}, [2]).share_memory_().is_shared()
        True
        """
        for value in self._flat_tensors([]):
            value.share_memory_()
        self.lock_()
        self._last_op = None
        return self

    def is_shared(self) -> bool:
        """Whether every tensor leaf is in shared memory (or on CUDA).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(2)}, [2]).is_shared()
        False
        """
        leaves = self._flat_tensors([])
        return bool(leaves) and all(v.is_shared() or v.is_cuda for v in leaves)

    def pin_memory(self, num_threads: int | None = None, inplace: bool = False) -> TensorDict:
        """Pin every leaf in page-locked memory (needs a CUDA-enabled PyTorch)."""
        out = self._map_tensors(lambda x: x.pin_memory())
        if inplace:
            self._tensordict = out._tensordict
            return self
        return out

    def pin_memory_(self, num_threads: int | None = None) -> TensorDict:
        """In-place :meth:`pin_memory`."""
        return self.pin_memory(num_threads, inplace=True)


def _write_inplace(key: Any, current: Any, value: Any, non_blocking: bool) -> None:
    """Copy ``value`` into the stored ``current`` entry, keeping its storage."""
    if isinstance(current, _Tensor):
        if not isinstance(value, _Tensor):
            value = torch.as_tensor(value)
        try:
            current.copy_(value, non_blocking=non_blocking)
        except RuntimeError as err:
            raise RuntimeError(
                f"cannot write a value of shape {tuple(value.shape)} in place into entry {key!r} "
                f"of shape {tuple(current.shape)}: {err}"
            ) from None
    elif isinstance(current, TensorDictBase) and type(current) is not NonTensorData:
        current.update_(value, non_blocking=non_blocking)
    elif type(current) is NonTensorData:
        current.data = value.data if type(value) is NonTensorData else value
    else:  # pragma: no cover - defensive
        raise TypeError(f"cannot write in place into {type(current).__name__} at {key!r}.")


def _dict_leaf_keys(source: dict, prefix: tuple = ()) -> list:
    keys = []
    for key, value in source.items():
        path = prefix + _key_tuple(key)
        if isinstance(value, dict):
            keys.extend(_dict_leaf_keys(value, path))
        else:
            keys.append(path)
    return keys


def _dict_get(source: dict, path: tuple) -> Any:
    for part in path:
        source = source[part]
    return source
