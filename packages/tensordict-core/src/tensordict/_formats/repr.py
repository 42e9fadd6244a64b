"""The printed form of tensordicts, in the reference library's layout."""

from __future__ import annotations

from typing import cast

import torch

from tensordict._kinds import kinds as _kinds
from tensordict._util.printoptions import PRINT_OPTIONS


def _tensor_shared(value: torch.Tensor) -> bool:
    # ``Tensor.is_shared`` has no annotations in torch.
    if value.device.type == "meta":
        return False
    return bool(value.is_shared())  # type: ignore[no-untyped-call]


def leaf_repr(value: object) -> str:
    """One line describing a leaf.

    >>> import torch
    >>> leaf_repr(torch.zeros(2, dtype=torch.int64))
    'Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.int64, is_shared=False)'
    """
    if isinstance(value, torch.Tensor):
        return _tensor_repr(value, _tensor_shared(value))
    return repr(value)


def _shape_of(value: torch.Tensor) -> torch.Size:
    """``value.shape``; for a strided nested tensor (which has none), its sizes with -1 for
    the dimensions that differ between components."""
    if not value.is_nested:
        return value.shape
    try:
        return value.shape
    except RuntimeError:
        sizes = value._nested_tensor_size()
        dims = [int(col[0]) if bool((col == col[0]).all()) else -1 for col in sizes.T]
        return torch.Size([value.size(0), *dims])


def _tensor_repr(value: torch.Tensor, shared: bool) -> str:
    shape = _shape_of(value)
    if not PRINT_OPTIONS["show_is_shared"]:
        return f"{type(value).__name__}(shape={shape}, device={value.device}, dtype={value.dtype})"
    return (
        f"{type(value).__name__}(shape={shape}, device={value.device}, "
        f"dtype={value.dtype}, is_shared={shared})"
    )


def td_repr(td: _kinds.Base) -> str:
    """The multi-line repr of a tensordict: sorted fields, then batch_size, device, is_shared.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> print(TensorDict({"a": torch.zeros(3)}, [3]))
    TensorDict(
        fields={
            a: Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32, is_shared=False)},
        batch_size=torch.Size([3]),
        device=None,
        is_shared=False)
    """
    return _td_repr(td, "")[0]


def _td_repr(td: _kinds.Base, indent: str) -> tuple[str, bool, bool]:
    """The repr of ``td`` whose first line starts at ``indent``, whether all its tensors
    are shared (or on CUDA), and whether it holds any tensor.

    Each leaf's shared state is read once and aggregated upwards (as ``is_shared()``
    defines it), and nested blocks are written at their final indentation.
    """
    inner = indent + "    "
    field_indent = inner + "    "
    fields = []
    shared_all = True
    any_tensor = False
    keys = list(td.keys())
    if PRINT_OPTIONS["sort_keys"]:
        keys.sort()
    limit = PRINT_OPTIONS["max_fields"]
    for key in keys:
        # Without ``include_nested`` the view yields the top-level keys, all strings.
        value = td._get_str(cast(str, key), None)
        if isinstance(value, torch.Tensor):
            leaf_shared = _tensor_shared(value)
            text = _tensor_repr(value, leaf_shared)
            any_tensor = True
            shared_all = shared_all and (leaf_shared or value.is_cuda)
        elif isinstance(value, _kinds.Dense) or hasattr(value, "_repr_block"):
            if isinstance(value, _kinds.Dense):
                text, sub_shared, sub_any = _td_repr(value, field_indent)
            else:  # other tensordict types (lazy stacks) print their own block
                text, sub_shared, sub_any = value._repr_block(field_indent)
            if sub_any:
                any_tensor = True
                shared_all = shared_all and sub_shared
        else:
            text = repr(value).replace("\n", "\n" + field_indent)
        fields.append(f"{field_indent}{key}: {text}")
    is_shared = any_tensor and shared_all
    if limit is not None and len(fields) > limit:
        fields[limit:] = [f"{field_indent}... ({len(fields) - limit} more)"]
    body = ",\n".join(fields) if fields else inner
    # tensordict-memmap records where a memory-mapped tensordict lives
    prefix = getattr(td, "__dict__", {}).get("_memmap_prefix")
    text = (
        f"{type(td).__name__}(\n"
        f"{inner}fields={{\n{body}}},\n"
        f"{inner}batch_size={td.batch_size},\n"
        f"{inner}device={td.device}"
        + (f",\n{inner}memmap_prefix={prefix!r}" if prefix else "")
        + (f",\n{inner}is_shared={is_shared})" if PRINT_OPTIONS["show_is_shared"] else ")")
    )
    return text, is_shared, any_tensor
