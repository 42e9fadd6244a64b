"""``LazyStackedTensorDict``: a stack of tensordicts whose entries are stacked on read.

The stack keeps the list of tensordicts (``tensordicts``) and the new dimension
(``stack_dim``). Reading an entry stacks the members' values (nested tensordicts come
back as lazy stacks of the members' nested tensordicts, non-tensor values as a
:class:`~tensordict.NonTensorStack`); writing by key or by index splits the value along
``stack_dim`` and writes each part into its member, so writes go through. Members may
hold keys the others lack ("exclusive" keys, not listed by :meth:`keys`) and entries of
different shapes ("heterogeneous" entries, which cannot be read as one tensor but can be
padded or densified).

Batch-shape operations, ``apply`` and the dict-like methods live in
:mod:`tensordict._lazy.ops`, dense copies in :mod:`tensordict._lazy.dense`; this module
holds the container, reads, writes and keys; indexing is in :mod:`tensordict._lazy.index`
and the printed form in :mod:`tensordict._lazy.repr`. The methods every kind shares
(indexed writes, key sets, state dicts, padding, consolidation: see
:mod:`tensordict._shared.install`) come from ``TensorDictBase``: they work through the
primitives, and the few hooks a lazy stack answers differently (``get_item_shape``,
``entry_class``, ``_plan_at``) are defined here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import numpy as np
import torch

from tensordict._combine.ragged import LazyRaggedOps
from tensordict._dense.td import TensorDict
from tensordict._keys.nested import NestedKey, key_as_tuple, unravel_key
from tensordict._keys.shape import common_shape, normalize_dim, parse_batch_size, parse_device
from tensordict._kinds import kinds as _kinds
from tensordict._kinds.kinds import is_leaf_default
from tensordict._kinds.views import TensorDictKeysView
from tensordict._lazy.as_list import LazyListOps
from tensordict._lazy.dense import LazyDenseOps
from tensordict._lazy.index import LazyIndexOps, member_item_shape
from tensordict._lazy.ops import LazyMemberOps, LazyShapeOps
from tensordict._lazy.repr import lazy_repr_block
from tensordict._leaves.collection import wrapped
from tensordict._leaves.nontensor import (
    NON_TENSOR,
    NON_TENSOR_TYPES,
    NonTensorStack,
    RaggedNonTensorStack,
    stack_non_tensor,
    unwrap_non_tensor,
)
from tensordict._leaves.unbatched import UNBATCHED_TYPES, combine_unbatched
from tensordict._util.errors import lock_error, missing_key
from tensordict._wire.consolidate import ConsolidatedState
from tensordict.base import NO_DEFAULT, TensorDictBase, _key_tuple

_Tensor = torch.Tensor
_MISSING: Any = object()
_NUMBERS = (bool, int, float, complex, np.number, np.bool_)


def _fmt(key: tuple[Any, ...]) -> Any:
    return unravel_key(key)


def _member_batch_size(members: list[Any], strict: bool) -> torch.Size:
    """The members' common batch size; with ``strict=False`` sizes that differ are
    ``-1`` (the members must still have the same number of batch dimensions)."""
    bs: torch.Size = members[0].batch_size
    for i, td in enumerate(members[1:], 1):
        other = td.batch_size
        if other == bs:
            continue
        if strict or len(other) != len(bs):
            raise RuntimeError(
                f"lazy_stack: the batch sizes of the stacked tensordicts differ (tensordict "
                f"0 has {tuple(members[0].batch_size)}, tensordict {i} has {tuple(other)})"
                + (
                    "; with strict_shape=True they must be equal."
                    if strict and len(other) == len(bs)
                    else "; they must have the same number of dimensions."
                )
            )
        bs = torch.Size([a if a == b else -1 for a, b in zip(bs, other, strict=True)])
    return bs


class LazyStackedTensorDict(
    LazyRaggedOps,
    LazyListOps,
    LazyIndexOps,
    LazyShapeOps,
    LazyMemberOps,
    LazyDenseOps,
    ConsolidatedState,
    TensorDictBase,
):
    """A lazy stack of tensordicts: entries are stacked when read, writes go to the members.

    Args:
        *tensordicts: the stacked tensordicts. They have the same number of batch
            dimensions; sizes that differ across them show as ``-1`` in the stack's batch
            size (``strict_shape=True`` requires equal batch sizes).
        stack_dim: the position of the new dimension in the batch size.
        hook_out, hook_in: callables applied to the tensors read with :meth:`get` and to
            the values written with :meth:`set` (kept for compatibility).
        batch_size: with tensordicts, the stacked batch size (checked); for an empty
            stack, the batch size of the members to come (the stack's gets size 0 inserted
            at ``stack_dim``); without it the first member added sets it.
        device: if given, the members are moved there first (an empty stack reports it).
        names: names of the batch dimensions.
        stack_dim_name: the name of the stack dimension only.
        strict_shape: require the members' batch sizes to be equal.

    >>> import torch
    >>> from tensordict import LazyStackedTensorDict, TensorDict
    >>> tds = [TensorDict({"a": torch.zeros(3)}, [3]), TensorDict({"a": torch.ones(3)}, [3])]
    >>> lazy = LazyStackedTensorDict(*tds, stack_dim=0)
    >>> lazy.batch_size, lazy["a"].shape, lazy[1] is tds[1]
    (torch.Size([2, 3]), torch.Size([2, 3]), True)
    >>> lazy["b"] = torch.arange(6).view(2, 3)   # written through to the members
    >>> tds[1]["b"]
    tensor([3, 4, 5])
    """

    hook_out: Callable[[Any], Any] | None = None
    hook_in: Callable[[Any], Any] | None = None
    _open_batch = False
    _empty_device: torch.device | None = None  # the device asked for while empty

    def __init__(
        self,
        *tensordicts: TensorDictBase,
        stack_dim: int = 0,
        hook_out: Callable[[Any], Any] | None = None,
        hook_in: Callable[[Any], Any] | None = None,
        batch_size: Sequence[int] | torch.Size | None = None,
        device: torch.device | str | int | None = None,
        names: Sequence[str | None] | None = None,
        stack_dim_name: str | None = None,
        strict_shape: bool = False,
    ) -> None:
        members: list[Any] = list(tensordicts)
        if len(members) == 1 and isinstance(members[0], (list, tuple)):
            members = list(members[0])
        for i, td in enumerate(members):
            if not isinstance(td, TensorDictBase):
                raise TypeError(
                    f"LazyStackedTensorDict stacks tensordicts, but item {i} is a "
                    f"{type(td).__name__}."
                )
        open_batch = False
        if members:
            bs = _member_batch_size(members, strict_shape)
            try:
                sd = normalize_dim(stack_dim, len(bs), "stack_dim", extra=1)
            except IndexError as err:  # the reference's lazy_stack raises RuntimeError
                raise RuntimeError(f"lazy_stack: {err}") from None
            full = torch.Size((*bs[:sd], len(members), *bs[sd:]))
            if batch_size is not None and parse_batch_size(batch_size) != full:
                raise RuntimeError(
                    f"LazyStackedTensorDict: batch_size={list(batch_size)} does not match the "
                    f"stacked batch size {tuple(full)}."
                )
        elif batch_size is None:  # an empty stack to grow: the first member sets the size
            if stack_dim < 0:
                raise RuntimeError(
                    f"LazyStackedTensorDict: an empty stack without batch_size needs a "
                    f"non-negative stack_dim, got {stack_dim}."
                )
            sd = stack_dim
            full = torch.Size([0] * (sd + 1))
            open_batch = True
        else:  # an empty stack of members of this batch size
            member_bs = parse_batch_size(batch_size)
            nb = len(member_bs)
            sd = min(stack_dim, nb) if stack_dim >= 0 else normalize_dim(stack_dim, nb, extra=1)
            full = torch.Size((*member_bs[:sd], 0, *member_bs[sd:]))
        if device is not None:
            members = [td.to(device) for td in members]
            self._empty_device = parse_device(device)
        self.tensordicts: list[TensorDictBase] = members
        self.stack_dim: int = sd
        self._batch_size = full
        self._td_dim_name = stack_dim_name
        self._open_batch = open_batch
        if hook_out is not None:
            self.hook_out = hook_out
        if hook_in is not None:
            self.hook_in = hook_in
        if names is not None:
            self.names = names

    @classmethod
    def _new(
        cls,
        members: list[Any],
        stack_dim: int,
        dim_name: str | None = None,
        batch_size: torch.Size | None = None,
    ) -> LazyStackedTensorDict:
        """Build without validation (members share one number of batch dims; sizes that
        differ across them are ``-1``)."""
        out = cls.__new__(cls)
        out.tensordicts = members
        out.stack_dim = stack_dim
        if batch_size is None:
            bs = _member_batch_size(members, strict=False)
            batch_size = torch.Size((*bs[:stack_dim], len(members), *bs[stack_dim:]))
        out._batch_size = batch_size
        out._td_dim_name = dim_name
        return out

    def _member_batch(self) -> torch.Size:
        bs, sd = self._batch_size, self.stack_dim
        return bs[:sd] + bs[sd + 1 :]

    # ------------------------------------------------------------------ metadata
    @property
    def batch_size(self) -> torch.Size:
        """The members' batch size with the stack dimension inserted at ``stack_dim``.

        Settable when the stack dimension is kept (the members get the rest).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict({"a": torch.zeros(3, 4)}, [3])] * 2, 1)
        >>> lazy.batch_size
        torch.Size([3, 2])
        >>> lazy.batch_size = [3, 2, 4]
        >>> lazy.tensordicts[0].batch_size
        torch.Size([3, 4])
        """
        return self._batch_size

    @batch_size.setter
    def batch_size(self, new: Sequence[int]) -> None:
        new = parse_batch_size(new)
        sd, n = self.stack_dim, len(self.tensordicts)
        if len(new) <= sd or new[sd] != n:
            raise RuntimeError(
                f"cannot set batch_size={tuple(new)} on a LazyStackedTensorDict stacking {n} "
                f"tensordicts at stack_dim={sd}: the new batch size must keep that dimension."
            )
        member_bs = new[:sd] + new[sd + 1 :]
        old = [td.batch_size for td in self.tensordicts]
        try:
            for td in self.tensordicts:
                td.batch_size = member_bs
        except Exception:
            for td, bs in zip(self.tensordicts, old, strict=False):  # all-or-nothing
                td.batch_size = bs
            raise
        self._batch_size = new

    @property
    def device(self) -> torch.device | None:
        """The device all members share, or ``None``."""
        if not self.tensordicts:
            return self._empty_device
        devices = {td.device for td in self.tensordicts}
        return devices.pop() if len(devices) == 1 else None

    @device.setter
    def device(self, value: Any) -> None:
        raise RuntimeError(
            "The device of a tensordict cannot be assigned; use td.to(device) to move it."
        )

    @property
    def names(self) -> list[str | None]:
        """Names of the batch dimensions: the members' names with the stack dimension's.

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict(batch_size=[3])] * 2)
        >>> lazy.names = ["env", "time"]
        >>> lazy.names, lazy.tensordicts[0].names
        (['env', 'time'], ['time'])
        """
        sd = self.stack_dim
        if self.tensordicts:
            names = list(self.tensordicts[0].names)
        else:
            names = [None] * (len(self._batch_size) - 1)
        names.insert(sd, self._td_dim_name)
        return names

    @names.setter
    def names(self, value: Sequence[str | None] | None) -> None:
        sd = self.stack_dim
        if value is None:
            member_names, dim_name = None, None
        else:
            value = list(value)
            if len(value) != len(self._batch_size):
                raise ValueError(
                    f"names: the length of the dimension names must equate the tensordict "
                    f"batch_dims: got {len(value)} names {value} for {len(self._batch_size)} "
                    f"batch dimension(s) (batch_size={self._batch_size})."
                )
            seen = [n for n in value if n is not None]
            if len(seen) != len(set(seen)):
                raise ValueError(f"dimension names must be unique, got {value}.")
            dim_name = value.pop(sd)
            member_names = value if any(n is not None for n in value) else None
            if dim_name is not None:
                self._check_dim_name_free(dim_name)
        for td in self.tensordicts:
            td.names = member_names
        self._td_dim_name = dim_name

    def _check_dim_name_free(self, dim_name: str) -> None:
        """Raise if a nested tensordict of a member names one of its own dimensions
        ``dim_name``: naming the stack dimension so would repeat a name there."""
        for td in self.tensordicts:
            nb = len(td.batch_size)
            for key in td.keys(include_nested=True):
                if not issubclass(td.entry_class(key), TensorDictBase):
                    continue
                names = td._get_tuple(_key_tuple(key), NO_DEFAULT).names
                if dim_name in names[nb:]:
                    raise ValueError(
                        f"cannot name the stack dimension {dim_name!r}: the nested tensordict "
                        f"at {key!r} already names one of its dimensions so (names {names})."
                    )

    def _has_names(self) -> bool:
        return self._td_dim_name is not None or any(n is not None for n in self.names)

    @property
    def is_locked(self) -> bool:
        """Whether every member is locked."""
        return bool(self.tensordicts) and all(td.is_locked for td in self.tensordicts)

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        if value:
            self.lock_()
        else:
            self.unlock_()

    @property
    def _is_locked(self) -> bool:  # type: ignore[override]
        return self.is_locked

    # ------------------------------------------------------------------ read
    def _gather(self, key: tuple[Any, ...], default: Any) -> Any:
        """The stacked entry at ``key`` (a tuple), or ``default`` when no member has it."""
        tds: list[Any] = self.tensordicts
        if len(key) == 1:
            k = key[0]
            try:  # fast path: dense members holding the key
                return self._stack_values(key, [td._tensordict[k] for td in tds])
            except (KeyError, AttributeError):
                values = [td._get_str(k, _MISSING) for td in tds]
        else:
            values = [td._get_tuple(key, _MISSING) for td in tds]
        if any(v is _MISSING for v in values):
            if default is not NO_DEFAULT:
                return default
            raise self._missing(key, [i for i, v in enumerate(values) if v is _MISSING])
        return self._stack_values(key, values)

    def _missing(self, key: tuple[Any, ...], lacking: list[int]) -> KeyError:
        """The error for ``key`` missing from the members ``lacking``."""
        n = len(self.tensordicts)
        if len(lacking) == n:
            if len(key) == 1:
                return missing_key(key[0], self)
            return KeyError(f"key {_fmt(key)!r} not found in any of the stacked tensordicts.")
        return KeyError(
            f"key {_fmt(key)!r} is only in some of the stacked tensordicts: tensordict(s) "
            f"{lacking} of {n} lack it, so it cannot be read as one stacked entry "
            "(it is an exclusive key). Read it from the members (lazy_td.tensordicts[i]) "
            "or set it in every member."
        )

    def _per_member(
        self, key: tuple[Any, ...], fn: Callable[[TensorDictBase, tuple[Any, ...]], Any]
    ) -> list[Any]:
        """``fn(member, key)`` for every member; a ``KeyError`` in any becomes the stack's."""
        out, lacking = [], []
        for i, td in enumerate(self.tensordicts):
            try:
                out.append(fn(td, key))
            except KeyError:
                lacking.append(i)
        if lacking or not out:
            raise self._missing(key, lacking or [])
        return out

    def get_item_shape(self, key: NestedKey) -> torch.Size:
        """The shape of the stacked entry at ``key``, without stacking it: ``-1`` in the
        dimensions whose size differs across the members (heterogeneous entries).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict({"a": torch.zeros(3, 2)}, [3]), TensorDict({"a": torch.zeros(3, 5)}, [3])])
        >>> lazy.get_item_shape("a")
        torch.Size([2, 3, -1])
        """
        path = _key_tuple(key)
        shapes = self._per_member(path, member_item_shape)
        shape = common_shape(shapes)
        if shape is None:
            raise RuntimeError(
                f"get_item_shape: entry {_fmt(path)!r} has a different number of dimensions "
                f"across the stacked tensordicts (shapes by member: "
                f"{[tuple(s) for s in shapes]})."
            )
        shape.insert(self.stack_dim, len(shapes))
        return torch.Size(shape)

    def entry_class(self, key: NestedKey) -> type:
        """The class of the stacked entry at ``key`` (``torch.Tensor`` for tensors, even of
        different shapes; ``LazyStackedTensorDict`` for nested tensordicts).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict({"a": torch.zeros(2), "b": {}, "s": f"x{i}"}) for i in range(2)])
        >>> [lazy.entry_class(k).__name__ for k in ("a", "b", "s")]
        ['Tensor', 'LazyStackedTensorDict', 'NonTensorStack']
        """
        path = _key_tuple(key)
        classes = self._per_member(path, _member_entry_class)
        if all(issubclass(c, _Tensor) for c in classes):
            return _Tensor  # a stack of tensors is a plain tensor
        cls = type(self._gather(path, NO_DEFAULT))  # non-tensors and nested: cheap to stack
        return NonTensorStack if cls is RaggedNonTensorStack else cls  # its ragged form too

    def _stack_values(self, key: tuple[Any, ...], values: list[Any]) -> Any:
        first = values[0]
        sd = self.stack_dim
        if type(first) in UNBATCHED_TYPES:
            bs = first.batch_size
            return combine_unbatched(values, bs[:sd] + torch.Size([len(values)]) + bs[sd:], key)
        if isinstance(first, _Tensor):
            try:  # torch.stack checks kinds and shapes; explain a failure afterwards
                return torch.stack(values, sd)
            except (RuntimeError, TypeError):
                if not all(isinstance(v, _Tensor) for v in values):
                    raise _mixed_error(key, values) from None
                if any(v.shape != first.shape for v in values):
                    shapes = {j: tuple(w.shape) for j, w in enumerate(values)}
                    raise RuntimeError(
                        f"Failed to stack tensors within a tensordict: cannot read entry "
                        f"{_fmt(key)!r} of the LazyStackedTensorDict as one tensor: its shape differs across the stacked tensordicts (shapes by "
                        f"member: {shapes}). Index the members (lazy_td[i], "
                        "lazy_td.tensordicts), or get a dense copy with "
                        "lazy_td.to_padded_tensor() or lazy_td.densify(layout=torch.jagged)."
                    ) from None
                raise
        if isinstance(first, TensorDictBase):
            bs = first.batch_size
            for v in values:
                if not isinstance(v, TensorDictBase):
                    raise _mixed_error(key, values)
                if len(v.batch_size) != len(bs):  # other sizes: a ragged stack (-1)
                    raise RuntimeError(
                        f"cannot read the nested entry {_fmt(key)!r} as a lazy stack: its "
                        f"number of batch dims differs across the stacked tensordicts "
                        f"({[tuple(w.batch_size) for w in values]})."
                    )
            inner = wrapped(values)
            if inner is not None:  # tensorclasses: a lazy stack of their data, same class
                return inner[1](LazyStackedTensorDict._new(inner[0], sd, self._td_dim_name))
            return LazyStackedTensorDict._new(values, sd, self._td_dim_name)
        if isinstance(first, NON_TENSOR):
            if not all(isinstance(v, NON_TENSOR) for v in values):
                raise _mixed_error(key, values)
            bs = first.batch_size
            return stack_non_tensor(values, sd, bs[:sd] + (len(values),) + bs[sd:])
        raise _mixed_error(key, values)  # pragma: no cover - members only store the above

    def _get_str(self, key: str, default: Any) -> Any:
        return self._gather((key,), default)

    def _get_tuple(self, key: tuple[Any, ...], default: Any) -> Any:
        return self._gather(key, default)

    def __getitem__(self, index: Any) -> Any:
        """``lazy[key]`` stacks an entry; any other index selects along the batch.

        An integer at the stack dimension returns the member itself (no copy).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> tds = [TensorDict({"a": torch.full((3,), float(i))}, [3]) for i in range(4)]
        >>> lazy = lazy_stack(tds)
        >>> lazy["a"][:, 0], lazy[2] is tds[2], lazy[1:3].batch_size, lazy[:, 0]["a"]
        (tensor([0., 1., 2., 3.]), True, torch.Size([2, 3]), tensor([0., 1., 2., 3.]))
        """
        if type(index) is str:
            value = self._gather((index,), NO_DEFAULT)
        elif type(index) is tuple and index and isinstance(index[0], (str, tuple)):
            value = self._gather(_key_tuple(index), NO_DEFAULT)
        else:
            return self._index(index)
        if type(value) in NON_TENSOR_TYPES:
            return unwrap_non_tensor(value)
        if self.hook_out is not None and isinstance(value, _Tensor):
            return self.hook_out(value)
        return value

    # ------------------------------------------------------------------ keys
    def _common_keys(self) -> list[str]:
        tds = self.tensordicts
        if not tds:
            return []
        keys = [k for k in tds[0].keys() if isinstance(k, str)]
        rest = [td.keys() for td in tds[1:]]
        return [k for k in keys if all(k in r for r in rest)] if rest else keys

    def keys(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        *,
        sort: bool = False,
    ) -> TensorDictKeysView:
        """The keys every member has (see :meth:`TensorDict.keys` for the options).

        Keys only some members hold ("exclusive" keys) are not listed.

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict({"a": 0, "b": 1}), TensorDict({"a": 2})])
        >>> list(lazy.keys()), "b" in lazy.keys(), "b" in lazy.tensordicts[0].keys()
        (['a'], False, True)
        """
        return _LazyKeysView(cast(Any, self), include_nested, leaves_only, is_leaf, sort)

    def valid_keys(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        *,
        sort: bool = False,
    ) -> TensorDictKeysView:
        """Alias of :meth:`keys` (kept from older versions)."""
        return self.keys(include_nested, leaves_only, is_leaf, sort=sort)

    @property
    def _has_exclusive_keys(self) -> bool:
        """Whether some member holds a key (at any depth) that another lacks (the
        reference's private property, read by clients).

        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy_stack([TensorDict(a=0), TensorDict(a=1, b=2)])._has_exclusive_keys
        True
        """
        tds = self.tensordicts
        if len(tds) < 2:
            return False
        first = set(tds[0].keys(True, True))
        return any(set(td.keys(True, True)) != first for td in tds[1:])

    def _exclusive_keys(self) -> list[list[str]]:
        common = set(self._common_keys())
        return [
            [k for k in td.keys() if isinstance(k, str) and k not in common]
            for td in self.tensordicts
        ]

    # ------------------------------------------------------------------ write
    def _split_value(self, key: tuple[Any, ...], value: Any) -> list[Any]:
        """``value`` split along the stack dimension: one part per member."""
        n, sd, bs = len(self.tensordicts), self.stack_dim, self._batch_size
        nb = len(bs)
        if isinstance(value, _NUMBERS) or (
            isinstance(value, np.ndarray) and value.dtype.kind not in "OUS"
        ):
            value = torch.as_tensor(value)
        if type(value) is list and _lists_span(value, bs[: sd + 1]):
            # nested lists laid out as the batch: each member takes its elements, which it
            # stores as any list (tensors of different shapes stay one per member)
            return [_take(value, sd, j) for j in range(n)]
        if isinstance(value, _Tensor):
            if value.shape[:nb] != bs:
                raise RuntimeError(
                    f"batch dimension mismatch for key {_fmt(key)!r}: the value has shape "
                    f"{tuple(value.shape)} but its leading dimensions must equal the "
                    f"LazyStackedTensorDict's batch_size={tuple(bs)}."
                )
            return list(value.unbind(sd))
        if isinstance(value, dict):
            value = TensorDict(value, batch_size=bs)
        if isinstance(value, TensorDictBase):
            if value.batch_size[:nb] != bs:
                raise RuntimeError(
                    f"batch dimension mismatch for key {_fmt(key)!r}: the tensordict has "
                    f"batch_size={tuple(value.batch_size)} but it must start with the "
                    f"LazyStackedTensorDict's batch_size={tuple(bs)}."
                )
            return self._unbind_like(value, "set")
        if isinstance(value, NonTensorStack):  # its ragged form too: split into its members
            if value.batch_size[:nb] != bs:
                raise RuntimeError(
                    f"batch dimension mismatch for key {_fmt(key)!r}: the NonTensorStack has "
                    f"batch_size={tuple(value.batch_size)} but it must start with "
                    f"batch_size={tuple(bs)}."
                )
            return list(value.unbind(sd))
        return [value] * n  # one non-tensor value for every member

    def _check_writable(self, key: tuple[Any, ...], inplace: bool = False) -> None:
        """Refuse (before writing anything) a write that a locked member would refuse: a
        new key, or one replaced other than in place."""
        for i, td in enumerate(self.tensordicts):
            if td.is_locked:
                missing = td._get_tuple(key, _MISSING) is _MISSING
                if missing or not inplace:
                    raise lock_error(_fmt(key), "add" if missing else "replace")
            if len(key) > 1:
                parent = td._get_tuple(key[:-1], None)
                if parent is not None and not isinstance(parent, TensorDictBase):
                    raise KeyError(
                        f"cannot write at {_fmt(key)!r}: in tensordict {i} of the stack, the "
                        f"entry at {_fmt(key[:-1])!r} is a {type(parent).__name__}, not a "
                        "tensordict."
                    )

    def _set_tuple(
        self,
        key: tuple[Any, ...],
        value: Any,
        *,
        inplace: bool,
        validated: bool,
        non_blocking: bool = False,
    ) -> LazyStackedTensorDict:
        if self.hook_in is not None:
            value = self.hook_in(value)
        parts = self._split_value(key, value)
        self._check_writable(key, inplace)
        for td, part in zip(self.tensordicts, parts, strict=True):
            td._set_tuple(key, part, inplace=inplace, validated=False, non_blocking=non_blocking)
        return self

    def _set_str(
        self,
        key: str,
        value: Any,
        *,
        inplace: bool,
        validated: bool,
        non_blocking: bool = False,
        ignore_lock: bool = False,
    ) -> LazyStackedTensorDict:
        return self._set_tuple(
            (key,), value, inplace=inplace, validated=validated, non_blocking=non_blocking
        )

    def __setitem__(self, index: Any, value: Any) -> None:
        """``lazy[key] = value`` writes into every member; ``lazy[idx] = td`` writes at an index.

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> tds = [TensorDict({"a": torch.zeros(2)}, [2]) for _ in range(3)]
        >>> lazy = lazy_stack(tds)
        >>> lazy[1] = TensorDict({"a": torch.ones(2)}, [2])
        >>> lazy[:, 0] = TensorDict({"a": torch.full((3,), 5.0)}, [3])
        >>> tds[1]["a"], tds[2]["a"]
        (tensor([5., 1.]), tensor([5., 0.]))
        """
        if type(index) is str:
            self._set_tuple((index,), value, inplace=False, validated=False)
        elif type(index) is tuple and index and isinstance(index[0], (str, tuple)):
            self._set_tuple(_key_tuple(index), value, inplace=False, validated=False)
        else:
            self._set_at_index(index, value)

    def _unbind_like(self, other: Any, op: str) -> list[Any]:
        """``other`` split into one part per member (tensordicts along the stack dimension)."""
        n, sd = len(self.tensordicts), self.stack_dim
        if isinstance(other, LazyStackedTensorDict) and other.stack_dim == sd:
            if len(other.tensordicts) == n and other._batch_size[: len(self._batch_size)] == (
                self._batch_size
            ):
                return other.tensordicts
        if isinstance(other, TensorDictBase):
            bs = self._batch_size
            if other.batch_size[: len(bs)] != bs:
                raise RuntimeError(
                    f"{op}: the other tensordict has batch_size={tuple(other.batch_size)}, but "
                    f"the LazyStackedTensorDict has batch_size={tuple(bs)}."
                )
            return list(other.unbind(sd))
        return [other] * n

    # ------------------------------------------------------------------ delete
    def del_(self, key: Any) -> LazyStackedTensorDict:
        """Remove ``key`` from every member holding it (exclusive keys included).

        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict({"a": 0, "b": 1}), TensorDict({"a": 2})])
        >>> [list(td.keys()) for td in lazy.del_("b").tensordicts]
        [['a'], ['a']]
        """
        path = _key_tuple(key)
        holders = [td for td in self.tensordicts if td._get_tuple(path, _MISSING) is not _MISSING]
        if not holders:
            raise missing_key(_fmt(path), self)
        for td in holders:
            parent = td._get_tuple(path[:-1], None) if len(path) > 1 else td
            if parent is not None and parent.is_locked:
                raise lock_error(_fmt(path), "delete")
        for td in holders:
            td.del_(path)
        return self

    def __delitem__(self, key: Any) -> None:
        self.del_(key)

    # ------------------------------------------------------------------ primitives for tables
    def _flat_tensors(self, out: list[Any]) -> list[Any]:
        for td in self.tensordicts:
            td._flat_tensors(out)
        return out

    def _rebuild(self, it: Any) -> LazyStackedTensorDict:
        return self._new(
            [td._rebuild(it) for td in self.tensordicts],
            self.stack_dim,
            self._td_dim_name,
            self._batch_size,
        )

    def _write_flat(self, it: Any) -> None:
        for td in self.tensordicts:
            td._write_flat(it)

    def _map_tensors(
        self, fn: Callable[..., Any], device: Any = NO_DEFAULT
    ) -> LazyStackedTensorDict:
        return self._new(
            [td._map_tensors(fn, device) for td in self.tensordicts],
            self.stack_dim,
            self._td_dim_name,
            self._batch_size,
        )

    def _aligned_tensors(
        self, other: Any, default: Any, out: list[Any] | None = None, prefix: tuple[Any, ...] = ()
    ) -> list[Any]:
        if out is None:
            out = []
        if not isinstance(other, TensorDictBase):
            out.extend([other] * len(self._flat_tensors([])))
            return out
        for td, part in zip(self.tensordicts, self._unbind_like(other, "binary op"), strict=True):
            td._aligned_tensors(part, default, out, prefix)
        return out

    def _map_batch(
        self,
        fn: Callable[..., Any],
        batch_size: torch.Size,
        names: list[Any] | None = None,
        spread: bool = False,
    ) -> TensorDictBase:
        """Batch-shape operations without a lazy form run on a dense copy."""
        return self.contiguous()._map_batch(fn, batch_size, names, spread)

    def to_lazystack(self, dim: int = 0) -> LazyStackedTensorDict:
        """This stack if ``dim`` is its stack dimension, else a lazy stack along ``dim``."""
        d = normalize_dim(dim, len(self._batch_size))
        if d == self.stack_dim:
            return self
        return LazyStackedTensorDict._new(list(self.unbind(d)), d)

    def is_contiguous(self) -> bool:
        """Always ``False``: entries are not stored as single tensors."""
        return False

    def is_shared(self) -> bool:
        """Whether every tensor leaf of every member is in shared memory (or on CUDA)."""
        leaves = self._flat_tensors([])
        return bool(leaves) and all(v.is_shared() or v.is_cuda for v in leaves)

    # ------------------------------------------------------------------ repr
    def __repr__(self) -> str:
        return self._repr_block("")[0]

    def _repr_block(self, indent: str) -> tuple[str, bool, bool]:
        """The repr starting at ``indent``, whether all tensors are shared, whether any."""
        return lazy_repr_block(self, indent)


