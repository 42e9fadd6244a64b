"""Loading a saved folder: ``load_memmap`` / ``load`` and the in-place ``load_*_``.

Loading maps each tensor file (no data is read) and checks the folder as it goes: a
``meta.json`` that is not valid JSON, names an unknown dtype, gives a shape that does not
fit the batch size or does not match its file, or refers to a missing file raises an
error that names the file and what was expected. A file may hold more bytes than its
entry only where :func:`~tensordict.append_memmap` can leave them (rows of an append
interrupted before its ``meta.json`` was replaced): a tensor with batch dimensions, not
nested, outside a lazy stack. Nothing is unpickled unless
``allow_pickle=True``, and no module is imported because a ``meta.json`` names a class
(see :mod:`~tensordict.memmap._classes`).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from tensordict import LazyStackedTensorDict, MetaData, NonTensorData, NonTensorStack, TensorDict
from tensordict._plugins.api import unravel_key
from tensordict.memmap import _classes, _codec, _fs
from tensordict.memmap._plan import META, META_FIELDS, RESERVED_ENTRIES, TC_INNER, member_batch
from tensordict.memmap._progress import Bar
from tensordict.memmap._source import FolderSource, Rel
from tensordict.memmap._tensor import parse_dtype, shape_numel
from tensordict.memmap._writer import mark

Source = Any  # FolderSource or _archive.ArchiveSource

_MODES = (None, "r", "r+")


class Loader:
    """Settings of one load, and the recursive reader of levels."""

    def __init__(
        self,
        *,
        device: Any = None,
        non_blocking: bool = False,
        robust_key: bool | None = True,
        mode: str | None = None,
        allow_pickle: bool | None = None,
        classes: Iterable[type] = (),
        import_classes: bool = False,
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"mode must be 'r', 'r+' or None, got {mode!r}.")
        self.device = None if device is None else torch.device(device)
        self.non_blocking = non_blocking
        self.robust = True if robust_key is None else bool(robust_key)
        self.mode = mode
        self.allow_pickle = _codec.check_allow_pickle(allow_pickle)
        self.classes = tuple(classes)
        self.import_classes = import_classes
        self.source: Source = None
        self.bar: Bar | None = None
        self._in_stack = 0  # > 0 while loading the members of a lazy stack

    def reads_data(self, source: Source) -> bool:
        """Whether loading from ``source`` goes through the data: checksums of an archive,
        or a copy to another device (mapping files reads nothing)."""
        moves = self.device is not None and self.device.type not in ("cpu", "meta")
        return moves or bool(getattr(source, "verify", False))

    # ------------------------------------------------------------------ entry points
    def load(self, source: Source, subpath: Any = None) -> Any:
        """Load the tensordict stored in ``source`` (at ``subpath``, if given)."""
        self.source = source
        rel: Rel = descend(source, subpath, self.robust) if subpath is not None else ()
        if not source.is_file((*rel, META)):
            if isinstance(source, FolderSource) and not source.exists(rel):
                raise FileNotFoundError(
                    f"No such file or directory: {source.describe((*rel, META))}"
                )
            raise FileNotFoundError(
                f"{source.describe(rel)} is not a memory-mapped tensordict: it has no meta.json."
            )
        return self.level(rel, None)

    # ------------------------------------------------------------------ levels
    def level(self, rel: Rel, parent_batch: torch.Size | None) -> Any:
        meta = self.source.read_meta((*rel, META))
        cls = _classes.builtin_from_meta(meta)
        if cls is LazyStackedTensorDict:
            return self._lazy(rel, meta)
        if cls is NonTensorStack:
            return self._non_tensor_stack(rel, meta, parent_batch)
        if cls in (NonTensorData, MetaData):
            return self._non_tensor_data(rel, meta, parent_batch, cls)
        if cls is TensorDict:
            return self._dense(rel, meta)
        return self._other(rel, meta, parent_batch)

    def _where(self, rel: Rel) -> str:
        return self.source.describe((*rel, META))

    def _other(self, rel: Rel, meta: dict[str, Any], parent_batch: torch.Size | None) -> Any:
        dotted = _classes.dotted_from_type(meta.get("_type"))
        if self.source.is_dir((*rel, TC_INNER)) and "shape" not in meta:
            content = self.level((*rel, TC_INNER), parent_batch)
        elif "shape" in meta:
            content = self._dense(rel, meta)
        else:
            raise ValueError(
                f"{self._where(rel)}: unknown layout for class {meta.get('_type')!r} "
                "(expected a tensordict level, a lazy stack, a non-tensor value or a "
                "tensorclass folder)."
            )
        if dotted is None:
            return content
        cls = _classes.resolve(dotted, self.classes, self.import_classes)
        if cls is None:
            warnings.warn(
                f"{self._where(rel)} names the class {dotted!r}, which is not imported or "
                "registered; returning a plain TensorDict. Import or register the class, pass "
                "it with classes=[...], or pass import_classes=True to let the loader import "
                "its module.",
                UserWarning,
                stacklevel=4,
            )
            return content
        return _classes.rebuild(cls, content)

    def _dense(self, rel: Rel, meta: dict[str, Any]) -> TensorDict:
        where = self._where(rel)
        batch = _size(meta.get("shape"), where, "shape")
        entries: dict[str, Any] = {}
        items = [(k, v) for k, v in meta.items() if k not in META_FIELDS]
        reserved = meta.get(RESERVED_ENTRIES)
        if reserved is not None:
            if not isinstance(reserved, dict):
                raise ValueError(f"{where}: {RESERVED_ENTRIES!r} must be an object")
            items += list(reserved.items())
        for key, entry in items:
            if not isinstance(entry, dict):
                if key.startswith("_"):
                    continue  # format fields of other versions
                raise ValueError(f"{where}: the entry {key!r} is not an object: {entry!r}")
            if "dtype" in entry:
                value = self._leaf(rel, key, entry, batch)
            elif "type" in entry:
                sub = locate(self.source, rel, key, "", self.robust, directory=True)
                if not self.source.is_file((*sub, META)):
                    raise FileNotFoundError(
                        f"{where} lists the entry {key!r} but "
                        f"{self.source.describe((*sub, META))} does not exist."
                    )
                value = self.level(sub, batch)
                sub_batch = getattr(value, "batch_size", None)
                if sub_batch is not None and tuple(sub_batch[: len(batch)]) != tuple(batch):
                    raise ValueError(
                        f"{self._where(sub)}: batch size {list(sub_batch)} does not start with "
                        f"the parent's {list(batch)} (from {where})."
                    )
            else:
                raise ValueError(f"{where}: the entry {key!r} has neither 'dtype' nor 'type'.")
            entries[key] = value
        device = self.device if self.device is not None else meta.get("device", "cpu")
        if device is not None and torch.device(device).type not in ("cpu", "meta"):
            device = self.device  # a saved CUDA device is not forced on the loaded leaves
        out = TensorDict(entries, batch_size=batch, device=device)
        names = meta.get("_names")
        if names is not None:
            out.names = names
        self._mark(out, rel)
        return out

    def _mark(self, td: Any, rel: Rel) -> None:
        if self.source.mapped and (self.device is None or self.device.type == "cpu"):
            mark(td, self.source.folder(rel), ())

    def _leaf(self, rel: Rel, key: str, entry: dict[str, Any], batch: torch.Size) -> torch.Tensor:
        where = self._where(rel)
        try:
            dtype = parse_dtype(entry.get("dtype"))
        except ValueError as err:
            raise ValueError(f"{where}, entry {key!r}: {err}") from None
        nested = entry.get("is_nested", False)
        if not isinstance(nested, bool):
            raise ValueError(f"{where}, entry {key!r}: 'is_nested' must be true or false")
        shape_field = _size(entry.get("shape"), where, f"shape of {key!r}")
        path = locate(self.source, rel, key, ".memmap", self.robust)
        shape: Any = shape_field
        if nested:
            sizes_rel = (*path[:-1], path[-1][: -len(".memmap")] + ".shape.memmap")
            self._check_file(sizes_rel, shape_numel(shape_field) * 8, where, key, False)
            shape = self.source.tensor(sizes_rel, torch.int64, shape_field, "r").clone()
            if shape.ndim != 2 or (shape < 0).any():
                raise ValueError(
                    f"{self.source.describe(sizes_rel)}: nested sizes must be a 2-D tensor of "
                    "sizes >= 0"
                )
        elif tuple(shape_field[: len(batch)]) != tuple(batch):
            raise ValueError(
                f"{where}: the entry {key!r} has shape {list(shape_field)}, which does not start "
                f"with the batch size {list(batch)}."
            )
        growable = not nested and len(batch) > 0 and not self._in_stack
        self._check_file(path, shape_numel(shape) * dtype.itemsize, where, key, growable)
        if self.device is not None and self.device.type == "meta" and not nested:
            return torch.empty(shape, dtype=dtype, device="meta")
        tensor = self.source.tensor(path, dtype, shape, self.mode)
        if self.device is not None and self.device.type != "cpu":
            tensor = tensor.to(self.device, non_blocking=self.non_blocking)
        if self.bar is not None:
            self.bar.update(shape_numel(shape) * dtype.itemsize)
        return tensor

    def _check_file(self, rel: Rel, nbytes: int, where: str, key: str, growable: bool) -> None:
        """The file of entry ``key`` holds its ``nbytes`` (and more only if ``growable``:
        the rows of an unfinished :func:`~tensordict.append_memmap`)."""
        try:
            size = self.source.file_size(rel)
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{where} lists the tensor {key!r} but its file {self.source.describe(rel)} is "
                "missing."
            ) from None
        if size < nbytes:
            raise ValueError(
                f"{self.source.describe(rel)} holds {size} bytes, but {where} describes the "
                f"entry {key!r} with {nbytes} bytes: the file is truncated or meta.json is wrong."
            )
        if size > nbytes and not growable:
            raise ValueError(
                f"{self.source.describe(rel)} holds {size} bytes, but {where} describes the "
                f"entry {key!r} with {nbytes} bytes: the file or meta.json is corrupted (only "
                "a tensor with batch dimensions, not nested and outside a lazy stack, can hold "
                "more bytes: the rows of an unfinished append_memmap)."
            )

    def _lazy(self, rel: Rel, meta: dict[str, Any]) -> LazyStackedTensorDict:
        where = self._where(rel)
        stack_dim = meta.get("stack_dim", 0)
        if type(stack_dim) is not int or stack_dim < 0:
            raise ValueError(f"{where}: 'stack_dim' must be an int >= 0, got {stack_dim!r}")
        count = meta.get("count")
        if count is None:
            count = 0
            while self.source.is_file((*rel, str(count), META)):
                count += 1
        elif type(count) is not int or count < 0:
            raise ValueError(f"{where}: 'count' must be an int >= 0, got {count!r}")
        members = []
        for i in range(count):
            member = (*rel, str(i))
            if not self.source.is_file((*member, META)):
                raise FileNotFoundError(
                    f"{where} stacks {count} tensordicts but "
                    f"{self.source.describe((*member, META))} does not exist."
                )
            self._in_stack += 1
            try:
                members.append(self.level(member, None))
            finally:
                self._in_stack -= 1
        batch = meta.get("shape")
        empty_batch = None  # an empty stack takes its (absent) members' batch size
        if not members and batch is not None:
            empty_batch = member_batch(_size(batch, where, "shape"), stack_dim)
        out = LazyStackedTensorDict(
            *members,
            stack_dim=stack_dim,
            stack_dim_name=meta.get("stack_dim_name"),
            batch_size=empty_batch,
        )
        self._mark(out, rel)
        return out

    def _non_tensor_data(
        self, rel: Rel, meta: dict[str, Any], parent_batch: torch.Size | None, cls: type
    ) -> NonTensorData:
        if "data" in meta:
            value = meta["data"]
        else:
            pickled = (*rel, "other.pickle")
            if not self.source.is_file(pickled):
                raise FileNotFoundError(
                    f"{self._where(rel)} has no 'data' and {self.source.describe(pickled)} "
                    "does not exist."
                )
            payload = _codec.unpickle_or_refuse(
                self.source.describe(pickled),
                self.allow_pickle,
                read=lambda: self.source.read_bytes(pickled),
            )
            if not isinstance(payload, dict) or "data" not in payload:
                raise ValueError(
                    f"{self.source.describe(pickled)} does not hold a {{'data': value}} mapping"
                )
            value = payload["data"]
        if parent_batch is None:  # loaded on its own: the batch size saved with it
            shape = meta.get("shape", [])
            if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
                raise ValueError(
                    f"{self._where(rel)}: 'shape' must be a list of sizes, got {shape!r}"
                )
            parent_batch = torch.Size(shape)
        out: NonTensorData = cls(value, batch_size=parent_batch, device=self.device)
        return out

    def _non_tensor_stack(
        self, rel: Rel, meta: dict[str, Any], parent_batch: torch.Size | None
    ) -> NonTensorStack:
        where = self._where(rel)
        values = meta.get("data")
        if values == "pickle.pkl":
            pickled = (*rel, "pickle.pkl")
            values = _codec.unpickle_or_refuse(
                self.source.describe(pickled),
                self.allow_pickle,
                read=lambda: self.source.read_bytes(pickled),
            )
        shape = meta.get("shape")
        batch = _size(shape, where, "shape") if shape is not None else parent_batch
        if not isinstance(values, list):
            raise ValueError(f"{where}: 'data' of a NonTensorStack must be a list")
        device = self.device if self.device is not None else meta.get("device")
        if not (device is None or isinstance(device, (str, torch.device))):
            raise ValueError(f"{where}: bad 'device' {device!r}")
        try:
            stack = NonTensorStack.from_list(
                values, device=device, ndim=None if batch is None else len(batch)
            )
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        if batch is not None and tuple(stack.batch_size) != tuple(batch):
            raise ValueError(
                f"{where}: the stacked values have shape {list(stack.batch_size)}, expected "
                f"{list(batch)}."
            )
        stack_dim = meta.get("stack_dim", 0)
        if type(stack_dim) is int and 0 <= stack_dim < max(stack.batch_dims, 1):
            stack.stack_dim = stack_dim
        return stack


# --------------------------------------------------------------------------- helpers


def _size(value: Any, where: str, what: str) -> torch.Size:
    if not isinstance(value, list) or not all(type(v) is int and v >= 0 for v in value):
        raise ValueError(f"{where}: {what} must be a list of integers >= 0, got {value!r}.")
    return torch.Size(value)


def locate(
    source: Source, rel: Rel, key: str, suffix: str, robust: bool, *, directory: bool = False
) -> Rel:
    """Where ``key`` of level ``rel`` is stored: the robust encoding first, then (for saves
    written with ``robust_key=False``) the key itself when it is a plain file name."""
    candidates = []
    if robust:
        candidates.append(_fs.encode_key(key, directory=directory))
        if directory:
            candidates.append(_fs.encode_key(key))
    if _fs.is_plain_name(key):
        candidates.append(key)
    if not candidates:
        raise ValueError(
            f"The key {key!r} of {source.describe((*rel, META))} is not a plain file name; load "
            "with robust_key=True."
        )
    for name in candidates:
        if source.exists((*rel, name + suffix)):
            return (*rel, name + suffix)
    return (*rel, candidates[0] + suffix)


def _subpath_parts(subpath: Any) -> list[str]:
    if isinstance(subpath, str):
        return [part for part in subpath.split("/") if part]
    if isinstance(subpath, Sequence):
        key = unravel_key(tuple(subpath))
        return [key] if isinstance(key, str) else list(key)
    raise TypeError(f"subpath must be a string or a nested key, got {subpath!r}")


def descend(source: Source, subpath: Any, robust: bool) -> Rel:
    """The level of the tensordict at ``subpath`` (keys, lazy-stack indices)."""
    rel: Rel = ()
    for part in _subpath_parts(subpath):
        meta = source.read_meta((*rel, META)) if source.is_file((*rel, META)) else {}
        cls = _classes.builtin_from_meta(meta) if meta else None
        nxt: Rel | None = None
        if cls is LazyStackedTensorDict:
            if part.isdigit() and source.is_file((*rel, part, META)):
                nxt = (*rel, part)
        else:
            if cls is None and "shape" not in meta and source.is_dir((*rel, TC_INNER)):
                rel = (*rel, TC_INNER)
                meta = source.read_meta((*rel, META))
            entry = meta.get(part)
            if part in META_FIELDS:
                entry = (meta.get(RESERVED_ENTRIES) or {}).get(part)
            if isinstance(entry, dict) and "type" in entry:
                nxt = locate(source, rel, part, "", robust, directory=True)
        if nxt is None or not source.is_file((*nxt, META)):
            raise ValueError(
                f"No tensordict found under subpath {subpath!r} in {source.describe(())}."
            )
        rel = nxt
    return rel
