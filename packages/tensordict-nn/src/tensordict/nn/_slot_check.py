"""What a value written into a module's tensor slot (a parameter, a buffer) must look like.

``to_module`` replaces the tensors of a module (or copies into them, in place). A value
that does not fit its slot would otherwise be put in silently and break the module later,
far from the cause (a ``Linear(4, 2)`` holding a ``[5, 5]`` weight). These checks name
the slot and both shapes instead. They run on every leaf ``to_module`` writes, so the
common case (equal shapes) costs one ``torch.Size`` comparison.
"""

from __future__ import annotations

from typing import Any

import torch

from tensordict import TensorDictBase

__all__ = ["check_copy", "check_swap", "shapes_fit"]

_Tensor = torch.Tensor


def shapes_fit(value_shape: torch.Size, slot_shape: torch.Size) -> bool:
    """Whether a value of ``value_shape`` may replace a tensor of ``slot_shape``: their
    trailing dimensions agree, and either one may have extra leading dimensions (stacked
    parameters written into a template module; inside ``torch.vmap`` the values show
    their per-sample shape while the slot may still hold a stacked tensor).

    >>> import torch
    >>> shapes_fit(torch.Size([5, 2, 4]), torch.Size([2, 4]))
    True
    >>> shapes_fit(torch.Size([5, 5]), torch.Size([2, 4]))
    False
    """
    n = min(len(value_shape), len(slot_shape))
    return value_shape[len(value_shape) - n :] == slot_shape[len(slot_shape) - n :]


def _name(path: tuple[str, ...], key: str) -> str:
    return ".".join((*path, key))


def check_swap(value: _Tensor, old: Any, path: tuple[str, ...], key: str, owner: Any) -> None:
    """Raise :class:`RuntimeError` when ``value`` cannot replace ``old``, the tensor at
    ``key`` of ``owner`` (the submodule at ``path``; see :func:`shapes_fit`). In a
    tensordict owner (``TensorDictParams``) only the dimensions after its batch
    dimensions must fit. A slot that holds no tensor, or an uninitialized (lazy)
    parameter, takes any shape.

    >>> import torch
    >>> from torch import nn
    >>> lin = nn.Linear(4, 2)
    >>> check_swap(torch.zeros(2, 4), lin.weight, (), "weight", lin)
    >>> check_swap(torch.zeros(5, 5), lin.weight, ("0",), "weight", lin)
    Traceback (most recent call last):
    ...
    RuntimeError: to_module: the value for '0.weight' has shape (5, 5), but the tensor it replaces in Linear has shape (2, 4); ...
    """
    if not isinstance(old, _Tensor):
        return
    try:
        value_shape, slot_shape = value.shape, old.shape
    except RuntimeError:  # an uninitialized parameter has no shape yet
        return
    if value_shape == slot_shape or shapes_fit(value_shape, slot_shape):
        return
    if isinstance(owner, TensorDictBase):  # a TensorDictParams: its batch dims may differ
        if shapes_fit(value_shape, slot_shape[len(owner.batch_size) :]):
            return
    raise RuntimeError(
        f"to_module: the value for {_name(path, key)!r} has shape {tuple(value_shape)}, but "
        f"the tensor it replaces in {type(owner).__name__} has shape {tuple(slot_shape)}; a value must "
        "have that shape (extra leading dimensions, as in stacked parameters, are "
        "accepted). The module was left unchanged."
    )


def check_copy(
    value: _Tensor, current: _Tensor, path: tuple[str, ...], key: str, owner: Any
) -> None:
    """Raise :class:`RuntimeError` when ``value`` cannot be copied in place into
    ``current`` (the tensor at ``key`` of ``owner``, at ``path``) without changing it: the shapes
    must be equal (no broadcasting) and ``current``'s dtype must hold the values without
    a change of kind (no float into an integer tensor, no complex into a real one).

    >>> import torch
    >>> from torch import nn
    >>> bn = nn.BatchNorm1d(3)
    >>> check_copy(torch.ones(3), bn.running_mean, (), "running_mean", bn)
    >>> check_copy(torch.tensor(2.5), bn.num_batches_tracked, (), "num_batches_tracked", bn)
    Traceback (most recent call last):
    ...
    RuntimeError: to_module(inplace=True): the value for 'num_batches_tracked' has dtype torch.float32, ...
    """
    if value.shape != current.shape:
        raise RuntimeError(
            f"to_module(inplace=True): the value for {_name(path, key)!r} has shape "
            f"{tuple(value.shape)}, but the tensor it is copied into in {type(owner).__name__} "
            f"has shape {tuple(current.shape)}; an in-place write needs the same shape. "
            "The module was left unchanged."
        )
    if value.dtype != current.dtype and not torch.can_cast(value.dtype, current.dtype):
        raise RuntimeError(
            f"to_module(inplace=True): the value for {_name(path, key)!r} has dtype "
            f"{value.dtype}, which the tensor it is copied into in {type(owner).__name__} "
            f"({current.dtype}) "
            "cannot hold without changing the values; cast it first. The module was left "
            "unchanged."
        )
