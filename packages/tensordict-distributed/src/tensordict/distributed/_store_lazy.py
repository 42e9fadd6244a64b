"""``LazyStackedTensorDictStore``: a lazy stack of tensordicts kept on a Redis server.

The elements may hold leaves of different shapes (as in a
:class:`~tensordict.LazyStackedTensorDict`); they share their keys. Each leaf is one
string on the server for the whole stack — the elements' bytes one after the other —
with every element's shape in the JSON beside it, so the number of server keys does not
grow with the number of elements. ``store[i]`` reads element ``i`` (a local
:class:`~tensordict.TensorDict`), ``store[i] = td`` writes it in place (or re-lays the
strings out, when its shapes change); ``to_local()`` rebuilds the lazy stack. A non-tensor
entry holds one JSON value for all elements, or one per element (a hash from the element's
index to its JSON) once elements are given different values, as a local lazy stack does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import torch

from tensordict import LazyStackedTensorDict, TensorDict, is_leaf_nontensor
from tensordict._plugins.api import NonTensorData, NonTensorStack, is_tensorclass, missing_key
from tensordict.base import NO_DEFAULT, TensorDictBase, _key_tuple
from tensordict.distributed import _redis
from tensordict.distributed._redis import StoreDataLostError
from tensordict.distributed._store import TensorDictStore
from tensordict.distributed._store_values import _element_json, fit_in_place, is_key

_Path = tuple[str, ...]


class LazyStackedTensorDictStore(TensorDictStore):
    """A lazy stack of ``count`` tensordicts of batch size ``inner_batch_size`` on a
    Redis-compatible server, stacked along ``stack_dim``. Connection arguments as for
    :class:`TensorDictStore`; :meth:`from_lazy_stack` copies a local lazy stack.
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
        count: int,
        stack_dim: int = 0,
        inner_batch_size: Sequence[int],
        device: Any = None,
        client: Any = None,
        td_id: str | None = None,
        cache_metadata: bool = True,
        _existing: bool = False,
        **redis_kwargs: Any,
    ) -> None:
        if not _existing:
            inner = torch.Size(inner_batch_size)
            if not 0 <= stack_dim <= len(inner):
                raise ValueError(
                    f"stack_dim={stack_dim} is out of range for inner batch size {tuple(inner)}."
                )
            self._count, self._stack_dim, self._inner = int(count), int(stack_dim), inner
        super().__init__(
            backend=backend,
            host=host,
            port=port,
            db=db,
            unix_socket_path=unix_socket_path,
            prefix=prefix,
            batch_size=None,
            device=device,
            client=client,
            td_id=td_id,
            cache_metadata=cache_metadata,
            _existing=_existing,
            **redis_kwargs,
        )
        if _existing:
            info = self._read_info()
            self._count = int(info["count"])
            self._stack_dim = int(info["stack_dim"])
            self._inner = torch.Size(info["inner_batch_size"])
        shape = list(self._inner)
        shape.insert(self._stack_dim, self._count)
        self._batch_size = torch.Size(shape)

    def _info(self) -> dict[str, Any]:
        return {
            "kind": "LazyStackedTensorDictStore",
            "batch_size": [],
            "count": self._count,
            "stack_dim": self._stack_dim,
            "inner_batch_size": list(self._inner),
        }

    @classmethod
    def from_lazy_stack(cls, td: Any, **kwargs: Any) -> LazyStackedTensorDictStore:
        """A new store holding a copy of the lazy stack ``td`` (one round trip)."""
        members = list(td.tensordicts)
        if not members:
            raise ValueError("from_lazy_stack: the lazy stack has no member.")
        if kwargs.get("device") is None:
            kwargs["device"] = td.device
        store = cls(
            count=len(members),
            stack_dim=td.stack_dim,
            inner_batch_size=members[0].batch_size,
            **kwargs,
        )
        try:
            store._write_members(list(range(len(members))), members)
        except BaseException:
            store._conn.delete_all()  # nothing of it stays on the server
            store.close()
            raise
        return store

    @classmethod
    def from_dict(cls, input_dict: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Raises ``NotImplementedError``: a dict holds no stack; build a
        :class:`~tensordict.LazyStackedTensorDict` and call :meth:`from_lazy_stack`
        (or use :meth:`TensorDictStore.from_dict`)."""
        raise NotImplementedError(
            "LazyStackedTensorDictStore.from_dict: a dict holds no stack of tensordicts; call "
            "LazyStackedTensorDictStore.from_lazy_stack(LazyStackedTensorDict(...), ...) or "
            "TensorDictStore.from_dict(...)."
        )

    # ------------------------------------------------------------------ elements
    def _element_bytes(self, entry: dict[str, Any]) -> list[int]:
        dtype = _redis.parse_dtype(entry["dtype"], None)
        return [math.prod(s) * dtype.itemsize for s in entry["shapes"]]

    def _read_elements(
        self, items: list[int], paths: list[_Path] | None = None
    ) -> list[TensorDict]:
        """Elements ``items`` as local tensordicts (only ``paths`` when given): one trip."""
        entries = self._entries()
        chosen = [(p, e) for p, e in sorted(entries.items()) if paths is None or p in paths]
        plan = []
        stacks = [(p, e) for p, e in chosen if e["kind"] == "stack"]
        for path, entry in chosen:
            if entry["kind"] != "tensor":
                continue
            sizes = self._element_bytes(entry)
            starts = [sum(sizes[:i]) for i in range(len(sizes))]
            plan.append((path, entry, [(starts[i], sizes[i]) for i in items]))

        def build(pipe: Any) -> None:
            for path, _, ranges in plan:
                key = self._data_key(path)
                pipe.strlen(key)
                for start, size in ranges:
                    pipe.getrange(key, start, start + size - 1)
            for path, _ in stacks:
                pipe.exists(self._data_key(path))
                if items:
                    pipe.hmget(self._data_key(path), [str(i) for i in items])

        replies = iter(self._conn.run(build))
        out = [TensorDict(batch_size=self._inner, device=self._device) for _ in items]
        for path, entry, ranges in plan:
            dtype = _redis.parse_dtype(entry["dtype"], path)
            length = next(replies)
            expected = sum(self._element_bytes(entry))
            chunks = [next(replies) if size else b"" for _, size in ranges]
            if length != expected:
                raise StoreDataLostError(
                    f"LazyStackedTensorDictStore {self.td_id!r}: the data of key "
                    f"{self._show(path)} is {length} bytes instead of {expected} on the server "
                    f"at {self._conn.where} (deleted, or the server restarted without "
                    "persistence). Nothing was read."
                )
            for td, i, chunk in zip(out, items, chunks):
                value = _redis.from_bytes(chunk, dtype, entry["shapes"][i])
                if self._device is not None:
                    value = value.to(self._device)
                td._set_tuple(path, value, inplace=False, validated=True)
        for path, _ in stacks:
            exists = next(replies)
            values = next(replies) if items else []
            if not exists and values:
                raise StoreDataLostError(
                    f"LazyStackedTensorDictStore {self.td_id!r}: the values of the non-tensor "
                    f"key {self._show(path)} are missing on the server at {self._conn.where} "
                    "(deleted, or the server restarted without persistence). Nothing was read."
                )
            for td, raw in zip(out, values):
                value = NonTensorData(
                    None if raw is None else json.loads(raw),
                    batch_size=self._inner,
                    device=self._device,
                )
                td._set_tuple(path, value, inplace=False, validated=True)
        for path, entry in chosen:
            if entry["kind"] == "json":
                for td in out:
                    td._set_tuple(path, entry["value"], inplace=False, validated=False)
        return out

    def _write_members(
        self, items: list[int], members: Sequence[Any], partial: bool = False
    ) -> None:
        """Write local tensordicts as elements ``items``: in place when every shape is
        unchanged, else by laying the leaf strings out again. With ``partial``, the
        members may hold only some of the store's keys (the others are kept)."""
        if len(items) != len(members):
            raise ValueError(f"{len(items)} elements to write but {len(members)} values given.")
        members = [m._tensordict if is_tensorclass(m) else m for m in members]
        for m in members:
            if not isinstance(m, TensorDictBase) or m.batch_size != self._inner:
                raise RuntimeError(
                    f"LazyStackedTensorDictStore: each element must be a tensordict of batch "
                    f"size {tuple(self._inner)}, got {getattr(m, 'batch_size', type(m).__name__)}."
                )
        entries = self._entries()
        leaves = [
            dict(m.items(include_nested=True, leaves_only=True, is_leaf=is_leaf_nontensor))
            for m in members
        ]
        keys = {_key_tuple(k) for k in leaves[0]}
        for leaf in leaves[1:]:
            if {_key_tuple(k) for k in leaf} != keys:
                raise KeyError("LazyStackedTensorDictStore: the elements must share their keys.")
        if entries and (not keys <= set(entries) if partial else set(entries) != keys):
            raise KeyError(
                f"LazyStackedTensorDictStore: the element has keys "
                f"{sorted(map(self._show, keys))}, the store {sorted(map(self._show, entries))}."
            )
        in_place = []
        relayout: dict[_Path, dict[str, Any]] = {}
        new: list[tuple[_Path, dict[str, Any], Any]] = []
        stacks: list[tuple[_Path, dict[str, Any], dict[str, str], str | None]] = []
        full = sorted(items) == list(range(self._count))
        for key in keys:
            values = [leaf[key if len(key) > 1 else key[0]] for leaf in leaves]
            entry = entries.get(key)
            if not isinstance(values[0], torch.Tensor):
                data = self._element_values(key, values)
                shown = self._show(key)
                texts = [_element_json(shown, d) for d in data]
                if entry is not None and entry["kind"] == "json":
                    if all(d == entry["value"] for d in data):
                        continue
                    if not full:  # the other elements keep the entry's value
                        fill = _element_json(shown, entry["value"])
                        fields = {str(i): t for i, t in zip(items, texts)}
                        stacks.append((key, self._stack_meta(), fields, fill))
                        continue
                if entry is not None and entry["kind"] == "stack":
                    fields = {str(i): t for i, t in zip(items, texts)}
                    stacks.append((key, entry, fields, None))
                    continue
                if not full:
                    raise KeyError(
                        f"LazyStackedTensorDictStore: {shown} is new (or changes kind); write "
                        "every element."
                    )
                if len(set(texts)) == 1:
                    relayout[key] = {"kind": "json", "value": data[0]}
                else:
                    by_item = {str(i): t for i, t in zip(items, texts)}
                    new.append((key, self._stack_meta(), by_item))
                continue
            dtype = values[0].dtype
            shapes = entry["shapes"] if entry is not None and entry["kind"] == "tensor" else None
            if (
                shapes is not None
                and entry["dtype"] == _redis.dtype_name(dtype)
                and all(list(v.shape) == shapes[i] for v, i in zip(values, items))
            ):
                sizes = self._element_bytes(entry)
                starts = [sum(sizes[:i]) for i in range(len(sizes))]
                ranges = [(starts[i], _redis.to_bytes(v)) for v, i in zip(values, items)]
                in_place.append((self._data_key(key), sum(sizes), ranges))
            else:
                relayout[key] = {"values": dict(zip(items, values)), "dtype": dtype}
        self._conn.write_ranges(in_place)
        if relayout:
            self._relayout(relayout, entries)
        if new or stacks:
            self._commit(new, stacks)

    def _stack_meta(self) -> dict[str, Any]:
        return {"kind": "stack", "shape": [self._count]}

    def _element_values(self, key: _Path, values: Sequence[Any]) -> list[Any]:
        """The JSON data of the elements' non-tensor values at ``key``."""
        out = []
        for v in values:
            if isinstance(v, NonTensorStack):
                raise TypeError(
                    f"LazyStackedTensorDictStore: the elements' non-tensor entry "
                    f"{self._show(key)} holds several values per element (a NonTensorStack); "
                    "a lazy-stacked store keeps one JSON value per element."
                )
            out.append(v.data if isinstance(v, NonTensorData) else v)
        return out

    def _relayout(self, changes: dict[_Path, dict[str, Any]], entries: dict[_Path, Any]) -> None:
        """Rewrite whole leaf strings whose element shapes or dtype change."""
        need = [p for p, c in changes.items() if "values" in c and p in entries]
        missing_items = {
            p: [i for i in range(self._count) if i not in changes[p]["values"]] for p in need
        }
        current = {}
        for p in need:
            if missing_items[p]:
                olds = self._read_elements(missing_items[p], [p])
                current[p] = dict(zip(missing_items[p], (o.get(p) for o in olds)))
        new_meta = {}
        blobs = {}
        for p, change in changes.items():
            if "values" not in change:
                new_meta[p] = change
                continue
            values = {**current.get(p, {}), **change["values"]}
            if len(values) != self._count:
                raise KeyError(
                    f"LazyStackedTensorDictStore: {self._show(p)} is new; write every element."
                )
            ordered = [values[i].to(change["dtype"]) for i in range(self._count)]
            new_meta[p] = {
                "kind": "tensor",
                "dtype": _redis.dtype_name(change["dtype"]),
                "shapes": [list(v.shape) for v in ordered],
            }
            blobs[p] = b"".join(bytes(_redis.to_bytes(v)) for v in ordered)

        def build(pipe: Any) -> None:
            for p, m in new_meta.items():
                pipe.hset(self._conn.meta_key, self._field(p), json.dumps(m))
                if p in blobs:
                    pipe.set(self._data_key(p), blobs[p])
                else:
                    pipe.delete(self._data_key(p))

        self._conn.run(build, transaction=True)
        for p, m in new_meta.items():
            self._remember(p, m)

    # ------------------------------------------------------------------ the interface
    def _skeleton(self) -> TensorDict:
        out = TensorDict(batch_size=self._batch_size)
        for path, entry in sorted(self._entries().items()):
            if entry["kind"] == "tensor":
                shapes = entry["shapes"]
                shape = (
                    list(shapes[0]) if all(s == shapes[0] for s in shapes) else list(self._inner)
                )
                shape.insert(self._stack_dim, self._count)
                dtype = _redis.parse_dtype(entry["dtype"], path)
                out._set_tuple(
                    path,
                    torch.empty(shape, dtype=dtype, device="meta"),
                    inplace=False,
                    validated=True,
                )
            elif entry["kind"] == "stack":
                value = NonTensorData(None, batch_size=self._batch_size).maybe_to_stack()
                out._set_tuple(path, value, inplace=False, validated=True)
            else:
                out._set_tuple(path, entry["value"], inplace=False, validated=False)
        return out

    def contiguous(self, *, canonical: bool = False, inplace: bool = False) -> Any:
        """The stack read into a local dense :class:`~tensordict.TensorDict` (as
        ``to_local().contiguous()``: the elements' shapes must match)."""
        if inplace:
            return super().contiguous(inplace=True)  # refused, naming the store
        return self.to_local().contiguous(canonical=canonical)

    def _repr_fields(self) -> list[tuple[str, Any]]:
        fields = super()._repr_fields()
        at = [name for name, _ in fields].index("batch_size") + 1
        fields[at:at] = [("count", self._count), ("stack_dim", self._stack_dim)]
        return fields

    def to_local(self) -> Any:
        """The whole stack as a local :class:`~tensordict.LazyStackedTensorDict`."""
        return self._local_of(None)

    def _local_of(self, paths: Sequence[_Path] | None) -> Any:
        members = self._read_elements(list(range(self._count)), paths)
        return LazyStackedTensorDict(*members, stack_dim=self._stack_dim)

    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        raise RuntimeError(
            "the batch size of a LazyStackedTensorDictStore (count and inner batch size) "
            "cannot be changed."
        )

    def _write_changed(self, local: Any, keys: list[Any]) -> None:
        members = getattr(local, "tensordicts", None)
        if members is None or len(members) != self._count:
            raise RuntimeError(
                "LazyStackedTensorDictStore: the result is no longer a stack of "
                f"{self._count} elements; it cannot be written back."
            )
        entries = self._entries()
        for key in keys:
            if _key_tuple(key) not in entries:
                self._relayout_new(_key_tuple(key), [m.select(key) for m in members])
        if any(_key_tuple(k) in entries for k in keys):
            stored = [p for p in self._entries() if p in entries]
            self._write_members(list(range(self._count)), [m.select(*stored) for m in members])

    def _get_tuple(self, key: tuple, default: Any) -> Any:
        path = tuple(key)
        entries = self._entries()
        paths = [p for p in entries if p[: len(path)] == path]
        if not paths:
            if default is NO_DEFAULT:
                raise missing_key(key[0] if len(key) == 1 else key, self)
            return default
        members = self._read_elements(list(range(self._count)), paths)
        return LazyStackedTensorDict(*members, stack_dim=self._stack_dim).get(path)

    def _set_tuple(
        self, key: tuple, value: Any, *, inplace: bool, validated: bool, non_blocking: bool = False
    ) -> LazyStackedTensorDictStore:
        path = tuple(key)
        if inplace and isinstance(value, torch.Tensor):
            current = self.get(path, None)
            if isinstance(current, torch.Tensor):
                value = fit_in_place(path, value, current.dtype, current.shape)
        if is_tensorclass(value) and not isinstance(value, NonTensorData):
            value = value._tensordict
        if isinstance(value, TensorDictStore):
            value = value.to_local()
        parts = (
            value.unbind(self._stack_dim)
            if isinstance(value, (torch.Tensor, TensorDictBase, NonTensorStack))
            else [value] * self._count
        )
        members = []
        for part in parts:
            td = TensorDict(batch_size=self._inner)
            td._set_tuple(path, part, inplace=False, validated=False)
            members.append(td)
        entries = self._entries()
        if path not in entries and entries:
            # A new key: every element gets it (the others keep theirs).
            self._relayout_new(path, members)
            return self
        self._write_members(list(range(self._count)), members, partial=True)
        return self

    def _relayout_new(self, path: _Path, members: list[TensorDict]) -> None:
        self._check_paths_unlocked([path], "add")
        changes: dict[_Path, dict[str, Any]] = {}
        new = []
        for p, _ in members[0].items(
            include_nested=True, leaves_only=True, is_leaf=is_leaf_nontensor
        ):
            p = _key_tuple(p)
            values = [m._get_tuple(p, NO_DEFAULT) for m in members]
            if isinstance(values[0], torch.Tensor):
                changes[p] = {"values": dict(enumerate(values)), "dtype": values[0].dtype}
                continue
            data = self._element_values(p, values)
            texts = [_element_json(self._show(p), d) for d in data]
            if len(set(texts)) == 1:
                changes[p] = {"kind": "json", "value": data[0]}
            else:
                new.append((p, self._stack_meta(), {str(i): t for i, t in enumerate(texts)}))
        self._relayout(changes, {})
        if new:
            self._commit(new, [])

    def _elements(self, index: Any) -> tuple[list[int], bool] | None:
        if self._stack_dim != 0:
            return None
        if isinstance(index, int):
            if not -self._count <= index < self._count:
                raise IndexError(f"index {index} is out of range for {self._count} elements.")
            return [index % self._count], True
        if isinstance(index, slice):
            return list(range(*index.indices(self._count))), False
        if isinstance(index, (list, torch.Tensor)) and torch.as_tensor(index).ndim == 1:
            t = torch.as_tensor(index)
            if t.dtype == torch.bool:
                return t.nonzero().flatten().tolist(), False
            return [int(i) % self._count for i in t.tolist()], False
        return None

    def __getitem__(self, index: Any) -> Any:
        if is_key(index):
            return super().__getitem__(index)
        plan = self._elements(index)
        if plan is None:
            return self.to_local()[index]
        items, single = plan
        members = self._read_elements(items)
        if single:
            return members[0]
        return LazyStackedTensorDict(*members, stack_dim=0)

    def __setitem__(self, index: Any, value: Any) -> None:
        if is_key(index):
            self.set(index, value)
            return
        plan = self._elements(index)
        if plan is None:
            raise NotImplementedError(
                "LazyStackedTensorDictStore: writes by index take elements along the stack "
                "dimension (an int, a slice or a list of ints, with stack_dim=0)."
            )
        items, single = plan
        if single:
            values = [value]
        elif isinstance(value, TensorDictBase) and hasattr(value, "tensordicts"):
            values = list(value.tensordicts)
        else:
            values = list(value.unbind(0))
        self._write_members(items, values)

    def update(
        self, input_dict_or_td: Any, clone: bool = False, inplace: bool = False, **kwargs: Any
    ) -> LazyStackedTensorDictStore:  # type: ignore[override]
        source = input_dict_or_td
        if hasattr(source, "tensordicts") and len(source.tensordicts) == self._count:
            self._write_members(list(range(self._count)), list(source.tensordicts))
            return self
        for key in source.keys():
            self._set_tuple(_key_tuple(key), source.get(key), inplace=inplace, validated=False)
        return self

    def __len__(self) -> int:
        return self._batch_size[0] if self._batch_size else 0
