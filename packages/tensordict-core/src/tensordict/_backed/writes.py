"""The writes every storage-backed tensordict shares: ``update``/``update_``,
``load_state_dict``, ``del_``/``clear``, ``select``/``exclude(inplace=True)``'s removals
and ``rename_key_``, in terms of the backend's primitives (``_set_str``, ``_remove``,
``_move``; see :mod:`tensordict._backed.base`). Every value is checked before anything
reaches the backend, so bad input leaves it unchanged; while locked, writes into
existing entries pass and adding, replacing or removing one raises, as for a locked
``TensorDict``.

>>> import tempfile, torch
>>> from tensordict import PersistentTensorDict, TensorDict
>>> with tempfile.TemporaryDirectory() as tmp:
...     h5 = PersistentTensorDict.from_dict(TensorDict(a=torch.zeros(3), batch_size=[3]),
...                                         filename=tmp + "/d.h5")
...     _ = h5.update({"n": {"b": torch.ones(3)}}).rename_key_(("n", "b"), "c")
...     print(sorted(h5.keys(True, True)), h5["c"].sum().item())
...     h5.close()
['a', 'c'] 3.0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from tensordict._dense.dict_ops import with_entries
from tensordict._dense.td import TensorDict
from tensordict._keys.nested import NestedKey, unravel_key
from tensordict._kinds.kinds import is_leaf_nontensor, is_tensorclass
from tensordict._util.errors import InplaceWriteError, lock_error, missing_key
from tensordict.base import NO_DEFAULT, TensorDictBase, _key_tuple

_Path = tuple[str, ...]


class BackedWrites:
    """Mixin of :class:`~tensordict._backed.base.BackedTensorDict`: its shared writes."""

    def load_state_dict(
        self: Any,
        state_dict: Mapping[str, Any],
        strict: bool = True,
        assign: bool = False,
        from_flatten: bool | None = None,
    ) -> Any:
        """Load a :meth:`state_dict`: checked on the content read into memory (as
        ``TensorDict.load_state_dict``), then written."""
        content = self.to_tensordict()
        content.load_state_dict(state_dict, strict=strict, assign=assign, from_flatten=from_flatten)
        if content.batch_size != self._batch_size:
            self.clear()
            self.batch_size = content.batch_size
            self.update(content)
        else:
            self.update(content, inplace=not assign)
        return self

    def update(
        self: Any,
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
        """Write the entries of a dict or tensordict (nested ones merge into the groups).
        Every value is checked against the batch sizes before anything is written."""
        source = with_entries(input_dict_or_td, kwargs)
        if is_tensorclass(source):
            source = source._tensordict
        if keys_to_update is not None:
            source = _as_td(source, self._batch_size).select(*keys_to_update, strict=False)
        if self._is_locked and not ignore_lock and not inplace:
            raise lock_error(next(iter(source.keys()), "?"), "add")
        self._writable()
        if update_batch_size and isinstance(source, TensorDictBase):
            self._update_batch_size(source)
        _check_source(self, source, (), inplace)
        self._merge(source, clone, inplace)
        return self

    def _update_batch_size(self: Any, source: TensorDictBase) -> None:
        new = source.batch_size
        for key, kind in self._members():
            meta = self._leaf_meta(key) if kind == "tensor" else None
            if meta is not None and tuple(meta[0])[: len(new)] != tuple(new):
                raise RuntimeError(
                    f"update(update_batch_size=True): the batch size {list(new)} does not fit "
                    f"the entry {key!r} of shape {list(meta[0])} in {self._where()}."
                )
        self.batch_size = new

    def _merge(self: Any, source: Any, clone: bool, inplace: bool) -> None:
        items = (
            source.items()
            if not isinstance(source, TensorDictBase)
            else ((k, source._get_str(str(k), NO_DEFAULT)) for k in source.keys())
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
            if isinstance(value, (Mapping, TensorDictBase)) and _is_backed(current):
                current._merge(value, clone, inplace)
                continue
            if clone and isinstance(value, torch.Tensor):
                value = value.clone()
            self._set_str(key, value, inplace=inplace, validated=True)

    def _nested(self: Any, path: _Path) -> Any:
        """The group at ``path``, created (with this batch size) where missing."""
        level: Any = self
        for part in path:
            sub = level._get_str(part, None)
            if sub is None:
                level._set_str(
                    part, TensorDict(batch_size=level.batch_size), inplace=False, validated=True
                )
                sub = level._get_str(part, NO_DEFAULT)
            elif not _is_backed(sub):
                raise KeyError(
                    f"{unravel_key(path)!r}: {part!r} is a {type(sub).__name__}, not a "
                    "nested tensordict"
                )
            level = sub
        return level

    def update_(
        self: Any,
        input_dict_or_td: Any = None,
        clone: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Sequence[NestedKey] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Write every leaf of a dict or tensordict (or of the keyword entries) into the
        existing entry of the same key, in place (all keys must exist and shapes match;
        checked before writing)."""
        return self.update_at_(
            with_entries(input_dict_or_td, kwargs),
            Ellipsis,
            clone,
            non_blocking=non_blocking,
            keys_to_update=keys_to_update,
        )

    def del_(self: Any, key: NestedKey) -> Any:
        """Delete the entry at ``key`` from the backend."""
        path = _key_tuple(key)
        parent = self._parent_of(path)
        if not _is_backed(parent) or not parent._exists(path[-1:]):
            raise missing_key(unravel_key(path), self)
        self._check_unlocked(unravel_key(path), "remove")
        parent._remove(path[-1])
        return self

    def __delitem__(self: Any, key: NestedKey) -> None:
        self.del_(key)

    def clear(self: Any) -> Any:
        """Delete every entry (the batch size and names stay)."""
        self._check_unlocked("*", "remove")
        for key, _ in list(self._members()):
            self._remove(key)
        return self

    def _leaf_paths(self: Any) -> list[_Path]:
        return [_key_tuple(k) for k in self.keys(True, True, is_leaf=is_leaf_nontensor)]

    def _delete_all(self: Any, paths: list[_Path], keep: list[_Path] | None = None) -> None:
        if not paths:
            return
        self._check_unlocked(unravel_key(paths[0]), "remove")
        for path in paths:
            parent = self._parent_of(path)
            if _is_backed(parent) and parent._exists(path[-1:]):
                parent._remove(path[-1])
        if keep is not None:  # select(inplace=True): groups left without any kept entry go
            for key, kind in list(self._members()):
                if kind == "group" and not any(p[0] == key for p in keep):
                    self._remove(key)

    def rename_key_(self: Any, old_key: NestedKey, new_key: NestedKey, safe: bool = False) -> Any:
        """Move the entry at ``old_key`` to ``new_key`` (``safe``: refuse to overwrite an
        existing entry)."""
        old, new = _key_tuple(old_key), _key_tuple(new_key)
        if not self._exists(old):
            raise missing_key(unravel_key(old), self)
        if old == new:
            return self
        if safe and self._exists(new):
            raise KeyError(
                f"rename_key_(safe=True): the key {unravel_key(new)!r} is already present in "
                f"{type(self).__name__} ({self._where()})."
            )
        self._check_unlocked(unravel_key(new), "add")
        src = self._parent_of(old)
        dst = self if len(new) == 1 else self._nested(new[:-1])
        if dst._exists(new[-1:]):
            dst._remove(new[-1])
        if not src._move(old[-1], dst, new[-1]):
            value = src._get_str(old[-1], NO_DEFAULT)
            dst._set_str(new[-1], value, inplace=False, validated=True)
            src._remove(old[-1])
        return self


