"""The printed form of a tensorclass instance.

Fields are listed by name (sorted), one per line, as ``name=value``: tensors in the
tensordict leaf format, nested tensorclasses and tensordicts as indented blocks,
non-tensor values by their ``repr``, missing fields as ``None``; then ``batch_size``,
``device`` and ``is_shared`` (a field with one of these names takes its place: the batch
size is then printed as ``shape``).
"""

from __future__ import annotations

from typing import Any

import torch

from tensordict import TensorDictBase
from tensordict._plugins.api import NON_TENSOR_TYPES, _td_repr, leaf_repr, unwrap_non_tensor


def tensorclass_repr(obj: Any) -> str:
    """The repr of a tensorclass instance (see the module docstring)."""
    return _block(obj, "")[0]


def _shared(value: torch.Tensor) -> bool:
    return value.device.type != "meta" and bool(value.is_shared())  # type: ignore[no-untyped-call]


def _block(obj: Any, indent: str) -> tuple[str, bool, bool]:
    """``obj``'s repr starting at ``indent``, whether all its tensors are shared, and
    whether it holds any tensor."""
    inner = indent + "    "
    td = obj._tensordict
    specs = type(obj)._field_specs
    lines = []
    shared_all, any_tensor = True, False
    for name in sorted(specs):
        value = td._get_str(name, None)
        if isinstance(value, torch.Tensor):
            shared = _shared(value)
            text = leaf_repr(value)
            any_tensor = True
            shared_all = shared_all and (shared or value.is_cuda)
        elif getattr(type(value), "_wraps_tensordict", False) and hasattr(
            type(value), "_field_specs"
        ):
            text, sub_shared, sub_any = _block(value, inner)
            any_tensor = any_tensor or sub_any
            shared_all = shared_all and (sub_shared or not sub_any)
        elif isinstance(value, TensorDictBase):
            text, sub_shared, sub_any = _td_repr(value, inner)
            any_tensor = any_tensor or sub_any
            shared_all = shared_all and (sub_shared or not sub_any)
        elif type(value) in NON_TENSOR_TYPES:
            text = repr(unwrap_non_tensor(value)).replace("\n", "\n" + inner)
        else:
            text = repr(value).replace("\n", "\n" + inner)
        lines.append(f"{inner}{name}={text}")
    if "batch_size" in specs:
        lines.append(f"{inner}shape={td.batch_size}")
    else:
        lines.append(f"{inner}batch_size={td.batch_size}")
    if "device" not in specs:
        lines.append(f"{inner}device={td.device}")
    is_shared = any_tensor and shared_all
    if "is_shared" not in specs:
        lines.append(f"{inner}is_shared={is_shared}")
    return f"{type(obj).__name__}(\n" + ",\n".join(lines) + ")", is_shared, any_tensor
