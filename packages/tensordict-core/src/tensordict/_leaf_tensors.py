"""Leaves of a tensordict combined into one tensor (to be filled in)."""

from __future__ import annotations


class LeafTensorOps:
    """Mixin of :class:`~tensordict.TensorDictBase`: ``cat_tensors``, ``stack_tensors``,
    ``cat_from_tensordict``, ``stack_from_tensordict``."""
