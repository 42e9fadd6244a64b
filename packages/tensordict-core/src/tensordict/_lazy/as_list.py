"""A ``LazyStackedTensorDict`` as a list of tensordicts: ``append``, ``insert``, ``extend``
and membership of a member (``td in lazy``).

A stack can start empty (``LazyStackedTensorDict(stack_dim=0)``): its first member then
sets the members' batch size. Every check runs before the stack changes, so a bad member
leaves it as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from tensordict._kinds import kinds as _kinds
from tensordict.base import TensorDictBase


class LazyListOps:
    """Mixin of :class:`~tensordict.LazyStackedTensorDict`: list-like growth."""

    tensordicts: list[TensorDictBase]
    stack_dim: int
    _batch_size: torch.Size
    _open_batch: bool  # an empty stack whose members' batch size is not known yet

    def __contains__(self, item: object) -> bool:
        """``key in lazy`` for a key (see :meth:`keys`); for a tensordict, whether it is
        one of the members (the object itself, not an equal copy).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> td = TensorDict(a=torch.zeros(2), batch_size=[2])
        >>> lazy = lazy_stack([td, td.clone()])
        >>> td in lazy, td.clone() in lazy, "a" in lazy
        (True, False, True)
        """
        if isinstance(item, TensorDictBase):
            return any(item is td for td in self.tensordicts)
        return item in self.keys(include_nested=True)  # type: ignore[attr-defined]

    def _check_member(self, td: Any, shape: torch.Size | None) -> torch.Size:
        """Check that ``td`` can join the stack; return the members' batch size."""
        if not isinstance(td, TensorDictBase):
            raise TypeError(
                f"a LazyStackedTensorDict stacks tensordicts; got a {type(td).__name__}."
            )
        if self.tensordicts and self.tensordicts[0].is_locked:
            raise RuntimeError(
                "cannot add a tensordict to a locked LazyStackedTensorDict; unlock it first."
            )
        device = self.device  # type: ignore[attr-defined]
        if self.tensordicts and td.device != device:
            raise ValueError(
                f"the new tensordict is on device {td.device}, the stacked ones on {device}."
            )
        if shape is None:  # the first member of an open stack sets the batch size
            return td.batch_size
        if len(td.batch_size) != len(shape) or any(
            s != -1 and s != t for s, t in zip(shape, td.batch_size, strict=True)
        ):
            raise ValueError(
                f"the new tensordict has batch_size={tuple(td.batch_size)}, but the stacked "
                f"tensordicts have batch_size={tuple(shape)}."
            )
        return shape

    def insert(self, index: int, tensordict: TensorDictBase) -> None:
        """Insert ``tensordict`` at position ``index`` of the stack (as :meth:`list.insert`).

        It is stored as is (not copied); its batch size must be the members' one.

        >>> import torch
        >>> from tensordict import LazyStackedTensorDict, TensorDict
        >>> lazy = LazyStackedTensorDict(TensorDict(a=torch.zeros(3)))
        >>> lazy.insert(0, TensorDict(a=torch.ones(3)))
        >>> lazy.batch_size, lazy[0]["a"].tolist()
        (torch.Size([2]), [1.0, 1.0, 1.0])
        """
        self.extend_at(index, [tensordict])

    def append(self, tensordict: TensorDictBase) -> None:
        """Add ``tensordict`` at the end of the stack (as :meth:`list.append`).

        >>> import torch
        >>> from tensordict import LazyStackedTensorDict, TensorDict
        >>> lazy = LazyStackedTensorDict(stack_dim=0)
        >>> lazy.append(TensorDict(a=torch.zeros(3), batch_size=[3]))
        >>> lazy.append(TensorDict(a=torch.ones(3), batch_size=[3]))
        >>> lazy.batch_size, lazy["a"][:, 0].tolist()
        (torch.Size([2, 3]), [0.0, 1.0])
        """
        self.extend_at(len(self.tensordicts), [tensordict])

    def extend(self, tensordict: Sequence[TensorDictBase] | TensorDictBase) -> None:
        """Add several tensordicts at the end: a sequence of them, a lazy stack's members,
        or a tensordict split along the stack dimension.

        >>> import torch
        >>> from tensordict import LazyStackedTensorDict, TensorDict
        >>> lazy = LazyStackedTensorDict(TensorDict(a=torch.zeros(3), batch_size=[3]))
        >>> lazy.extend(TensorDict(a=torch.ones(2, 3), batch_size=[2, 3]))
        >>> lazy.batch_size
        torch.Size([3, 3])
        """
        if isinstance(tensordict, _kinds.Lazy) and tensordict.stack_dim == self.stack_dim:
            items = list(tensordict.tensordicts)
        elif isinstance(tensordict, TensorDictBase):
            items = list(tensordict.unbind(self.stack_dim))
        else:
            items = list(tensordict)
        self.extend_at(len(self.tensordicts), items)

    def extend_at(self, index: int, items: Sequence[TensorDictBase]) -> None:
        """Insert ``items`` at ``index`` (all checked first: all or nothing)."""
        shape: torch.Size | None = None if self._open_batch else self._member_batch()  # type: ignore[attr-defined]
        for td in items:
            shape = self._check_member(td, shape)
        if not items:
            return
        assert shape is not None
        n = len(self.tensordicts)
        index = max(0, min(n, index + n if index < 0 else index))
        self.tensordicts[index:index] = list(items)
        sd = min(self.stack_dim, len(shape))
        self.stack_dim = sd
        self._batch_size = torch.Size((*shape[:sd], len(self.tensordicts), *shape[sd:]))
        self._open_batch = False
