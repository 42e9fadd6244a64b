"""``BackedTensorDict``: the base of tensordicts whose entries live in a backend.

An HDF5 file (``PersistentTensorDict``), a zarr store (``ZarrTensorDict``) and a Redis
server (``TensorDictStore``) keep their entries elsewhere; they share everything here and
implement only how a level of the tree is listed, read, written and removed:

==========================  ==========================================================
primitive                   what it does
==========================  ==========================================================
``_members()``              ``(key, kind)`` of one level, kind ``"group"``, ``"tensor"``
                            or ``"non_tensor"`` (no data read)
``_child(key)``             the nested backed tensordict of a group
``_leaf_meta(key)``         ``(shape, dtype)`` of a tensor entry, from the metadata
``_get_str``/``_set_str``   read / write one entry of this level
``_remove(key)``            delete one entry of this level
``_index(index)``           the selected rows of every entry, into memory
``_read_names()``,          the batch dimensions' names, as stored
``_write_names(names)``
``_shallow(device)``        another handle on the same data
``_writable()``             raise if the backend refuses writes (read-only, closed)
``_where()``                the backend and place, for messages
==========================  ==========================================================

The rules, once for every backend: metadata questions (``keys``, ``get_item_shape``,
``entry_class``, ``is_empty``…) read no data; ``select``/``exclude`` read only what they
keep; methods that make new data run on the content read into memory; views are
refused; in-place ops write back into the existing entries; every write is checked
before anything reaches the backend, so bad input leaves it unchanged (the writes live in
:mod:`tensordict._backed.writes`).

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

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from tensordict._backed import families
from tensordict._backed.writes import BackedWrites
from tensordict._dense.td import TensorDict
from tensordict._functions.pad import PadOps
from tensordict._keys.nested import NestedKey, unravel_key
from tensordict._kinds.kinds import is_leaf_nontensor, is_tensorclass
from tensordict._leaves.nontensor import NonTensorData, unwrap_non_tensor
from tensordict._shared.indexed import IndexedOps
from tensordict._shared.key_sets import KeySetOps
from tensordict._shared.memory import MemoryOps
from tensordict._shared.state_dict import StateDictOps
from tensordict._util.errors import lock_error, missing_key
from tensordict._wire.consolidate import ConsolidateOps
from tensordict.base import NO_DEFAULT, TensorDictBase, _key_tuple

#: where ``lock_``/``unlock_`` leave the previous lock state for a ``with`` block to restore
LOCK_OP = "_lock_op"

_Path = tuple[str, ...]


class BackedKeys:
    """The keys of a :class:`BackedTensorDict`, listed from the backend (no data read)."""

    def __init__(
        self,
        td: BackedTensorDict,
        include_nested: bool,
        leaves_only: bool,
        is_leaf: Callable[[type], bool] | None,
        sort: bool,
    ) -> None:
        self._td, self._nested, self._leaves = td, include_nested, leaves_only
        self._is_leaf, self._sort = is_leaf, sort

    def _walk(self, td: BackedTensorDict, prefix: _Path) -> Iterator[Any]:
        for key, kind in td._members():
            full = (*prefix, key) if prefix else key
            if kind == "group":
                is_leaf = self._is_leaf is not None and self._is_leaf(type(td))
                if not self._leaves or is_leaf:
                    yield full
                if self._nested and not is_leaf:
                    yield from self._walk(td._child(key), (*prefix, key))
            elif kind == "non_tensor":
                # as a TensorDict's: not a leaf by default (is_leaf_nontensor lists it)
                if not self._leaves or (self._is_leaf is not None and self._is_leaf(NonTensorData)):
                    yield full
            else:
                yield full

    def __iter__(self) -> Iterator[Any]:
        keys = self._walk(self._td, ())
        if self._sort:
            return iter(sorted(keys, key=lambda k: k if isinstance(k, tuple) else (k,)))
        return keys

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, key: Any) -> bool:
        return unravel_key(key) in set(self)

    def __repr__(self) -> str:
        return f"{type(self._td).__name__}Keys({list(self)})"


class BackedTensorDict(
    BackedWrites,
    ConsolidateOps,
    StateDictOps,
    KeySetOps,
    IndexedOps,
    MemoryOps,
    PadOps,
    TensorDictBase,
):
    """Base of the tensordicts whose entries live in a backend (see the module).

    Subclasses implement the primitives of the module's table and keep ``_batch_size``,
    ``_device`` and ``_children`` (the cache of nested handles).
    """

    _batch_size: torch.Size
    _device: torch.device | None
    _children: dict[str, Any]
    _is_locked: bool = False

    # ------------------------------------------------------------------ primitives
    def _members(self) -> Iterator[tuple[str, str]]:
        """``(key, "group" | "tensor" | "non_tensor")`` of this level."""
        raise NotImplementedError(f"{type(self).__name__} does not list its members")

    def _child(self, key: str) -> BackedTensorDict:
        """The nested tensordict of the group ``key``."""
        raise NotImplementedError(f"{type(self).__name__} has no nested groups")

    def _leaf_meta(self, key: str) -> tuple[torch.Size, torch.dtype] | None:
        """Shape and dtype of the tensor entry ``key`` (None for anything else)."""
        raise NotImplementedError(f"{type(self).__name__} does not describe its entries")

    def _remove(self, key: str) -> None:
        """Delete the entry ``key`` of this level."""
        raise NotImplementedError(f"{type(self).__name__} cannot delete entries")

    def _index(self, index: Any) -> TensorDict:
        """The selected rows of every entry, read into memory."""
        out: TensorDict = self.to_tensordict()[index]
        return out

    def _read_names(self) -> list[str | None] | None:
        """The stored names of the batch dimensions (None: unnamed)."""
        return None

    def _write_names(self, names: list[str | None] | None) -> None:
        """Store the names of the batch dimensions (None: unnamed)."""
        raise NotImplementedError(f"{type(self).__name__} cannot store dimension names")

    def _shallow(self, device: Any = NO_DEFAULT) -> BackedTensorDict:
        """Another handle on the same data (``device``: where its reads go)."""
        raise NotImplementedError(f"{type(self).__name__} cannot make another handle")

    def _writable(self) -> None:
        """Raise if the backend refuses writes (read-only, closed)."""

    def _where(self) -> str:
        """The backend and the place of this level, for messages."""
        return f"a {type(self).__name__}"

    def _move(self, old: str, dst: BackedTensorDict, new: str) -> bool:
        """Move the entry ``old`` of this level to ``new`` of ``dst`` natively (False: the
        backend cannot; the entry is then copied and removed)."""
        return False

    # ------------------------------------------------------------------ locking
    @property
    def is_locked(self) -> bool:
        """Whether writes are refused (``lock_``/``unlock_``; settable)."""
        return self._is_locked

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        self._is_locked = bool(value)

    def lock_(self) -> Any:
        """Refuse writes through this object (the stored data is unchanged). In a ``with``
        statement (``with td.lock_():``), the previous lock state comes back on exit."""
        self.__dict__[LOCK_OP] = self._is_locked
        self._is_locked = True
        return self

    def unlock_(self) -> Any:
        """Accept writes again. In a ``with`` statement (``with td.unlock_():``), the
        previous lock state comes back on exit."""
        self.__dict__[LOCK_OP] = self._is_locked
        self._is_locked = False
        return self

    def __enter__(self) -> Any:
        # right after lock_()/unlock_(), the block restores the lock state; else it closes
        self.__dict__.setdefault("_ctx_lock", []).append(self.__dict__.pop(LOCK_OP, None))
        return self

    def __exit__(self, *exc: Any) -> None:
        previous = self.__dict__["_ctx_lock"].pop()
        if previous is None:
            self.close()
        else:
            self._is_locked = previous

    def close(self) -> None:
        """Release the backend (a file, a connection); nothing to do by default."""

    def _check_unlocked(self, key: Any, what: str = "add") -> None:
        """Refuse adding, replacing or removing ``key`` while locked (writes into existing
        entries stay allowed, as for a locked ``TensorDict``)."""
        if self._is_locked:
            raise lock_error(key, what)
        self._writable()

    def _check_set(self, key: Any, inplace: bool) -> None:
        """The lock rule of ``_set_str``: an in-place write into an existing entry is
        allowed while locked; adding or replacing one is not."""
        if self._is_locked:
            exists = self._exists(_key_tuple(key))
            if not (inplace and exists):
                raise lock_error(key, "replace" if exists else "add")
        self._writable()

    # ------------------------------------------------------------------ keys and reads
    def keys(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        *,
        sort: bool = False,
    ) -> Any:
        """The keys, listed from the backend (no data read)."""
        return BackedKeys(self, include_nested, leaves_only, is_leaf, sort)

    def _get_tuple(self, key: tuple[str, ...], default: Any) -> Any:
        if len(key) == 1:
            return self._get_str(key[0], default)
        sub = self._get_str(key[0], None)
        if not isinstance(sub, TensorDictBase):
            if default is NO_DEFAULT:
                raise missing_key(unravel_key(key), self)
            return default
        return sub._get_tuple(key[1:], default)

    def _set_tuple(
        self,
        key: tuple[str, ...],
        value: Any,
        *,
        inplace: bool,
        validated: bool,
        non_blocking: bool = False,
    ) -> Any:
        if len(key) == 1:
            return self._set_str(key[0], value, inplace=inplace, validated=validated)
        self._nested(key[:1])._set_tuple(key[1:], value, inplace=inplace, validated=validated)
        return self

    def __getitem__(self, index: Any) -> Any:
        """``td[key]`` reads one entry; any other index reads those rows into memory."""
        if isinstance(index, str) or (
            isinstance(index, tuple) and index and all(isinstance(i, (str, tuple)) for i in index)
        ):
            return unwrap_non_tensor(self.get(index, NO_DEFAULT))
        return self._index(index)

    def __setitem__(self, index: Any, value: Any) -> None:
        """``td[key] = value`` writes an entry; ``td[rows] = tensordict`` writes those rows
        of the existing entries (every leaf checked first)."""
        if isinstance(index, str) or (
            isinstance(index, tuple) and index and all(isinstance(i, str) for i in index)
        ):
            self.set(index, value)
            return
        self._writable()  # rows are written in place: allowed while locked
        if is_tensorclass(value):
            value = value._tensordict
        if not isinstance(value, (TensorDictBase, dict)):
            raise TypeError(
                f"assigning rows of a {type(self).__name__} needs a tensordict (or dict) of "
                f"rows, got {type(value).__name__}"
            )
        self.update_at_(value, index)

    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDict:
        """Read everything into an in-memory :class:`~tensordict.TensorDict`."""
        entries = {}
        for key, kind in self._members():
            value = self._get_str(key, NO_DEFAULT)
            entries[key] = value.to_tensordict() if kind == "group" else value
        out = TensorDict(entries, batch_size=self._batch_size, device=self._device)
        names = self._read_names()
        if names is not None and any(n is not None for n in names):
            out.names = names
        return out

    def clone(self, recurse: bool = True, **kwargs: Any) -> TensorDict:  # type: ignore[override]
        """An in-memory copy (:meth:`to_tensordict`)."""
        return self.to_tensordict()

    def is_shared(self) -> bool:
        """False: the entries live in a backend, not in shared memory."""
        return False

    def is_contiguous(self) -> bool:
        """False, as the reference answers for a file or a server: the entries are not
        tensors in memory (:meth:`contiguous` reads them)."""
        return False

    def contiguous(self, *, canonical: bool = False, inplace: bool = False) -> TensorDict:
        """The content read into memory (:meth:`to_tensordict`, then ``contiguous``);
        ``inplace=True`` is refused: the entries stay where they live."""
        if inplace:
            raise RuntimeError(
                f"contiguous(inplace=True): a {type(self).__name__} reads its entries from "
                f"{self._where()}; call to_tensordict() for a contiguous copy in memory."
            )
        content: Any = self.to_tensordict()
        out: TensorDict = content.contiguous(canonical=canonical)
        return out

    # ------------------------------------------------------------------ device and names
    @property
    def device(self) -> torch.device | None:
        """The device entries are moved to when read (settable; ``None``: the CPU)."""
        return self._device

    @device.setter
    def device(self, value: torch.device | str | None) -> None:
        self._device = None if value is None else torch.device(value)
        children = self.__dict__.get("_children")
        if children:
            children.clear()

    def clear_device_(self) -> Any:
        """Forget the device: entries are read to the CPU."""
        self.device = None
        return self

    def auto_device_(self) -> Any:
        """Set the device to the one entries are read to (the CPU unless one is set)."""
        if self._device is None and any(kind == "tensor" for _, kind in self._members()):
            self.device = torch.device("cpu")
        return self

    @property
    def names(self) -> list[str | None]:
        """Names of the batch dimensions (settable; stored with the data)."""
        names = self._read_names()
        if not isinstance(names, list) or len(names) != len(self._batch_size):
            return [None] * len(self._batch_size)
        return list(names)

    @names.setter
    def names(self, value: Sequence[str | None] | None) -> None:
        probe = TensorDict(batch_size=self._batch_size)
        probe.names = value  # the in-memory rules check the value
        self._store_names(probe.names)

    def _store_names(self, names: Sequence[str | None]) -> None:
        self._writable()
        self._write_names(None if all(n is None for n in names) else list(names))

    def _probe(self) -> TensorDict:
        """An empty in-memory tensordict with this batch size and names."""
        names = self.names
        return TensorDict(
            batch_size=self._batch_size, names=names if any(n is not None for n in names) else None
        )

    def rename_(self, *names: Any, **rename_map: str) -> Any:
        """Rename batch dimensions in place (stored); see ``TensorDict.rename_``."""
        self._store_names(self._probe().rename_(*names, **rename_map).names)
        return self

    def refine_names(self, *names: Any) -> Any:
        """Name unnamed batch dimensions in place (``...`` skips some); see
        ``TensorDict.refine_names``."""
        self._store_names(self._probe().refine_names(*names).names)
        return self

    def _shapes(self) -> list[tuple[int, ...]]:
        """Shapes of every tensor entry, nested ones included (no data read)."""
        out: list[tuple[int, ...]] = []
        for key, kind in self._members():
            if kind == "group":
                out += self._child(key)._shapes()
            elif kind == "tensor" and (meta := self._leaf_meta(key)) is not None:
                out.append(tuple(meta[0]))
        return out

    def auto_batch_size_(
        self, batch_dims: int | None = None, keep_compliant_size: bool = False
    ) -> Any:
        """Set the batch size to the leading dimensions all entries share (at most
        ``batch_dims``); ``keep_compliant_size`` keeps the current one when it fits."""
        if keep_compliant_size and self._batch_size:
            return self
        self.batch_size = torch.Size(common_leading(self._shapes(), batch_dims))
        return self

    # ------------------------------------------------------------------ new tensordicts
    def copy(self) -> Any:
        """Another handle on the same data (nothing read)."""
        return self._shallow()

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """``to(device)`` gives a handle on the same data whose reads go to ``device``; any
        other conversion (dtype, ``other`` tensordict…) reads the content into memory."""
        device = _device_only(args, kwargs)
        if device is not None:
            return self._shallow(device=device)
        return self.to_tensordict().to(*args, **kwargs)

    def cpu(self, **kwargs: Any) -> Any:
        """A handle on the same data whose reads go to the CPU."""
        return self.to("cpu", **kwargs)

    def cuda(self, device: Any = None, **kwargs: Any) -> Any:
        """A handle on the same data whose reads go to a CUDA device."""
        if device is None:
            device = torch.device("cuda")
        elif isinstance(device, int):
            device = torch.device("cuda", device)
        return self.to(device, **kwargs)

    def empty(  # type: ignore[override]
        self,
        recurse: bool = False,
        *,
        batch_size: Sequence[int] | None = None,
        device: Any = NO_DEFAULT,
        names: Any = NO_DEFAULT,
    ) -> TensorDict:
        """An in-memory tensordict without tensors (with ``recurse``, the nested groups as
        empty tensordicts, and the non-tensor values); no tensor is read."""
        out = TensorDict(
            batch_size=self._batch_size if batch_size is None else batch_size,
            device=self._device if device is NO_DEFAULT else device,
            names=(self._probe().names if batch_size is None else None)
            if names is NO_DEFAULT
            else names,
        )
        if recurse and batch_size is None:
            for key, kind in self._members():  # nested levels and non-tensor values stay
                if kind != "tensor":
                    value = self._get_str(key, NO_DEFAULT)
                    value = value.empty(recurse=True) if kind == "group" else value
                    out._set_str(key, value, inplace=False, validated=True)
        return out

    def select(
        self,
        *keys: NestedKey,
        inplace: bool = False,
        strict: bool = True,
        as_tensordict: bool = False,
    ) -> Any:
        """The entries at ``keys``: read into a new in-memory tensordict, or, with
        ``inplace=True``, every other entry deleted from the backend."""
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
        ``inplace=True``, the entries at ``keys`` deleted from the backend."""
        paths = [p for p in _paths(keys) if self._exists(p)]
        if inplace:
            self._delete_all(paths)
            return self
        return self._read_where(
            keep=lambda path: not any(_under(path, p) for p in paths),
            descend=lambda path: any(_below(p, path) for p in paths),
        )

    def _read_where(
        self, keep: Callable[[_Path], bool], descend: Callable[[_Path], bool], prefix: _Path = ()
    ) -> TensorDict:
        """The entries whose path ``keep`` accepts, read into memory; the groups that
        ``descend`` accepts are walked into (they keep their batch sizes)."""
        out = self.empty()
        for key, kind in self._members():
            path = (*prefix, key)
            value = None
            if kind == "group" and descend(path):
                value = self._child(key)._read_where(keep, descend, path)
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

    def _parent_of(self, path: _Path) -> Any:
        return self if len(path) == 1 else self._get_tuple(path[:-1], None)

    def get_item_shape(self, key: NestedKey) -> torch.Size:
        """The shape of the entry at ``key`` (a group's batch size), from the metadata."""
        path = _key_tuple(key)
        parent = self._parent_of(path)
        meta = parent._leaf_meta(path[-1]) if isinstance(parent, BackedTensorDict) else None
        if meta is not None:
            return torch.Size(meta[0])
        value = self._get_tuple(path, NO_DEFAULT)
        return value.shape if isinstance(value, torch.Tensor) else value.batch_size

    def entry_class(self, key: NestedKey) -> type:
        """The class of the entry at ``key`` (``torch.Tensor`` for a tensor, from the
        metadata)."""
        path = _key_tuple(key)
        parent = self._parent_of(path)
        if isinstance(parent, BackedTensorDict) and parent._leaf_meta(path[-1]) is not None:
            return torch.Tensor
        return type(self._get_tuple(path, NO_DEFAULT))

    def _exists(self, path: _Path) -> bool:
        """Whether there is an entry at ``path`` (from the metadata; no data read)."""
        level: Any = self
        for part in path[:-1]:
            if not any(k == part and kind == "group" for k, kind in level._members()):
                return False
            level = level._child(part)
        return any(k == path[-1] for k, _ in level._members())

    # ------------------------------------------------------------------ engine primitives
    def _skeleton(self) -> TensorDict:
        """The structure in memory, tensors as ``meta`` tensors of their shape and dtype
        (non-tensor values are read): what the engine's flat-list primitives walk."""
        out = TensorDict(batch_size=self._batch_size, device=self._device)
        for key, kind in self._members():
            value: Any
            if kind == "group":
                value = self._child(key)._skeleton()
            elif kind == "tensor" and (meta := self._leaf_meta(key)) is not None:
                value = torch.empty(meta[0], dtype=meta[1], device="meta")
            else:
                value = self._get_str(key, NO_DEFAULT)
            out._set_str(key, value, inplace=False, validated=True)
        return out

    def _flat_tensors(self, out: list[Any]) -> list[Any]:
        return self.to_tensordict()._flat_tensors(out)

    def _rebuild(self, it: Any) -> Any:
        return self._skeleton()._rebuild(it)

    def _write_flat(self, it: Any) -> None:
        """In-place results are written into the existing entries."""
        skeleton = self._skeleton()
        skeleton._write_flat(it)
        self.update_(skeleton)

    def _aligned_tensors(
        self, other: Any, default: Any, out: list[Any] | None = None, prefix: _Path = ()
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

    def _tree_map(self, fn: Callable[..., Any], *others: Any, **kwargs: Any) -> Any:
        return self.to_tensordict()._tree_map(fn, *others, **kwargs)

    # ------------------------------------------------------------------ not in a backend
    def share_memory_(self) -> Any:
        """Not possible: the entries live in a backend (use :meth:`to_tensordict`)."""
        raise NotImplementedError(
            f"share_memory_: a {type(self).__name__} reads its entries from "
            f"{self._where()}; call to_tensordict().share_memory_() or memmap() to share "
            "its content."
        )

    def pin_memory_(self, num_threads: int = 0) -> Any:
        """Not possible: the entries live in a backend (use :meth:`to_tensordict`)."""
        raise RuntimeError(
            f"pin_memory_: a {type(self).__name__} reads its entries from {self._where()}; "
            "call to_tensordict().pin_memory() instead."
        )

    def pin_memory(self, num_threads: int | None = None, inplace: bool = False) -> Any:
        """Refused (``RuntimeError``), as the reference refuses it: the entries live in a
        backend; ``to_tensordict().pin_memory()`` pins a copy."""
        return self.pin_memory_()


families.install(BackedTensorDict, TensorDict)


def _paths(keys: Sequence[Any]) -> list[_Path]:
    if len(keys) == 1 and isinstance(keys[0], list):
        keys = tuple(keys[0])
    return [_key_tuple(k) for k in keys]


def common_leading(shapes: Sequence[Sequence[int]], limit: int | None = None) -> list[int]:
    """The leading sizes every shape of ``shapes`` shares (at most ``limit`` of them): the
    batch size a backend's entries allow.

    >>> common_leading([(3, 4, 2), (3, 4), (3, 5)]), common_leading([(3, 4)], limit=1)
    ([3], [3])
    """
    common: list[int] | None = None
    for shape in shapes:
        if common is None:
            common = list(shape)
            continue
        n = 0
        for a, b in zip(common, shape):
            if a != b:
                break
            n += 1
        common = common[:n]
    common = common or []
    return common[:limit] if limit is not None else common


def _under(path: _Path, prefix: _Path) -> bool:
    return path[: len(prefix)] == prefix


def _below(path: _Path, prefix: _Path) -> bool:
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
