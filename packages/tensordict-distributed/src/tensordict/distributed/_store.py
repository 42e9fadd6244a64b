"""``TensorDictStore``: a tensordict whose leaves live on a Redis-compatible server.

Each leaf is a string of raw bytes on the server, its dtype and shape are JSON beside it
(see :mod:`._redis` for the layout), so several processes — on several machines — read
and write the same tensordict through the server:

.. code-block:: python

    store = TensorDictStore.from_tensordict(td, host="localhost", port=6379)
    other = TensorDictStore.from_store(td_id=store.td_id, port=6379)  # another process
    other[10:20] = new_rows  # written in place on the server, one round trip
    store["obs"]             # downloads the leaf

Reads return new local tensors (``store[idx]`` a local :class:`~tensordict.TensorDict`
of those rows); writes go to the server at once. ``store["a"]`` of a nested entry is a
store on the same data (reads and writes go through). Every call is one round trip.
Non-tensor values are stored as JSON (others raise ``TypeError``): nothing is ever
pickled. Writing a different value into some rows of a non-tensor entry turns it into
one value per row (a :class:`~tensordict.NonTensorStack`), as in memory.

A store pickles as its address (server, ``td_id``, device, lock…), so it can be sent to
another process, which reconnects to the same data.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from tensordict import TensorDict
from tensordict._plugins.api import (
    BackedTensorDict,
    NonTensorData,
    TensorDictKeysView,
    is_tensorclass,
    missing_key,
)
from tensordict.base import NO_DEFAULT, TensorDictBase, _key_tuple
from tensordict.distributed import _redis
from tensordict.distributed._redis import Connection, StoreDataLostError
from tensordict.distributed._store_ops import StoreOps
from tensordict.distributed._store_rows import StoreRows
from tensordict.distributed._store_transfer import StoreTransfer

_Path = tuple[str, ...]


def _unpickle_store(settings: dict[str, Any], handle: dict[str, Any]) -> Any:
    """Reconnect to a pickled store (see :meth:`TensorDictStore.__reduce_ex__`)."""
    store = TensorDictStore.from_store(**settings)
    if handle["path"]:
        store = store._view(tuple(handle["path"]))
        store._batch_size = torch.Size(handle["batch_size"])
        store._names = handle["names"]
    store._is_locked = handle["locked"]
    return store


def _import_class(path: str) -> Any:
    """The class named ``"package.module.Class"`` (or ``"package.module:Class"``)."""
    module, sep, name = path.replace(":", ".").rpartition(".")
    if not sep:
        raise ValueError(f"{path!r} is not an import path 'package.module.Class'.")
    return getattr(importlib.import_module(module), name)


class TensorDictStore(StoreRows, StoreTransfer, StoreOps, BackedTensorDict):
    """A tensordict kept on a Redis-compatible server (``pip install
    tensordict-distributed[redis]``).

    Keyword Args:
        backend: a label for the server kind (``"redis"``, ``"dragonfly"``…); all speak the
            Redis protocol.
        host, port, db: where the server is (ignored with ``unix_socket_path`` or ``client``).
        unix_socket_path: the server's Unix socket, for a server on this machine.
        prefix: the namespace of the store's keys on the server.
        batch_size: the batch size of a new store.
        device: where reads put tensors (default: CPU).
        client: an existing ``redis.Redis`` client.
        td_id: the store's identifier on the server (default: a new UUID). To reconnect,
            use :meth:`from_store`.
        cache_metadata: keep keys, dtypes and shapes in this process (refreshed by this
            process's writes; call :meth:`refresh` to see keys other processes added).
        **redis_kwargs: passed to ``redis.Redis``.

    A store pickles as its address: unpickled (in another process, say), it reconnects
    to the same server and data.
    """

    #: The path of this handle's entries on the server: ``()`` for a store, the nested
    #: key for the view ``store["a"]`` returns (which shares the store's connection).
    _path: _Path = ()
    #: The store a nested view belongs to (``None`` for a store itself).
    _root: TensorDictStore | None = None

    def __init__(
        self,
        *,
        backend: str = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        batch_size: Any = None,
        device: Any = None,
        client: Any = None,
        td_id: str | None = None,
        cache_metadata: bool = True,
        _existing: bool = False,
        **redis_kwargs: Any,
    ) -> None:
        self._conn = Connection(
            host=host,
            port=port,
            db=db,
            unix_socket_path=unix_socket_path,
            prefix=prefix,
            td_id=td_id or _redis.new_td_id(),
            client=client,
            redis_kwargs=redis_kwargs,
        )
        self.backend = backend
        self._device: torch.device | None = None if device is None else torch.device(device)
        self._cache_metadata = cache_metadata
        self._meta: dict[_Path, dict[str, Any]] | None = None
        if _existing:
            info = self._read_info()
            self._batch_size = torch.Size(info["batch_size"])
            self._names = info.get("names")
            if self._device is None and info.get("device") is not None:
                self._device = torch.device(info["device"])
        else:
            self._batch_size = torch.Size(() if batch_size is None else batch_size)
            self._write_info()

    # ------------------------------------------------------------------ construction
    def _info(self) -> dict[str, Any]:
        return {"kind": "TensorDictStore", "batch_size": list(self._batch_size)}

    def _write_info(self) -> None:
        if self._path:  # a nested view: its batch size and names are its own
            return
        device = None if self._device is None else str(self._device)
        info = json.dumps({**self._info(), "names": self._names, "device": device})
        self._conn.run(lambda pipe: pipe.hset(self._conn.meta_key, "td", info))

    def _read_info(self) -> dict[str, Any]:
        (raw,) = self._conn.run(lambda pipe: pipe.hget(self._conn.meta_key, "td"))
        if raw is None:
            raise KeyError(
                f"no tensordict store with td_id {self._conn.td_id!r} under prefix "
                f"{self._conn.prefix!r} on the server at {self._conn.where}."
            )
        info: dict[str, Any] = json.loads(raw)
        if info.get("kind") != type(self).__name__:
            raise TypeError(
                f"td_id {self._conn.td_id!r} holds a {info.get('kind')}; open it with that class "
                "(or TensorDictStore.from_store, which picks it)."
            )
        return info

    @classmethod
    def from_store(
        cls,
        *,
        backend: str = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        td_id: str,
        device: Any = None,
        tensorclass_cls: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Reconnect to the store ``td_id`` (from another process, say). ``KeyError`` when
        the server has no such store. A lazy-stacked store comes back as a
        :class:`LazyStackedTensorDictStore`. Reads go to ``device`` (default: the device
        the store was made with). With ``tensorclass_cls`` (a tensorclass or its import
        path ``"package.module.Class"``), the store comes back wrapped in it."""
        conn_kwargs = dict(
            backend=backend,
            host=host,
            port=port,
            db=db,
            unix_socket_path=unix_socket_path,
            prefix=prefix,
            td_id=td_id,
            device=device,
            _existing=True,
            **kwargs,
        )
        probe = Connection(
            host=host,
            port=port,
            db=db,
            unix_socket_path=unix_socket_path,
            prefix=prefix,
            td_id=td_id,
            client=kwargs.get("client"),
            redis_kwargs={k: v for k, v in kwargs.items() if k not in ("client", "cache_metadata")},
        )
        try:
            (raw,) = probe.run(lambda pipe: pipe.hget(probe.meta_key, "td"))
        finally:
            if kwargs.get("client") is None:
                probe.close()
        info = json.loads(raw) if raw is not None else {}
        store: TensorDictStore
        if info.get("kind") == "LazyStackedTensorDictStore":
            from tensordict.distributed._store_lazy import LazyStackedTensorDictStore

            layout = {k: info[k] for k in ("count", "stack_dim", "inner_batch_size")}
            store = LazyStackedTensorDictStore(**layout, **conn_kwargs)
        else:
            store = TensorDictStore(**conn_kwargs)
        if tensorclass_cls is None:
            return store
        if isinstance(tensorclass_cls, str):
            tensorclass_cls = _import_class(tensorclass_cls)
        if not is_tensorclass(tensorclass_cls):
            raise TypeError(
                f"from_store(tensorclass_cls={tensorclass_cls!r}): not a tensorclass (give "
                "the class, or its import path 'package.module.Class')."
            )
        return tensorclass_cls.from_tensordict(store)

    @classmethod
    def from_tensordict(
        cls,
        td: Any,
        *,
        backend: str = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        device: Any = None,
        **kwargs: Any,
    ) -> Any:
        """A new store holding a copy of ``td`` (one round trip). A lazy stack becomes a
        :class:`LazyStackedTensorDictStore`, so its members may differ in shape. Reads go
        to ``device`` (default: ``td``'s device); the names of the batch dimensions are
        kept."""
        if is_tensorclass(td):
            td = td._tensordict
        if isinstance(td, dict):
            td = TensorDict(td)
        if device is None:
            device = td.device
        conn = dict(
            backend=backend,
            host=host,
            port=port,
            db=db,
            unix_socket_path=unix_socket_path,
            prefix=prefix,
            device=device,
            **kwargs,
        )
        if hasattr(td, "tensordicts") and hasattr(td, "stack_dim"):
            from tensordict.distributed._store_lazy import LazyStackedTensorDictStore

            return LazyStackedTensorDictStore.from_lazy_stack(td, **conn)
        if isinstance(td, TensorDictStore):
            td = td.to_local()
        names = td.names if td.batch_dims and any(n is not None for n in td.names) else None
        store = TensorDictStore(batch_size=td.batch_size, **conn)
        try:
            store.update(td)
            if names is not None:
                store.names = names
        except BaseException:
            store._conn.delete_all()  # nothing of it stays on the server
            store.close()
            raise
        return store

    @classmethod
    def from_dict(  # type: ignore[override]
        cls,
        input_dict: Any,
        *,
        backend: str = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        auto_batch_size: bool = False,
        batch_size: Any = None,
        device: Any = None,
        batch_dims: int | None = None,
        names: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> TensorDictStore:
        """A new store holding ``input_dict`` (nested dicts become nested entries), with
        the batch size, device and names :meth:`TensorDict.from_dict
        <tensordict.TensorDict.from_dict>` gives it. Connection arguments as for
        :class:`TensorDictStore`."""
        local = TensorDict.from_dict(
            input_dict,
            auto_batch_size=auto_batch_size,
            batch_size=batch_size,
            device=device,
            batch_dims=batch_dims,
            names=names,
        )
        return TensorDictStore.from_tensordict(  # type: ignore[no-any-return]
            local,
            backend=backend,
            host=host,
            port=port,
            db=db,
            unix_socket_path=unix_socket_path,
            prefix=prefix,
            device=device,
            **kwargs,
        )

    @classmethod
    def from_schema(  # type: ignore[override]
        cls,
        schema: dict[Any, tuple[Sequence[int] | torch.Size, torch.dtype]],
        *,
        batch_size: Sequence[int] | torch.Size | None = None,
        backend: str = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        device: Any = None,
        **kwargs: Any,
    ) -> TensorDictStore:
        """A new zero-filled store from ``{key: (element_shape, dtype)}`` (as
        :meth:`TensorDict.from_schema <tensordict.TensorDict.from_schema>`)."""
        local = TensorDict.from_schema(schema, batch_size=batch_size)
        return TensorDictStore.from_tensordict(  # type: ignore[no-any-return]
            local,
            backend=backend,
            host=host,
            port=port,
            db=db,
            unix_socket_path=unix_socket_path,
            prefix=prefix,
            device=device,
            **kwargs,
        )

    # ------------------------------------------------------------------ lifecycle
    @property
    def td_id(self) -> str:
        """The store's identifier on the server (pass it to :meth:`from_store`)."""
        return self._conn.td_id

    def _connection_kwargs(self) -> dict[str, Any]:
        """The arguments that open another store on the same server (sharing a client
        passed in; else a new client with the same settings)."""
        conn = self._conn
        kwargs: dict[str, Any] = {
            "backend": self.backend,
            "device": self._device,
            "cache_metadata": self._cache_metadata,
            **conn.settings,
        }
        if conn.owns_client:
            kwargs.update(conn.redis_kwargs)
        else:
            kwargs["client"] = conn.client
        return kwargs

    def _reopen(self, td_id: str) -> Any:
        store = TensorDictStore.from_store(td_id=td_id, **self._connection_kwargs())
        if self._path and td_id == self.td_id:
            store = store._view(self._path)
            store._batch_size = self._batch_size
        return store

    def _view(self, path: _Path) -> TensorDictStore:
        """The nested entry at ``path`` (below this handle) as a store on the same data
        and connection (the view keeps its store, hence the connection, alive)."""
        view = object.__new__(TensorDictStore)
        view._conn = self._conn
        view.backend = self.backend
        view._root = self._base
        view._path = self._path + tuple(path)
        view._device = self._device
        view._cache_metadata = self._cache_metadata
        view._meta = None  # unused: a view reads its store's cache
        view._batch_size = self._batch_size
        view._names = self._names
        view._is_locked = self._is_locked
        return view

    def __reduce_ex__(self, protocol: Any) -> Any:
        settings = {
            "backend": self.backend,
            "td_id": self.td_id,
            "device": self._device,
            "cache_metadata": self._cache_metadata,
            **self._conn.portable_settings(),
        }
        handle = {
            "path": list(self._path),
            "batch_size": list(self._batch_size),
            "names": self._names,
            "locked": self._is_locked,
        }
        return _unpickle_store, (settings, handle)

    def __reduce__(self) -> Any:
        return self.__reduce_ex__(2)

    def close(self) -> None:
        """Close the connection; the data stays on the server (see :meth:`clear_redis`)."""
        self._conn.close()

    def clear_redis(self) -> None:
        """Delete every key of this store from the server (data and metadata; for a
        nested view, of the whole store it belongs to)."""
        self._conn.delete_all()
        self._base._meta = None
        self._base._write_info()

    def refresh(self) -> TensorDictStore:
        """Re-read keys, dtypes and shapes from the server (other processes' new keys)."""
        self._base._meta = None
        return self

    def __del__(self) -> None:
        conn = self.__dict__.get("_conn")
        if conn is not None and self._root is None:
            conn.close()

    # ------------------------------------------------------------------ metadata
    def _entries(self) -> dict[_Path, dict[str, Any]]:
        """``{path: entry}`` of this handle's leaves (paths relative to it)."""
        meta = self._base._all_entries()
        if not self._path:
            return meta
        n = len(self._path)
        return {p[n:]: e for p, e in meta.items() if len(p) > n and p[:n] == self._path}

    @property
    def _base(self) -> TensorDictStore:
        """The store this handle is (or is a nested view of): it holds the metadata cache."""
        return self if self._root is None else self._root

    def _data_key(self, path: _Path) -> str:
        return self._conn.data_key(self._path + tuple(path))

    def _field(self, path: _Path) -> str:
        return _redis.path_field(self._path + tuple(path))

    def _remember(self, path: _Path, entry: dict[str, Any]) -> None:
        meta = self._base._meta
        if meta is not None:
            meta[self._path + tuple(path)] = entry

    def _all_entries(self) -> dict[_Path, dict[str, Any]]:
        if self._meta is not None and self._cache_metadata:
            return self._meta
        (raw,) = self._conn.run(lambda pipe: pipe.hgetall(self._conn.meta_key))
        if not raw:
            raise StoreDataLostError(
                f"TensorDictStore {self.td_id!r}: its metadata is gone from the server at "
                f"{self._conn.where} (deleted, or the server restarted without persistence)."
            )
        meta = {}
        for field, value in raw.items():
            name = field.decode() if isinstance(field, bytes) else field
            if name != "td":
                meta[_redis.field_path(name)] = json.loads(value)
        self._meta = meta
        return meta

    def _skeleton(self) -> TensorDict:
        """A TensorDict of the store's structure whose tensors are on the meta device."""
        out = TensorDict(batch_size=self._batch_size)
        for path, entry in sorted(self._entries().items()):
            if entry["kind"] == "tensor":
                dtype = _redis.parse_dtype(entry["dtype"], path)
                value: Any = torch.empty(entry["shape"], dtype=dtype, device="meta")
            elif entry["kind"] == "stack":
                value = NonTensorData(None, batch_size=entry["shape"]).maybe_to_stack()
            else:
                value = NonTensorData(entry["value"], batch_size=self._batch_size)
            out._set_tuple(path, value, inplace=False, validated=True)
        return out

    # ------------------------------------------------------------------ storage-backed primitives
    def _members(self) -> Iterator[tuple[str, str]]:
        kinds: dict[str, str] = {}
        for path, entry in self._entries().items():
            kind = "group" if len(path) > 1 else entry["kind"]
            kinds.setdefault(path[0], kind if kind in ("group", "tensor") else "non_tensor")
        return iter(kinds.items())

    def _child(self, key: str) -> TensorDictStore:
        return self._view((key,))

    def _leaf_meta(self, key: str) -> tuple[torch.Size, torch.dtype] | None:
        entry = self._entries().get((key,))
        if entry is None or entry["kind"] != "tensor":
            return None
        return torch.Size(entry["shape"]), _redis.parse_dtype(entry["dtype"], (key,))

    def _remove(self, key: str) -> None:
        self._delete([(key,)])

    def _read_names(self) -> list[str | None] | None:
        return self._names

    def _write_names(self, names: list[str | None] | None) -> None:
        self._names = names
        self._write_info()

    def _where(self) -> str:
        return f"the {self.backend} server at {self._conn.where} (td_id {self.td_id!r})"

    # ------------------------------------------------------------------ the primitives
    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        # Leaves keep their full shapes on the server: only the description changes.
        new = torch.Size(value)
        for path, entry in self._entries().items():
            if "shape" in entry and list(entry["shape"][: len(new)]) != list(new):
                raise RuntimeError(
                    f"cannot set batch_size={tuple(new)}: the entry {self._show(path)} has "
                    f"shape {tuple(entry['shape'])}, whose leading dimensions must equal it."
                )
        if len(new) != len(self._batch_size):
            self._names = None
        self._batch_size = new
        self._write_info()

    @property
    def device(self) -> torch.device | None:
        return self._device

    def is_shared(self) -> bool:
        return False

    def keys(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable | None = None,
        *,
        sort: bool = False,
    ) -> TensorDictKeysView:
        return self._skeleton().keys(include_nested, leaves_only, is_leaf, sort=sort)

    def _get_str(self, key: str, default: Any) -> Any:
        return self._get_tuple((key,), default)

    def _get_tuple(self, key: tuple, default: Any) -> Any:
        entries = self._entries()
        path = tuple(key)
        if path in entries:
            return self._download({path: entries[path]}, None)[path]
        if not any(p[: len(path)] == path and len(p) > len(path) for p in entries):
            if default is NO_DEFAULT:
                raise missing_key(key[0] if len(key) == 1 else key, self)
            return default
        return self._view(path)

    def pop(self, key: Any, default: Any = NO_DEFAULT) -> Any:
        """Remove ``key`` on the server and return its value (a nested entry as a local
        :class:`~tensordict.TensorDict`), or ``default`` when it is missing."""
        path = _key_tuple(key)
        value = self._get_tuple(path, None)
        if value is None:
            return super().pop(key, default)
        if isinstance(value, TensorDictStore):
            value = value.to_local()
        self._delete([path])
        return value.data if isinstance(value, NonTensorData) else value

    def _set_str(
        self, key: str, value: Any, *, inplace: bool, validated: bool, non_blocking: bool = False
    ) -> TensorDictStore:
        return self._set_tuple((key,), value, inplace=inplace, validated=validated)

    def _set_tuple(
        self, key: tuple, value: Any, *, inplace: bool, validated: bool, non_blocking: bool = False
    ) -> TensorDictStore:
        self._upload([(tuple(key), value)], inplace)
        return self

    def del_(self, key: Any) -> TensorDictStore:
        """Delete ``key`` (a leaf or a nested tensordict) on the server."""
        path = _key_tuple(key)
        if not any(p[: len(path)] == path for p in self._entries()):
            raise missing_key(key, self)
        self._delete([path])
        return self

    def _delete(self, paths: Sequence[_Path]) -> None:
        """Delete the entries at or below each of ``paths``, in one round trip."""
        gone = [p for p in self._entries() if any(p[: len(q)] == q for q in paths)]
        if not gone:
            return
        self._check_paths_unlocked(gone, "delete")
        fields = [self._field(p) for p in gone]
        datas = [self._data_key(p) for p in gone]

        def build(pipe: Any) -> None:
            pipe.hdel(self._conn.meta_key, *fields)
            pipe.delete(*datas)

        self._conn.run(build, transaction=True)
        self._forget(gone)

    def _forget(self, paths: Sequence[_Path]) -> None:
        meta = self._base._meta
        if meta is not None:
            for p in paths:
                meta.pop(self._path + tuple(p), None)

    # ------------------------------------------------------------------ local copies
    def to_local(self) -> TensorDict:
        """A local :class:`~tensordict.TensorDict` copy of the whole store (one round trip)."""
        return self._local_of(None)

    def _local_of(self, paths: Sequence[_Path] | None) -> TensorDict:
        """A local copy of the entries ``paths`` (all when ``None``), in one round trip."""
        entries = self._entries()
        if paths is not None:
            entries = {p: entries[p] for p in paths}
        leaves = self._download(entries, None)
        out = TensorDict(batch_size=self._batch_size, device=self._device)
        for p, v in sorted(leaves.items()):
            out._set_tuple(p, v, inplace=False, validated=True)
        return out

    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDict:
        return self.to_local()

    # Tensor operations (``store + 1``, ``store.sum()``…) run on a local snapshot and
    # return local results. In-place ones would change the snapshot only: write results
    # back with ``store.update(result)`` or ``store[idx] = result``.
    def _flat_tensors(self, out: list) -> list:
        self._snapshot = self.to_local()
        return self._snapshot._flat_tensors(out)  # type: ignore[attr-defined,no-any-return]

    def _rebuild(self, it: Any) -> Any:
        snapshot = self.__dict__.pop("_snapshot", None)
        if snapshot is None:
            snapshot = self.to_local()
        return snapshot._rebuild(it)

    def _aligned_tensors(
        self, other: Any, default: Any, out: list | None = None, prefix: tuple = ()
    ) -> list:
        return self.to_local()._aligned_tensors(other, default, out, prefix)  # type: ignore[attr-defined,no-any-return]

    def _tree_map(self, fn: Callable, *others: TensorDictBase, **kwargs: Any) -> Any:
        local = self.to_local()
        result = local._tree_map(fn, *others, **kwargs)
        spec = kwargs.get("spec")  # core's ApplySpec: how the function is applied
        if spec is not None and spec.inplace:
            self.update(local)
            return self
        return result

    def update(
        self, input_dict_or_td: Any, clone: bool = False, inplace: bool = False, **kwargs: Any
    ) -> TensorDictStore:  # type: ignore[override]
        """Write every leaf of ``input_dict_or_td`` (one round trip). As in memory, nested
        entries are merged (the store's other entries below them are kept); only the
        ``keys_to_update`` are written when given."""
        source = input_dict_or_td
        if isinstance(source, TensorDictStore):
            source = source.to_local()
        if isinstance(source, dict):
            source = TensorDict(source, batch_size=self._batch_size)
        if is_tensorclass(source):
            source = source._tensordict
        keys_to_update = kwargs.get("keys_to_update")
        if keys_to_update is not None:
            source = source.select(*keys_to_update, strict=False)
        self._upload([((), source)], inplace, merge=True)
        return self

    def is_contiguous(self) -> bool:
        """``False``: the store's leaves are on the server (see :meth:`contiguous`)."""
        return False

    def __len__(self) -> int:
        return self._batch_size[0] if self._batch_size else 0

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self[i]

    def _repr_fields(self) -> list[tuple[str, Any]]:
        try:
            keys: Any = sorted(map(str, self.keys()))
        except Exception:  # closed or unreachable: the repr still works
            keys = "?"
        fields: list[tuple[str, Any]] = [
            ("keys", keys),
            ("batch_size", self._batch_size),
            ("device", self._device),
            ("backend", self.backend),
            ("server", self._conn.where),
            ("td_id", self.td_id),
        ]
        if self._path:
            fields.append(("path", self._path[0] if len(self._path) == 1 else self._path))
        return fields

    def __repr__(self) -> str:
        shown = ",\n".join(
            f"    {name}={value if name in ('batch_size', 'device') else repr(value)}"
            for name, value in self._repr_fields()
        )
        return f"{type(self).__name__}(\n{shown})"


def td_to_store(
    td: Any,
    *,
    backend: str = "redis",
    host: str = "localhost",
    port: int = 6379,
    db: int = 0,
    unix_socket_path: str | None = None,
    prefix: str = "tensordict",
    device: Any = None,
    **kwargs: Any,
) -> TensorDictStore:
    """``td.to_store(...)``: upload ``td`` to a Redis-compatible server and return the
    :class:`TensorDictStore` backed by it (a :class:`LazyStackedTensorDictStore` for a
    lazy stack). Reads of the result go to ``device`` (default: ``td``'s device).
    ``**kwargs`` go to the store (``client=``, ``td_id=``, ``redis.Redis`` arguments).

    .. code-block:: python

        store = td.to_store(host="localhost", port=6379)
        TensorDictStore.from_store(td_id=store.td_id, port=6379)  # from another process
    """
    return TensorDictStore.from_tensordict(
        td,
        backend=backend,
        host=host,
        port=port,
        db=db,
        unix_socket_path=unix_socket_path,
        prefix=prefix,
        device=td.device if device is None else device,
        **kwargs,
    )
