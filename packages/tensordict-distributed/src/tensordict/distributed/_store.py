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
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from tensordict import TensorDict, is_leaf_nontensor
from tensordict._plugins.api import (
    BackedTensorDict,
    InplaceWriteError,
    NonTensorData,
    NonTensorStack,
    TensorDictKeysView,
    is_non_tensor,
    is_tensorclass,
    missing_key,
    normalize_index,
    unwrap_non_tensor,
    write_inplace,
)
from tensordict.base import NO_DEFAULT, TensorDictBase, _key_tuple
from tensordict.distributed import _redis
from tensordict.distributed._redis import Connection, StoreDataLostError
from tensordict.distributed._store_ops import StoreOps

_Path = tuple[str, ...]


def _is_json(value: Any) -> bool:
    try:
        return json.loads(json.dumps(value)) == value
    except (TypeError, ValueError):
        return False


def _runs(rows: Sequence[int]) -> list[tuple[int, int]]:
    """Consecutive rows grouped into ``(start, stop)`` runs, in order.

    >>> _runs([3, 4, 5, 1, 2, 7])
    [(3, 6), (1, 3), (7, 8)]
    """
    out: list[tuple[int, int]] = []
    for r in rows:
        if out and out[-1][1] == r:
            out[-1] = (out[-1][0], r + 1)
        else:
            out.append((r, r + 1))
    return out


def non_tensor_stack(flat: Sequence[Any], shape: Sequence[int], device: Any) -> Any:
    """A :class:`NonTensorStack` of ``shape`` holding the flat (C order) values ``flat``."""
    if not shape:
        raise ValueError("a non-tensor stack has at least one dimension.")
    if math.prod(shape) == 0:
        return NonTensorData(None, batch_size=list(shape), device=device).maybe_to_stack()
    return NonTensorStack.from_list(_redis.nest(flat, shape), device=device, ndim=len(shape))


def _element_json(path_repr: str, value: Any) -> str:
    if not _is_json(value):
        raise TypeError(
            f"TensorDictStore: the value {value!r} at {path_repr} is not JSON data; "
            "non-tensor values are stored as JSON (nothing is pickled). Nothing was written."
        )
    return json.dumps(value)


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


def is_key(index: Any) -> bool:
    """Whether ``store[index]`` names an entry (a string or a tuple of strings) rather
    than rows."""
    return isinstance(index, str) or (
        isinstance(index, tuple) and bool(index) and all(isinstance(i, str) for i in index)
    )


def fit_in_place(path: Any, value: torch.Tensor, dtype: torch.dtype, shape: Any) -> torch.Tensor:
    """``value`` with the ``dtype`` and ``shape`` of the entry at ``path`` it is written
    into in place, as core writes into a tensordict in memory (broadcast and cast), else
    :class:`InplaceWriteError`, raised before anything is written."""
    fitted = torch.empty(tuple(shape), dtype=dtype)
    try:
        write_inplace(path, fitted, value, False)
    except InplaceWriteError as err:
        raise InplaceWriteError(f"TensorDictStore: nothing was written. {err}") from None
    return fitted


