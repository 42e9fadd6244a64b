"""Writing one value in place into a stored entry (``update_``, ``set_``, ``apply_``):
the value must be of the entry's kind and fit its shape; the entry keeps its storage."""

from __future__ import annotations

from typing import Any

import torch

from tensordict._keys.nested import unravel_key
from tensordict._kinds import kinds as _kinds
from tensordict._leaves.collection import data_of
from tensordict._leaves.nontensor import NON_TENSOR, NonTensorData, NonTensorStack
from tensordict._util.errors import InplaceWriteError

_Tensor = torch.Tensor
_MISSING: Any = object()


def write_inplace(key: Any, current: Any, value: Any, non_blocking: bool) -> None:
    """Copy ``value`` into the stored ``current`` entry, keeping its storage."""
    _check_same_kind(key, current, value)
    if isinstance(current, _Tensor):
        if not isinstance(value, _Tensor):
            value = torch.as_tensor(value)
        if not _fits(value, current):
            raise InplaceWriteError(
                f"cannot write a value of shape {tuple(value.shape)} in place into entry "
                f"{unravel_key(key)!r} of shape {tuple(current.shape)}: in place, the value "
                "must have (or broadcast to) the entry's shape."
            )
        current.copy_(value, non_blocking=non_blocking)  # other errors are torch's own
    elif isinstance(current, _kinds.Base):  # (a NonTensorData is not a tensordict)
        current.update_(value, non_blocking=non_blocking)
    elif isinstance(current, NonTensorData):
        current.data = _single_value(key, value)
    elif type(current) is NonTensorStack:
        current._assign(value)
    else:  # pragma: no cover - defensive
        raise TypeError(f"cannot write in place into {type(current).__name__} at {key!r}.")


def _fits(value: _Tensor, current: _Tensor) -> bool:
    """Whether ``value`` broadcasts to ``current``'s shape (nested tensors: torch decides)."""
    if value.is_nested or current.is_nested:
        return True
    try:
        shape: torch.Size = torch.broadcast_shapes(value.shape, current.shape)  # type: ignore[no-untyped-call]
        return shape == current.shape
    except RuntimeError:
        return False


def _kind(value: Any) -> str:
    """The kind of an entry or value, for :func:`_check_same_kind`."""
    if isinstance(value, _Tensor):
        return "tensor"
    if isinstance(value, dict) or isinstance(data_of(value), _kinds.Base):
        return "tensordict"
    if isinstance(value, NON_TENSOR):
        return "non-tensor value"
    return "other"  # a number, an array…: becomes a tensor


_WRITABLE = {
    ("tensor", "tensor"),
    ("tensor", "other"),
    ("tensordict", "tensordict"),
    ("non-tensor value", "non-tensor value"),
    ("non-tensor value", "other"),
}


def _check_same_kind(key: Any, current: Any, value: Any) -> None:
    """Refuse an in-place write of a value of another kind than the stored entry."""
    cur, val = _kind(current), _kind(value)
    if (cur, val) not in _WRITABLE:
        what = type(value).__name__ if val == "other" else val
        raise InplaceWriteError(
            f"cannot write a {what} in place into entry {unravel_key(key)!r}, which holds a "
            f"{cur}; replace the entry with td.set(key, value) instead."
        )


def _single_value(key: Any, value: Any) -> Any:
    """The one Python value that ``value`` writes into a single-valued non-tensor entry."""
    if isinstance(value, NonTensorData):
        return value.data
    if isinstance(value, NonTensorStack):  # its ragged form too
        common = value._common_value(_MISSING)
        if common is not _MISSING:
            return common
        raise RuntimeError(
            f"cannot write a NonTensorStack holding different values in place into the "
            f"non-tensor entry {key!r}, which holds one value for the whole batch; store the "
            "stack with td.set(key, value) instead (not in place)."
        )
    return value
