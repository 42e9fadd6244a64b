"""The server side of the stores: key layout, byte codecs, round trips, errors.

Layout of a store ``td_id`` under ``prefix`` on a Redis-compatible server:

* ``{prefix}:{td_id}:meta`` — a hash. Field ``td``: JSON of the store itself (kind,
  batch size, device, stack layout). One field per leaf, named by the JSON list of its
  key path (``["a","b"]``): JSON of its dtype and shape (or of its non-tensor value).
  Keys and shapes are known without downloading any data.
* ``{prefix}:{td_id}:data:{path}`` — a string holding the leaf's raw bytes (C order); for
  a non-tensor entry with one value per row (kind ``"stack"``, a
  :class:`~tensordict.NonTensorStack`), a hash from each element's flat (C order) index
  to the JSON of its value, so that writing some rows sets only their fields.

Every public call is one round trip: the commands of a call go through one pipeline.
Writes into existing rows run as one Lua script that first checks that every string
still exists with its expected length, so that writing into data the server lost (a
restart without persistence, ``clear_redis`` from another process) raises instead of
silently recreating zero-filled strings. Values are raw bytes and JSON, never pickles.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Sequence
from typing import Any

import torch

from tensordict._plugins.api import _DTYPES

#: Arguments of the Lua writer: KEYS = strings; ARGV = per key: expected length, number
#: of ranges, then (offset, bytes) per range.
_WRITE_RANGES = """
local a = 1
for i, key in ipairs(KEYS) do
  local expected = tonumber(ARGV[a])
  local n = tonumber(ARGV[a + 1])
  if redis.call('STRLEN', key) ~= expected then
    return {0, key}
  end
  a = a + 2 + 2 * n
end
a = 1
for i, key in ipairs(KEYS) do
  local n = tonumber(ARGV[a + 1])
  for j = 0, n - 1 do
    redis.call('SETRANGE', key, tonumber(ARGV[a + 2 + 2 * j]), ARGV[a + 3 + 2 * j])
  end
  a = a + 2 + 2 * n
end
return {1, ''}
"""


#: Turns a non-tensor entry of one value into one value per element: KEYS[1] = the hash;
#: ARGV = number of elements, JSON of the value. Elements already set are kept (another
#: process may have turned the entry into a stack and written rows first).
_FILL_STACK = """
for i = 0, tonumber(ARGV[1]) - 1 do
  redis.call('HSETNX', KEYS[1], tostring(i), ARGV[2])
