"""Data transfer of a :class:`~tensordict.distributed.TensorDictStore`: downloading
entries (one round trip for any number of them), and uploading (checked before anything
is written, then one pipeline: bytes, metadata and the entry index together)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import torch

from tensordict import TensorDict, is_leaf_nontensor
from tensordict._plugins.api import (
    NonTensorData,
    NonTensorStack,
    is_non_tensor,
    is_tensorclass,
)
from tensordict.base import TensorDictBase, _key_tuple
from tensordict.distributed import _redis
from tensordict.distributed._redis import StoreDataLostError
from tensordict.distributed._store_values import (
    _element_json,
    _is_json,
    _runs,
    fit_in_place,
    non_tensor_stack,
)

_Path = tuple[str, ...]


class StoreTransfer:
    """Mixin of :class:`~tensordict.distributed.TensorDictStore`: downloads and uploads."""

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
        if isinstance(value, StoreTransfer):  # another store: its data, read here
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
