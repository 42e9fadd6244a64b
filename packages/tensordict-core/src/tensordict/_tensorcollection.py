"""The reference's (private) module path of :class:`~tensordict.TensorCollection`, which
clients import (docs: compatibility). Use ``from tensordict import TensorCollection``."""

from __future__ import annotations

from typing import TypeVar

from tensordict._leaves.collection import TensorCollection

T = TypeVar("T", bound=TensorCollection)

__all__ = ["TensorCollection"]
