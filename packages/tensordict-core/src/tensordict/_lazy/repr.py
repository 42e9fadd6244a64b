"""The printed form of a :class:`~tensordict.LazyStackedTensorDict`: its common fields
(stacked shapes, ``-1`` where members differ), the keys only some members hold
(``exclusive_fields``), and the stack's batch size, device, shared state and stack dim."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tensordict._formats.repr import _td_repr, _tensor_repr, _tensor_shared
from tensordict._keys.shape import common_shape
from tensordict._kinds import kinds as _kinds
from tensordict.base import NO_DEFAULT

if TYPE_CHECKING:  # pragma: no cover
    from tensordict._lazy.stack import LazyStackedTensorDict

_Tensor = torch.Tensor


def lazy_repr_block(self: LazyStackedTensorDict, indent: str) -> tuple[str, bool, bool]:
    """The repr of a lazy stack starting at ``indent``, whether all its tensors are shared,
    and whether it holds any tensor."""
    inner = indent + "    "
    field_indent = inner + "    "
    fields: list[str] = []
    state = [True, False]  # all shared, any tensor

    def describe(value: Any, at: str) -> str:
        if isinstance(value, _Tensor):
            shared = _tensor_shared(value) or value.is_cuda
            state[0] = state[0] and shared
            state[1] = True
            return _tensor_repr(value, shared)
        if isinstance(value, _kinds.Lazy):
            text, shared, anyt = value._repr_block(at)
        elif isinstance(value, _kinds.Dense):
            text, shared, anyt = _td_repr(value, at)
        else:
            return repr(value).replace("\n", "\n" + at)
        if anyt:
            state[0] = state[0] and shared
            state[1] = True
        return text

    for key in sorted(self._common_keys()):
        values = [td._get_str(key, NO_DEFAULT) for td in self.tensordicts]
        first = values[0]
        if isinstance(first, _Tensor) and all(isinstance(v, _Tensor) for v in values):
            shape = common_shape([v.shape for v in values]) or [-1] * first.ndim
            shape.insert(self.stack_dim, len(values))
            shared = all(_tensor_shared(v) or v.is_cuda for v in values)
            state[0] = state[0] and shared
            state[1] = True
            text = _tensor_repr(first, shared).replace(
                f"shape={first.shape}", f"shape={torch.Size(shape)}", 1
            )
        else:
            try:
                text = describe(self._stack_values((key,), values), field_indent)
            except (RuntimeError, TypeError) as err:
                text = f"<{err}>"
        fields.append(f"{field_indent}{key}: {text}")
    exclusive = []
    for i, (td, keys) in enumerate(zip(self.tensordicts, self._exclusive_keys(), strict=True)):
        if keys:
            at = field_indent + "    "
            lines = [f"{at}{k}: {describe(td._get_str(k, NO_DEFAULT), at)}" for k in sorted(keys)]
            exclusive.append(f"{field_indent}{i} ->\n" + ",\n".join(lines))
    is_shared = state[1] and state[0]
    body = ",\n".join(fields) if fields else inner
    excl = ",\n".join(exclusive) if exclusive else inner
    text = (
        f"{type(self).__name__}(\n"
        f"{inner}fields={{\n{body}}},\n"
        f"{inner}exclusive_fields={{\n{excl}}},\n"
        f"{inner}batch_size={self.batch_size},\n"
        f"{inner}device={self.device},\n"
        f"{inner}is_shared={is_shared},\n"
        f"{inner}stack_dim={self.stack_dim})"
    )
    return text, is_shared, state[1]