end
return 1
"""


#: The ``redis.Redis`` arguments read from a client's pool when a store is pickled.
_PORTABLE = ("username", "password", "socket_timeout", "socket_connect_timeout")


class StoreDataLostError(RuntimeError):
    """Data the store expected is not (or no longer) on the server: it was deleted
    (``clear_redis`` elsewhere) or the server restarted without persistence."""


def redis_module() -> Any:
    try:
        import redis
    except ImportError as err:
        raise ModuleNotFoundError(
            "TensorDictStore needs the redis client: pip install tensordict-distributed[redis] "
            "(redis and hiredis)."
        ) from err
    return redis


def new_td_id() -> str:
    return uuid.uuid4().hex


def path_field(path: Sequence[str]) -> str:
    """The hash field / key suffix naming a leaf path.

    >>> path_field(("a", "b"))
    '["a","b"]'
    """
    return json.dumps(list(path), separators=(",", ":"))


def field_path(field: str | bytes) -> tuple[str, ...]:
    text = field.decode() if isinstance(field, bytes) else field
    return tuple(json.loads(text))


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def parse_dtype(name: Any, key: Any) -> torch.dtype:
    dtype = _DTYPES.get(name) if isinstance(name, str) else None
    if dtype is None:
        raise ValueError(f"the server describes key {key!r} with an unknown dtype {name!r}.")
    return dtype


def to_bytes(t: torch.Tensor) -> memoryview:
    """The raw bytes of ``t`` in C order, without a copy when it is a contiguous CPU tensor."""
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    return memoryview(flat.view(torch.uint8).numpy())


def from_bytes(data: bytes, dtype: torch.dtype, shape: Sequence[int]) -> torch.Tensor:
    """A new tensor holding ``data`` (one copy: the received bytes are read-only)."""
    if not data:
        return torch.empty(tuple(shape), dtype=dtype)
    raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return raw.view(dtype).reshape(tuple(shape))


def nest(flat: Sequence[Any], shape: Sequence[int]) -> list[Any]:
    """The flat (C order) list ``flat`` as nested lists of ``shape``.

    >>> nest([1, 2, 3, 4, 5, 6], [2, 3])
    [[1, 2, 3], [4, 5, 6]]
    """
    if len(shape) <= 1:
        return list(flat)
    step = math.prod(shape[1:])
    return [nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


def flatten_levels(nested: Any, ndim: int) -> list[Any]:
    """The elements of the first ``ndim`` levels of nested lists, in C order.

    >>> flatten_levels([[1, [2]], [3, [4]]], 2)
    [1, [2], 3, [4]]
    """
    if ndim == 0:
        return [nested]
    return [x for item in nested for x in flatten_levels(item, ndim - 1)]


class Connection:
    """A client and the names of one store's keys on the server."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        db: int,
        unix_socket_path: str | None,
        prefix: str,
        td_id: str,
        client: Any,
        redis_kwargs: dict[str, Any],
    ) -> None:
        self.owns_client = client is None
        if client is None:
            redis = redis_module()
            if unix_socket_path is not None:
                client = redis.Redis(unix_socket_path=unix_socket_path, db=db, **redis_kwargs)
                self.where = f"unix socket {unix_socket_path}"
            else:
                client = redis.Redis(host=host, port=port, db=db, **redis_kwargs)
                self.where = f"{host}:{port}"
        else:
            self.where = repr(client)
        self.client = client
        self.prefix = prefix
        self.td_id = td_id
        self.closed = False
        self.settings = {
            "host": host,
            "port": port,
            "db": db,
            "unix_socket_path": unix_socket_path,
            "prefix": prefix,
        }
        self.redis_kwargs = dict(redis_kwargs)
        self.meta_key = f"{prefix}:{td_id}:meta"
        self._writer: Any = None
        self._filler: Any = None

    def portable_settings(self) -> dict[str, Any]:
        """The arguments that open a new client on the same server, database and prefix,
        for a store sent to another process. A client passed in cannot travel: its
        address is read from its connection pool."""
        if self.owns_client:
            return {**self.settings, **self.redis_kwargs}
        pool = getattr(self.client, "connection_pool", None)
        found = dict(getattr(pool, "connection_kwargs", None) or {})
        if not found:
            raise TypeError(
                f"TensorDictStore {self.td_id!r}: the client it was given ({self.where}) has "
                "no connection pool to read its address from, so the store cannot be "
                "pickled or sent to another process; open it with host=/port= instead."
            )
        out: dict[str, Any] = {
            "host": found.get("host", "localhost"),
            "port": found.get("port", 6379),
            "db": found.get("db", 0),
            "unix_socket_path": found.get("path"),
            "prefix": self.prefix,
        }
        for name in _PORTABLE:
            if found.get(name) is not None:
                out[name] = found[name]
        return out

    def data_key(self, path: Sequence[str]) -> str:
        return f"{self.prefix}:{self.td_id}:data:{path_field(path)}"

    def run(self, build: Any, transaction: bool = False) -> list[Any]:
        """Run the commands ``build(pipe)`` queues, in one round trip; errors made clear."""
        self.check_open()
        redis = redis_module()
        try:
            pipe = self.client.pipeline(transaction=transaction)
            build(pipe)
            return list(pipe.execute())
        except redis.exceptions.ConnectionError as err:
            raise ConnectionError(
                f"TensorDictStore {self.td_id!r}: cannot reach the server at {self.where} "
                f"({err}). The data on the server is unchanged by this call; retry once it "
                "is back."
            ) from err
        except redis.exceptions.TimeoutError as err:
            raise TimeoutError(
                f"TensorDictStore {self.td_id!r}: the server at {self.where} did not answer "
                f"in time ({err})."
            ) from err

    def write_ranges(self, writes: list[tuple[str, int, list[tuple[int, Any]]]]) -> None:
        """Write byte ranges into existing strings, atomically, after checking that each
        string exists with its expected length: ``[(key, expected length, [(offset,
        bytes)])]``."""
        if not writes:
            return
        keys: list[str] = []
        args: list[Any] = []
        for key, length, ranges in writes:
            keys.append(key)
            args += [length, len(ranges)]
            for offset, data in ranges:
                args += [offset, data]
        if self._writer is None:
            self._writer = self.client.register_script(_WRITE_RANGES)
        writer = self._writer
        ((status, bad),) = self.run(lambda pipe: writer(keys=keys, args=args, client=pipe))
        if int(status) != 1:
            name = bad.decode() if isinstance(bad, bytes) else bad
            raise StoreDataLostError(
                f"TensorDictStore {self.td_id!r}: the data at {name!r} is missing or has the "
                f"wrong size on the server at {self.where}; nothing was written. It was "
                "deleted (clear_redis from another process?) or the server restarted without "
                "persistence."
            )

    def fill_stack(self, pipe: Any, key: str, count: int, value_json: str) -> None:
        """Queue on ``pipe``: set every element ``0..count-1`` of the hash ``key`` not set
        yet to ``value_json`` (one command, run on the server)."""
        if self._filler is None:
            self._filler = self.client.register_script(_FILL_STACK)
        self._filler(keys=[key], args=[count, value_json], client=pipe)

    def check_open(self) -> None:
        if self.closed:
            raise RuntimeError(
                f"TensorDictStore {self.td_id!r} is closed; reconnect with "
                f"TensorDictStore.from_store(td_id={self.td_id!r}, ...)."
            )

    def close(self) -> None:
        """Stop using the server; a client this store made is closed (a client passed in
        belongs to the caller and stays open)."""
        if not self.closed:
            self.closed = True
            if self.owns_client:
                try:
                    self.client.close()
                except Exception:  # pragma: no cover - closing a broken connection
                    pass

    def delete_all(self) -> None:
        """Delete every key of this store (its data strings and its metadata)."""
        pattern = f"{self.prefix}:{self.td_id}:*"
        self.check_open()
        keys = list(self.client.scan_iter(match=pattern, count=1000))
        if keys:
            self.run(lambda pipe: pipe.delete(*keys))
