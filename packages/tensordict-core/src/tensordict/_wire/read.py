"""Rebuilding a consolidated tensordict from its buffer and metadata (or from a file
written by ``consolidate(filename)``) without unpickling anything unless asked: every
entry is checked against the buffer before it is viewed. See
:mod:`tensordict._wire.consolidate`.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, cast

import torch

from tensordict._keys.nested import unravel_key
from tensordict._kinds import kinds as _kinds
from tensordict._leaves import nontensor as _nontensor
from tensordict._leaves.nontensor import NonTensorData
from tensordict._util.class_registry import lookup_class
from tensordict._wire.format import (
    _TRAILER,
    ALIGN,
    FORMAT_VERSION,
    MAGIC,
    _decode_non_tensor,
)

_Tensor = torch.Tensor


def _map_file(path: Path, size: int) -> _Tensor:
    if size == 0:
        return torch.empty(0, dtype=torch.uint8)
    return torch.from_file(str(path), shared=True, size=size, dtype=torch.uint8)


# ---------------------------------------------------------------------- rebuild
#: dtype name in the metadata (``"float32"``) -> dtype.
_DTYPES: dict[str, torch.dtype] = {
    str(d).removeprefix("torch."): d for d in vars(torch).values() if isinstance(d, torch.dtype)
}


def _dtype(name: Any, path: tuple[str, ...]) -> torch.dtype:
    dtype = _DTYPES.get(name) if isinstance(name, str) else None
    if dtype is None:
        raise ValueError(
            f"from_consolidated: invalid dtype {name!r} for entry {unravel_key(path)!r}."
        )
    return dtype


def _view_trusted(
    buffer: _Tensor, entry: dict[str, Any], typed: dict[torch.dtype, _Tensor] | None = None
) -> _Tensor:
    """The leaf described by metadata this library just wrote (no checks). ``typed``
    caches the buffer viewed as each dtype, so that a leaf is one ``as_strided`` of it
    (instead of a slice, a dtype view and an ``as_strided``)."""
    dtype = _DTYPES[entry["dtype"]]
    size = dtype.itemsize
    offset = entry["offset"]
    base = None if typed is None else typed.get(dtype)
    if base is None and typed is not None and buffer.storage_offset() % size == 0:
        whole = buffer.numel() - buffer.numel() % size
        base = typed[dtype] = buffer[:whole].view(dtype)
    if base is not None and offset % size == 0:
        view = base.as_strided(
            entry["shape"], entry["stride"], base.storage_offset() + offset // size
        )
    else:
        region = buffer[offset : offset + entry["nbytes"]].view(dtype)
        view = region.as_strided(entry["shape"], entry["stride"])
    if entry["requires_grad"]:
        view.requires_grad_()
    return view


def _view(buffer: _Tensor, entry: dict[str, Any], path: tuple[str, ...], limit: int) -> _Tensor:
    dtype = _dtype(entry.get("dtype"), path)
    shape, stride = entry.get("shape"), entry.get("stride")
    offset, nbytes = entry.get("offset"), entry.get("nbytes")
    ints = [offset, nbytes, *(shape or []), *(stride or [])]
    if (
        not isinstance(shape, list)
        or not isinstance(stride, list)
        or len(shape) != len(stride)
        or not all(type(i) is int and i >= 0 for i in ints)
    ):
        raise ValueError(
            f"from_consolidated: bad shape/stride/offset for entry {unravel_key(path)!r}: {entry}."
        )
    itemsize = dtype.itemsize
    numel = 1
    span = 1
    for size, st in zip(shape, stride):
        numel *= size
        span += (size - 1) * st if size else 0
    if numel == 0:
        span = 0
    assert isinstance(offset, int) and isinstance(nbytes, int)  # checked above
    if nbytes != numel * itemsize or offset % itemsize or offset + span * itemsize > limit:
        raise ValueError(
            f"from_consolidated: entry {unravel_key(path)!r} (dtype {dtype}, shape {shape}, "
            f"offset {offset}, nbytes {nbytes}) does not fit in a buffer of {limit} bytes."
        )
    region = buffer[offset : offset + span * itemsize].view(dtype)
    view = region.as_strided(shape, stride)
    if entry.get("requires_grad"):
        view.requires_grad_()
    return view


def _batch_size_of(node: dict[str, Any], path: tuple[str, ...]) -> torch.Size:
    """The batch size recorded in ``node``, checked: a list of non-negative ints."""
    value = node.get("batch_size", [])
    if not isinstance(value, list) or not all(type(s) is int and s >= 0 for s in value):
        raise ValueError(
            f"from_consolidated: bad batch_size {value!r} at {unravel_key(path) or '<root>'!r} "
            "(a list of non-negative ints is expected)."
        )
    return torch.Size(value)


def _build(
    cls: type[_kinds.Dense],
    node: dict[str, Any],
    buffer: _Tensor,
    limit: int,
    allow_pickle: bool,
    path: tuple[str, ...],
    trusted: bool = False,
    typed: dict[torch.dtype, _Tensor] | None = None,
) -> _kinds.Dense:
    if trusted and typed is None:
        typed = {}  # the buffer as each dtype (see _view_trusted), for the whole tree
    if not isinstance(node, dict) or not isinstance(node.get("entries"), dict):
        raise ValueError(
            f"from_consolidated: malformed metadata at {unravel_key(path) or '<root>'!r}."
        )
    if node.get("type") == "LazyStackedTensorDict":
        lazy_cls = _kinds.Lazy
        members = node.get("members")
        if not isinstance(members, list):
            raise ValueError(
                f"from_consolidated: cannot rebuild the lazy stack at "
                f"{unravel_key(path) or '<root>'!r}."
            )
        built = [_build(cls, m, buffer, limit, allow_pickle, path, trusted, typed) for m in members]
        kwargs: dict[str, Any] = {}
        if not built:  # an empty stack: the members' batch size (the stack's less its dim)
            full = _batch_size_of(node, path)
            sd = node.get("stack_dim", 0)
            if not isinstance(sd, int) or not 0 <= sd < len(full):
                raise ValueError(
                    f"from_consolidated: bad stack_dim {sd!r} at {unravel_key(path) or '<root>'!r}."
                )
            kwargs["batch_size"] = full[:sd] + full[sd + 1 :]
        dim_name = node.get("stack_dim_name")
        if dim_name is not None and not isinstance(dim_name, str):
            raise ValueError(
                f"from_consolidated: bad stack_dim_name {dim_name!r} at "
                f"{unravel_key(path) or '<root>'!r}."
            )
        return lazy_cls(  # type: ignore[return-value]
            *built, stack_dim=node.get("stack_dim", 0), stack_dim_name=dim_name, **kwargs
        )
    batch_size = _batch_size_of(node, path)
    device = None if node.get("device") is None else buffer.device
    names = node.get("names")
    store: dict[str, Any] = {}
    for key, entry in node["entries"].items():
        sub = path + (key,)
        kind = entry.get("kind") if isinstance(entry, dict) else None
        if kind == "njt":
            store[key] = _build_njt(buffer, entry, sub, limit, trusted)
        elif kind == "tensor" and trusted:
            store[key] = _view_trusted(buffer, entry, typed)
        elif kind == "tensor":
            value = _view(buffer, entry, sub, limit)
            if value.shape[: len(batch_size)] != batch_size:
                raise ValueError(
                    f"from_consolidated: entry {unravel_key(sub)!r} has shape {tuple(value.shape)}, "
                    f"which does not start with the batch size {tuple(batch_size)}."
                )
            store[key] = value
        elif kind == "tensordict":
            inner = _build(cls, entry, buffer, limit, allow_pickle, sub, trusted, typed)
            store[key] = inner if entry.get("class") is None else _wrap(inner, entry, sub)
        elif kind == "stack":
            store[key] = _build_stack(entry, sub, allow_pickle, batch_size, device)
        else:
            wrapper = NonTensorData
            if entry.get("cls") is not None:
                wrapper = getattr(_nontensor, str(entry["cls"]), None)  # type: ignore[assignment]
                if not (isinstance(wrapper, type) and issubclass(wrapper, NonTensorData)):
                    raise ValueError(
                        f"from_consolidated: unknown non-tensor class {entry['cls']!r} at "
                        f"{unravel_key(sub)!r}."
                    )
            store[key] = wrapper._make(
                _decode_non_tensor(sub, entry, allow_pickle), batch_size, device
            )
    out = cls._new_unsafe(store, batch_size, device, list(names) if names else None)
    if node.get("locked"):
        out.lock_()
        out._last_op = None
    return out


def _wrap(inner: Any, entry: dict[str, Any], path: tuple[str, ...]) -> Any:
    """A rebuilt tensorclass entry: ``inner`` in the class the metadata names, when that
    class is registered in this process (nothing is imported); else ``inner`` itself, a
    plain tensordict, with a warning."""
    name = str(entry["class"])
    found = lookup_class(name)
    if found is None or not getattr(found, "_wraps_tensordict", False):
        warnings.warn(
            f"from_consolidated: the entry at {unravel_key(path)!r} was a {name}, a class "
            "not defined in this process; it is rebuilt as a plain TensorDict (define or "
            "import the class first to get it back).",
            stacklevel=3,
        )
        return inner
    return cast(Any, found)._rewrap(inner)


def _build_njt(
    buffer: _Tensor, entry: dict[str, Any], path: tuple[str, ...], limit: int, trusted: bool
) -> _Tensor:
    """A jagged nested tensor whose values, offsets and lengths view ``buffer``."""
    parts: dict[str, _Tensor | None] = {}
    for name in ("values", "offsets", "lengths"):
        sub = entry.get(name)
        if sub is None and name == "lengths":
            parts[name] = None
            continue
        if not isinstance(sub, dict) or sub.get("kind") != "tensor":
            raise ValueError(
                f"from_consolidated: bad nested tensor entry at {unravel_key(path)!r}."
            )
        parts[name] = _view_trusted(buffer, sub) if trusted else _view(buffer, sub, path, limit)
    ragged = entry.get("ragged_idx", 1)
    if type(ragged) is not int or ragged < 1:
        raise ValueError(f"from_consolidated: bad ragged_idx {ragged!r} at {unravel_key(path)!r}.")
    values, offsets = cast(_Tensor, parts["values"]), parts["offsets"]
    return torch.nested.nested_tensor_from_jagged(
        values, offsets, lengths=parts["lengths"], jagged_dim=ragged
    )


def _build_stack(
    entry: dict[str, Any],
    path: tuple[str, ...],
    allow_pickle: bool,
    batch_size: torch.Size,
    device: Any,
) -> Any:
    stack_cls = getattr(_nontensor, "NonTensorStack", None)
    shape, values = entry.get("shape"), entry.get("values")
    if stack_cls is None or not isinstance(shape, list) or not isinstance(values, list):
        raise ValueError(f"from_consolidated: cannot rebuild the stack at {unravel_key(path)!r}.")
    decoded = [_decode_non_tensor(path, v, allow_pickle) for v in values]
    size = torch.Size(shape)
    if size[: len(batch_size)] != batch_size or len(decoded) != size.numel():
        raise ValueError(
            f"from_consolidated: the stack at {unravel_key(path)!r} has shape {shape} and "
            f"{len(decoded)} values, which does not fit the batch size {tuple(batch_size)}."
        )
    out = stack_cls.from_list(decoded, device=device, ndim=1)
    return out if len(shape) == 1 else out.reshape(shape)


def _rebuild(
    buffer: _Tensor,
    metadata: dict[str, Any],
    *,
    allow_pickle: bool,
    trusted: bool = False,
    data_end: int | None = None,
    where: str = "the buffer",
) -> _kinds.Dense:
    """The tensordict ``metadata`` describes, viewing ``buffer``. ``trusted`` skips the
    checks for metadata this library produced itself (``consolidate``, pickling).
    ``data_end``: where the data region ends (the metadata trailer starts there)."""
    if (
        not isinstance(metadata, dict)
        or metadata.get("format") != "tensordict-consolidated"
        or "td" not in metadata
    ):
        raise ValueError(
            "from_consolidated: the metadata is not that of a consolidated tensordict (expected "
            "a dict with format='tensordict-consolidated', as in td._consolidated['metadata'])."
        )
    if metadata.get("version") != FORMAT_VERSION:
        raise ValueError(
            f"from_consolidated: metadata version {metadata.get('version')!r} is not supported "
            f"(this library reads version {FORMAT_VERSION})."
        )
    limit = metadata.get("nbytes")
    if type(limit) is not int or limit > buffer.numel():
        raise ValueError(
            f"from_consolidated: the metadata describes {limit} bytes of data but the buffer "
            f"holds {buffer.numel()} bytes."
        )
    if data_end is not None and limit > data_end:
        raise ValueError(
            f"from_consolidated: {where} is truncated: its data region holds {data_end} bytes "
            f"before the metadata trailer, but the metadata describes {limit} bytes of data."
        )
    out = _build(_kinds.Dense, metadata["td"], buffer, limit, allow_pickle, (), trusted)
    object.__setattr__(out, "_consolidated", {"storage": buffer, "metadata": metadata})
    return out


def _read_trailer(blob: bytes, total: int, where: str) -> tuple[int, int]:
    """``(json_start, json_length)`` from the last bytes of a buffer of ``total`` bytes."""
    if total < _TRAILER or blob[-len(MAGIC) :] != MAGIC:
        raise ValueError(
            f"from_consolidated: {where} does not end with consolidated-tensordict metadata "
            "(it was not written by consolidate(filename) or consolidate(metadata=True)); "
            "pass the metadata dict explicitly."
        )
    length = int.from_bytes(blob[-_TRAILER : -len(MAGIC)], "little")
    start = total - _TRAILER - length
    if start < 0:
        raise ValueError(f"from_consolidated: {where} is truncated (metadata length {length}).")
    return start, length


def _parse_json(blob: bytes, where: str) -> dict[str, Any]:
    try:
        meta = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"from_consolidated: corrupt metadata in {where}: {err}.") from None
    if not isinstance(meta, dict):
        raise ValueError(f"from_consolidated: corrupt metadata in {where}.")
    return meta


def from_consolidated(
    filename: str | Path | torch.Tensor,
    metadata: dict[str, Any] | None = None,
    *,
    allow_pickle: bool = False,
) -> _kinds.Dense:
    """Rebuild a consolidated tensordict from its buffer (and metadata) or from a file.

    Nothing is unpickled: the metadata is plain JSON data. Non-tensor values that
    :meth:`~tensordict.TensorDict.consolidate` stored pickled (``allow_pickle=True``
    there) are refused unless ``allow_pickle=True`` here too.

    Args:
        filename: the path of a file written by ``td.consolidate(filename)``
            (memory-mapped, not read), or the ``uint8`` buffer
            (``td._consolidated["storage"]``).
        metadata: the metadata dict (``td._consolidated["metadata"]``); needed unless the
            buffer carries it (``consolidate(metadata=True)``, and every file).
        allow_pickle: accept non-tensor values stored pickled.

    The result's leaves are views into the buffer.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.arange(3), "b": {"c": torch.ones(3, 2)}}, [3]).consolidate()
    >>> buffer, meta = td._consolidated["storage"], td._consolidated["metadata"]
    >>> out = from_consolidated(buffer, meta)
    >>> out["b", "c"].untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr()
    True
    >>> from_consolidated(td.consolidate(metadata=True)._consolidated["storage"])["a"]
    tensor([0, 1, 2])
    """
    if isinstance(filename, _Tensor):
        if filename.dtype != torch.uint8 or filename.ndim != 1:
            raise TypeError(
                f"from_consolidated: the buffer must be a 1-d uint8 tensor, got dtype "
                f"{filename.dtype} and shape {tuple(filename.shape)}."
            )
        buffer = filename
        if buffer.storage_offset() % ALIGN or not buffer.is_contiguous():
            buffer = buffer.clone()  # leaf views need aligned offsets
        data_end = None
        if metadata is None:
            total = buffer.numel()
            tail = buffer[max(0, total - _TRAILER) :].cpu().numpy().tobytes()
            start, length = _read_trailer(tail, total, "the buffer")
            blob = buffer[start : start + length].cpu().numpy().tobytes()
            metadata = _parse_json(blob, "the buffer")
            data_end = start
        return _rebuild(buffer, metadata, allow_pickle=allow_pickle, data_end=data_end)
    if not isinstance(filename, (str, Path)):
        raise TypeError(
            f"from_consolidated expects a uint8 tensor or a file path, got {type(filename).__name__}."
        )
    path = Path(filename)
    if not path.is_file():
        raise FileNotFoundError(f"from_consolidated: no file at {str(path)!r}.")
    total = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(max(0, total - _TRAILER))
        start, length = _read_trailer(f.read(), total, f"file {str(path)!r}")
        f.seek(start)
        file_meta = _parse_json(f.read(length), f"file {str(path)!r}")
    if metadata is None:
        metadata = file_meta
    return _rebuild(
        _map_file(path, total),
        metadata,
        allow_pickle=allow_pickle,
        data_end=start,  # the data region ends where the trailer starts
        where=f"the file {str(path)!r}",
    )
