"""Memory accounting of a tensordict: ``data_ptr``, ``param_count``, ``bytes``, and
``record_stream`` (marking every tensor leaf as used by a CUDA stream).

A lazy stack holds no tensor of its own: these methods count and report its members'
stored tensors (keys only some members hold included), never stacked copies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tensordict._engine.tree import leaf_items
from tensordict._keys.nested import unravel_key
from tensordict._kinds import kinds as _kinds
from tensordict._kinds.kinds import is_nested

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self


_Tensor = torch.Tensor


class MemoryOps(_kinds.SharedMixin):
    """Mixin of :class:`~tensordict.TensorDict` and :class:`~tensordict.LazyStackedTensorDict`:
    the methods of this module."""

    def data_ptr(self, *, storage: bool = False) -> _kinds.Dense:
        """A tensordict of the same structure (batch size ``[]``) holding each tensor
        leaf's ``data_ptr()`` (``untyped_storage().data_ptr()`` with ``storage=True``).

        Non-tensor entries are left out. A lazy stack (at the root or nested) holds no
        tensor of its own: it gives one entry per member, ``"0"``, ``"1"``, ...

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> x = torch.zeros(4)
        >>> td = TensorDict({"a": x[:2], "b": {"c": x[2:]}}, [2])
        >>> ptrs = td.data_ptr(storage=True)
        >>> bool(ptrs["a"] == ptrs["b", "c"]), bool(td.data_ptr()["a"] == ptrs["a"])
        (True, True)
        >>> sorted(lazy_stack([td, td.clone()]).data_ptr().keys(True, True))
        [('0', 'a'), ('0', 'b', 'c'), ('1', 'a'), ('1', 'b', 'c')]
        """

        def walk(td: Any) -> _kinds.Dense:
            out: dict[str, Any] = {}
            store = td._tensordict if isinstance(td, _kinds.Dense) else None
            members = _kinds.lazy_members(td) if store is None else None
            if members is not None:
                out = {str(i): walk(m) for i, m in enumerate(members)}
                return _kinds.Dense._new_unsafe(out, torch.Size([]))
            for key, value in store.items() if store is not None else td.items():
                if isinstance(value, _Tensor):
                    ptr = value.untyped_storage().data_ptr() if storage else value.data_ptr()
                    out[key] = torch.tensor(ptr, dtype=torch.int64)
                elif is_nested(value):
                    out[key] = walk(value)
            return _kinds.Dense._new_unsafe(out, torch.Size([]))

        return walk(self)

    def param_count(self, *, count_duplicates: bool = True) -> int:
        """The number of elements in all tensor leaves.

        With ``count_duplicates=False`` a tensor stored under several keys is counted
        once (the same tensor object; different views of one storage count separately).
        A lazy stack counts its members' tensors (keys only some members hold included).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> x = torch.zeros(2, 3)
        >>> td = TensorDict({"a": x, "b": {"c": torch.zeros(2)}, "d": x}, [2])
        >>> td.param_count(), td.param_count(count_duplicates=False)
        (14, 8)
        """
        return sum(t.numel() for t in self._tensor_leaves(count_duplicates))

    def bytes(self, *, count_duplicates: bool = False) -> int:
        """The number of bytes of all tensor leaves (``numel() * element_size()``).

        A leaf's gradient counts too, and a jagged nested tensor counts its values,
        offsets and lengths. With ``count_duplicates=False`` (the default) memory reached
        more than once (the same tensor under several keys, nested tensors sharing their
        offsets) is counted once. A lazy stack counts its members' tensors (as
        :meth:`param_count`).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> x = torch.zeros(2, 3)
        >>> td = TensorDict({"a": x, "b": torch.zeros(2, dtype=torch.int8), "c": x}, [2])
        >>> td.bytes(), td.bytes(count_duplicates=True)
        (26, 50)
        """
        pieces = [p for t in self._tensor_leaves(True) for p in _memory_pieces(t)]
        if not count_duplicates:
            pieces = list({_memory_key(p): p for p in reversed(pieces)}.values())
        return sum(p.numel() * p.element_size() for p in pieces)

    def _tensor_leaves(self, count_duplicates: bool) -> list[_Tensor]:
        leaves = [v for _, v in leaf_items(self) if isinstance(v, _Tensor)]
        if count_duplicates:
            return leaves
        seen: set[int] = set()
        unique = []
        for t in leaves:
            if id(t) not in seen:
                seen.add(id(t))
                unique.append(t)
        return unique

    def record_stream(self, stream: torch.cuda.Stream) -> Self:
        """Mark every tensor leaf as used by the CUDA ``stream`` (see
        :meth:`torch.Tensor.record_stream`). Every leaf must be on a CUDA device.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2)}, [2])
        >>> try:
        ...     td.record_stream(None)
        ... except RuntimeError as err:
        ...     print(str(err)[:43])
        record_stream needs CUDA tensors, but 'a' i
        """
        leaves = [(p, v) for p, v in leaf_items(self) if isinstance(v, _Tensor)]
        for path, leaf in leaves:
            if not leaf.is_cuda:
                raise RuntimeError(
                    f"record_stream needs CUDA tensors, but {unravel_key(path)!r} is on "
                    f"{leaf.device}; streams only exist for CUDA devices."
                )
        for _, leaf in leaves:
            leaf.record_stream(stream)
        return self


def _memory_pieces(t: _Tensor) -> list[_Tensor]:
    """The tensors holding the memory of the leaf ``t``: itself (or the parts of a
    jagged nested tensor) and its gradient."""
    if t.is_nested and t.layout is torch.jagged:
        parts = [t.values(), t.offsets(), t.lengths()]  # type: ignore[attr-defined]
        return [p for p in parts if p is not None]
    if t.is_nested:  # a strided nested tensor: its buffer
        return [t.values()] if hasattr(t, "values") else []
    grad = t.grad if t.is_leaf else None
    return [t] if grad is None else [t, grad]


def _memory_key(t: _Tensor) -> tuple[Any, ...]:
    """What tells two tensors viewing the same memory apart from distinct ones."""
    try:
        return (t.data_ptr(), t.numel(), t.dtype, t.device)
    except RuntimeError:  # no storage (meta, fake): by identity
        return (id(t),)
