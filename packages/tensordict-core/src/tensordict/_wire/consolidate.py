"""Consolidation: every tensor leaf of a tensordict as a view into one ``uint8`` storage.

A consolidated tensordict crosses a process or device boundary as *one* buffer plus a
small metadata dict, instead of one message per leaf:

* :meth:`ConsolidateOps.consolidate` copies the leaves into one contiguous byte buffer
  and returns a tensordict whose leaves are views into it;
* ``td._consolidated`` is ``{"storage": buffer, "metadata": metadata}``; the metadata is
  plain JSON-able data (keys, dtypes, shapes, strides, byte offsets, batch sizes, names,
  devices and non-tensor values);
* :func:`from_consolidated` rebuilds the tensordict from the buffer and the metadata (or
  from a file written by ``consolidate(filename)``) without unpickling anything;
* pickling a consolidated tensordict sends the buffer and the metadata, and unpickles as
  a consolidated tensordict again (``torch.multiprocessing`` moves the buffer through
  shared memory as one storage).

Layout of a buffer that carries its own metadata (``consolidate(metadata=True)``, and
every file written by ``consolidate(filename)``)::

    [leaf bytes, each leaf aligned] [metadata as UTF-8 JSON] [JSON length: 8 bytes LE] [MAGIC]
"""

from __future__ import annotations

import base64
import json
import os
import pickle
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from tensordict._keys.nested import unravel_key
from tensordict._keys.shape import parse_device
from tensordict._kinds import kinds as _kinds
from tensordict._leaves.collection import data_of
from tensordict._leaves.nontensor import NonTensorData, is_non_tensor
from tensordict._util.futures import TensorDictFuture
from tensordict._wire.format import (
    ALIGN,
    FORMAT_VERSION,
    MAGIC,
    _encode_non_tensor,
    _is_json_exact,
)
from tensordict._wire.read import (
    _map_file,
    _rebuild,
    from_consolidated,
)

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self


_Tensor = torch.Tensor

# (the format: constants and non-tensor values, in _consolidate_format; rebuilding, in
# _consolidate_read)


# ---------------------------------------------------------------------- layouts
def _dense_stride(t: _Tensor) -> tuple[int, ...] | None:
    """The strides of ``t`` if its elements fill a contiguous block exactly once
    (contiguous or a permutation of it, e.g. channels-last), else ``None``."""
    if t.is_contiguous():
        return tuple(t.stride())
    dims = sorted((d for d in range(t.ndim) if t.shape[d] != 1), key=lambda d: (t.stride(d), -d))
    expected = 1
    for d in dims:
        if t.stride(d) != expected:
            return None
        expected *= t.shape[d]
    return tuple(t.stride())


def _contiguous_stride(shape: torch.Size) -> tuple[int, ...]:
    stride = []
    acc = 1
    for size in reversed(shape):
        stride.append(acc)
        acc *= max(size, 1)
    return tuple(reversed(stride))


