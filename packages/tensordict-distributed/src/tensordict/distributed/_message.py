"""A tensordict (or tensorclass instance) as a message: JSON description + data buffer.

The encoding is core's wire codec (:mod:`tensordict._wire.wire`, built on ``consolidate``);
this module only adds what the transports need around it:

* a tensorclass instance travels as its inner tensordict, with the class named in the
  description (``"module:QualName"``); the receiver looks the class up among the modules
  it has imported already and never imports one, so a message cannot make it run code;
* :func:`pack_parts` cuts the data of a point-to-point transfer into parts (see
  :mod:`._parts`), each filled just before it is sent;
* :class:`Landing` checks a received description against the tensordict that will hold
  the data, and picks where each part lands — straight into that tensordict's own
  consolidated buffer when the layouts are equal, or into its large leaves, else into a
  scratch buffer whose leaves are copied in part by part, as the parts arrive;
* :func:`cached` remembers that for the next transfer of the same description.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch

from tensordict._plugins.api import is_tensorclass
from tensordict._plugins.api import lazy_members as _lazy_members
from tensordict._plugins.api import wire as _wire
from tensordict.distributed import _buffers, _parts
from tensordict.distributed._kept import Kept, layout_of


def unwrap(obj: Any) -> tuple[Any, str | None]:
    """``(tensordict, tensorclass name or None)`` for a tensordict or tensorclass instance."""
    if is_tensorclass(obj) and not isinstance(obj, type):
        cls = type(obj)
        return obj._tensordict, f"{cls.__module__}:{cls.__qualname__}"
    return obj, None


#: One part of a transfer's data: the bytes to send, and the function that fills them
#: first (packed leaves) or ``None`` (a large leaf's own memory, a consolidated buffer).
Part = tuple[torch.Tensor, Callable[[], None] | None]


def pack(
    obj: Any, device: torch.device | None, tensorclass_type: str | None = None
) -> tuple[bytes, torch.Tensor, dict[str, Any]]:
    """``(description, data, metadata)`` of ``obj``: JSON bytes and one ``uint8`` buffer on
    ``device``, and the metadata the JSON encodes. A consolidated ``obj`` is sent from its
    own buffer; otherwise the buffer comes from the pool (``_buffers.give`` takes it back
    once sent), and the layout and description of the last send of the same tensordict
    (same leaves, shapes, strides and non-tensor values) are reused."""
    td, cls_name = unwrap(obj)
    cls_name = tensorclass_type or cls_name
    if _wire.consolidated_buffer(td) is not None:
        meta, data = _wire.encode(td, device)
        if cls_name is not None:
            meta = {**meta, "tensorclass": cls_name}
        return _wire.dumps(meta), data, meta
    sent = _sent_for(td, device, cls_name, False)
    return sent.desc, sent.packing.fill(_buffers.take), sent.meta


def pack_parts(
    obj: Any, device: torch.device | None, tensorclass_type: str | None = None
) -> tuple[bytes, list[Part], dict[str, Any], torch.Tensor | None]:
    """``(description, parts, metadata, pooled)``: :func:`pack` for point-to-point
    transfers, whose data goes as several messages (see :mod:`._parts`): each part is
    ``(bytes to send, function that fills them first or None)``. Large leaves are parts
    of their own (``uint8`` views of their memory); the other leaves are packed into
    ``pooled`` (a pool buffer to give back once sent, ``None`` when nothing is packed),
    piece by piece, by the parts' functions. The metadata's ``"segments"`` lists each
    part's byte range in the buffer it describes (absent when the data is one part, the
    whole buffer). A consolidated ``obj`` is one part, its own buffer."""
    td, cls_name = unwrap(obj)
    cls_name = tensorclass_type or cls_name
    if _wire.consolidated_buffer(td) is not None:
        desc, data, meta = pack(obj, device, tensorclass_type)
        return desc, [(data, None)] if data.numel() else [], meta, None
    sent = _sent_for(td, device, cls_name, True)
    packing = sent.packing
    packed = any(piece.view is None for piece in sent.pieces)
    pooled = _buffers.take(packing.nbytes, packing.device) if packed else None
    parts: list[Part] = []
    for piece in sent.pieces:
        if piece.view is not None:
            parts.append((piece.view, None))
            continue
        assert pooled is not None
        parts.append((pooled[piece.start : piece.stop], packing.filler(pooled, piece.leaves)))
    return sent.desc, parts, sent.meta, pooled


def _sent_for(td: Any, device: Any, cls_name: str | None, in_parts: bool) -> _Sent:
    """The layout, description and parts of sending ``td`` (kept from the last send of
    the same tensordict when its leaves, shapes, strides and non-tensor values are the
    same); ``in_parts``: cut into parts (see :func:`._parts.cut`), else one buffer."""
    sent = _SENT.get(td)
    if sent is not None:
        if (sent.device, sent.cls, sent.in_parts) == (device, cls_name, in_parts) and (
            sent.matches(_objects(td, []))
        ):
            return sent
    packing = _wire.plan(td, device)
    meta = packing.meta if cls_name is None else {**packing.meta, "tensorclass": cls_name}
    pieces = _parts.cut(packing, _parts.LARGE_BYTES, _parts.CHUNK_BYTES) if in_parts else []
    described = _parts.described(pieces)
    if described is not None:
        meta = {**meta, "segments": described}
    sent = _Sent(packing, meta, _wire.dumps(meta), _objects(td, []), device, cls_name)
    sent.in_parts, sent.pieces = in_parts, pieces
    _SENT.put(td, sent)
    return sent


class _Sent:
    """The layout and description of a tensordict sent before, with what it held."""

    __slots__ = (
        "packing",
        "meta",
        "desc",
        "objects",
        "layouts",
        "device",
        "cls",
        "in_parts",
        "pieces",
    )

    def __init__(
        self, packing: Any, meta: Any, desc: bytes, objects: list[Any], device: Any, cls: Any
    ) -> None:
        self.packing, self.meta, self.desc = packing, meta, desc
        self.objects, self.device, self.cls = objects, device, cls
        self.layouts = [layout_of(o) for o in objects]
        self.in_parts = False
        self.pieces: list[_parts.Piece] = []

    def matches(self, objects: list[Any]) -> bool:
        if len(objects) != len(self.objects):
            return False
        for now, then, layout in zip(objects, self.objects, self.layouts):
            if now is not then or layout_of(now) != layout:
                return False
        return True


#: The layout and description of the last send of each tensordict.
_SENT: Kept[_Sent] = Kept()


def resolve_tensorclass(name: Any) -> type:
    """The tensorclass named ``"module:QualName"`` (or ``"module.ClassName"``), from a
    module imported already."""
    if not isinstance(name, str) or not (":" in name or "." in name):
        raise ValueError(f"the description names an invalid tensorclass {name!r}.")
    if ":" in name:
        module_name, qualname = name.split(":", 1)
    else:  # "module.ClassName", as the reference library writes it
        module_name, _, qualname = name.rpartition(".")
    module = sys.modules.get(module_name)
    if module is None:
        raise ValueError(
            f"the received data is a tensorclass {qualname!r} of module {module_name!r}, "
            "which this process has not imported. Receiving never imports code: import "
            f"{module_name!r} first."
        )
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if not (isinstance(obj, type) and is_tensorclass(obj)):
        raise ValueError(f"{name!r} does not name a tensorclass in this process.")
    return obj


def wrap(td: Any, cls_name: Any) -> Any:
    """``td`` as an instance of the tensorclass ``cls_name`` (itself when ``None``)."""
    if cls_name is None:
        return td
    cls = resolve_tensorclass(cls_name)
    build = getattr(cls, "_from_tensordict", None) or cls.from_tensordict
    return build(td)


def parse(desc: bytes, source: str) -> dict[str, Any]:
    return _wire.loads(desc, f"the description from {source}")


def unpack(meta: dict[str, Any], data: torch.Tensor) -> Any:
    """The tensordict (or tensorclass instance) ``meta`` describes, viewing ``data``."""
    return wrap(_wire.decode(meta, data), meta.get("tensorclass"))


class Landing:
    """Where received data goes, and whether it fits the destination tensordict.

    ``buffer`` is what to receive into (``data_len`` bytes); ``problems`` lists why the
    data does not fit (then ``buffer`` is scratch and nothing is written).
    :meth:`targets` says where each part is received and what to copy out of it once it
    has arrived; after the last one, :meth:`finish` writes the non-tensor values.
    """

    def __init__(
        self, template: Any, meta: dict[str, Any] | None, data_len: int, device: torch.device
    ) -> None:
        self.target, _ = unwrap(template)
        self.problems: list[str] = []
        self.received: Any = None
        self.buffer: torch.Tensor | None = None
        if meta is not None and meta.get("nbytes") != data_len:
            self.problems.append(
                f"the description announces {meta.get('nbytes')!r} bytes but {data_len} are sent"
            )
        if meta is not None and not self.problems:
            direct = _wire.landing_buffer(self.target, meta)
            if direct is not None and direct.device == device:
                self.buffer = direct
            try:
                self.received = _wire.decode(meta, self._buffer(data_len, device))
                self.problems = _wire.mismatches(self.target, self.received)
            except (ValueError, TypeError) as err:
                self.problems.append(str(err))
        if self.problems or meta is None:
            # Never land data that does not fit into the destination's own buffer.
            self.pooled = True
            self.buffer = _buffers.take(data_len, device)

    pooled = False

    def _buffer(self, data_len: int, device: torch.device) -> torch.Tensor:
        if self.buffer is None:
            self.pooled = True
            self.buffer = _buffers.take(data_len, device)
        return self.buffer

    def targets(self, segments: list[tuple[int, int]]) -> list[tuple[torch.Tensor, list[Any]]]:
        """``[(where the part is received, the copies (destination, source) to make once
        it has arrived)]``, one per part, in order. A part that is exactly one leaf goes
        straight into the destination's leaf when that leaf is contiguous on the same
        device (nothing to copy); the others into the buffer. A leaf outside every part
        is a problem (nothing is written)."""
        assert self.buffer is not None
        self.replace: list[Any] = []
        groups = None
        if not self.problems and self.received is not None:
            pairs, self.replace = _wire.copy_plan(self.target, self.received)
            groups = _parts.by_segment(pairs, segments, self.buffer)
            if groups is None:
                self.problems.append(
                    "the description places a leaf outside the data segments it announces"
                )
        if groups is None:
            self.parts = [(self.buffer[a:b], []) for a, b in segments]
            return self.parts
        self.parts = []
        for (a, b), group in zip(segments, groups):
            if len(group) == 1 and self._takes_directly(group[0], b - a):
                self.parts.append((group[0][0].detach().reshape(-1).view(torch.uint8), []))
            else:
                self.parts.append((self.buffer[a:b], group))
        return self.parts

    def _takes_directly(self, pair: tuple[torch.Tensor, torch.Tensor], nbytes: int) -> bool:
        """Whether a part of ``nbytes`` holding only ``pair``'s source can be received
        straight into its destination."""
        d, src = pair
        assert self.buffer is not None
        return (
            d.is_contiguous()
            and src.is_contiguous()
            and d.device == self.buffer.device
            and src.numel() * src.element_size() == nbytes
        )

    def finish(self, template: Any, desc: bytes) -> None:
        """Once every part has arrived and been copied out (it fits: no problems): write
        the non-tensor values, and remember where the parts went, for the next transfer
        of the same description into the destination."""
        for store, key, value in self.replace:
            store[key] = value
        assert self.buffer is not None
        objects = _objects(self.target, [])
        _CACHE.put(template, Cached(desc, self.target, objects, self.buffer, self.parts))

    def discard(self) -> None:
        """Give a scratch buffer back after a failure."""
        if self.pooled and self.buffer is not None:
            _buffers.give(self.buffer)


# ---------------------------------------------------------------------- repeated transfers
class Cached:
    """How the last transfer landed in a tensordict: the same description into the same
    leaves lands in the same buffer, and is copied with the same pairs, without parsing
    or checking again. ``parts`` is :meth:`Landing.targets`' answer."""

    __slots__ = ("desc", "batch_size", "objects", "layouts", "buffer", "parts")

    def __init__(
        self,
        desc: bytes,
        target: Any,
        objects: list[Any],
        buffer: torch.Tensor,
        parts: list[tuple[torch.Tensor, list[Any]]],
    ):
        self.desc = desc
        self.batch_size = target.batch_size
        self.objects = objects
        self.layouts = [layout_of(o) if isinstance(o, torch.Tensor) else None for o in objects]
        self.buffer = buffer
        self.parts = parts


#: How the last transfer landed in each tensordict.
_CACHE: Kept[Cached] = Kept()


def _objects(td: Any, out: list[Any]) -> list[Any]:
    """Every leaf object (tensors and non-tensor entries) in storage order."""
    members = _lazy_members(td)
    if members is not None:
        for m in members:
            _objects(m, out)
        return out
    for value in td._tensordict.values():
        if (
            isinstance(value, torch.Tensor)
            or not hasattr(value, "_tensordict")
            and _lazy_members(value) is None
        ):
            out.append(value)
        else:
            _objects(value, out)
    return out


def cached(template: Any, desc: bytes, data_len: int) -> Cached | None:
    """The :class:`Cached` landing of ``template`` for ``desc``, if still valid (the same
    leaf objects, with the same shapes, strides and memory)."""
    hit = _CACHE.get(template)
    if hit is None or hit.desc != desc or hit.buffer.numel() != data_len:
        return None
    target = unwrap(template)[0]
    if target.batch_size != hit.batch_size:
        return None
    objects = _objects(target, [])
    if len(objects) != len(hit.objects):
        return None
    for now, then, layout in zip(objects, hit.objects, hit.layouts):
        if now is not then or (layout is not None and layout_of(now) != layout):
            return None
    return hit