_kinds.bind(Lazy=LazyStackedTensorDict)


def _lists_span(value: Any, sizes: Sequence[int]) -> bool:
    """Whether ``value`` is nested lists of (at least) the given leading sizes."""
    if not sizes:
        return True
    if type(value) is not list or len(value) != sizes[0]:
        return False
    return all(_lists_span(v, sizes[1:]) for v in value)


def _take(value: list[Any], dim: int, index: int) -> Any:
    """Element ``index`` along nesting level ``dim`` of nested lists (the others kept)."""
    if dim == 0:
        return value[index]
    return [_take(v, dim - 1, index) for v in value]


def _member_entry_class(td: TensorDictBase, path: tuple[Any, ...]) -> type:
    fn = getattr(td, "entry_class", None)
    if fn is not None:
        return fn(path)  # type: ignore[no-any-return]
    return type(td._get_tuple(path, NO_DEFAULT))


def _mixed_error(key: tuple[Any, ...], values: list[Any]) -> TypeError:
    kinds = {i: type(v).__name__ for i, v in enumerate(values)}
    return TypeError(
        f"cannot stack entry {_fmt(key)!r}: the stacked tensordicts hold values of different "
        f"kinds there (by member: {kinds})."
    )


class _LazyKeysView(TensorDictKeysView):
    """The keys view of a lazy stack: the keys every member holds."""

    def __iter__(self) -> Iterator[str | tuple[str, ...]]:
        keys = self._walk(self._td, ())  # type: ignore[arg-type]
        if self.sort:
            return iter(sorted(keys, key=lambda k: k if type(k) is str else ".".join(k)))
        return keys

    @staticmethod
    def _entry(td: LazyStackedTensorDict, key: str) -> tuple[type | None, Any]:
        """The type of the stacked entry (without stacking) and, for nested entries, the
        lazy stack of the members' nested tensordicts."""
        values = [m._get_str(key, _MISSING) for m in td.tensordicts]
        if not values or any(v is _MISSING for v in values):
            return None, None
        if all(isinstance(v, TensorDictBase) for v in values):
            return LazyStackedTensorDict, LazyStackedTensorDict._new(values, td.stack_dim)
        return type(values[0]), None

    def _walk(self, td: LazyStackedTensorDict, prefix: tuple[Any, ...]) -> Iterator[Any]:
        is_leaf = self.is_leaf or is_leaf_default
        for key in td._common_keys():
            full = prefix + (key,) if prefix else key
            if not (self.include_nested or self.leaves_only):
                yield full
                continue
            cls, nested = self._entry(td, key)
            assert cls is not None  # a common key: every member holds it
            leaf = is_leaf(cls)
            if leaf or not self.leaves_only:
                yield full
            if not leaf and self.include_nested and nested is not None:
                yield from self._walk(nested, prefix + (key,))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, (str, tuple)):
            return False
        try:
            path = key_as_tuple(key)
        except (TypeError, KeyError):
            return False
        if len(path) > 1 and not self.include_nested:
            return False
        td: Any = self._td
        cls: type | None = None
        for i, part in enumerate(path):
            cls, nested = self._entry(td, part)
            if cls is None:
                return False
            if i < len(path) - 1:
                if nested is None:
                    return False
                td = nested
        assert cls is not None
        return not self.leaves_only or (self.is_leaf or is_leaf_default)(cls)
