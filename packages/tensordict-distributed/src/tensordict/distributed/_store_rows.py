"""Rows of a :class:`~tensordict.distributed.TensorDictStore`: ``store[rows]`` reads them
into a local tensordict and ``store[rows] = value`` writes them in place on the server,
one round trip each (tensors as byte ranges, non-tensor values as one JSON field per
element, which turns a single value into one value per row, as in memory)."""

from __future__ import annotations

import math
from typing import Any

import torch

from tensordict import TensorDict
from tensordict._plugins.api import (
    InplaceWriteError,
    NonTensorData,
    NonTensorStack,
    is_non_tensor,
    is_tensorclass,
    normalize_index,
    unwrap_non_tensor,
    write_inplace,
)
from tensordict.base import NO_DEFAULT, TensorDictBase
from tensordict.distributed import _redis
from tensordict.distributed._store_values import (
    _element_json,
    _runs,
    is_key,
)

_Path = tuple[str, ...]


class StoreRows:
    """Mixin of :class:`~tensordict.distributed.TensorDictStore`: reading and writing rows."""

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
