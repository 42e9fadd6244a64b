"""Ragged non-tensor stacks: non-tensor leaves of different batch sizes, stacked.

Reading a non-tensor entry of a lazy stack whose members have different batch sizes
(a ``batch_size`` with ``-1``), or ``torch.stack``/``lazy_stack`` of non-tensor leaves of
different batch sizes, gives a :class:`RaggedNonTensorStack`, as the reference gives a
``NonTensorStack`` of batch size ``[n, -1]``. One index tensor cannot describe such a
batch, so this stack holds the stacked leaves (its *members*) themselves, in containers
of its own.

It reads like a regular stack: ``batch_size`` has ``-1`` where the members' sizes differ,
``tolist()`` gives one nested list per member, an int at the stack dimension gives that
member, and other indices are applied to every member (the result is a regular stack
again when the selected parts share their batch size). What needs one size per dimension
(reshaping, comparisons, ``torch.cat``, ``where``, padding, writing, memory mapping) raises
a ``RuntimeError`` that names the ragged batch size and says what to do instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np
import torch

from tensordict._keys.shape import normalize_dim
from tensordict._leaves.nontensor_data import NON_TENSOR_TYPES, NonTensorDataBase, _same_value
from tensordict._leaves.nontensor_stack import NonTensorStack, _join
from tensordict._util.linked_list import LinkedList

_Leaf = NonTensorDataBase | NonTensorStack
_MISSING: Any = object()


def ragged_shape(shapes: Sequence[torch.Size], dim: int) -> torch.Size:
    """The batch size of ``shapes`` stacked at ``dim``: ``-1`` where they differ.

    >>> ragged_shape([torch.Size([2]), torch.Size([3])], 0)
    torch.Size([2, -1])
    """
    first = shapes[0]
    if any(len(s) != len(first) for s in shapes):
        raise RuntimeError(
            "cannot stack non-tensor leaves whose number of batch dims differs "
            f"({[tuple(s) for s in shapes]}): a ragged stack needs one number of dims."
        )
    common = [n if all(s[i] == n for s in shapes) else -1 for i, n in enumerate(first)]
    return torch.Size([*common[:dim], len(shapes), *common[dim:]])


def makes_ragged(items: Sequence[_Leaf]) -> bool:
    """Whether stacking the non-tensor leaves ``items`` makes a ragged stack: their batch
    sizes differ, or one of them is ragged.

    >>> from tensordict import NonTensorStack
    >>> makes_ragged([NonTensorStack("a", "b"), NonTensorStack("c")])
    True
    """
    bs = items[0].batch_size
    return any(type(it) is RaggedNonTensorStack or it.batch_size != bs for it in items)


def stack_leaves(items: Sequence[_Leaf], dim: int, device: Any = _MISSING) -> _Leaf:
    """``items`` stacked at ``dim``: a regular :class:`NonTensorStack` when they share
    their batch size, a :class:`RaggedNonTensorStack` otherwise.

    >>> from tensordict import NonTensorStack
    >>> stack_leaves([NonTensorStack("a", "b"), NonTensorStack("c")], 0).batch_size
    torch.Size([2, -1])
    >>> stack_leaves([NonTensorStack("a"), NonTensorStack("c")], 0).tolist()
    [['a'], ['c']]
    """
    dev = items[0].device if device is _MISSING else device
    if makes_ragged(items):
        return RaggedNonTensorStack._of(items, dim, dev)
    values, index = _join(items, dim, torch.stack)
    return NonTensorStack._from_parts(values, index, dev, dim)


def _rebuild(members: list[_Leaf], dim: int, device: Any) -> RaggedNonTensorStack:
    return RaggedNonTensorStack._of(members, dim, device)


def _produced_dims(item: Any) -> int:
    """The number of result dims an index item makes (int: 0, slice: 1, tensor: its ndim
    for integers, 1 for a boolean mask)."""
    if isinstance(item, torch.Tensor):
        return 1 if item.dtype is torch.bool else item.ndim
    if isinstance(item, (list, range)):
        return 1
    return 1 if isinstance(item, slice) else 0


def _consumed_dims(item: Any) -> int:
    """The number of batch dims an index item consumes (a boolean mask: its ndim)."""
    if isinstance(item, torch.Tensor) and item.dtype is torch.bool:
        return max(item.ndim, 1)
    return 1


def _is_advanced(item: Any) -> bool:
    return isinstance(item, (torch.Tensor, list, range)) and not (
        isinstance(item, torch.Tensor) and item.ndim == 0 and item.dtype is not torch.bool
    )


class RaggedNonTensorStack(NonTensorStack):
    """A :class:`NonTensorStack` of leaves of different batch sizes (see the module).

    >>> import torch
    >>> from tensordict import NonTensorStack, TensorDict, lazy_stack
    >>> lazy = lazy_stack([TensorDict(s=NonTensorStack("a", "b"), batch_size=[2]),
    ...                    TensorDict(s=NonTensorStack("c", "d", "e"), batch_size=[3])])
    >>> s = lazy.get("s")
    >>> s.batch_size, s.tolist()
    (torch.Size([2, -1]), [['a', 'b'], ['c', 'd', 'e']])
    >>> s[1].tolist(), s[1, 2].data, s[:, 0].tolist()
    (['c', 'd', 'e'], 'e', ['a', 'c'])
    """

    __slots__ = ("_members", "_shape")

    _members: list[_Leaf]
    _shape: torch.Size

    @classmethod
    def _of(cls, members: Sequence[_Leaf], dim: int, device: Any) -> RaggedNonTensorStack:
        """The stack of ``members`` (each put in a container of its own) at ``dim``."""
        if not members:
            raise RuntimeError("a ragged NonTensorStack needs at least one member.")
        dim = normalize_dim(dim, len(members[0].batch_size), "dim", extra=1)
        shape = ragged_shape([m.batch_size for m in members], dim)
        out = cls.__new__(cls)
        out._members = [m._with(m.batch_size) for m in members]
        out._shape = shape
        out._device = device
        out.stack_dim = dim
        return out

    # ------------------------------------------------------------------ refusals
    def _refuse(self, what: str = "this operation") -> NoReturn:
        raise RuntimeError(
            f"{what} is not possible on a ragged NonTensorStack (batch_size="
            f"{tuple(self._shape)}: its {len(self._members)} members have different batch "
            "sizes), which has no single size in the -1 dimensions. Read its members "
            "(stack[i], stack.tensordicts) or its values (stack.tolist()) instead."
        )

    # The regular stack's storage (one index tensor over a value list) does not exist
    # here: any operation of the regular stack that reaches it is refused clearly.
    @property  # type: ignore[override]
    def _index(self) -> NoReturn:
        self._refuse()

    @property  # type: ignore[override]
    def _values(self) -> NoReturn:
        self._refuse()

    def __setitem__(self, index: Any, value: Any) -> None:
        raise RuntimeError(
            f"cannot write into a ragged NonTensorStack (batch_size={tuple(self._shape)}): it "
            "is read from members of different batch sizes. Write into the members of the "
            "lazy stack it was read from (lazy_td.tensordicts[i]) instead."
        )

    def __reduce__(self) -> Any:
        return _rebuild, (self._members, self.stack_dim, self._device)

    # ------------------------------------------------------------------ shape info
    @property
    def batch_size(self) -> torch.Size:
        """The batch shape: ``-1`` where the members' sizes differ."""
        return self._shape

    shape = batch_size

    @property
    def batch_dims(self) -> int:
        """Number of batch dimensions."""
        return len(self._shape)

    ndim = batch_dims

    @property
    def names(self) -> list[str | None]:
        """The names of the batch dimensions (stacks are unnamed)."""
        return [None] * len(self._shape)

    def dim(self) -> int:
        """Number of batch dimensions."""
        return len(self._shape)

    def numel(self) -> int:
        """The number of elements: those of every member."""
        return sum(m.numel() for m in self._members)

    def __len__(self) -> int:
        if self._shape[0] < 0:
            self._refuse("len()")
        return self._shape[0]

    # ------------------------------------------------------------------ values
    def tolist(self, **kwargs: Any) -> Any:
        """Nested lists, one per member at the stack dimension (a
        :class:`~tensordict.utils.LinkedList` with ``as_linked_list=True``)."""
        linked = bool(kwargs.get("as_linked_list"))
        if self.stack_dim == 0:
            out = [_member_list(m, linked) for m in self._members]
            return LinkedList(out, td=self) if linked else out
        if self._shape[0] < 0:
            self._refuse("tolist() with the stack dimension after a ragged dimension")
        out = [part.tolist(**kwargs) for part in self.unbind(0)]
        return LinkedList(out, td=self) if linked else out

    def _linked_list(self) -> LinkedList:
        out: LinkedList = self.tolist(as_linked_list=True)
        return out

    def _common_value(self, default: Any) -> Any:
        """The value every element of every member holds, else ``default``."""
        first: Any = _MISSING
        for m in self._members:
            value = m._common_value(_MISSING) if isinstance(m, NonTensorStack) else m.data
            if value is _MISSING:
                return default
            if first is _MISSING:
                first = value
            elif not _same_value(value, first):
                return default
        return default if first is _MISSING else first

    @property
    def tensordicts(self) -> list[_Leaf]:
        """The members, along :attr:`stack_dim` (containers of their own)."""
        return [m._with(m.batch_size) for m in self._members]

    def __iter__(self) -> Any:
        return iter(self.unbind(0))

    def unbind(self, dim: int = 0) -> tuple[_Leaf, ...]:
        """Split along ``dim``: the members for the stack dimension; a dimension whose
        size differs across the members cannot be split."""
        d = normalize_dim(dim, len(self._shape), "dim")
        if d == self.stack_dim:
            return tuple(self.tensordicts)
        if self._shape[d] < 0:
            self._refuse(f"unbind({dim}) along a dimension of different sizes")
        return tuple(self[(slice(None),) * d + (i,)] for i in range(self._shape[d]))

    def __getitem__(self, index: Any) -> _Leaf:
        member_index, selector, new_dim = self._split_index(index)
        members = self._members
        if isinstance(selector, int):
            member = members[selector]
            if member_index:
                out: _Leaf = member[member_index]
                return out
            return member._with(member.batch_size)
        parts = [members[j][member_index] if member_index else members[j] for j in selector]
        if not parts:  # nothing selected: an empty regular stack, shaped by the index
            sizes = [max(m.batch_size[i] for m in members) for i in range(len(self._shape) - 1)]
            sd = self.stack_dim
            full = torch.zeros([*sizes[:sd], len(members), *sizes[sd:]], dtype=torch.long)
            return NonTensorStack._from_parts([], full[index], self._device, new_dim)
        return stack_leaves(parts, new_dim, self._device)

    def _split_index(self, index: Any) -> tuple[tuple[Any, ...], Any, int]:
        """``index`` split into (the index every member receives, the members selected
        (an int or a list of positions), the position of the stack dimension after)."""
        items = list(index) if type(index) is tuple else [index]
        nd, sd, n = len(self._shape), self.stack_dim, len(self._members)
        if any(it is None for it in items):
            raise IndexError(
                "None (a new dimension) is not supported when indexing a ragged "
                f"NonTensorStack (batch_size={tuple(self._shape)}); index its members."
            )
        if sum(_is_advanced(it) for it in items) > 1:
            raise IndexError(
                "a ragged NonTensorStack takes at most one tensor or list in an index "
                f"(batch_size={tuple(self._shape)}); index its members one by one."
            )
        ellipses = [i for i, it in enumerate(items) if it is Ellipsis]
        if len(ellipses) > 1:
            raise IndexError("an index can only have a single ellipsis ('...').")
        explicit = sum(_consumed_dims(it) for it in items if it is not Ellipsis)
        if ellipses:
            at = ellipses[0]
            items[at : at + 1] = [slice(None)] * max(nd - explicit, 0)
        if explicit > nd:
            raise IndexError(
                f"too many indices for a NonTensorStack of batch_size={tuple(self._shape)}."
            )
        before: list[Any] = []
        after: list[Any] = []
        selector: Any = slice(None)
        new_dim = 0
        pos = 0
        for it in items:
            span = _consumed_dims(it)
            if pos <= sd < pos + span:
                if span != 1:
                    raise IndexError(
                        "a boolean mask over several dims that include the stack dim of a "
                        f"ragged NonTensorStack (batch_size={tuple(self._shape)}) is not "
                        "supported; index its members."
                    )
                selector = it
            elif pos < sd:
                before.append(it)
                new_dim += _produced_dims(it)
            else:
                after.append(it)
            pos += span
        member_index = tuple(before + after)
        if isinstance(selector, torch.Tensor):
            if selector.dtype is torch.bool:
                if selector.shape != (n,):
                    raise IndexError(
                        f"the boolean mask of shape {tuple(selector.shape)} does not match the "
                        f"stack dim of size {n}."
                    )
                selector = selector.nonzero().squeeze(-1).tolist()
            else:
                selector = selector.tolist()
        elif isinstance(selector, slice):
            selector = list(range(n))[selector]
        elif isinstance(selector, range):
            selector = list(selector)
        if isinstance(selector, list):
            for j in selector:
                if isinstance(j, bool) or not isinstance(j, (int, np.integer)):
                    raise IndexError(
                        f"cannot index the stack dim of a ragged NonTensorStack with {j!r}: "
                        "positions must be ints."
                    )
                if not -n <= j < n:
                    raise IndexError(f"index {j} is out of bounds for the stack dim of size {n}.")
            return member_index, [j % n for j in selector], new_dim
        if isinstance(selector, bool) or not isinstance(selector, (int, np.integer, torch.Tensor)):
            raise IndexError(
                f"cannot index the stack dim of a ragged NonTensorStack with {selector!r}: use "
                "an int, a slice, a list or tensor of ints, or a boolean mask."
            )
        j = int(selector)
        if not -n <= j < n:
            raise IndexError(f"index {j} is out of bounds for the stack dim of size {n}.")
        return member_index, j % n, new_dim

    # ------------------------------------------------------------------ copies
    def clone(self, recurse: bool = True) -> RaggedNonTensorStack:
        """A copy (the members cloned)."""
        return RaggedNonTensorStack._of(
            [m.clone() for m in self._members], self.stack_dim, self._device
        )

    copy = clone

    def _with(
        self, batch_size: torch.Size, device: torch.device | None = None
    ) -> RaggedNonTensorStack:
        """This stack for a parent of ``batch_size`` (a prefix of its own), on ``device``."""
        if self._shape[: len(batch_size)] != batch_size:
            raise RuntimeError(
                f"a ragged NonTensorStack of batch_size={tuple(self._shape)} cannot take the "
                f"batch size {tuple(batch_size)}: its leading dimensions must match."
            )
        return RaggedNonTensorStack._of(
            self._members, self.stack_dim, self._device if device is None else device
        )


def _member_list(member: _Leaf, linked: bool) -> Any:
    """The values of one member as nested lists (linked to it with ``linked``)."""
    if isinstance(member, NonTensorStack):
        return member.tolist(as_linked_list=linked)
    values = member.tolist()
    return LinkedList(values) if linked and isinstance(values, list) else values


NON_TENSOR_TYPES.add(RaggedNonTensorStack)


__all__ = ["RaggedNonTensorStack", "makes_ragged", "ragged_shape", "stack_leaves"]
