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
of those rows); writes go to the server at once. Every call is one round trip. Non-tensor
values are stored as JSON (others raise ``TypeError``): nothing is ever pickled.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from tensordict import TensorDict, is_leaf_nontensor
from tensordict._plugins.api import (
    InplaceWriteError,
    NonTensorData,
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


class TensorDictStore(StoreOps, TensorDictBase):
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
    """

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
        self._device = None if device is None else torch.device(device)
        self._cache_metadata = cache_metadata
        self._meta: dict[_Path, dict[str, Any]] | None = None
        if _existing:
            info = self._read_info()
            self._batch_size = torch.Size(info["batch_size"])
            self._names = info.get("names")
        else:
            self._batch_size = torch.Size(() if batch_size is None else batch_size)
            self._write_info()

    # ------------------------------------------------------------------ construction
    def _info(self) -> dict[str, Any]:
        return {"kind": "TensorDictStore", "batch_size": list(self._batch_size)}

    def _write_info(self) -> None:
        info = json.dumps({**self._info(), "names": self._names})
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
        :class:`LazyStackedTensorDictStore`."""
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
        (raw,) = probe.run(lambda pipe: pipe.hget(probe.meta_key, "td"))
        if kwargs.get("client") is None:
            probe.close()
        info = json.loads(raw) if raw is not None else {}
        if info.get("kind") == "LazyStackedTensorDictStore":
            from tensordict.distributed._store_lazy import LazyStackedTensorDictStore

            layout = {k: info[k] for k in ("count", "stack_dim", "inner_batch_size")}
            return LazyStackedTensorDictStore(**layout, **conn_kwargs)
        return TensorDictStore(**conn_kwargs)

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
        :class:`LazyStackedTensorDictStore`, so its members may differ in shape."""
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
        if is_tensorclass(td):
            td = td._tensordict
        if hasattr(td, "tensordicts") and hasattr(td, "stack_dim"):
            from tensordict.distributed._store_lazy import LazyStackedTensorDictStore

            return LazyStackedTensorDictStore.from_lazy_stack(td, **conn)
        store = cls(batch_size=td.batch_size, **conn)
        store.update(td)
        return store

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
        return TensorDictStore.from_store(td_id=td_id, **self._connection_kwargs())

    def close(self) -> None:
        """Close the connection; the data stays on the server (see :meth:`clear_redis`)."""
        self._conn.close()

    def clear_redis(self) -> None:
        """Delete every key of this store from the server (data and metadata)."""
        self._conn.delete_all()
        self._meta = None
        self._write_info()

    def refresh(self) -> TensorDictStore:
        """Re-read keys, dtypes and shapes from the server (other processes' new keys)."""
        self._meta = None
        return self

    def __del__(self) -> None:
        conn = self.__dict__.get("_conn")
        if conn is not None:
            conn.close()

    # ------------------------------------------------------------------ metadata
    def _entries(self) -> dict[_Path, dict[str, Any]]:
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
            else:
                value = NonTensorData(entry["value"], batch_size=self._batch_size)
            out._set_tuple(path, value, inplace=False, validated=True)
        return out

    # ------------------------------------------------------------------ the primitives
    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        # Leaves keep their full shapes on the server: only the description changes.
        new = torch.Size(value)
        for path, entry in self._entries().items():
            if entry["kind"] == "tensor" and list(entry["shape"][: len(new)]) != list(new):
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
        below = {p: e for p, e in entries.items() if p[: len(path)] == path and len(p) > len(path)}
        if not below:
            if default is NO_DEFAULT:
                raise missing_key(key[0] if len(key) == 1 else key, self)
            return default
        leaves = self._download(below, None)
        out = TensorDict(batch_size=self._batch_size, device=self._device)
        for p, value in sorted(leaves.items()):
            out._set_tuple(p[len(path) :], value, inplace=False, validated=True)
        return out

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
        self._check_unlocked(gone, "delete")
        fields = [_redis.path_field(p) for p in gone]
        datas = [self._conn.data_key(p) for p in gone]

        def build(pipe: Any) -> None:
            pipe.hdel(self._conn.meta_key, *fields)
            pipe.delete(*datas)

        self._conn.run(build, transaction=True)
        self._forget(gone)

    def _forget(self, paths: Sequence[_Path]) -> None:
        if self._meta is not None:
            for p in paths:
                self._meta.pop(p, None)

    # ------------------------------------------------------------------ data transfer
    def _download(
        self, entries: dict[_Path, dict[str, Any]], rows: Sequence[int] | None
    ) -> dict[_Path, Any]:
        """The leaves ``entries`` describes (only ``rows`` of the first dim if given),
        read in one round trip."""
        plan: list[tuple[_Path, dict[str, Any], list[tuple[int, int]]]] = []
        for path, entry in entries.items():
            if entry["kind"] != "tensor":
                continue
            if rows is None:
                plan.append((path, entry, []))
            else:
                rb = self._row_bytes(entry)
                plan.append((path, entry, [(a * rb, b * rb) for a, b in _runs(rows)] if rb else []))

        def build(pipe: Any) -> None:
            for path, _, ranges in plan:
                key = self._conn.data_key(path)
                if rows is None:
                    pipe.get(key)
                    continue
                pipe.exists(key)
                for start, stop in ranges:
                    pipe.getrange(key, start, stop - 1)

        replies = iter(self._conn.run(build))
        out: dict[_Path, Any] = {}
        for path, entry, ranges in plan:
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
            if entry["kind"] != "tensor":
                out[path] = NonTensorData(entry["value"], batch_size=batch, device=self._device)
        return out

    @staticmethod
    def _row_bytes(entry: dict[str, Any]) -> int:
        dtype = _redis.parse_dtype(entry["dtype"], None)
        return math.prod(entry["shape"][1:]) * dtype.itemsize

    @staticmethod
    def _show(path: _Path) -> str:
        return repr(path[0] if len(path) == 1 else path)

    def _leaf_entry(self, path: _Path, value: Any) -> tuple[dict[str, Any], Any]:
        """``(metadata, bytes or None)`` of one leaf to store at ``path``."""
        if isinstance(value, NonTensorData):
            value = value.data
        elif is_non_tensor(value):  # a NonTensorStack: one value per element
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
        if isinstance(value, dict):
            value = TensorDict(value, batch_size=self._batch_size if check else [])
        if is_tensorclass(value):
            value = value._tensordict
        if isinstance(value, TensorDictBase):
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

    def _upload(self, items: Sequence[tuple[_Path, Any]], inplace: bool) -> None:
        """Write each ``(path, value)`` (a tensor, a JSON value or a tensordict): one round
        trip. With ``inplace``, leaves of the same dtype and shape are overwritten in place
        (and must still be on the server); a tensor written in place into a tensor entry
        takes that entry's dtype and shape (it must broadcast to it, as ``copy_``), else
        :class:`InplaceWriteError` and nothing is written."""
        entries = self._entries()
        flat = [(p, v) for path, value in items for p, v in self._flatten(path, value)]
        if inplace:
            flat = [(p, self._fit_in_place(p, v, entries.get(p))) for p, v in flat]
        leaves = [(p, *self._leaf_entry(p, v)) for p, v in flat]
        self._check_unlocked([p for p, _, _ in leaves if p not in entries], "add")
        if inplace and all(entries.get(p) == m for p, m, d in leaves if d is not None):
            self._conn.write_ranges(
                [
                    (self._conn.data_key(p), d.nbytes, [(0, d)])
                    for p, m, d in leaves
                    if d is not None
                ]
            )
            leaves = [(p, m, d) for p, m, d in leaves if d is None]
            if not leaves:
                return
        written = {p for p, _, _ in leaves}
        stale = [
            q
            for q in entries
            if q not in written
            and any(q[: len(path)] == path or path[: len(q)] == q for path, _ in items)
        ]

        def build(pipe: Any) -> None:
            pipe.hexists(self._conn.meta_key, "td")
            for p, m, d in leaves:
                pipe.hset(self._conn.meta_key, _redis.path_field(p), json.dumps(m))
                if d is None:
                    pipe.delete(self._conn.data_key(p))
                else:
                    pipe.set(self._conn.data_key(p), d)
            if stale:
                pipe.hdel(self._conn.meta_key, *[_redis.path_field(q) for q in stale])
                pipe.delete(*[self._conn.data_key(q) for q in stale])

        replies = self._conn.run(build, transaction=True)
        if self._meta is not None:
            self._forget(stale)
            for p, m, _ in leaves:
                self._meta[p] = m
        if not replies[0]:
            self._meta = None
            raise StoreDataLostError(
                f"TensorDictStore {self.td_id!r}: the store's metadata was gone from the server "
                f"at {self._conn.where} when writing {[self._show(p) for p, _, _ in leaves]} "
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
            self._write_rows(
                list(range(self._batch_size[0])) if self._batch_size else [], local, False
            )
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
        """Write ``value`` into ``rows`` of every leaf, in place on the server."""
        entries = self._entries()
        is_td = isinstance(value, (TensorDictBase, dict)) or is_tensorclass(value)
        values = dict(self._flatten((), value, check=False)) if is_td else None
        writes = []
        for path, entry in entries.items():
            if values is not None and path not in values:
                continue
            v = values[path] if values is not None else value
            if entry["kind"] != "tensor":
                new = v.data if isinstance(v, NonTensorData) else v
                if new != entry["value"]:
                    raise ValueError(
                        f"TensorDictStore: {self._show(path)} holds one non-tensor value for all "
                        f"rows ({entry['value']!r}); rows cannot be given {new!r}."
                    )
                continue
            dtype = _redis.parse_dtype(entry["dtype"], path)
            row_shape = list(entry["shape"][1:])
            target = row_shape if drop else [len(rows), *row_shape]
            t = torch.as_tensor(v).to(dtype).expand(target)
            data = _redis.to_bytes(t)
            rb = self._row_bytes(entry)
            total = math.prod(entry["shape"]) * dtype.itemsize
            ranges = []
            pos = 0
            for a, b in _runs(rows):
                size = (b - a) * rb
                if size:
                    ranges.append((a * rb, data[pos : pos + size]))
                pos += size
            writes.append((self._conn.data_key(path), total, ranges))
        if values is not None:
            unknown = [p for p in values if p not in entries]
            if unknown:
                raise KeyError(
                    f"TensorDictStore: rows can only be written to existing keys; "
                    f"unknown key(s) {[self._show(p) for p in unknown]}."
                )
        self._conn.write_ranges(writes)

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
        """Write every entry of ``input_dict_or_td`` (one round trip)."""
        source = input_dict_or_td
        if isinstance(source, dict):
            source = TensorDict(source, batch_size=self._batch_size)
        if is_tensorclass(source):
            source = source._tensordict
        self._upload([((k,), source._get_str(k, NO_DEFAULT)) for k in source.keys()], inplace)
        return self

    def __len__(self) -> int:
        return self._batch_size[0] if self._batch_size else 0

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        try:
            keys = sorted(map(str, self.keys(True, True)))
        except Exception:  # pragma: no cover - closed or unreachable
            keys = ["?"]
        return (
            f"{type(self).__name__}(td_id={self.td_id!r}, server={self._conn.where}, "
            f"batch_size={self._batch_size}, keys={keys})"
        )


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
