"""The ``TensorDict`` methods of :class:`~tensordict.memmap.PersistentTensorDict`.

Three families:

* writes that go to the HDF5 file: ``update``/``update_``, ``del_``/``clear``,
  ``rename_key_``, ``select``/``exclude`` with ``inplace=True``, indexed writes
  (``set_at_``, ``update_at_``, ``copy_at_``, through :meth:`PersistentOps._plan_at`),
  names and batch size (``rename_``, ``refine_names``, ``auto_batch_size_``), locking;
* results that are new tensordicts: ``select``/``exclude``/``empty`` read only what they
  keep; shape ops, ``flatten_keys``, ``to(dtype)``… read the content into memory
  (:meth:`to_tensordict`) and apply the :class:`~tensordict.TensorDict` method there;
* ``copy``/``to(device)``: another view of the same file (nothing read).

Every write is checked before anything reaches the file, so bad input leaves the file
unchanged.

>>> import tempfile, torch
>>> from tensordict import PersistentTensorDict, TensorDict
>>> with tempfile.TemporaryDirectory() as tmp:
...     data = TensorDict({"a": torch.zeros(3, 2), "b": torch.ones(3)}, [3])
...     h5 = PersistentTensorDict.from_dict(data, filename=tmp + "/d.h5")
...     _ = h5.add_(1).update({"c": torch.arange(3)})  # written to the file
...     print(sorted(h5.select("a", "c").keys()), h5.reshape(3, 1).batch_size, h5["a"].sum().item())
...     h5.close()
['a', 'c'] torch.Size([3, 1]) 6.0
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from tensordict import NonTensorData, NonTensorStack, TensorDict, is_leaf_nontensor
from tensordict._plugins.api import (
    InplaceWriteError,
    NestedKey,
    _check_at,
    is_tensorclass,
    lock_error,
    missing_key,
    unravel_key,
    with_entries,
)
from tensordict.base import NO_DEFAULT, TensorDictBase, _key_tuple

#: Where ``lock_``/``unlock_`` leave the previous lock state for a ``with`` block to restore.
LOCK_OP = "_lock_op"

#: ``TensorDict`` methods that PersistentTensorDict runs on its content read into memory:
#: shape ops (their result is a new tensordict, not a view of the file) and key layouts
IN_MEMORY = (
    "broadcast_to chunk consolidate expand expand_as flatten flatten_keys flip fliplr flipud movedim "
    "moveaxis narrow permute pin_memory rename repeat reshape split squeeze swapaxes "
    "swapdims tensor_split transpose unbind unflatten unflatten_keys unsqueeze view"
).split()


def _in_memory(name: str) -> Callable[..., Any]:
    method = getattr(TensorDict, name)

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.to_tensordict(), name)(*args, **kwargs)

    run.__doc__ = (
        f"``TensorDict.{name}`` of the content read into memory (:meth:`to_tensordict`); "
        "the result is an in-memory tensordict."
    )
    return run


#: in-place ``TensorDict`` ops that PersistentTensorDict runs on its content read into
#: memory, then writes back to the datasets
WRITE_BACK = (
    "abs_ acos_ add_ addcdiv_ addcmul_ apply_ asin_ atan_ ceil_ clamp_max_ clamp_min_ cos_ "
    "cosh_ div_ erf_ erfc_ exp_ expm1_ fill_ floor_ frac_ lerp_ lgamma_ log10_ log1p_ log2_ "
    "log_ masked_fill_ maximum_ minimum_ mul_ neg_ pow_ reciprocal_ round_ sigmoid_ sign_ sin_ "
    "sinh_ sqrt_ sub_ tan_ tanh_ trunc_ zero_"
).split()


def _write_back(name: str) -> Callable[..., Any]:
    method = getattr(TensorDict, name)

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._check_unlocked("*", "replace")
        content = self.to_tensordict()
        getattr(content, name)(*args, **kwargs)
        self.update_(content)
        return self

    run.__doc__ = (
        f"``TensorDict.{name}`` computed on the content read into memory, whose leaves are "
        "then written back to the datasets."
    )
    return run


def _paths(keys: Sequence[NestedKey]) -> list[tuple[str, ...]]:
    if len(keys) == 1 and isinstance(keys[0], list):
        keys = tuple(keys[0])
    return [_key_tuple(k) for k in keys]


class PersistentOps:
    """Mixin: the ``TensorDict`` methods of :class:`PersistentTensorDict` (see the module)."""

    # provided by PersistentTensorDict
    _batch_size: torch.Size
    _device: torch.device | None
    _is_locked: bool
    _names: list[str | None] | None
    _children: dict[str, Any]
    _group: Any
    file: Any
    batch_size: torch.Size
    names: list[str | None]
    keys: Callable[..., Any]
    _entries: Callable[[], Any]
    _get_str: Callable[..., Any]
    _get_tuple: Callable[..., Any]
    _set_str: Callable[..., Any]
    _set_tuple: Callable[..., Any]
    _name: Callable[[str], str]
    _meta: Callable[[], dict[str, Any]]
    _set_meta: Callable[..., None]
    _key_names: Callable[[], dict[str, str]]
    _shapes: Callable[[], list[tuple[int, ...]]]
    _writable: Callable[[], None]
    _shallow: Callable[..., Any]
    to_tensordict: Callable[..., TensorDict]

    # ------------------------------------------------------------------ locking
    @property
    def is_locked(self) -> bool:
        """Whether writes are refused (``lock_``/``unlock_``; settable)."""
        return self._is_locked

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        self._is_locked = bool(value)

    def lock_(self) -> Any:
        """Refuse writes through this object (the file itself is unchanged). In a ``with``
        statement (``with h5.lock_():``), the previous lock state comes back on exit."""
        self.__dict__[LOCK_OP] = self._is_locked
        self._is_locked = True
        return self

    def unlock_(self) -> Any:
        """Accept writes again (the file must be open for writing). In a ``with``
        statement (``with h5.unlock_():``), the previous lock state comes back on exit."""
        self.__dict__[LOCK_OP] = self._is_locked
        self._is_locked = False
        return self

    # ------------------------------------------------------------------ device and names
    @property
    def device(self) -> torch.device | None:
        """The device entries are moved to when read (settable; ``None``: where h5py puts
        them, the CPU)."""
        return self._device

    @device.setter
    def device(self, value: torch.device | str | None) -> None:
        self._device = None if value is None else torch.device(value)
        self._children.clear()

    def clear_device_(self) -> Any:
        """Forget the device: entries are read to the CPU."""
        self.device = None
        return self

    def auto_device_(self) -> Any:
        """Set the device to the one entries are read to (the CPU unless one is set)."""
        if self._device is None and any(kind == "dataset" for _, kind in self._entries()):
            self.device = torch.device("cpu")
        return self

    @property
    def names(self) -> list[str | None]:
        """Names of the batch dimensions (settable; stored in the file)."""
        names = self._names
        if not isinstance(names, list) or len(names) != len(self._batch_size):
            return [None] * len(self._batch_size)
        return list(names)

    @names.setter
    def names(self, value: Sequence[str | None] | None) -> None:
        probe = TensorDict(batch_size=self._batch_size)
        probe.names = value  # the in-memory rules check the value
        self._store_names(probe.names)

    def _store_names(self, names: Sequence[str | None]) -> None:
        stored = None if all(n is None for n in names) else list(names)
        self._writable()
        self._set_meta(names=stored)
        self._names = stored

    def _probe(self) -> TensorDict:
        """An empty in-memory tensordict with this batch size and names."""
        names = self._names if any(n is not None for n in self.names) else None
        return TensorDict(batch_size=self._batch_size, names=names)

    def rename_(self, *names: Any, **rename_map: str) -> Any:
        """Rename batch dimensions in place (stored in the file); see ``TensorDict.rename_``."""
        self._store_names(self._probe().rename_(*names, **rename_map).names)
        return self

    def refine_names(self, *names: Any) -> Any:
        """Name unnamed batch dimensions in place (``...`` skips some); see
        ``TensorDict.refine_names``."""
        self._store_names(self._probe().refine_names(*names).names)
        return self

    def auto_batch_size_(
        self, batch_dims: int | None = None, keep_compliant_size: bool = False
    ) -> Any:
        """Set the batch size to the leading dimensions all datasets share (at most
        ``batch_dims``); ``keep_compliant_size`` keeps the current one when it fits."""
        if keep_compliant_size and self._batch_size:
            return self
        shapes = self._shapes()
        common: list[int] | None = None
        for shape in shapes:
            common = list(shape) if common is None else _prefix(common, list(shape))
        new = (common or [])[:batch_dims] if batch_dims is not None else (common or [])
        self.batch_size = torch.Size(new)
        return self

    # ------------------------------------------------------------------ new tensordicts
    def copy(self) -> Any:
        """Another :class:`PersistentTensorDict` on the same file and group (no data read)."""
        return self._shallow()

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """``to(device)`` gives a view of the same file whose reads go to ``device``; any
        other conversion (dtype, ``other`` tensordict…) reads the content into memory."""
        device = _device_only(args, kwargs)
        if device is not None:
            return self._shallow(device=device)
        return self.to_tensordict().to(*args, **kwargs)

    def cpu(self, **kwargs: Any) -> Any:
        """A view of the same file whose reads go to the CPU."""
        return self.to("cpu", **kwargs)

    def cuda(self, device: Any = None, **kwargs: Any) -> Any:
        """A view of the same file whose reads go to a CUDA device."""
        if device is None:
            device = torch.device("cuda")
        elif isinstance(device, int):
            device = torch.device("cuda", device)
        return self.to(device, **kwargs)

    def empty(
        self,
        recurse: bool = False,
        *,
        batch_size: Sequence[int] | None = None,
        device: Any = NO_DEFAULT,
        names: Any = NO_DEFAULT,
    ) -> TensorDict:
        """An in-memory tensordict without entries (with ``recurse``, the nested groups as
        empty tensordicts); nothing is read."""
        out = TensorDict(
            batch_size=self._batch_size if batch_size is None else batch_size,
            device=self._device if device is NO_DEFAULT else device,
            names=(self._probe().names if batch_size is None else None)
            if names is NO_DEFAULT
            else names,
        )
        if recurse and batch_size is None:
            for key, kind in self._entries():
                if kind == "group":
                    out._set_str(
                        key,
                        self._get_str(key, NO_DEFAULT).empty(recurse=True),
                        inplace=False,
                        validated=True,
                    )
        return out

    def select(
        self,
        *keys: NestedKey,
        inplace: bool = False,
        strict: bool = True,
        as_tensordict: bool = False,
    ) -> Any:
        """The entries at ``keys``: read into a new in-memory tensordict, or, with
        ``inplace=True``, every other entry deleted from the file (``as_tensordict``: the
        result is a plain tensordict anyway)."""
        paths = _paths(keys)
        if not strict:
            paths = [p for p in paths if self._exists(p)]
        for path in paths:
            if not self._exists(path):
                raise missing_key(unravel_key(path), self)
        if inplace:
            drop = [k for k in self._leaf_paths() if not any(_under(k, p) for p in paths)]
            self._delete_all(drop, keep=paths)
            return self
        return self._read_where(
            keep=lambda path: any(_under(path, p) for p in paths),
            descend=lambda path: any(_below(p, path) for p in paths),
        )

    def exclude(self, *keys: NestedKey, inplace: bool = False) -> Any:
        """Everything but ``keys``: read into a new in-memory tensordict, or, with
        ``inplace=True``, the entries at ``keys`` deleted from the file."""
        paths = [p for p in _paths(keys) if self._exists(p)]
        if inplace:
            self._delete_all(paths)
            return self
        return self._read_where(
            keep=lambda path: not any(_under(path, p) for p in paths),
            descend=lambda path: any(_below(p, path) for p in paths),
        )

    def _read_where(
        self,
        keep: Callable[[tuple[str, ...]], bool],
        descend: Callable[[tuple[str, ...]], bool],
        prefix: tuple[str, ...] = (),
    ) -> TensorDict:
        """The entries whose path ``keep`` accepts, read into memory; the groups that
        ``descend`` accepts are walked into (they keep their batch sizes)."""
        out = self.empty()
        for key, kind in self._entries():
            path = (*prefix, key)
            value = None
            if kind == "group" and descend(path):
                value = self._get_str(key, NO_DEFAULT)._read_where(keep, descend, path)
            elif keep(path):
                value = self._get_str(key, NO_DEFAULT)
                if kind == "group":
                    value = value.to_tensordict()
            if value is not None:
                out._set_str(key, value, inplace=False, validated=True)
        return out

    def is_empty(self) -> bool:
        """Whether there is no leaf (groups without leaves count as empty); reads no data."""
        return not any(True for _ in self.keys(True, True, is_leaf=is_leaf_nontensor))

    def get_item_shape(self, key: NestedKey) -> torch.Size:
        """The shape of the entry at ``key`` (a group's batch size), read from the file's
        metadata."""
        path = _key_tuple(key)
        parent = self if len(path) == 1 else self._get_tuple(path[:-1], NO_DEFAULT)
        dataset = parent._dataset(path[-1]) if isinstance(parent, PersistentOps) else None
        if dataset is not None:
            return torch.Size(dataset.shape)
        value = self._get_tuple(path, NO_DEFAULT)
        return value.shape if isinstance(value, torch.Tensor) else value.batch_size

    def entry_class(self, key: NestedKey) -> type:
        """The class of the entry at ``key`` (``torch.Tensor`` for a dataset, read from
        the file's metadata)."""
        path = _key_tuple(key)
        parent = self if len(path) == 1 else self._get_tuple(path[:-1], NO_DEFAULT)
        dataset = parent._dataset(path[-1]) if isinstance(parent, PersistentOps) else None
        if dataset is not None and dataset.dtype.kind not in "SOU":
            return torch.Tensor
        return type(self._get_tuple(path, NO_DEFAULT))

    def _exists(self, path: tuple[str, ...]) -> bool:
        """Whether there is an entry at ``path`` (from the file's metadata; no data read)."""
        level: Any = self
        for part in path[:-1]:
            if not any(k == part and kind == "group" for k, kind in level._entries()):
                return False
            level = level._get_str(part, NO_DEFAULT)
        return any(k == path[-1] for k, _ in level._entries())

    def _dataset(self, key: str) -> Any:
        """The h5py dataset of ``key`` (None for a group, a non-tensor or a missing key)."""
        obj = self._group.get(self._name(key))
        return obj if obj is not None and hasattr(obj, "dtype") else None

    # ------------------------------------------------------------------ engine primitives
    def _skeleton(self) -> TensorDict:
        """The structure in memory, datasets as ``meta`` tensors of their shape and dtype
        (non-tensor values are read): what the engine's flat-list primitives walk."""
        out = TensorDict(batch_size=self._batch_size, device=self._device)
        for key, kind in self._entries():
            value: Any
            if kind == "group":
                value = self._get_str(key, NO_DEFAULT)._skeleton()
            elif kind == "dataset" and (dataset := self._dataset(key)).dtype.kind not in "SOU":
                dtype = torch.from_numpy(np.empty(0, dtype=dataset.dtype)).dtype
                value = torch.empty(dataset.shape, dtype=dtype, device="meta")
            else:
                value = self._get_str(key, NO_DEFAULT)
            out._set_str(key, value, inplace=False, validated=True)
        return out

    def _flat_tensors(self, out: list[Any]) -> list[Any]:
        return self.to_tensordict()._flat_tensors(out)

    def _rebuild(self, it: Any) -> Any:
        return self._skeleton()._rebuild(it)

    def _write_flat(self, it: Any) -> None:
        """In-place results are written to the datasets."""
        skeleton = self._skeleton()
        skeleton._write_flat(it)
        self.update_(skeleton)

    def _aligned_tensors(
        self, other: Any, default: Any, out: list[Any] | None = None, prefix: tuple[str, ...] = ()
    ) -> list[Any]:
        return self._skeleton()._aligned_tensors(other, default, out, prefix)

    def _map_tensors(
        self, fn: Callable[[torch.Tensor], torch.Tensor], device: Any = NO_DEFAULT
    ) -> Any:
        return self.to_tensordict()._map_tensors(fn, device)

    def _map_batch(
        self, fn: Callable[[Any], Any], batch_size: torch.Size, names: Any = None
    ) -> Any:
        return self.to_tensordict()._map_batch(fn, batch_size, names)

    def load_state_dict(
        self,
        state_dict: Mapping[str, Any],
        strict: bool = True,
        assign: bool = False,
        from_flatten: bool | None = None,
    ) -> Any:
        """Load a :meth:`state_dict` into the file: checked on the content read into memory
        (as ``TensorDict.load_state_dict``), then written."""
        content = self.to_tensordict()
        content.load_state_dict(state_dict, strict=strict, assign=assign, from_flatten=from_flatten)
        if content.batch_size != self._batch_size:
            self.clear()
            self.batch_size = content.batch_size
            self.update(content)
        else:
            self.update(content, inplace=not assign)
        return self

    # ------------------------------------------------------------------ writes
    def _check_unlocked(self, key: Any, what: str = "add") -> None:
        if self._is_locked:
            raise lock_error(key, what)
        self._writable()

    def update(
        self,
        input_dict_or_td: Any = None,
        clone: bool = False,
        inplace: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Sequence[NestedKey] | None = None,
        is_leaf: Callable[[type], bool] | None = None,
        update_batch_size: bool = False,
        ignore_lock: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Write the entries of a dict or tensordict to the file (nested ones merge into the
        groups). Every value is checked against the batch sizes before anything is written.
        """
        source = with_entries(input_dict_or_td, kwargs)
        if is_tensorclass(source):
            source = source._tensordict
        if keys_to_update is not None:
            source = _as_td(source, self._batch_size).select(*keys_to_update, strict=False)
        if self._is_locked and not ignore_lock:
            raise lock_error(next(iter(source.keys()), "?"))
        self._writable()
        if update_batch_size and isinstance(source, TensorDictBase):
            self._update_batch_size(source)
        _check_source(self, source, (), inplace)
        self._merge(source, clone, inplace)
        return self

    def _update_batch_size(self, source: TensorDictBase) -> None:
        new = source.batch_size
        for shape in (tuple(s) for s in self._shapes_here()):
            if shape[: len(new)] != tuple(new):
                raise RuntimeError(
                    f"update(update_batch_size=True): the batch size {list(new)} does not fit "
                    f"a dataset of shape {list(shape)} in {self.file.filename!r}."
                )
        self.batch_size = new

    def _shapes_here(self) -> list[tuple[int, ...]]:
        out = []
        for key, kind in self._entries():
            if kind == "dataset":
                out.append(tuple(self._group[self._name(key)].shape))
        return out

    def _merge(self, source: Any, clone: bool, inplace: bool) -> None:
        items = (
            source.items()
            if not isinstance(source, TensorDictBase)
            else ((k, source._get_str(k, NO_DEFAULT)) for k in source.keys())
        )
        for key, value in list(items):
            if isinstance(key, tuple):
                path = _key_tuple(key)
                parent = self if len(path) == 1 else self._nested(path[:-1])
                parent._merge({path[-1]: value}, clone, inplace)
                continue
            if is_tensorclass(value):
                value = value._tensordict
            current = self._get_str(key, None)
            if isinstance(value, (Mapping, TensorDictBase)) and isinstance(current, PersistentOps):
                current._merge(value, clone, inplace)
                continue
            if clone and isinstance(value, torch.Tensor):
                value = value.clone()
            self._set_str(key, value, inplace=inplace, validated=True)

    def _nested(self, path: tuple[str, ...]) -> Any:
        """The group at ``path``, created (with this batch size) where missing."""
        level: Any = self
        for part in path:
            sub = level._get_str(part, None)
            if sub is None:
                level._set_str(
                    part, TensorDict(batch_size=level.batch_size), inplace=False, validated=True
                )
                sub = level._get_str(part, NO_DEFAULT)
            elif not isinstance(sub, PersistentOps):
                raise KeyError(
                    f"{unravel_key(path)!r}: {part!r} is a {type(sub).__name__}, not a group"
                )
            level = sub
        return level

    def update_(
        self,
        input_dict_or_td: Any = None,
        clone: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Sequence[NestedKey] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Write every leaf of a dict or tensordict (or of the keyword entries) into the
        existing dataset of the same key, in place (all keys must exist and shapes match;
        checked before writing)."""
        return self.update_at_(
            with_entries(input_dict_or_td, kwargs),
            Ellipsis,
            clone,
            non_blocking=non_blocking,
            keys_to_update=keys_to_update,
        )

    def _plan_at(
        self,
        key: str,
        path: tuple[str, ...],
        value: Any,
        index: Any,
        plan: list[Callable[[], None]],
        non_blocking: bool,
    ) -> None:
        """Check an indexed in-place write of the entry ``key`` (``set_at_``,
        ``update_at_``, ``update_``…) and append the write to the file to ``plan``."""
        self._check_unlocked(unravel_key(path), "replace")
        name = self._name(key)
        target = self._group.get(name)
        if target is None and key in self._meta().get("non_tensor", {}):
            if index is Ellipsis:
                plan.append(lambda: self._set_str(key, value, inplace=False, validated=True))
                return
            current = self._get_str(key, NO_DEFAULT)
            updated = current.clone()
            updated[index] = value
            plan.append(lambda: self._set_str(key, updated, inplace=False, validated=True))
            return
        if target is None or not hasattr(target, "dtype"):
            raise KeyError(
                f"cannot write in place at {unravel_key(path)!r}: no such dataset in "
                f"{self.file.filename!r}{self._group.name}."
            )
        probe = torch.empty(target.shape, dtype=torch.uint8, device="meta")
        _check_at(path, probe, value, index)
        array = _as_array(value, target.dtype, key)
        plan.append(lambda: _write_rows(target, index, array))

    def del_(self, key: NestedKey) -> Any:
        """Delete the entry at ``key`` from the file."""
        path = _key_tuple(key)
        parent = self if len(path) == 1 else self._get_tuple(path[:-1], None)
        if not isinstance(parent, PersistentOps) or parent._get_str(path[-1], None) is None:
            raise missing_key(unravel_key(path), self)
        self._check_unlocked(unravel_key(path), "remove")
        parent._remove(path[-1])
        return self

    def __delitem__(self, key: NestedKey) -> None:
        self.del_(key)

    def _remove(self, key: str) -> None:
        name = self._name(key)
        if name in self._group:
            del self._group[name]
            self._children.pop(key, None)
            names = self._key_names()
            if name in names:
                del names[name]
                self._set_meta(keys=names)
        non_tensor = self._meta().get("non_tensor", {})
        if key in non_tensor:
            del non_tensor[key]
            self._set_meta(non_tensor=non_tensor)

    def clear(self) -> Any:
        """Delete every entry from the file (the batch size and names stay)."""
        self._check_unlocked("*", "remove")
        for key, _ in list(self._entries()):
            self._remove(key)
        return self

    def _leaf_paths(self) -> list[tuple[str, ...]]:
        return [_key_tuple(k) for k in self.keys(True, True, is_leaf=is_leaf_nontensor)]

    def _delete_all(
        self, paths: list[tuple[str, ...]], keep: list[tuple[str, ...]] | None = None
    ) -> None:
        if not paths:
            return
        self._check_unlocked(unravel_key(paths[0]), "remove")
        for path in paths:
            parent = self if len(path) == 1 else self._get_tuple(path[:-1], None)
            if isinstance(parent, PersistentOps) and parent._get_str(path[-1], None) is not None:
                parent._remove(path[-1])
        if keep is not None:  # select(inplace=True): groups left without any kept entry go
            for key, kind in list(self._entries()):
                if kind == "group" and not any(p[0] == key for p in keep):
                    self._remove(key)

    def rename_key_(self, old_key: NestedKey, new_key: NestedKey, safe: bool = False) -> Any:
        """Move the entry at ``old_key`` to ``new_key`` in the file (``safe``: refuse to
        overwrite an existing entry)."""
        old, new = _key_tuple(old_key), _key_tuple(new_key)
        value = self._get_tuple(old, None)
        if value is None:
            raise missing_key(unravel_key(old), self)
        if old == new:
            return self
        if safe and self._get_tuple(new, None) is not None:
            raise KeyError(
                f"rename_key_(safe=True): the key {unravel_key(new)!r} is already present in "
                f"TensorDict (file {self.file.filename!r})."
            )
        self._check_unlocked(unravel_key(new), "add")
        src = self if len(old) == 1 else self._get_tuple(old[:-1], NO_DEFAULT)
        dst = self if len(new) == 1 else self._nested(new[:-1])
        name = src._name(old[-1])
        if name in src._group:
            if dst._get_str(new[-1], None) is not None:
                dst._remove(new[-1])
            target = dst._name(new[-1])
            src._group.move(name, f"{dst._group.name.rstrip('/')}/{target}")
            src._remove_name(name)
            dst._children.pop(new[-1], None)
            src._children.pop(old[-1], None)
            if target != new[-1]:
                names = dst._key_names()
                names[target] = new[-1]
                dst._set_meta(keys=names)
        else:  # a non-tensor entry of the group's attribute
            dst._set_str(new[-1], value, inplace=False, validated=True)
            src._remove(old[-1])
        return self

    def _remove_name(self, name: str) -> None:
        names = self._key_names()
        if name in names:
            del names[name]
            self._set_meta(keys=names)

    # ------------------------------------------------------------------ unsupported in place
    def share_memory_(self) -> Any:
        """Not possible: the content lives in an HDF5 file (use :meth:`to_tensordict`)."""
        raise NotImplementedError(
            "share_memory_: a PersistentTensorDict reads its entries from an HDF5 file; call "
            "to_tensordict().share_memory_() or memmap() to share its content."
        )

    def pin_memory_(self, num_threads: int = 0) -> Any:
        """Not possible: the content lives in an HDF5 file (use :meth:`to_tensordict`)."""
        raise RuntimeError(
            "pin_memory_: a PersistentTensorDict reads its entries from an HDF5 file; call "
            "to_tensordict().pin_memory() instead."
        )


for _name in IN_MEMORY:
    setattr(PersistentOps, _name, _in_memory(_name))
for _name in WRITE_BACK:
    setattr(PersistentOps, _name, _write_back(_name))
del _name


def _prefix(a: list[int], b: list[int]) -> list[int]:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return a[:n]


def _under(path: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    return path[: len(prefix)] == prefix


def _below(path: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    """Whether ``path`` is strictly inside ``prefix``."""
    return len(path) > len(prefix) and path[: len(prefix)] == prefix


def _device_only(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.device | None:
    """The device of a ``to(device)`` call (``non_blocking`` aside), else None."""
    extra = set(kwargs) - {"device", "non_blocking"}
    if extra or len(args) > 1:
        return None
    target = args[0] if args else kwargs.get("device")
    if isinstance(target, (str, torch.device)) or (
        isinstance(target, int) and not isinstance(target, bool)
    ):
        try:
            return torch.device(target)
        except RuntimeError:
            return None
    return None


def _as_td(source: Any, batch_size: torch.Size) -> TensorDictBase:
    if isinstance(source, TensorDictBase):
        return source
    return TensorDict.from_dict(dict(source), batch_size=batch_size)


def _check_source(td: Any, source: Any, prefix: tuple[str, ...], inplace: bool = False) -> None:
    """Refuse (before any write) a tensor whose leading dimensions are not the batch size
    of the group it goes to (``inplace``: or that does not fit its existing dataset)."""
    batch = tuple(td.batch_size)
    items = (
        source.items()
        if not isinstance(source, TensorDictBase)
        else ((k, source._get_str(k, NO_DEFAULT)) for k in source.keys())
    )
    for key, value in items:
        path = (*prefix, *_key_tuple(key))
        if is_tensorclass(value):
            value = value._tensordict
        if isinstance(value, TensorDictBase):
            inner = tuple(value.batch_size)
            if inner[: len(batch)] != batch and not isinstance(key, tuple):
                raise RuntimeError(
                    f"update: the tensordict at {unravel_key(path)!r} has batch size "
                    f"{list(inner)}, which does not start with {list(batch)}; nothing was "
                    "written."
                )
            current = td._get_str(key, None) if inplace and isinstance(key, str) else None
            if isinstance(current, PersistentOps):  # merged into the group: check its entries
                _check_source(current, value, path, inplace)
            continue
        if isinstance(value, Mapping):
            current = td._get_str(key, None) if isinstance(key, str) else None
            _check_source(
                current if isinstance(current, PersistentOps) else td, value, path, inplace
            )
            continue
        if isinstance(value, (torch.Tensor, np.ndarray)) and not isinstance(key, tuple):
            shape = tuple(value.shape)
            if shape[: len(batch)] != batch:
                raise RuntimeError(
                    f"update: the value at {unravel_key(path)!r} has shape {list(shape)}, "
                    f"which does not start with the batch size {list(batch)}; nothing was "
                    "written."
                )
            existing = td._group.get(td._name(key)) if inplace else None
            if existing is not None and hasattr(existing, "dtype"):
                try:
                    fits = torch.broadcast_shapes(shape, existing.shape) == existing.shape
                except RuntimeError:
                    fits = False
                if not fits:
                    raise InplaceWriteError(
                        f"update(inplace=True): the value at {unravel_key(path)!r} has shape "
                        f"{list(shape)}, which does not fit the dataset of shape "
                        f"{list(existing.shape)}; nothing was written."
                    )


def _as_array(value: Any, dtype: Any, key: str) -> np.ndarray:
    if isinstance(value, NonTensorData | NonTensorStack):
        raise TypeError(f"cannot write the non-tensor value {value!r} into the dataset {key!r}")
    tensor = torch.as_tensor(value)
    tensor = tensor.detach().as_subclass(torch.Tensor).cpu()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return np.asarray(tensor.numpy(), dtype=dtype)


def _write_rows(dataset: Any, index: Any, array: np.ndarray) -> None:
    """``dataset[index] = array``; indices h5py cannot take (tensors, unsorted or
    repeated rows, masks) go through a read-modify-write of the dataset."""
    idx = index if isinstance(index, tuple) else (index,)
    simple = all(isinstance(i, int | slice) or i is Ellipsis for i in idx) and all(
        not isinstance(i, slice) or i.step is None or i.step > 0 for i in idx
    )
    if simple:
        dataset[index] = np.broadcast_to(array, dataset[index].shape) if array.ndim else array
        return
    full = torch.from_numpy(np.asarray(dataset[()]))
    full[index] = torch.from_numpy(np.ascontiguousarray(array))
    dataset[...] = full.numpy()