# ---------------------------------------------------------------------- consolidate
class _Plan:
    """The leaves to copy and the metadata describing where they go."""

    def __init__(
        self, allow_pickle: bool, for_pickle: bool = False, in_memory: bool = False
    ) -> None:
        self.allow_pickle = allow_pickle
        self.for_pickle = for_pickle
        self.in_memory = in_memory
        self.leaves: list[_Tensor] = []
        self.strides: list[tuple[int, ...] | None] = []
        self.offset = 0

    def node(self, td: Any, path: tuple[str, ...]) -> dict[str, Any]:
        members = _kinds.lazy_members(td)
        if members is not None:
            return {
                "type": "LazyStackedTensorDict",
                "batch_size": list(td.batch_size),
                "stack_dim": int(td.stack_dim),
                "stack_dim_name": getattr(td, "_td_dim_name", None),
                "members": [self.node(m, path) for m in members],
                "entries": {},
            }
        dense: Any = td
        store = td._tensordict if isinstance(td, _kinds.Dense) else None
        if store is None or not isinstance(td, _kinds.Base):
            raise NotImplementedError(
                f"consolidate: the entry at {unravel_key(path)!r} is a {type(td).__name__}; "
                "only dense TensorDicts and lazy stacks of them (with tensor, tensordict and "
                "non-tensor entries) can be consolidated. Convert it with .to_tensordict() first."
            )
        entries: dict[str, Any] = {}
        for key, value in store.items():
            sub = path + (key,)
            if isinstance(value, _Tensor):
                entries[key] = self.tensor(value, sub)
            elif isinstance(value, NonTensorData):
                entry = _encode_non_tensor(
                    sub, value.data, self.allow_pickle, self.for_pickle, self.in_memory
                )
                if type(value) is not NonTensorData:
                    entry["cls"] = type(value).__name__
                entries[key] = entry
            elif is_non_tensor(value):  # a NonTensorStack: one value per element
                entries[key] = self.stack(value, sub)
            elif getattr(type(value), "_wraps_tensordict", False):
                # a tensorclass: its data, and the class's name (found again in the class
                # registry when rebuilt, never imported)
                cls = type(value)
                entries[key] = {
                    "kind": "tensordict",
                    "class": f"{cls.__module__}.{cls.__qualname__}",
                    **self.node(value._tensordict, sub),
                }
            else:
                entries[key] = {"kind": "tensordict", **self.node(value, sub)}
        return {
            "type": type(td).__name__,
            "batch_size": list(td.batch_size),
            "device": None if dense._device is None else str(dense._device),
            "names": None if dense._names is None else list(dense._names),
            "locked": bool(td._is_locked) and not td._consolidate_lock,
            "entries": entries,
        }

    def stack(self, value: Any, path: tuple[str, ...]) -> dict[str, Any]:
        shape = list(value.batch_size)
        flat = value.tolist()
        for _ in range(len(shape) - 1):
            flat = [x for row in flat for x in row]
        if not shape:
            flat = [flat]
        return {
            "kind": "stack",
            "shape": shape,
            "values": [
                _encode_non_tensor(path, v, self.allow_pickle, self.for_pickle, self.in_memory)
                for v in flat
            ],
        }

    def tensor(self, value: _Tensor, path: tuple[str, ...]) -> dict[str, Any]:
        if value.is_nested and value.layout == torch.jagged:
            # a jagged nested tensor: its values, offsets (and lengths) go in the buffer
            values, offsets, lengths = _njt_parts(value)
            return {
                "kind": "njt",
                "values": self.tensor(values, path),
                "offsets": self.tensor(offsets, path),
                "lengths": None if lengths is None else self.tensor(lengths, path),
                "ragged_idx": int(cast(Any, value)._ragged_idx),
            }
        if value.is_nested or value.layout != torch.strided:
            raise NotImplementedError(
                f"consolidate: the entry at {unravel_key(path)!r} is a {value.layout} "
                f"{'nested ' if value.is_nested else ''}tensor; only strided tensors and "
                "jagged nested tensors can be consolidated."
            )
        stride = _dense_stride(value)
        nbytes = value.numel() * value.element_size()
        self.offset = -(-self.offset // ALIGN) * ALIGN
        entry = {
            "kind": "tensor",
            "dtype": str(value.dtype).removeprefix("torch."),
            "shape": list(value.shape),
            "stride": list(stride if stride is not None else _contiguous_stride(value.shape)),
            "offset": self.offset,
            "nbytes": nbytes,
            "requires_grad": bool(value.requires_grad),
        }
        self.leaves.append(value)
        self.strides.append(stride)
        self.offset += nbytes
        return entry


def _njt_parts(nt: _Tensor) -> tuple[_Tensor, _Tensor, _Tensor | None]:
    """``(values, offsets, lengths)`` of a jagged nested tensor (``lengths`` may be None)."""
    jagged = cast(Any, nt)
    return jagged.values(), jagged.offsets(), jagged.lengths()


def _target_device(td: Any, leaves: list[_Tensor], device: Any) -> torch.device:
    if device is not None:
        return cast(torch.device, parse_device(device))
    if td.device is not None:
        return td.device  # type: ignore[no-any-return]
    devices = {leaf.device for leaf in leaves}
    if len(devices) > 1:
        found: dict[str, Any] = {}
        for key, value in td.items(True, True):
            if isinstance(value, _Tensor):
                found.setdefault(str(value.device), key)
        raise ValueError(
            f"consolidate: the leaves live on several devices ({found}, a key on each), but "
            "one buffer lives on one device; pass device=... to choose it."
        )
    return devices.pop() if devices else torch.device("cpu")


def _fill_buffer(
    plan: _Plan,
    total: int,
    device: torch.device,
    share_memory: bool,
    pin_memory: bool,
    out: _Tensor | None = None,
    program: list[_Step] | None = None,
) -> _Tensor:
    """A new buffer (or ``out``) with every leaf copied to its aligned place, in the leaf's
    own dtype (a byte-wise copy is several times slower); the alignment gaps are zeroed."""
    shared_now = share_memory and device.type == "cpu"
    if out is not None:
        if out.dtype != torch.uint8 or out.numel() != total or out.device != device:
            raise ValueError(
                f"pack: out must be a uint8 tensor of {total} bytes on {device}, got "
                f"{out.dtype} {tuple(out.shape)} on {out.device}."
            )
        buffer = out
    elif shared_now:
        storage = torch.UntypedStorage._new_shared(total)  # type: ignore[no-untyped-call]
        buffer = torch.empty(0, dtype=torch.uint8).set_(storage)
    else:
        buffer = torch.empty(
            total, dtype=torch.uint8, device=device, pin_memory=pin_memory and device.type == "cpu"
        )
    with torch.no_grad():
        _run_program(program if program is not None else _copy_program(plan, device), buffer)
    if share_memory and not shared_now:
        buffer.share_memory_()  # type: ignore[no-untyped-call]
    return buffer


def _copy_leaves(plan: _Plan, buffer: _Tensor) -> None:
    """Copy the plan's leaves to their aligned places in ``buffer``, zeroing the gaps
    (see :func:`_copy_program`)."""
    _run_program(_copy_program(plan, buffer.device), buffer)


#: One step of filling a buffer: ``("cat", byte offset, dtype, sources)``: the sources
#: (flat, of that dtype) back to back from the offset; ``("view", byte offset, dtype,
#: shape, stride, source)``: one leaf through a strided view; ``("zero", start, stop)``.
_Step = tuple[Any, ...]


def _positions(plan: _Plan) -> list[int]:
    """The byte offset of each of the plan's leaves in the buffer (aligned to ``ALIGN``)."""
    out = []
    pos = 0
    for leaf in plan.leaves:
        start = -(-pos // ALIGN) * ALIGN
        out.append(start)
        pos = start + leaf.numel() * leaf.element_size()
    return out


def _copy_program(
    plan: _Plan, device: torch.device, span: tuple[int, int] | None = None
) -> list[_Step]:
    """The steps that copy the plan's leaves into a buffer on ``device``: all of them,
    the gaps between them and the buffer's tail zeroed; or, with ``span=(first, stop)``,
    the leaves ``first`` to ``stop - 1`` only, with the gaps between them (the bytes from
    the first one's offset to the end of the last one). Runs of contiguous leaves of one
    dtype become one ``cat``, their alignment gaps included as small zero tensors of that
    dtype: one ``cat`` copies as fast as one memcpy, where a copy per leaf is much slower
    for many small leaves. The steps hold (views of) the leaves, so running them again
    copies the leaves' current values."""
    steps: list[_Step] = []
    zeros: dict[torch.dtype, _Tensor] = {}
    first, stop = (0, len(plan.leaves)) if span is None else span
    pos = _positions(plan)[first] if first < stop else 0
    run: list[_Tensor] = []
    run_start = 0
    run_dtype: torch.dtype | None = None

    def flush() -> None:
        if run:
            steps.append(("cat", run_start, run_dtype, list(run)))
            run.clear()

    for leaf, stride in zip(plan.leaves[first:stop], plan.strides[first:stop]):
        start = -(-pos // ALIGN) * ALIGN
        nbytes = leaf.numel() * leaf.element_size()
        size = leaf.element_size()
        joins = bool(nbytes) and leaf.is_contiguous() and leaf.device == device
        if start > pos:
            if joins and run and run_dtype == leaf.dtype and (start - pos) % size == 0:
                pad = zeros.get(leaf.dtype)
                if pad is None:
                    pad = zeros[leaf.dtype] = torch.zeros(ALIGN // size, dtype=leaf.dtype)
                run.append(pad[: (start - pos) // size].to(device))
            else:
                flush()
                steps.append(("zero", pos, start))
        if joins:
            if not run or run_dtype != leaf.dtype:
                flush()
                run_start, run_dtype = start, leaf.dtype
            run.append(leaf.detach().reshape(-1))
        elif nbytes:
            flush()
            layout = stride if stride is not None else _contiguous_stride(leaf.shape)
            steps.append(("view", start, leaf.dtype, leaf.shape, layout, leaf.detach()))
        pos = start + nbytes
    flush()
    if span is None:
        steps.append(("zero", pos, None))
    return steps


def _run_program(steps: list[_Step], buffer: _Tensor) -> None:
    bases: dict[torch.dtype, _Tensor] = {}

    def base(dtype: torch.dtype) -> _Tensor:
        view = bases.get(dtype)
        if view is None:
            size = torch.empty((), dtype=dtype).element_size()
            view = bases[dtype] = buffer[: buffer.numel() - buffer.numel() % size].view(dtype)
        return view

    for step in steps:
        kind = step[0]
        if kind == "cat":
            _, start, dtype, sources = step
            b = base(dtype)
            n = sum(t.numel() for t in sources)
            dst = b.as_strided((n,), (1,), start // b.element_size())
            if len(sources) == 1:
                dst.copy_(sources[0])
            else:
                torch.cat(sources, out=dst)
        elif kind == "view":
            _, start, dtype, shape, layout, leaf = step
            b = base(dtype)
            b.as_strided(shape, layout, start // b.element_size()).copy_(leaf)
        else:
            _, start, stop = step
            if start < (buffer.numel() if stop is None else stop):
                buffer[start:stop].zero_()


def _with_trailer(data: _Tensor, metadata: dict[str, Any]) -> _Tensor:
    blob = json.dumps(metadata, separators=(",", ":")).encode("utf-8")
    tail = blob + len(blob).to_bytes(8, "little") + MAGIC
    extra = torch.frombuffer(bytearray(tail), dtype=torch.uint8).to(data.device)
    return torch.cat([data, extra])


def _layout(
    td: Any, device: Any, allow_pickle: bool, in_memory: bool = False
) -> tuple[_Plan, dict[str, Any], int, torch.device]:
    """The plan, metadata, buffer size and buffer device of consolidating ``td``.

    ``in_memory``: the metadata only rebuilds the result here (no file, no trailer), so
    non-tensor values are carried as they are, JSON or not, as the reference does."""
    plan = _Plan(allow_pickle, in_memory=in_memory)
    meta_td = plan.node(td, ())
    total = -(-plan.offset // ALIGN) * ALIGN
    dev = _target_device(td, plan.leaves, device)
    meta = {
        "format": "tensordict-consolidated",
        "version": FORMAT_VERSION,
        "nbytes": total,
        "td": meta_td,
    }
    if device is not None:
        _set_devices(meta_td, str(dev))
    return plan, meta, total, dev


class Packing:
    """How :func:`consolidate` lays ``td`` out: ``meta`` (the metadata), ``nbytes`` and
    ``device`` of the buffer; :meth:`fill` copies the leaves, as they are at that
    moment, into a buffer. A transport that sends the same tensordict again keeps its
    ``Packing`` and only fills."""

    def __init__(self, td: Any, device: Any = None, allow_pickle: bool = False) -> None:
        self.plan, self.meta, self.nbytes, self.device = _layout(td, device, allow_pickle)
        self._programs: dict[tuple[int, int] | None, list[_Step]] = {}

    def _program(self, span: tuple[int, int] | None) -> list[_Step]:
        program = self._programs.get(span)
        if program is None:  # kept: filling again only runs the copies
            program = self._programs[span] = _copy_program(self.plan, self.device, span)
        return program

    def fill(self, out: Callable[[int, torch.device], _Tensor | None] | None = None) -> _Tensor:
        """The buffer: a new one, or the one ``out(nbytes, device)`` returns."""
        given = out(self.nbytes, self.device) if out is not None else None
        program = self._program(None)
        return _fill_buffer(self.plan, self.nbytes, self.device, False, False, given, program)

    def filler(self, buffer: _Tensor, span: tuple[int, int] | None = None) -> Callable[[], None]:
        """A function that copies the leaves ``span = (first, stop)`` (indices into
        ``plan.leaves``) to their places in ``buffer`` (``nbytes`` bytes on ``device``),
        zeroing the alignment gaps between them; no other byte is written (``None``:
        all the leaves, the whole buffer, as :meth:`fill`). A transport fills a buffer
        piece by piece this way, sending each piece while the next one is filled. The
        copy steps are prepared here, so calling the function only copies.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.ones(2), "b": torch.full((2,), 2.0)}, [])
        >>> packing = Packing(td)
        >>> buffer = torch.zeros(packing.nbytes, dtype=torch.uint8)
        >>> packing.filler(buffer, (1, 2))()
        >>> buffer.view(torch.float32)[:8].tolist()
        [0.0, 0.0, 0.0, 0.0, 2.0, 2.0, 0.0, 0.0]
        """
        if buffer.dtype != torch.uint8 or buffer.numel() != self.nbytes:
            raise ValueError(f"filler: a uint8 buffer of {self.nbytes} bytes is expected.")
        program = self._program(span)

        def fill() -> None:
            with torch.no_grad():
                _run_program(program, buffer)

        return fill

    def offsets(self) -> list[int]:
        """The byte offset of each leaf (in the order of ``plan.leaves``) in the buffer."""
        return _positions(self.plan)

    def large_leaves(self, min_bytes: int) -> list[tuple[int, int, _Tensor]]:
        """``(index, byte offset, leaf)`` of the contiguous leaves on the buffer's device
        of at least ``min_bytes``, in buffer order: a transport may send those from their
        own memory rather than copy them into the buffer.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"big": torch.zeros(1000), "small": torch.zeros(3)}, [])
        >>> [(i, offset) for i, offset, _ in Packing(td).large_leaves(1024)]
        [(0, 0)]
        """
        return [
            (i, start, leaf)
            for i, (leaf, start) in enumerate(zip(self.plan.leaves, _positions(self.plan)))
            if leaf.numel() * leaf.element_size() >= min_bytes
            and leaf.is_contiguous()
            and leaf.device == self.device
        ]


def pack(
    td: Any,
    *,
    device: Any = None,
    allow_pickle: bool = False,
    out: Callable[[int, torch.device], _Tensor | None] | None = None,
) -> tuple[dict[str, Any], _Tensor]:
    """``(metadata, buffer)``: what :func:`consolidate` makes, without building the
    consolidated tensordict (what a transport sends). ``out(nbytes, device)`` may return
    a buffer to fill (a reused one: a fresh large allocation costs page faults).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> meta, buffer = pack(TensorDict({"a": torch.ones(2, dtype=torch.int32)}, [2]))
    >>> buffer.numel(), meta["td"]["entries"]["a"]["shape"]
    (16, [2])
    """
    packing = Packing(td, device, allow_pickle)
    return packing.meta, packing.fill(out)


def consolidate(
    td: _kinds.Dense,
    filename: str | Path | None = None,
    *,
    device: Any = None,
    share_memory: bool = False,
    pin_memory: bool = False,
    metadata: bool = False,
    inplace: bool = False,
    allow_pickle: bool = False,
) -> _kinds.Dense:
    """Implementation of :meth:`ConsolidateOps.consolidate`."""
    in_memory = filename is None and not metadata
    plan, meta, total, dev = _layout(td, device, allow_pickle, in_memory)
    if filename is not None:
        if share_memory or pin_memory or dev.type != "cpu":
            raise ValueError(
                "consolidate(filename=...) writes a memory-mapped CPU buffer; it cannot be "
                "combined with share_memory, pin_memory or a non-CPU device."
            )
        _set_devices(meta["td"], "cpu", force=True)  # the file's leaves live on the CPU
        buffer = _fill_buffer(plan, total, torch.device("cpu"), False, False)
        buffer = _write_file(Path(filename), _with_trailer(buffer, meta))
    else:
        buffer = _fill_buffer(plan, total, dev, share_memory and not metadata, pin_memory)
        if metadata:
            buffer = _with_trailer(buffer, meta)
            if share_memory:
                buffer.share_memory_()  # type: ignore[no-untyped-call]
    out = _rebuild(buffer, meta, allow_pickle=True, trusted=True)
    for leaf in _iter_leaves(out):  # as the reference: copies out of the graph
        if isinstance(leaf, _Tensor) and leaf.requires_grad:
            leaf.requires_grad_(False)
    if inplace:
        _adopt(td, out)
        object.__setattr__(td, "_consolidated", out._consolidated)
        return cast("_kinds.Dense", _lock(td))
    return cast("_kinds.Dense", _lock(out))


def _lock(td: Any) -> Any:
    """Lock a consolidated result, as the reference does. The tensordicts that were not
    locked are marked: their metadata (pickles, chunks sent to workers) still records them
    unlocked, as their source was."""
    _mark_unlocked(td)
    return td.lock_()


def _mark_unlocked(td: Any) -> None:
    members = _kinds.lazy_members(td)
    if members is not None:
        for member in members:
            _mark_unlocked(member)
        return
    if not td._is_locked:
        object.__setattr__(td, "_consolidate_lock", True)
    for value in td._tensordict.values():
        value = data_of(value)  # a tensorclass: its data (its __dict__ is that storage)
        if isinstance(value, _kinds.Base) and not is_non_tensor(value):
            _mark_unlocked(value)


_EARLY_POOL: list[ThreadPoolExecutor] = []


def consolidate_early(td: Any, filename: str | Path | None = None, **kwargs: Any) -> Any:
    """``consolidate(..., return_early=True)``: a future of the consolidated tensordict.

    In memory, the buffer is allocated and the result built (its leaves view the buffer)
    before the copy, which runs in a worker thread; ``result()`` waits for it. A file is
    written by the worker as a whole.
    """
    if not _EARLY_POOL:
        _EARLY_POOL.append(ThreadPoolExecutor(1, thread_name_prefix="td-consolidate"))
    pool = _EARLY_POOL[0]
    if filename is not None or kwargs.get("inplace") or kwargs.get("metadata"):
        return TensorDictFuture([pool.submit(consolidate, td, filename, **kwargs)], None)
    plan, meta, total, dev = _layout(
        td, kwargs.get("device"), kwargs.get("allow_pickle", False), in_memory=True
    )
    buffer = torch.empty(
        total,
        dtype=torch.uint8,
        device=dev,
        pin_memory=kwargs.get("pin_memory", False) and dev.type == "cpu",
    )
    if kwargs.get("share_memory"):
        buffer.share_memory_()  # type: ignore[no-untyped-call]
    out = _rebuild(buffer, meta, allow_pickle=True, trusted=True)

    def copy() -> None:
        with torch.no_grad():
            _copy_leaves(plan, buffer)

    return TensorDictFuture([pool.submit(copy)], out)


def _adopt(td: Any, new: Any) -> None:
    """Make ``td`` hold the entries of ``new`` (same structure); the members of a lazy
    stack stay the same objects."""
    members = _kinds.lazy_members(td)
    if members is not None:
        for member, new_member in zip(members, new.tensordicts):
            _adopt(member, new_member)
        return
    td._tensordict = new._tensordict
    td._device = new._device


def _set_devices(node: dict[str, Any], device: str, force: bool = False) -> None:
    for member in node.get("members", ()):
        _set_devices(member, device, force)
    if "members" in node:
        return
    if force or node["device"] is not None:
        node["device"] = device
    for entry in node["entries"].values():
        if entry["kind"] == "tensordict":
            _set_devices(entry, device, force)


def _write_file(path: Path, data: _Tensor) -> _Tensor:
    """Write ``data`` to ``path`` atomically (temp file, fsync, rename) and map it back."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data.numpy().tobytes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return _map_file(path, data.numel())


# ---------------------------------------------------------------------- state checks
def _storage_ptr(t: _Tensor) -> int:
    return int(t.untyped_storage().data_ptr())


def _iter_leaves(td: Any) -> Iterator[Any]:
    members = _kinds.lazy_members(td)
    if members is not None:
        for member in members:
            yield from _iter_leaves(member)
        return
    for value in td._tensordict.values():
        if isinstance(value, _Tensor):
            if value.is_nested and value.layout == torch.jagged:
                yield from (t for t in _njt_parts(value) if t is not None)
            else:
                yield value
        elif not is_non_tensor(value):
            value = data_of(value)  # a tensorclass: its data
            if not isinstance(value, _kinds.Dense) and _kinds.lazy_members(value) is None:
                if isinstance(value, _kinds.Base):  # neither dense nor a lazy stack:
                    yield value  # it cannot be part of the buffer
                # (else a tensorclass's plain Python field value: no tensor)
            else:
                yield from _iter_leaves(value)


def consolidated_buffer(td: Any, buffer: _Tensor | None = None) -> _Tensor | None:
    """The buffer holding every leaf of ``td``, or ``None`` if ``td`` is not (any longer)
    consolidated: entries added or replaced since ``consolidate()`` break it.

    ``buffer`` checks against that buffer instead of the one ``td`` records."""
    if buffer is None:
        info = td._consolidated
        if info is None:
            return None
        buffer = info["storage"]
    ptr = _storage_ptr(buffer)
    for leaf in _iter_leaves(td):
        if not isinstance(leaf, _Tensor) or _storage_ptr(leaf) != ptr:
            return None
    return buffer


def current_metadata(
    td: Any,
    buffer: _Tensor,
    *,
    for_pickle: bool,
    nbytes: int | None = None,
    allow_pickle: bool = True,
) -> dict[str, Any]:
    """Metadata describing ``td``'s leaves as they are now placed in ``buffer``.

    ``allow_pickle=False`` raises ``TypeError`` for a non-tensor value that is not JSON
    data (instead of storing it pickled)."""
    plan = _Plan(allow_pickle=allow_pickle, for_pickle=for_pickle)
    node = plan.node(td, ())
    base = buffer.storage_offset()
    for leaf, (_, entry) in zip(plan.leaves, _tensor_entries(node)):
        entry["offset"] = leaf.storage_offset() * leaf.element_size() - base
        entry["stride"] = list(leaf.stride())
    return {
        "format": "tensordict-consolidated",
        "version": FORMAT_VERSION,
        "nbytes": int(td._consolidated["metadata"]["nbytes"] if nbytes is None else nbytes),
        "td": node,
    }


def _tensor_entries(node: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for member in node.get("members", ()):
        yield from _tensor_entries(member)
    for key, entry in node["entries"].items():
        if entry["kind"] == "tensor":
            yield key, entry
        elif entry["kind"] == "njt":  # in the order _Plan.tensor registered them
            for name in ("values", "offsets", "lengths"):
                if entry[name] is not None:
                    yield key, entry[name]
        elif entry["kind"] == "tensordict":
            yield from _tensor_entries(entry)


def _unpickle_consolidated(buffer: _Tensor, metadata: dict[str, Any]) -> _kinds.Dense:
    out = _rebuild(buffer, metadata, allow_pickle=False, trusted=True)
    # ``object`` entries are only used inside a pickle; keep JSON-able metadata on the result
    _to_json_entries(metadata["td"])
    return out


# ``torch.load`` (``weights_only=True`` by default) may rebuild a consolidated tensordict: the
# pickle holds only the buffer (a tensor) and plain metadata (dicts, lists, strings, numbers),
# and rebuilding views the buffer without unpickling anything (allow_pickle=False).
torch.serialization.add_safe_globals([_unpickle_consolidated])


def _to_json_entries(node: dict[str, Any]) -> None:
    for member in node.get("members", ()):
        _to_json_entries(member)
    for entry in node["entries"].values():
        if entry["kind"] == "tensordict":
            _to_json_entries(entry)
        for item in entry["values"] if entry["kind"] == "stack" else (entry,):
            if item["kind"] == "object":
                value = item["value"]
                if _is_json_exact(value):
                    item["kind"] = "json"
                else:
                    item["kind"] = "pickle"
                    item["value"] = base64.b64encode(pickle.dumps(value)).decode("ascii")


def _device_move(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[torch.device, bool] | None:
    """``(device, non_blocking)`` if ``to(*args, **kwargs)`` only changes the device."""
    if "batch_size" in kwargs or (args and isinstance(args[0], _kinds.Base)):
        return None
    kwargs = dict(kwargs)
    non_blocking = bool(kwargs.pop("non_blocking", False))
    parsed: Any = torch._C._nn._parse_to(*args, **kwargs)
    device, dtype, nb = parsed[0], parsed[1], parsed[2]
    if device is None or dtype is not None:
        return None
    return cast(torch.device, parse_device(device)), bool(non_blocking or nb)


def consolidated_to(
    td: Any, args: tuple[Any, ...], kwargs: dict[str, Any], plain_to: Callable[..., Any]
) -> Any:
    """``td.to(*args, **kwargs)`` for a tensordict that was consolidated: a move to another
    device copies the buffer once and gives a consolidated result; anything else is
    ``plain_to`` (the result stays consolidated when its leaves still view the buffer)."""
    buffer = consolidated_buffer(td)
    target = _device_move(args, kwargs)
    if buffer is None or target is None:
        return plain_to(*args, **kwargs)
    device, non_blocking = target
    if buffer.device != device:
        meta = current_metadata(td, buffer, for_pickle=True)
        _set_devices(meta["td"], str(device), force=True)
        moved = buffer.to(device, non_blocking=non_blocking)
        out = _rebuild(moved, meta, allow_pickle=False, trusted=True)
        _to_json_entries(meta["td"])
        return out
    out = plain_to(*args, **kwargs)
    if out is not td and consolidated_buffer(out, buffer) is not None:
        nbytes = td._consolidated["metadata"]["nbytes"]
        meta = current_metadata(out, buffer, for_pickle=False, nbytes=nbytes)
        out._consolidated = {"storage": buffer, "metadata": meta}
    return out


# ---------------------------------------------------------------------- the mixin
class ConsolidateOps(_kinds.SharedMixin):
    """Consolidation: ``consolidate``, ``is_consolidated``, ``from_consolidated``
    (installed on :class:`~tensordict.TensorDictBase`; see :mod:`tensordict._shared.install`)."""

    def consolidate(
        self,
        filename: str | Path | None = None,
        *,
        num_threads: int = 0,
        device: torch.device | str | None = None,
        non_blocking: bool = False,
        inplace: bool = False,
        return_early: bool = False,
        use_buffer: bool = False,
        share_memory: bool = False,
        pin_memory: bool = False,
        metadata: bool = False,
        allow_pickle: bool = False,
    ) -> Self:
        """Copy every tensor leaf into one contiguous ``uint8`` buffer; leaves become views.

        The result keeps ``_consolidated = {"storage": buffer, "metadata": dict}``, where
        the metadata is plain JSON data (see :func:`~tensordict.from_consolidated`).
        Shapes, dtypes, batch sizes, names and non-tensor values are kept; contiguous and
        densely permuted (e.g. channels-last) leaves keep their strides, other leaves
        become contiguous. The copies are out of the autograd graph: the consolidated
        leaves do not require grad, as in the reference (the metadata records each
        source leaf's ``requires_grad``, which a tensordict unpickled or received from it
        gets back).
        The result is locked (``unlock_()`` it to add keys). Pickling it sends the buffer
        and the metadata only, and unpickles as a consolidated tensordict, locked as the
        source was.

        Args:
            filename: write the buffer, followed by its metadata, to this file (atomically)
                and return a tensordict whose leaves are views into the memory-mapped file.
            num_threads: accepted for compatibility (one ``torch.cat`` does the copy).
            device: device of the buffer (default: the tensordict's, or its leaves').
            non_blocking: accepted for compatibility.
            inplace: make this tensordict's leaves the views (returns ``self``; a lazy
                stack keeps its members, whose leaves become the views).
            return_early: return a :class:`~tensordict.utils.TensorDictFuture` at once;
                the copy runs in a worker thread and ``future.result()`` waits for it
                (not with ``use_buffer`` or ``non_blocking``).
            use_buffer: accepted for compatibility.
            share_memory: put the buffer in shared memory.
            pin_memory: allocate the buffer in pinned memory (CUDA-enabled PyTorch only).
            metadata: also append the metadata to the buffer, so the buffer alone can be
                passed to :func:`~tensordict.from_consolidated`.
            allow_pickle: store non-tensor values that are not plain JSON data pickled
                (otherwise they raise ``TypeError``).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2, 3), "b": {"c": torch.ones(2, dtype=torch.int64)}}, [2])
        >>> ctd = td.consolidate()
        >>> ctd.is_consolidated(), td.is_consolidated()
        (True, False)
        >>> buffer = ctd._consolidated["storage"]
        >>> ptrs = {v.untyped_storage().data_ptr() for v in ctd.values(True, True)}
        >>> ptrs == {buffer.untyped_storage().data_ptr()}
        True
        """
        if return_early:
            for name, value in (("use_buffer", use_buffer), ("non_blocking", non_blocking)):
                if value:
                    raise NotImplementedError(
                        f"consolidate(return_early=True) does not support {name}=True."
                    )
            return consolidate_early(  # type: ignore[no-any-return]
                self,
                filename,
                device=device,
                share_memory=share_memory,
                pin_memory=pin_memory,
                metadata=metadata,
                inplace=inplace,
                allow_pickle=allow_pickle,
            )
        return consolidate(  # type: ignore[return-value] # a lazy stack gives a lazy stack
            self,  # type: ignore[arg-type]
            filename,
            device=device,
            share_memory=share_memory,
            pin_memory=pin_memory,
            metadata=metadata,
            inplace=inplace,
            allow_pickle=allow_pickle,
        )

    def is_consolidated(self) -> bool:
        """Whether every tensor leaf is a view into the buffer made by :meth:`consolidate`.

        Adding or replacing an entry with a tensor from elsewhere makes it ``False``;
        writing into the leaves in place does not. (A consolidated tensordict is locked:
        unlock it to add entries.)

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2)}, [2]).consolidate()
        >>> td.is_consolidated(), td.is_locked
        (True, True)
        >>> td = td.set_("a", td["a"] + 1)  # written in place
        >>> td.is_consolidated()
        True
        >>> td = td.unlock_()
        >>> td["b"] = torch.ones(2)
        >>> td.is_consolidated()
        False
        """
        return consolidated_buffer(self) is not None

    @classmethod
    def from_consolidated(
        cls,
        filename: str | Path | torch.Tensor,
        metadata: dict[str, Any] | None = None,
        *,
        allow_pickle: bool = False,
    ) -> _kinds.Base:
        """Rebuild a tensordict from a consolidated buffer or file (see
        :func:`tensordict.from_consolidated`).

        >>> import tempfile, os
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.arange(4.0)}, [4], names=["t"])
        >>> with tempfile.TemporaryDirectory() as d:
        ...     _ = td.consolidate(os.path.join(d, "td.bin"))
        ...     out = TensorDict.from_consolidated(os.path.join(d, "td.bin"))
        ...     print(out["a"], out.names)
        tensor([0., 1., 2., 3.]) ['t']
        """
        return from_consolidated(filename, metadata, allow_pickle=allow_pickle)


class ConsolidatedState(_kinds.SharedMixin):
    """Mixin of the concrete kinds: what a consolidated tensordict does differently when
    moved (``to``) or pickled. Kept in the class bases (not installed on the base class):
    it calls the kind's own ``to`` and pickling through ``super()``."""

    def to(self, *args: Any, **kwargs: Any) -> Self:
        if self._consolidated is None:  # the common case: one attribute read
            return super().to(*args, **kwargs)
        return cast("Self", consolidated_to(self, args, kwargs, super().to))

    def __reduce_ex__(self, protocol: Any) -> Any:
        buffer = consolidated_buffer(self)
        if buffer is None:
            return super().__reduce_ex__(protocol)
        return _unpickle_consolidated, (buffer, current_metadata(self, buffer, for_pickle=True))

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_consolidated", None)
        state.pop("_ctx_ops", None)
        state.pop("_last_op", None)  # may hold weak references (shape-op contexts)
        state.pop("_lock_holds", None)  # this object's lock bookkeeping (see _lock)
        return state
