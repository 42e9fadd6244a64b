"""Loading a saved folder: ``load_memmap`` / ``load`` and the in-place ``load_*_``.

Loading maps each tensor file (no data is read) and checks the folder as it goes: a
``meta.json`` that is not valid JSON, names an unknown dtype, gives a shape that does not
fit the batch size or is larger than its file, or refers to a missing file raises an
error that names the file and what was expected. Nothing is unpickled unless
``allow_pickle=True``, and no module is imported because a ``meta.json`` names a class
(see :mod:`~tensordict.memmap._classes`).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from tensordict import LazyStackedTensorDict, MetaData, NonTensorData, NonTensorStack, TensorDict
from tensordict._keys import unravel_key
from tensordict.memmap import _classes, _codec, _fs
from tensordict.memmap._plan import META, META_FIELDS, RESERVED_ENTRIES, TC_INNER
from tensordict.memmap._tensor import map_file, parse_dtype, shape_numel
from tensordict.memmap._writer import mark

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

    # ------------------------------------------------------------------ entry points
    def load(self, root: Path, subpath: Any = None) -> Any:
        folder = descend(root, subpath, self.robust) if subpath is not None else root
        if not (folder / META).is_file():
            if not folder.exists():
                raise FileNotFoundError(f"No such file or directory: {str(folder / META)!r}")
            raise FileNotFoundError(
                f"{str(folder)!r} is not a memory-mapped tensordict: it has no meta.json."
            )
        return self.level(folder, None)

    # ------------------------------------------------------------------ levels
    def level(self, folder: Path, parent_batch: torch.Size | None) -> Any:
        meta = read_meta(folder / META)
        cls = _classes.builtin_from_meta(meta)
        if cls is LazyStackedTensorDict:
            return self._lazy(folder, meta)
        if cls is NonTensorStack:
            return self._non_tensor_stack(folder, meta, parent_batch)
        if cls in (NonTensorData, MetaData):
            return self._non_tensor_data(folder, meta, parent_batch, cls)
        if cls is TensorDict:
            return self._dense(folder, meta)
        return self._other(folder, meta, parent_batch)

    def _other(self, folder: Path, meta: dict[str, Any], parent_batch: torch.Size | None) -> Any:
        dotted = _classes.dotted_from_type(meta.get("_type"))
        if (folder / TC_INNER).is_dir() and "shape" not in meta:
            content = self.level(folder / TC_INNER, parent_batch)
        elif "shape" in meta:
            content = self._dense(folder, meta)
        else:
            raise ValueError(
                f"{str(folder / META)!r}: unknown layout for class {meta.get('_type')!r} "
                "(expected a tensordict level, a lazy stack, a non-tensor value or a "
                "tensorclass folder)."
            )
        if dotted is None:
            return content
        cls = _classes.resolve(dotted, self.classes, self.import_classes)
        if cls is None:
            warnings.warn(
                f"{str(folder / META)!r} names the class {dotted!r}, which is not imported or "
                "registered; returning a plain TensorDict. Import or register the class, pass "
                "it with classes=[...], or pass import_classes=True to let the loader import "
                "its module.",
                UserWarning,
                stacklevel=4,
            )
            return content
        return _classes.rebuild(cls, content)

    def _dense(self, folder: Path, meta: dict[str, Any]) -> TensorDict:
        meta_file = folder / META
        batch = _size(meta.get("shape"), meta_file, "shape")
        entries: dict[str, Any] = {}
        items = [(k, v) for k, v in meta.items() if k not in META_FIELDS]
        reserved = meta.get(RESERVED_ENTRIES)
        if reserved is not None:
            if not isinstance(reserved, dict):
                raise ValueError(f"{str(meta_file)!r}: {RESERVED_ENTRIES!r} must be an object")
            items += list(reserved.items())
        mapped = self.device is None or self.device.type == "cpu"
        for key, entry in items:
            if not isinstance(entry, dict):
                if key.startswith("_"):
                    continue  # format fields of other versions
                raise ValueError(f"{str(meta_file)!r}: the entry {key!r} is not an object: {entry!r}")
            if "dtype" in entry:
                value = self._leaf(folder, key, entry, batch)
            elif "type" in entry:
                sub = locate(folder, key, "", self.robust, directory=True)
                if not (sub / META).is_file():
                    raise FileNotFoundError(
                        f"{str(meta_file)!r} lists the entry {key!r} but {str(sub / META)!r} "
                        "does not exist."
                    )
                value = self.level(sub, batch)
                sub_batch = getattr(value, "batch_size", None)
                if sub_batch is not None and tuple(sub_batch[: len(batch)]) != tuple(batch):
                    raise ValueError(
                        f"{str(sub / META)!r}: batch size {list(sub_batch)} does not start with "
                        f"the parent's {list(batch)} (from {str(meta_file)!r})."
                    )
            else:
                raise ValueError(
                    f"{str(meta_file)!r}: the entry {key!r} has neither 'dtype' nor 'type'."
                )
            entries[key] = value
        device = self.device if self.device is not None else meta.get("device", "cpu")
        if device is not None and torch.device(device).type not in ("cpu", "meta"):
            device = self.device  # a saved CUDA device is not forced on the loaded leaves
        names = meta.get("_names")
        out = TensorDict(entries, batch_size=batch, device=device)
        if names is not None:
            out.names = names
        if mapped:
            mark(out, folder, ())
        return out

    def _leaf(self, folder: Path, key: str, entry: dict[str, Any], batch: torch.Size) -> torch.Tensor:
        meta_file = folder / META
        try:
            dtype = parse_dtype(entry.get("dtype"))
        except ValueError as err:
            raise ValueError(f"{str(meta_file)!r}, entry {key!r}: {err}") from None
        nested = entry.get("is_nested", False)
        if not isinstance(nested, bool):
            raise ValueError(f"{str(meta_file)!r}, entry {key!r}: 'is_nested' must be true or false")
        shape_field = _size(entry.get("shape"), meta_file, f"shape of {key!r}")
        path = locate(folder, key, ".memmap", self.robust)
        shape: Any = shape_field
        if nested:
            sizes_path = path.with_name(path.name[: -len(".memmap")] + ".shape.memmap")
            _check_file(sizes_path, shape_numel(shape_field) * 8, meta_file, key)
            shape = map_file(str(sizes_path), torch.int64, shape_field, "r").clone()
            if shape.ndim != 2 or (shape < 0).any():
                raise ValueError(f"{str(sizes_path)!r}: nested sizes must be a 2-D tensor of sizes >= 0")
        elif tuple(shape_field[: len(batch)]) != tuple(batch):
            raise ValueError(
                f"{str(meta_file)!r}: the entry {key!r} has shape {list(shape_field)}, which does "
                f"not start with the batch size {list(batch)}."
            )
        nbytes = shape_numel(shape) * dtype.itemsize
        _check_file(path, nbytes, meta_file, key)
        if self.device is not None and self.device.type == "meta":
            if nested:
                return map_file(str(path), dtype, shape, "r").to("meta")
            return torch.empty(shape, dtype=dtype, device="meta")
        tensor = map_file(str(path), dtype, shape, self.mode)
        if self.device is not None and self.device.type != "cpu":
            return tensor.to(self.device, non_blocking=self.non_blocking)
        return tensor

    def _lazy(self, folder: Path, meta: dict[str, Any]) -> LazyStackedTensorDict:
        meta_file = folder / META
        stack_dim = meta.get("stack_dim", 0)
        if type(stack_dim) is not int or stack_dim < 0:
            raise ValueError(f"{str(meta_file)!r}: 'stack_dim' must be an int >= 0, got {stack_dim!r}")
        count = meta.get("count")
        if count is None:
            count = 0
            while (folder / str(count) / META).is_file():
                count += 1
        elif type(count) is not int or count < 0:
            raise ValueError(f"{str(meta_file)!r}: 'count' must be an int >= 0, got {count!r}")
        members = []
        for i in range(count):
            member = folder / str(i)
            if not (member / META).is_file():
                raise FileNotFoundError(
                    f"{str(meta_file)!r} stacks {count} tensordicts but {str(member / META)!r} "
                    "does not exist."
                )
            members.append(self.level(member, None))
        batch = meta.get("shape")
        out = LazyStackedTensorDict(
            *members,
            stack_dim=stack_dim,
            stack_dim_name=meta.get("stack_dim_name"),
            batch_size=_size(batch, meta_file, "shape") if not members and batch is not None else None,
        )
        if self.device is None or self.device.type == "cpu":
            mark(out, folder, ())
        return out

    def _non_tensor_data(
        self, folder: Path, meta: dict[str, Any], parent_batch: torch.Size | None, cls: type
    ) -> NonTensorData:
        if "data" in meta:
            value = meta["data"]
        else:
            path = folder / "other.pickle"
            if not path.is_file():
                raise FileNotFoundError(
                    f"{str(folder / META)!r} has no 'data' and {str(path)!r} does not exist."
                )
            payload = _codec.unpickle_or_refuse(path, self.allow_pickle)
            if not isinstance(payload, dict) or "data" not in payload:
                raise ValueError(f"{str(path)!r} does not hold a {{'data': value}} mapping")
            value = payload["data"]
        out: NonTensorData = cls(value, batch_size=parent_batch or [], device=self.device)
        return out

    def _non_tensor_stack(
        self, folder: Path, meta: dict[str, Any], parent_batch: torch.Size | None
    ) -> NonTensorStack:
        meta_file = folder / META
        values = meta.get("data")
        if values == "pickle.pkl":
            values = _codec.unpickle_or_refuse(folder / "pickle.pkl", self.allow_pickle)
        shape = meta.get("shape")
        batch = _size(shape, meta_file, "shape") if shape is not None else parent_batch
        if not isinstance(values, list):
            raise ValueError(f"{str(meta_file)!r}: 'data' of a NonTensorStack must be a list")
        device = self.device if self.device is not None else meta.get("device")
        if not (device is None or isinstance(device, (str, torch.device))):
            raise ValueError(f"{str(meta_file)!r}: bad 'device' {device!r}")
        try:
            stack = NonTensorStack.from_list(
                values, device=device, ndim=None if batch is None else len(batch)
            )
        except ValueError as err:
            raise ValueError(f"{str(meta_file)!r}: {err}") from None
        if batch is not None and tuple(stack.batch_size) != tuple(batch):
            raise ValueError(
                f"{str(meta_file)!r}: the stacked values have shape {list(stack.batch_size)}, "
                f"expected {list(batch)}."
            )
        stack_dim = meta.get("stack_dim", 0)
        if type(stack_dim) is int and 0 <= stack_dim < max(stack.batch_dims, 1):
            stack.stack_dim = stack_dim
        return stack


# --------------------------------------------------------------------------- helpers


def read_meta(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; clear errors for missing, unreadable or bad files."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"No such file or directory: {str(path)!r}") from None
    try:
        meta = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"{str(path)!r} is not valid JSON ({err}); the save is corrupted.") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{str(path)!r} must hold a JSON object, got {type(meta).__name__}.")
    return meta


def _size(value: Any, meta_file: Path, what: str) -> torch.Size:
    if not isinstance(value, list) or not all(type(v) is int and v >= 0 for v in value):
        raise ValueError(
            f"{str(meta_file)!r}: {what} must be a list of integers >= 0, got {value!r}."
        )
    return torch.Size(value)


def _check_file(path: Path, nbytes: int, meta_file: Path, key: str) -> None:
    if path.is_symlink():
        raise ValueError(f"{str(path)!r} (entry {key!r} of {str(meta_file)!r}) is a symlink; refusing to follow it.")
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{str(meta_file)!r} lists the tensor {key!r} but its file {str(path)!r} is missing."
        ) from None
    if not path.is_file():
        raise ValueError(f"{str(path)!r} (entry {key!r}) is not a regular file.")
    if size < nbytes:
        raise ValueError(
            f"{str(path)!r} holds {size} bytes, but {str(meta_file)!r} describes the entry "
            f"{key!r} with {nbytes} bytes: the file is truncated or meta.json is wrong."
        )


def locate(folder: Path, key: str, suffix: str, robust: bool, *, directory: bool = False) -> Path:
    """The path storing ``key`` in ``folder``: the robust encoding first, then (for saves
    written with ``robust_key=False``) the key itself when it is a plain file name."""
    candidates = []
    if robust:
        candidates.append(_fs.encode_key(key, directory=directory))
        if directory:
            candidates.append(_fs.encode_key(key))
    if _fs.is_plain_name(key):
        candidates.append(key)
    for name in candidates:
        path = _fs.child(folder, name + suffix)
        if path.exists() or path.is_symlink():
            return path
    if not candidates:
        raise ValueError(
            f"The key {key!r} of {str(folder / META)!r} is not a plain file name; load with "
            "robust_key=True."
        )
    return _fs.child(folder, candidates[0] + suffix)


def _subpath_parts(subpath: Any) -> list[str]:
    if isinstance(subpath, str):
        return [part for part in subpath.split("/") if part]
    if isinstance(subpath, Sequence):
        key = unravel_key(tuple(subpath))
        return [key] if isinstance(key, str) else list(key)
    raise TypeError(f"subpath must be a string or a nested key, got {subpath!r}")


def descend(root: Path, subpath: Any, robust: bool) -> Path:
    """The folder of the tensordict at ``subpath`` (keys, lazy-stack indices) under ``root``."""
    folder = root
    for part in _subpath_parts(subpath):
        meta_path = folder / META
        meta = read_meta(meta_path) if meta_path.is_file() else {}
        cls = _classes.builtin_from_meta(meta) if meta else None
        nxt: Path | None = None
        if cls is LazyStackedTensorDict:
            if part.isdigit() and (folder / part / META).is_file():
                nxt = folder / part
        else:
            if (folder / TC_INNER).is_dir() and cls is None and "shape" not in meta:
                folder = folder / TC_INNER
                meta = read_meta(folder / META)
            entry = meta.get(part)
            if part in META_FIELDS:
                entry = (meta.get(RESERVED_ENTRIES) or {}).get(part)
            if isinstance(entry, dict) and "type" in entry:
                nxt = locate(folder, part, "", robust, directory=True)
        if nxt is None or not (nxt / META).is_file():
            raise ValueError(f"No tensordict found under subpath {subpath!r} in {str(root)!r}.")
        folder = nxt
    return folder