def _as_td(source: Any, batch_size: torch.Size) -> TensorDictBase:
    if isinstance(source, TensorDictBase):
        return source
    return TensorDict.from_dict(dict(source), batch_size=batch_size)


def _check_source(td: Any, source: Any, prefix: _Path, inplace: bool = False) -> None:
    """Refuse (before any write) a tensor whose leading dimensions are not the batch size
    of the level it goes to (``inplace``: or that does not fit its existing entry)."""
    batch = tuple(td.batch_size)
    items = (
        source.items()
        if not isinstance(source, TensorDictBase)
        else ((k, source._get_str(str(k), NO_DEFAULT)) for k in source.keys())
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
            if _is_backed(current):  # merged into the group
                _check_source(current, value, path, inplace)
            continue
        if isinstance(value, Mapping):
            current = td._get_str(key, None) if isinstance(key, str) else None
            _check_source(current if _is_backed(current) else td, value, path, inplace)
            continue
        if isinstance(value, (torch.Tensor, np.ndarray)) and not isinstance(key, tuple):
            shape = tuple(value.shape)
            if shape[: len(batch)] != batch:
                raise RuntimeError(
                    f"update: the value at {unravel_key(path)!r} has shape {list(shape)}, "
                    f"which does not start with the batch size {list(batch)}; nothing was "
                    "written."
                )
            meta = td._leaf_meta(key) if inplace else None
            if meta is not None:
                try:
                    fits = torch.Size(np.broadcast_shapes(shape, meta[0])) == meta[0]
                except ValueError:
                    fits = False
                if not fits:
                    raise InplaceWriteError(
                        f"update(inplace=True): the value at {unravel_key(path)!r} has shape "
                        f"{list(shape)}, which does not fit the entry of shape "
                        f"{list(meta[0])}; nothing was written."
                    )


def _is_backed(value: Any) -> bool:
    """Whether ``value`` is a storage-backed tensordict (it has the shared writes)."""
    return isinstance(value, BackedWrites)
