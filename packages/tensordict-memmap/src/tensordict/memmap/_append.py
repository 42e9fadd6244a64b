"""``append_memmap``: grow a saved folder along its first batch dimension, in place.

Every tensor file gets the new rows' bytes after its current rows; then the
``meta.json`` files are rewritten (each through a temporary file, all written and flushed
before the first rename, the top one renamed first). Until the top ``meta.json`` is
replaced a reader sees the old rows; an append interrupted between renames leaves nested
levels whose sizes disagree, which a load reports as an error (never as wrong data).
Readers that mapped the files before keep their old view. One appender at a time.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from tensordict import LazyStackedTensorDict, MetaData, NonTensorData, NonTensorStack
from tensordict._plugins.api import is_tensorclass
from tensordict.base import NO_DEFAULT, TensorDictBase
from tensordict.memmap import _classes, _codec, _fs
from tensordict.memmap._plan import META, META_FIELDS, RESERVED_ENTRIES, TC_INNER
from tensordict.memmap._reader import locate
from tensordict.memmap._source import FolderSource, Rel
from tensordict.memmap._tensor import _tensor_bytes, parse_dtype, shape_numel


def append_memmap(prefix: str | Path, rows: Any, *, allow_pickle: bool | None = None) -> None:
    """Append ``rows`` (a tensordict with the saved one's keys and trailing shapes) to the
    tensordict saved in folder ``prefix``, along the first batch dimension.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict, append_memmap
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = TensorDict({"x": torch.zeros(2, 3)}, [2]).memmap(tmp)
    ...     append_memmap(tmp, TensorDict({"x": torch.ones(1, 3)}, [1]))
    ...     print(TensorDict.load_memmap(tmp)["x"].sum(-1))
    tensor([0., 0., 3.])
    """
    root = Path(prefix).absolute()
    if not root.is_dir() or not (root / META).is_file():
        raise ValueError(
            f"append_memmap appends to a folder written by save or memmap, and {str(root)!r} is "
            "not one (an archive cannot grow: unpack it with unpack_memmap first)."
        )
    appender = _Appender(FolderSource(root), _codec.check_allow_pickle(allow_pickle))
    appender.walk((), _unwrap(rows), top=True)
    appender.commit()


def _unwrap(value: Any) -> Any:
    return value._tensordict if is_tensorclass(value) else value


class _Appender:
    def __init__(self, source: FolderSource, allow_pickle: bool) -> None:
        self.source = source
        self.allow_pickle = allow_pickle
        self.writes: list[tuple[Path, int, torch.Tensor]] = []
        self.metas: list[tuple[Rel, bytes]] = []
        self.rows: int | None = None

    def walk(self, rel: Rel, value: Any, top: bool = False) -> None:
        meta = self.source.read_meta((*rel, META))
        where = self.source.describe((*rel, META))
        cls = _classes.builtin_from_meta(meta)
        if cls is LazyStackedTensorDict:
            raise ValueError(f"{where}: cannot append rows to a lazy stack.")
        if cls is NonTensorStack:
            self._stack(rel, meta, value, where)
        elif cls in (NonTensorData, MetaData):
            self._data(meta, value, where)
        elif cls is None and "shape" not in meta and self.source.is_dir((*rel, TC_INNER)):
            self.walk((*rel, TC_INNER), value, top)
        else:
            self._dense(rel, meta, value, where, top)

    def _dense(self, rel: Rel, meta: dict[str, Any], value: Any, where: str, top: bool) -> None:
        if not isinstance(value, TensorDictBase):
            raise ValueError(f"{where}: expected a tensordict of rows, got {type(value).__name__}")
        batch = meta.get("shape")
        if not isinstance(batch, list) or not batch:
            raise ValueError(
                f"{where}: the saved tensordict has batch size {batch!r}; appending needs at "
                "least one batch dimension."
            )
        got = list(value.batch_size)
        if not got or got[1:] != batch[1:]:
            raise ValueError(
                f"Cannot append rows with batch size {got} to the saved tensordict of batch size "
                f"{batch} ({where}): the sizes after the first must match."
            )
        n = got[0]
        if self.rows is None:
            self.rows = n
        elif n != self.rows:
            raise ValueError(f"{where}: nested rows have {n} rows, the top level {self.rows}.")
        entries = {k: v for k, v in meta.items() if k not in META_FIELDS}
        reserved = meta.get(RESERVED_ENTRIES) or {}
        entries.update(reserved)
        saved_keys = sorted(k for k, v in entries.items() if isinstance(v, dict))
        row_keys = sorted(value.keys())
        if saved_keys != row_keys:
            raise ValueError(
                f"Cannot append rows with the keys {row_keys} to the saved tensordict, which has "
                f"the keys {saved_keys} ({where})."
            )
        new_meta = json.loads(json.dumps(meta))
        for key in saved_keys:
            entry = entries[key]
            target = new_meta[RESERVED_ENTRIES][key] if key in reserved else new_meta[key]
            item = value._get_str(key, NO_DEFAULT)
            if "dtype" in entry:
                self._leaf(rel, key, entry, item, where)
                target["shape"][0] += n
            else:
                sub = locate(self.source, rel, key, "", True, directory=True)
                self.walk(sub, _unwrap(item))
        new_meta["shape"][0] += n
        self.metas.append((rel, json.dumps(new_meta).encode("utf-8")))

    def _leaf(self, rel: Rel, key: str, entry: dict[str, Any], item: Any, where: str) -> None:
        dtype = parse_dtype(entry.get("dtype"))
        shape = entry.get("shape")
        if entry.get("is_nested"):
            raise ValueError(f"{where}: cannot append to the nested tensor {key!r}.")
        if not isinstance(item, torch.Tensor):
            raise ValueError(
                f"{where}: the entry {key!r} is a tensor, the rows hold {type(item).__name__}"
            )
        if item.dtype != dtype or list(item.shape[1:]) != list(shape[1:]):
            raise ValueError(
                f"Cannot append rows of dtype {item.dtype} and shape {tuple(item.shape)} to the "
                f"entry {key!r}, of dtype {dtype} and shape {tuple(shape)}."
            )
        path = self.source.path(locate(self.source, rel, key, ".memmap", True))
        old = shape_numel(shape) * dtype.itemsize
        if path.is_symlink() or not path.is_file() or path.stat().st_size < old:
            raise ValueError(f"{str(path)!r} is missing, a symlink or shorter than {where} says.")
        self.writes.append((path, old, item))

    def _data(self, meta: dict[str, Any], value: Any, where: str) -> None:
        if "data" not in meta:
            raise ValueError(f"{where}: cannot append to a pickled non-tensor value.")
        saved = meta["data"]
        if isinstance(value, NonTensorStack):
            values = _flatten(value.tolist(), value.batch_dims)
        elif isinstance(value, NonTensorData):
            values = [value.data]
        else:
            values = [value]
        if any(type(v) is not type(saved) or v != saved for v in values):
            raise ValueError(
                f"Cannot append to the entry at {where}: the saved non-tensor value {saved!r} "
                f"stays as it is, so the rows must hold the same value."
            )

    def _stack(self, rel: Rel, meta: dict[str, Any], value: Any, where: str) -> None:
        data = meta.get("data")
        if data == "pickle.pkl":
            raise ValueError(f"{where}: cannot append to a pickled NonTensorStack.")
        if isinstance(value, (NonTensorStack, NonTensorData)):
            extra = value.tolist()
        else:
            raise ValueError(f"{where}: expected non-tensor rows, got {type(value).__name__}")
        if not isinstance(data, list) or not isinstance(extra, list):
            raise ValueError(f"{where}: cannot append to a 0-dimensional NonTensorStack")
        if not _codec.is_json_exact(extra):
            raise ValueError(f"{where}: the appended values are not JSON; they cannot be appended.")
        new_meta = dict(meta)
        new_meta["data"] = data + extra
        if isinstance(meta.get("shape"), list) and meta["shape"]:
            new_meta["shape"] = [meta["shape"][0] + len(extra), *meta["shape"][1:]]
        self.metas.append((rel, json.dumps(new_meta).encode("utf-8")))

    def commit(self) -> None:
        for path, offset, tensor in self.writes:
            fd = os.open(path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
            try:
                payload = _tensor_bytes(tensor)
                _fs.write_all(fd, payload.numpy(), offset)
                os.ftruncate(fd, offset + payload.numel())
                os.fsync(fd)
            finally:
                os.close(fd)
        staged = []
        for rel, payload in self.metas:
            final = self.source.path((*rel, META))
            tmp = final.with_name(f"{_fs.TMP_MARK}append-{META}")
            fd = _fs.create_file(tmp, exclusive=False)
            try:
                os.ftruncate(fd, 0)
                _fs.write_all(fd, payload)
                os.fsync(fd)
            finally:
                os.close(fd)
            staged.append((tmp, final))
        for tmp, final in sorted(staged, key=lambda p: len(p[1].parts)):
            os.replace(tmp, final)
            _fs.fsync_dir(final.parent)


def _flatten(values: Any, ndim: int) -> list[Any]:
    if ndim == 0:
        return [values]
    return [x for v in values for x in _flatten(v, ndim - 1)]
