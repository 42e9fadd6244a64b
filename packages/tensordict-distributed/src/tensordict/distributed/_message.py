"""A tensordict (or tensorclass instance) as a message: JSON description + data buffer.

The encoding is core's wire codec (:mod:`tensordict._wire`, built on ``consolidate``);
this module only adds what the transports need around it:

* a tensorclass instance travels as its inner tensordict, with the class named in the
  description (``"module:QualName"``); the receiver looks the class up among the modules
  it has imported already and never imports one, so a message cannot make it run code;
* :func:`receive_into` checks a received description against the tensordict that will
  hold the data, and picks where the data lands — straight into that tensordict's own
  consolidated buffer when the layouts are equal, else into a scratch buffer that is
  copied in once it has been checked.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

import torch

from tensordict import _wire
from tensordict._kinds import is_tensorclass
from tensordict._kinds import lazy_members as _lazy_members
from tensordict._nontensor import NonTensorData
from tensordict.distributed import _buffers


def unwrap(obj: Any) -> tuple[Any, str | None]:
    """``(tensordict, tensorclass name or None)`` for a tensordict or tensorclass instance."""
    if is_tensorclass(obj) and not isinstance(obj, type):
        cls = type(obj)
        return obj._tensordict, f"{cls.__module__}:{cls.__qualname__}"
    return obj, None


def pack(
    obj: Any, device: torch.device | None, tensorclass_type: str | None = None
) -> tuple[bytes, torch.Tensor, dict[str, Any]]:
    """``(description, data, metadata)`` of ``obj``: JSON bytes and one ``uint8`` buffer on
    ``device``, and the metadata the JSON encodes. A consolidated ``obj`` is sent from its
    own buffer; otherwise the buffer comes from the pool (:func:`release` gives it back
    once sent), and the layout and description of the last send of the same tensordict
    (same leaves, shapes, strides and non-tensor values) are reused."""
    td, cls_name = unwrap(obj)
    cls_name = tensorclass_type or cls_name
    if _wire.consolidated_buffer(td) is not None:
        meta, data = _wire.encode(td, device)
        if cls_name is not None:
            meta = {**meta, "tensorclass": cls_name}
        return _wire.dumps(meta), data, meta
    hit = _SENT.get(id(td))
    if hit is not None and hit[0]() is td and hit[1].device == device and hit[1].cls == cls_name:
        sent = hit[1]
        if sent.matches(_objects(td, [])):
            return sent.desc, sent.packing.fill(_buffers.take), sent.meta
    packing = _wire.plan(td, device)
    meta = packing.meta if cls_name is None else {**packing.meta, "tensorclass": cls_name}
    desc = _wire.dumps(meta)
    _remember_sent(td, _Sent(packing, meta, desc, _objects(td, []), device, cls_name))
    return desc, packing.fill(_buffers.take), meta


class _Sent:
    """The layout and description of a tensordict sent before, with what it held."""

    __slots__ = ("packing", "meta", "desc", "objects", "layouts", "device", "cls")

    def __init__(
        self, packing: Any, meta: Any, desc: bytes, objects: list[Any], device: Any, cls: Any
    ) -> None:
        self.packing, self.meta, self.desc = packing, meta, desc
        self.objects, self.device, self.cls = objects, device, cls
        self.layouts = [_layout_of(o) for o in objects]

    def matches(self, objects: list[Any]) -> bool:
        if len(objects) != len(self.objects):
            return False
        for now, then, layout in zip(objects, self.objects, self.layouts):
            if now is not then or _layout_of(now) != layout:
                return False
        return True


def _layout_of(obj: Any) -> Any:
    """What the wire layout depends on: a tensor's shape, stride and dtype, a non-tensor
    entry's value."""
    if isinstance(obj, torch.Tensor):
        return (obj.shape, obj.stride(), obj.dtype, obj.device)
    if isinstance(obj, NonTensorData):
        return ("value", obj.data, obj.batch_size)
    return ("values", obj.tolist(), obj.batch_size)


_SENT: dict[int, tuple[Any, _Sent]] = {}


def _remember_sent(td: Any, sent: _Sent) -> None:
    key = id(td)
    try:
        ref = weakref.ref(td, lambda _, key=key: _SENT.pop(key, None))
    except TypeError:
        return
    _SENT[key] = (ref, sent)


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


def release(data: torch.Tensor, obj: Any) -> None:
    """Give ``data`` (from :func:`pack`) back to the pool unless it is ``obj``'s own."""
    td, _ = unwrap(obj)
    own = td.__dict__.get("_consolidated") if hasattr(td, "__dict__") else None
    if (
        own is not None
        and own["storage"].untyped_storage().data_ptr() == data.untyped_storage().data_ptr()
    ):
        return
    _buffers.give(data)


class Landing:
    """Where received data goes, and whether it fits the destination tensordict.

    ``buffer`` is what to receive into (``data_len`` bytes); ``problems`` lists why the
    data does not fit (then ``buffer`` is scratch and nothing is written); after the data
    has arrived, :meth:`finish` writes it into the destination.
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

    def finish(self, template: Any, desc: bytes) -> None:
        """Write the received data into the destination (it fits: no problems), and
        remember how, for the next transfer of the same description into it."""
        pairs, replace = _wire.copy_plan(self.target, self.received)
        _wire.copy_pairs(pairs)
        for store, key, value in replace:
            store[key] = value
        assert self.buffer is not None
        _remember(template, self.target, desc, self.buffer, pairs)

    def discard(self) -> None:
        """Give a scratch buffer back after a failure."""
        if self.pooled and self.buffer is not None:
            _buffers.give(self.buffer)


# ---------------------------------------------------------------------- repeated transfers
class Cached:
    """How the last transfer landed in a tensordict: the same description into the same
    leaves lands in the same buffer, and is copied with the same pairs, without parsing
    or checking again."""

    __slots__ = ("desc", "batch_size", "objects", "shapes", "buffer", "pairs")

    def __init__(
        self, desc: bytes, target: Any, objects: list[Any], buffer: torch.Tensor, pairs: list[Any]
    ):
        self.desc = desc
        self.batch_size = target.batch_size
        self.objects = objects
        self.shapes = [o.shape if isinstance(o, torch.Tensor) else None for o in objects]
        self.buffer = buffer
        self.pairs = pairs

    def finish(self) -> None:
        _wire.copy_pairs(self.pairs)


_CACHE: dict[int, tuple[Any, Cached]] = {}


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


def _remember(
    template: Any, target: Any, desc: bytes, buffer: torch.Tensor, pairs: list[Any]
) -> None:
    key = id(template)
    try:
        ref = weakref.ref(template, lambda _, key=key: _CACHE.pop(key, None))
    except TypeError:
        return
    _CACHE[key] = (ref, Cached(desc, target, _objects(target, []), buffer, pairs))


def cached(template: Any, desc: bytes, data_len: int) -> Cached | None:
    """The :class:`Cached` landing of ``template`` for ``desc``, if still valid (the same
    leaf objects, of the same shapes)."""
    entry = _CACHE.get(id(template))
    if entry is None or entry[0]() is not template:
        return None
    hit = entry[1]
    if hit.desc != desc or hit.buffer.numel() != data_len:
        return None
    target = unwrap(template)[0]
    if target.batch_size != hit.batch_size:
        return None
    objects = _objects(target, [])
    if len(objects) != len(hit.objects):
        return None
    for now, then, shape in zip(objects, hit.objects, hit.shapes):
        if now is not then or (shape is not None and now.shape != shape):
            return None
    return hit
