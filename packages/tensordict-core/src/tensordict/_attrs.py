"""Per-leaf tensor attributes (to be filled in)."""

from __future__ import annotations


class AttrsOps:
    """Mixin of :class:`~tensordict.TensorDictBase`: ``attrs``."""
