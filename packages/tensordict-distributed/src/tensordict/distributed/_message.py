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
from typing import Any

import torch

from tensordict import _wire
from tensordict._kinds import is_tensorclass


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
    ``device``, and the metadata the JSON encodes."""
    td, cls_name = unwrap(obj)
    meta, data = _wire.encode(td, device)
    cls_name = tensorclass_type or cls_name
    if cls_name is not None:
        meta = {**meta, "tensorclass": cls_name}
    return _wire.dumps(meta), data, meta


def resolve_tensorclass(name: Any) -> type:
    """The tensorclass named ``"module:QualName"``, from a module imported already."""
    if not isinstance(name, str) or ":" not in name:
        raise ValueError(f"the description names an invalid tensorclass {name!r}.")
    module_name, qualname = name.split(":", 1)
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
    build = getattr(cls, "_from_tensordict", None) or getattr(cls, "from_tensordict")
    return build(td)


def parse(desc: bytes, source: str) -> dict[str, Any]:
    return _wire.loads(desc, f"the description from {source}")


def unpack(meta: dict[str, Any], data: torch.Tensor) -> Any:
    """The tensordict (or tensorclass instance) ``meta`` describes, viewing ``data``."""
    return wrap(_wire.decode(meta, data), meta.get("tensorclass"))


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
            self.buffer = torch.empty(data_len, dtype=torch.uint8, device=device)

    def _buffer(self, data_len: int, device: torch.device) -> torch.Tensor:
        if self.buffer is None:
            self.buffer = torch.empty(data_len, dtype=torch.uint8, device=device)
        return self.buffer

    def finish(self) -> None:
        """Write the received data into the destination (it fits: no problems)."""
        _wire.write_into(self.target, self.received)