class TensorDictStore(StoreOps, BackedTensorDict):
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

    # ------------------------------------------------------------------ data transfer
    def _download(
        self, entries: dict[_Path, dict[str, Any]], rows: Sequence[int] | None
    ) -> dict[_Path, Any]:
        """The leaves ``entries`` describes (only ``rows`` of the first dim if given),
        read in one round trip."""
        plan: list[tuple[_Path, dict[str, Any], list[Any]]] = []
        for path, entry in entries.items():
            if entry["kind"] == "tensor":
                if rows is None:
                    plan.append((path, entry, []))
                else:
                    rb = self._row_bytes(entry)
                    runs = [(a * rb, b * rb) for a, b in _runs(rows)] if rb else []
                    plan.append((path, entry, runs))
            elif entry["kind"] == "stack":
                per_row = math.prod(entry["shape"][1:])
                fields = (
                    None
                    if rows is None
                    else [str(r * per_row + j) for r in rows for j in range(per_row)]
                )
                plan.append((path, entry, [fields]))

        def build(pipe: Any) -> None:
            for path, entry, ranges in plan:
                key = self._data_key(path)
                if entry["kind"] == "stack":
                    pipe.exists(key)
                    if ranges[0] is None:
                        pipe.hgetall(key)
                    elif ranges[0]:
                        pipe.hmget(key, ranges[0])
                    continue
                if rows is None:
                    pipe.get(key)
                    continue
                pipe.exists(key)
                for start, stop in ranges:
                    pipe.getrange(key, start, stop - 1)

        replies = iter(self._conn.run(build))
        out: dict[_Path, Any] = {}
        for path, entry, ranges in plan:
            if entry["kind"] == "stack":
                out[path] = self._read_stack(path, entry, ranges[0], replies)
                continue
            dtype = _redis.parse_dtype(entry["dtype"], path)
            shape = list(entry["shape"])
            if rows is not None:
                shape[0] = len(rows)
                exists = next(replies)
                data = b"".join(next(replies) for _ in ranges)
                if not exists:
                    data = None
            else:
                data = next(replies)
            expected = math.prod(shape) * dtype.itemsize
            if data is None or len(data) != expected:
                raise StoreDataLostError(
                    f"TensorDictStore {self.td_id!r}: the data of key {self._show(path)} is "
                    f"{'missing' if data is None else f'{len(data)} bytes instead of {expected}'}"
                    f" on the server at {self._conn.where}: it was deleted or the server "
                    "restarted without persistence. Nothing was read."
                )
            value = _redis.from_bytes(data, dtype, shape)
            out[path] = value if self._device is None else value.to(self._device)
        batch = self._batch_size if rows is None else torch.Size([len(rows), *self._batch_size[1:]])
        for path, entry in entries.items():
            if entry["kind"] == "json":
                out[path] = NonTensorData(entry["value"], batch_size=batch, device=self._device)
        return out

    def _read_stack(
        self, path: _Path, entry: dict[str, Any], fields: list[str] | None, replies: Any
    ) -> Any:
        """Parse the replies of one stack entry read by :meth:`_download` (a
        :class:`NonTensorStack`)."""
        shape = list(entry["shape"])
        exists = next(replies)
        if fields is None:
            raw = next(replies)
            found = {int(k): v for k, v in raw.items()}
            values = [found.get(i) for i in range(math.prod(shape))]
        else:
            values = next(replies) if fields else []
            per_row = math.prod(shape[1:])
            shape[0] = len(fields) // per_row if per_row else 0
        if not exists and values:
            raise StoreDataLostError(
                f"TensorDictStore {self.td_id!r}: the values of the non-tensor key "
                f"{self._show(path)} are missing on the server at {self._conn.where}: they "
                "were deleted or the server restarted without persistence. Nothing was read."
            )
        flat = [None if v is None else json.loads(v) for v in values]
        return non_tensor_stack(flat, shape, self._device)

    @staticmethod
    def _row_bytes(entry: dict[str, Any]) -> int:
        dtype = _redis.parse_dtype(entry["dtype"], None)
        return math.prod(entry["shape"][1:]) * dtype.itemsize

    def _show(self, path: _Path) -> str:
        full = self._path + tuple(path)
        return repr(full[0] if len(full) == 1 else full)

    def _stack_entry(self, path: _Path, value: Any) -> tuple[dict[str, Any], dict[str, str]]:
        """``(metadata, {field: JSON})`` of a non-tensor stack stored at ``path``."""
        shape = list(value.batch_size)
        nb = len(self._batch_size)
        if shape[:nb] != list(self._batch_size):
            raise RuntimeError(
                f"batch dimension mismatch for key {self._show(path)}: the non-tensor stack "
                f"has batch size {tuple(shape)}, the store {tuple(self._batch_size)}."
            )
        flat = _redis.flatten_levels(value.tolist(), len(shape))
        shown = self._show(path)
        fields = {str(i): _element_json(shown, v) for i, v in enumerate(flat)}
        return {"kind": "stack", "shape": shape}, fields

    def _leaf_entry(self, path: _Path, value: Any) -> tuple[dict[str, Any], Any]:
        """``(metadata, payload)`` of one leaf to store at ``path``: the payload is the
        bytes of a tensor, ``None`` for one JSON value, ``{field: JSON}`` for a stack."""
        if isinstance(value, NonTensorData):
            value = value.data
        elif isinstance(value, NonTensorStack):  # one value per element
            return self._stack_entry(path, value)
        elif is_non_tensor(value):
            value = value.tolist()
        if not isinstance(value, torch.Tensor):
            if isinstance(value, (bool, int, float)):
                value = torch.as_tensor(value).expand(self._batch_size)
            elif isinstance(value, (str, list, dict)) or value is None:
                if not _is_json(value):
                    raise TypeError(
                        f"TensorDictStore: the value at {self._show(path)} is not JSON data; "
                        "non-tensor values are stored as JSON (nothing is pickled)."
                    )
                return {"kind": "json", "value": value}, None
            else:
                raise TypeError(
                    f"TensorDictStore: cannot store a {type(value).__name__} at "
                    f"{self._show(path)}; non-tensor values must be JSON data."
                )
        if value.layout != torch.strided or value.is_nested:
            raise TypeError(f"TensorDictStore: {self._show(path)} is not a strided tensor.")
        nb = len(self._batch_size)
        if value.shape[:nb] != self._batch_size:
            raise RuntimeError(
                f"batch dimension mismatch for key {self._show(path)}: the value has shape "
                f"{tuple(value.shape)} but its leading dimensions must equal the store's "
                f"batch_size={tuple(self._batch_size)}."
            )
        meta = {
            "kind": "tensor",
            "dtype": _redis.dtype_name(value.dtype),
            "shape": list(value.shape),
        }
        return meta, _redis.to_bytes(value)

    def _fit_in_place(self, path: _Path, value: Any, entry: dict[str, Any] | None) -> Any:
        """``value`` as the tensor entry ``entry`` holds it (its dtype and shape), for an
        in-place write; other entries and values are returned as they are."""
        if entry is None or entry.get("kind") != "tensor" or not isinstance(value, torch.Tensor):
            return value
        dtype = _redis.parse_dtype(entry["dtype"], path)
        return fit_in_place(path, value, dtype, tuple(entry["shape"]))

    def _flatten(self, path: _Path, value: Any, check: bool = True) -> list[tuple[_Path, Any]]:
        if isinstance(value, TensorDictStore):
            value = value.to_local()
        if isinstance(value, dict):
            value = TensorDict(value, batch_size=self._batch_size if check else [])
        if is_tensorclass(value):
            value = value._tensordict
        if isinstance(value, TensorDictBase) and not is_non_tensor(value):
            if check and value.batch_size[: len(self._batch_size)] != self._batch_size:
                raise RuntimeError(
                    f"batch dimension mismatch for key {self._show(path)}: the tensordict has "
                    f"batch size {tuple(value.batch_size)}, the store {tuple(self._batch_size)}."
                )
            return [
                (path + _key_tuple(k), v)
                for k, v in value.items(
                    include_nested=True, leaves_only=True, is_leaf=is_leaf_nontensor
                )
            ]
        return [(path, value)]

    def _upload(
        self, items: Sequence[tuple[_Path, Any]], inplace: bool, merge: bool = False
    ) -> None:
        """Write each ``(path, value)`` (a tensor, a JSON value or a tensordict): one round
        trip. A tensordict replaces what is at its path (with ``merge``, as ``update``,
        only its leaves are written and the other entries below the path are kept). With
        ``inplace``, leaves of the same dtype and shape are overwritten in place (and must
        still be on the server); a tensor written in place into a tensor entry takes that
        entry's dtype and shape (it must broadcast to it, as ``copy_``), else
        :class:`InplaceWriteError` and nothing is written."""
        entries = self._entries()
        flat = [(p, v) for path, value in items for p, v in self._flatten(path, value)]
        if inplace:
            flat = [(p, self._fit_in_place(p, v, entries.get(p))) for p, v in flat]
        leaves = [(p, *self._leaf_entry(p, v)) for p, v in flat]
        # locked: writes into existing entries pass; adding or replacing one does not
        self._check_paths_unlocked([p for p, _, _ in leaves if p not in entries], "add")
        if not inplace:
            self._check_paths_unlocked([p for p, _, _ in leaves], "replace")
        tensors = [(p, m, d) for p, m, d in leaves if m["kind"] == "tensor"]
        if inplace and all(entries.get(p) == m for p, m, _ in tensors):
            self._conn.write_ranges(
                [(self._data_key(p), d.nbytes, [(0, d)]) for p, m, d in tensors]
            )
            leaves = [(p, m, d) for p, m, d in leaves if m["kind"] != "tensor"]
            if not leaves:
                return
        written = {p for p, _, _ in leaves}
        targets = [p for p, _ in flat] if merge else [path for path, _ in items]
        stale = [
            q
            for q in entries
            if q not in written
            and any(q[: len(path)] == path or path[: len(q)] == q for path in targets)
        ]
        if leaves or stale:
            self._commit(leaves, [], stale)

    def _commit(
        self,
        leaves: Sequence[tuple[_Path, dict[str, Any], Any]],
        stacks: Sequence[tuple[_Path, dict[str, Any], dict[str, str], str | None]],
        stale: Sequence[_Path] = (),
    ) -> None:
        """One transaction: write the whole ``leaves`` ``(path, metadata, payload)``, set
        fields of stack entries ``(path, metadata, {field: JSON}, fill)`` (``fill``: the
        JSON of the single value the other elements keep, when the entry becomes a
        stack), and delete the ``stale`` entries."""

        def build(pipe: Any) -> None:
            pipe.hexists(self._conn.meta_key, "td")
            for p, m, d in leaves:
                pipe.hset(self._conn.meta_key, self._field(p), json.dumps(m))
                key = self._data_key(p)
                if isinstance(d, dict) or d is None:
                    pipe.delete(key)
                    if d:
                        pipe.hset(key, mapping=d)
                else:
                    pipe.set(key, d)
            for p, m, fields, fill in stacks:
                key = self._data_key(p)
                if fill is not None:
                    self._conn.fill_stack(pipe, key, math.prod(m["shape"]), fill)
                    pipe.hset(self._conn.meta_key, self._field(p), json.dumps(m))
                if fields:
                    pipe.hset(key, mapping=fields)
            if stale:
                pipe.hdel(self._conn.meta_key, *[self._field(q) for q in stale])
                pipe.delete(*[self._data_key(q) for q in stale])

        replies = self._conn.run(build, transaction=True)
        self._forget(stale)
        for p, m, _ in leaves:
            self._remember(p, m)
        for p, m, _, _ in stacks:
            self._remember(p, m)
        if not replies[0]:
            self._base._meta = None
            shown = [self._show(p) for p, _, _ in leaves] + [self._show(p) for p, *_ in stacks]
            raise StoreDataLostError(
                f"TensorDictStore {self.td_id!r}: the store's metadata was gone from the server "
                f"at {self._conn.where} when writing {shown} "
                "(it restarted without persistence, or the store was deleted): the other "
                "entries are lost. The written entries are on the server."
            )

    # ------------------------------------------------------------------ indexing
    def _row_plan(self, index: Any) -> tuple[list[int], bool, tuple[Any, ...]] | None:
        """``(rows of dim 0, drop dim 0, index of the other dims)`` or ``None`` when the
        index is better applied to a full local copy."""
        if not self._batch_size:
            return None
        idx = normalize_index(index, self._batch_size)
        items = idx if isinstance(idx, tuple) else (idx,)
        if not items:
            return None
        first, rest = items[0], tuple(items[1:])
        n = self._batch_size[0]
        if any(isinstance(r, torch.Tensor) or r is None or r is Ellipsis for r in rest):
            return None
        if isinstance(first, int):
            return [first % n], True, rest
        if isinstance(first, slice):
            return list(range(*first.indices(n))), False, rest
        if isinstance(first, torch.Tensor) and first.ndim == 1:
            if first.dtype == torch.bool:
                return first.nonzero().flatten().tolist(), False, rest
            return [int(i) % n for i in first.tolist()], False, rest
        return None

    def _read_rows(self, rows: list[int]) -> TensorDict:
        entries = self._entries()
        leaves = self._download(entries, rows)
        out = TensorDict(batch_size=[len(rows), *self._batch_size[1:]], device=self._device)
        for p, v in sorted(leaves.items()):
            out._set_tuple(p, v, inplace=False, validated=True)
        return out

    def __getitem__(self, index: Any) -> Any:
        if is_key(index):
            # a missing key raises and a non-tensor entry reads as its value, as td[key] does
            return unwrap_non_tensor(self.get(index, NO_DEFAULT))
        plan = self._row_plan(index)
        if plan is None:
            return self.to_local()[index]
        rows, drop, rest = plan
        local = self._read_rows(rows)
        if drop:
            local = local[0]
            return local[rest] if rest else local
        return local[(slice(None), *rest)] if rest else local

    def __setitem__(self, index: Any, value: Any) -> None:
        if is_key(index):
            self.set(index, value)
            return
        plan = self._row_plan(index)
        if plan is None:
            local = self.to_local()
            local[index] = value
            if self._batch_size:
                self._write_rows(list(range(self._batch_size[0])), local, False)
            else:
                self._upload([((), local)], inplace=False, merge=True)
            return
        rows, drop, rest = plan
        if rest:  # read the rows, change them locally, write them back
            local = self._read_rows(rows)
            if drop:
                local[(0, *rest)] = value
            else:
                local[(slice(None), *rest)] = value
            self._write_rows(rows, local, False)
            return
        self._write_rows(rows, value, drop)

    def _write_rows(self, rows: list[int], value: Any, drop: bool) -> None:
        """Write ``value`` into ``rows`` of dim 0 (one row, without its dim, with
        ``drop``): tensors in place on the server; a non-tensor entry given other values
        becomes one value per row; keys the store lacks are created (zeros, or ``None``
        for non-tensor values, in the other rows). Everything is checked first: bad input
        raises and leaves the server unchanged. A number or tensor written to every
        entry (``store[i] = 0``) leaves the non-tensor entries unchanged."""
        entries = self._entries()
        is_td = isinstance(value, (TensorDictBase, dict)) or is_tensorclass(value)
        if is_td:
            values = dict(self._flatten((), value, check=False))
        else:
            values = {p: value for p, e in entries.items() if e["kind"] == "tensor"}
        ranges = []
        stacks = []
        new = []
        for path, v in values.items():
            entry = entries.get(path)
            if entry is None:
                new.append(self._new_from_rows(path, v, rows, drop, entries))
            elif entry["kind"] == "tensor":
                ranges.append(self._tensor_rows(path, entry, v, rows, drop))
            else:
                op = self._non_tensor_rows(path, entry, v, rows, drop)
                if op is not None:
                    stacks.append(op)
        self._check_paths_unlocked([p for p, _, _ in new], "add")
        self._conn.write_ranges(ranges)
        if new or stacks:
            self._commit(new, stacks)

    def _tensor_rows(
        self, path: _Path, entry: dict[str, Any], v: Any, rows: list[int], drop: bool
    ) -> tuple[str, int, list[tuple[int, Any]]]:
        """The byte ranges that write ``v`` into ``rows`` of the tensor entry ``path``."""
        if is_non_tensor(v) or isinstance(v, (str, dict)) or v is None:
            raise TypeError(
                f"TensorDictStore: cannot write the non-tensor value {unwrap_non_tensor(v)!r} "
                f"into rows of the tensor entry {self._show(path)}. Nothing was written."
            )
        dtype = _redis.parse_dtype(entry["dtype"], path)
        row_shape = list(entry["shape"][1:])
        target = row_shape if drop else [len(rows), *row_shape]
        t = torch.as_tensor(v)
        fitted = torch.empty(target, dtype=dtype)
        try:
            write_inplace(path, fitted, t, False)
        except InplaceWriteError:
            raise RuntimeError(
                f"TensorDictStore: cannot write a value of shape {tuple(t.shape)} into "
                f"{len(rows)} row(s) of {self._show(path)}, whose rows have shape "
                f"{tuple(row_shape)} (the value must broadcast to {tuple(target)}). Nothing "
                "was written."
            ) from None
        t = fitted
        data = _redis.to_bytes(t)
        rb = self._row_bytes(entry)
        total = math.prod(entry["shape"]) * dtype.itemsize
        out = []
        pos = 0
        for a, b in _runs(rows):
            size = (b - a) * rb
            if size:
                out.append((a * rb, data[pos : pos + size]))
            pos += size
        return self._data_key(path), total, out

    def _row_values(
        self, path: _Path, v: Any, count: int, inner: list[int], drop: bool
    ) -> list[Any]:
        """The flat values ``v`` gives to ``count`` rows whose elements have shape
        ``inner`` (a single value is repeated; a stack must have the rows' shape)."""
        per_row = math.prod(inner)
        shape = inner if drop else [count, *inner]
        if isinstance(v, NonTensorStack):
            if list(v.batch_size) != shape:
                raise RuntimeError(
                    f"TensorDictStore: cannot write a non-tensor stack of batch size "
                    f"{tuple(v.batch_size)} into {count} row(s) of {self._show(path)}, which "
                    f"take a batch of shape {tuple(shape)}. Nothing was written."
                )
            return _redis.flatten_levels(v.tolist(), len(shape))
        if isinstance(v, torch.Tensor):  # a number the tensordict made a tensor
            try:
                t = v.expand(shape)
            except RuntimeError:
                raise RuntimeError(
                    f"TensorDictStore: cannot write a value of shape {tuple(v.shape)} into "
                    f"{count} row(s) of {self._show(path)} (elements of shape "
                    f"{tuple(shape)}). Nothing was written."
                ) from None
            return list(t.reshape(-1).tolist())
        if isinstance(v, NonTensorData):
            v = v.data
        return [v] * (count * per_row)

    def _non_tensor_rows(
        self, path: _Path, entry: dict[str, Any], v: Any, rows: list[int], drop: bool
    ) -> tuple[_Path, dict[str, Any], dict[str, str], str | None] | None:
        """The stack write that puts ``v`` into ``rows`` of the non-tensor entry ``path``
        (``None`` when nothing changes)."""
        shape = list(entry["shape"]) if entry["kind"] == "stack" else list(self._batch_size)
        inner = shape[1:]
        flat = self._row_values(path, v, len(rows), inner, drop)
        shown = self._show(path)
        if entry["kind"] == "json":
            if all(x == entry["value"] for x in flat):
                return None
            fill: str | None = _element_json(shown, entry["value"])
        else:
            fill = None
        per_row = math.prod(inner)
        fields = {}
        for i, r in enumerate(rows):
            for j in range(per_row):
                fields[str(r * per_row + j)] = _element_json(shown, flat[i * per_row + j])
        return path, {"kind": "stack", "shape": shape}, fields, fill

    def _new_from_rows(
        self, path: _Path, v: Any, rows: list[int], drop: bool, entries: dict[_Path, Any]
    ) -> tuple[_Path, dict[str, Any], Any]:
        """A new entry ``path`` whose ``rows`` hold ``v`` (zeros or ``None`` elsewhere)."""
        for q in entries:
            if q[: len(path)] == path or path[: len(q)] == q:
                raise RuntimeError(
                    f"TensorDictStore: cannot write rows of {self._show(path)}: "
                    f"{self._show(q)} is in the way (a leaf cannot hold nested entries, nor a "
                    "nested tensordict a value). Nothing was written."
                )
        n = self._batch_size[0]
        skip = 0 if drop else 1
        if is_non_tensor(v) or isinstance(v, str) or v is None:
            inner = (
                list(v.batch_size[skip:])
                if isinstance(v, NonTensorStack)
                else list(self._batch_size[1:])
            )
            shape = [n, *inner]
            if shape[: len(self._batch_size)] != list(self._batch_size):
                raise RuntimeError(
                    f"batch dimension mismatch for key {self._show(path)}: rows of batch "
                    f"{tuple(inner)} cannot go into a store of batch size "
                    f"{tuple(self._batch_size)}. Nothing was written."
                )
            flat: list[Any] = [None] * math.prod(shape)
            values = self._row_values(path, v, len(rows), inner, drop)
            per_row = math.prod(inner)
            for i, r in enumerate(rows):
                flat[r * per_row : (r + 1) * per_row] = values[i * per_row : (i + 1) * per_row]
            shown = self._show(path)
            fields = {str(i): _element_json(shown, x) for i, x in enumerate(flat)}
            return path, {"kind": "stack", "shape": shape}, fields
        t = torch.as_tensor(v)
        if not drop and (t.ndim == 0 or t.shape[0] != len(rows)):
            raise RuntimeError(
                f"TensorDictStore: the new key {self._show(path)} is given a value of shape "
                f"{tuple(t.shape)} for {len(rows)} row(s); its first dimension must be "
                f"{len(rows)}. Nothing was written."
            )
        full = torch.zeros([n, *t.shape[skip:]], dtype=t.dtype)
        if full.shape[: len(self._batch_size)] != self._batch_size:
            raise RuntimeError(
                f"batch dimension mismatch for key {self._show(path)}: rows of shape "
                f"{tuple(t.shape[skip:])} cannot go into a store of batch size "
                f"{tuple(self._batch_size)}. Nothing was written."
            )
        index = torch.tensor(rows, dtype=torch.long)
        full[index] = t.cpu().unsqueeze(0) if drop else t.cpu()
        meta, payload = self._leaf_entry(path, full)
        return path, meta, payload

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
