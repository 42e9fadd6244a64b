"""The printed form of tensordicts, in the reference library's layout."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, cast

import torch

from tensordict._nontensor import NonTensorData

if TYPE_CHECKING:  # pragma: no cover
    from tensordict.base import TensorDictBase


def leaf_repr(value: object) -> str:
    """One line describing a leaf.

    >>> import torch
    >>> leaf_repr(torch.zeros(2, dtype=torch.int64))
    'Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.int64, is_shared=False)'
    """
    if isinstance(value, torch.Tensor):
        # ``Tensor.is_shared`` has no annotations in torch.
        shared = value.is_shared() if value.device.type != "meta" else False  # type: ignore[no-untyped-call]
        return (
            f"{type(value).__name__}(shape={value.shape}, device={value.device}, "
            f"dtype={value.dtype}, is_shared={shared})"
        )
    if isinstance(value, NonTensorData):
        return repr(value)
    return repr(value)


def td_repr(td: TensorDictBase) -> str:
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
    fields = []
    for key in sorted(td.keys()):
        # Without ``include_nested`` the view yields the top-level keys, all strings.
        value = td._get_str(cast(str, key), None)
        fields.append(
            f"{key}: {leaf_repr(value) if not hasattr(value, '_tensordict') else repr(value)}"
        )
    body = ",\n".join(fields)
    body = textwrap.indent(body, " " * 4)
    lines = [
        f"fields={{\n{body}}}",
        f"batch_size={td.batch_size}",
        f"device={td.device}",
        # TensorDictBase does not declare is_shared() yet; TensorDict has it (DeviceOps).
        f"is_shared={td.is_shared()}",
    ]
    return f"{type(td).__name__}(\n" + textwrap.indent(",\n".join(lines), " " * 4) + ")"
