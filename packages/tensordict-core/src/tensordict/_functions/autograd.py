"""``torch.autograd.grad`` with tensordicts as outputs, inputs or grad_outputs.

The leaves are matched by key: the gradient of every tensor leaf of ``outputs`` with
respect to every tensor leaf of ``inputs`` comes back as a tensordict shaped like
``inputs`` (its non-tensor entries left out).

>>> import torch
>>> from tensordict import TensorDict
>>> x = torch.ones(3, requires_grad=True)
>>> inputs = TensorDict(x=x, batch_size=[3])
>>> outputs = TensorDict(y=x * 2, batch_size=[3])
>>> torch.autograd.grad(outputs, inputs, torch.ones_like(outputs))["x"]
tensor([2., 2., 2.])
"""

from __future__ import annotations

from typing import Any

import torch

from tensordict._kinds import kinds as _kinds
from tensordict._leaves.collection import data_of
from tensordict.base import implements_for_td


def _tensor_leaves(td: Any) -> tuple[list[Any], list[torch.Tensor]]:
    keys, leaves = [], []
    for key, value in td.items(include_nested=True, leaves_only=True):
        if isinstance(value, torch.Tensor):
            keys.append(key)
            leaves.append(value)
    return keys, leaves


def _one(value: Any) -> Any:
    """A tensordict (torch passes ``(td,)`` for ``td``), its data for a tensorclass."""
    if isinstance(value, (tuple, list)) and len(value) == 1 and data_of(value[0]) is not value[0]:
        return data_of(value[0])
    if isinstance(value, (tuple, list)) and len(value) == 1 and isinstance(value[0], _kinds.Base):
        return value[0]
    return data_of(value)


@implements_for_td(torch.autograd.grad)
def autograd_grad(outputs: Any, inputs: Any, grad_outputs: Any = None, **kwargs: Any) -> Any:
    """``torch.autograd.grad`` over the tensor leaves of tensordicts (see the module)."""
    outputs, inputs, grad_outputs = _one(outputs), _one(inputs), _one(grad_outputs)
    if isinstance(outputs, _kinds.Base):
        out_keys, out_leaves = _tensor_leaves(outputs)
    else:
        out_keys, out_leaves = None, outputs
    if isinstance(grad_outputs, _kinds.Base):
        if out_keys is None:
            raise TypeError("grad_outputs is a tensordict but outputs is not.")
        grad_outputs = [grad_outputs.get(key) for key in out_keys]
    if not isinstance(inputs, _kinds.Base):
        return torch.autograd.grad(out_leaves, inputs, grad_outputs, **kwargs)
    in_keys, in_leaves = _tensor_leaves(inputs)
    grads = torch.autograd.grad(out_leaves, in_leaves, grad_outputs, **kwargs)
    result = _kinds.Dense._new_unsafe({}, inputs.batch_size, inputs.device)
    for key, grad in zip(in_keys, grads):
        if grad is not None:
            result.set(key, grad)
    return result
