"""``gather_and_stack`` over torch.distributed (to be filled in)."""

from __future__ import annotations


class GatherOps:
    """Mixin of :class:`~tensordict.TensorDictBase`: ``gather_and_stack``."""
