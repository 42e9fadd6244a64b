"""Indexing of a :class:`~tensordict.LazyStackedTensorDict` along its batch dimensions.

An index is decomposed once (:meth:`LazyIndexOps._decompose`) into the members it
selects along the stack dimension, the index each selected member receives, and the
position of the stack dimension in the result. Reads then index the members and restack
them (an int along the stack dimension returns the member itself); writes split the
value along the stack dimension and write each part into its member, checking every
member first so that bad input leaves the stack unchanged. Indices that mix the stack
dimension into a multi-dimensional advanced index are read from a dense copy, and written
element by element into the members that hold them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from tensordict._keys import first_class
from tensordict._keys.first_class import has_dim_index
from tensordict._keys.index import indexed_batch_size, normalize_index
from tensordict._keys.nested import unravel_key
from tensordict._kinds import kinds as _kinds
from tensordict._leaves.nontensor import NON_TENSOR, NonTensorStack, write_non_tensor
from tensordict._shared.indexed import _check_at, _check_non_tensor_at, _plan_in, _write_at
from tensordict._util.errors import index_write_error
from tensordict.base import NO_DEFAULT, TensorDictBase

_Tensor = torch.Tensor
_MISSING: Any = object()
_NUMBERS = (bool, int, float, complex, np.number, np.bool_)


def _fmt(key: tuple[Any, ...]) -> Any:
    return unravel_key(key)


class LazyIndexOps(_kinds.LazyMixin):
    """Mixin of :class:`~tensordict.LazyStackedTensorDict`: indexed reads and writes."""

    def _decompose(self, index: Any) -> tuple[Any, Any, int] | None:
        """Split an index into (members selected, index for each member, position of the
        stack dimension in the result); ``None`` when it mixes the stack dimension into a
        multi-dimensional advanced index (handled on a dense copy)."""
        bs, sd = self._batch_size, self.stack_dim
        idx = normalize_index(index, bs)
        items = list(idx) if type(idx) is tuple else [idx]
        if sum(isinstance(it, _Tensor) for it in items) > 1:
            return None
        dim = 0
        out_dims = 0
        selector: Any = _MISSING
        pos = 0
        member_items: list[Any] = []
        for it in items:
            if it is None:
                out_dims += 1
                member_items.append(it)
                continue
            if isinstance(it, _Tensor):
                if it.dtype is torch.bool:
                    span, produced = it.ndim, 1
                    if span == 0:
                        return None
                else:
                    span, produced = 1, it.ndim
            else:
                span, produced = 1, (0 if type(it) is int else 1)
            if dim <= sd < dim + span:
                if span != 1:
                    return None
                selector, pos = it, out_dims
            else:
                member_items.append(it)
            dim += span
            out_dims += produced
        if selector is _MISSING:  # the index stops before the stack dimension
            selector, pos = slice(None), out_dims + (sd - dim)
        n = len(self.tensordicts)
        if isinstance(selector, _Tensor):
            if selector.dtype is torch.bool:
                selector = selector.nonzero().squeeze(-1)
            if selector.ndim == 0:
                selector = int(selector)
            elif selector.ndim == 1:
                selector = [i % n if i < 0 else i for i in selector.tolist()]
            else:
                return None
        if type(selector) is int:
            selector = selector + n if selector < 0 else selector
        elif type(selector) is slice:
            selector = list(range(n))[selector]
        if not member_items:
            member_index: Any = _MISSING  # the members are taken whole
        else:
            member_index = tuple(member_items) if len(member_items) != 1 else member_items[0]
        return selector, member_index, pos

    def _index_first_class(self, index: Any) -> TensorDictBase:
        """First-class dims bind batch dims of the members; the stack dim cannot be bound
        (each member is a separate tensordict)."""
        s = self.stack_dim
        nb = len(self.batch_size)
        items, bound = first_class.bind(index, nb)
        if s in bound:
            raise ValueError(
                f"Cannot index a LazyStackedTensorDict with a first-class dim at its stack dim "
                f"({s}): the stacked tensordicts are separate. Bind another dim, or make it "
                f"dense first (contiguous())."
            )
        member_index = items[:s] + items[s + 1 :] if len(items) > s else items
        members = [td[member_index] for td in self.tensordicts]
        new_s = s - sum(1 for b in bound if b < s)
        return _kinds.Lazy._new(members, new_s, self._td_dim_name)

    def _index(self, index: Any) -> TensorDictBase:
        if has_dim_index(index):
            return self._index_first_class(index)
        dec = self._decompose(index)
        if dec is None:
            dense: TensorDictBase = self.contiguous()[index]
            return dense
        selector, member_index, pos = dec
        tds = self.tensordicts
        if type(selector) is int:
            td = tds[selector]
            return td if member_index is _MISSING else td[member_index]
        parts = [tds[j] if member_index is _MISSING else tds[j][member_index] for j in selector]
        if parts:
            return _kinds.Lazy._new(parts, pos, self._td_dim_name)
        if tds:  # no member selected: an empty tensordict with the members' entries
            one = tds[0] if member_index is _MISSING else tds[0][member_index]
            empty: TensorDictBase = one.unsqueeze(pos)[(slice(None),) * pos + (slice(0, 0),)]
            return empty
        new_bs = indexed_batch_size(normalize_index(index, self._batch_size), self._batch_size)
        return _kinds.Lazy._new([], pos, self._td_dim_name, new_bs)

    def _set_at_index(self, index: Any, value: Any) -> None:
        # Only the members the index selects are written: a key new to the stack goes into
        # them alone (the others do not get it), as in the reference.
        dec = self._decompose(index)
        if dec is None:
            writes = self._scatter_writes(index, value)
        else:
            selector, member_index, pos = dec
            tds = self.tensordicts
            key = Ellipsis if member_index is _MISSING else member_index
            if type(selector) is int:
                tds[selector][key] = value
                return
            bs = self._batch_size
            idx_bs = indexed_batch_size(normalize_index(index, bs), bs)
            parts = _split_at(value, idx_bs, pos, len(selector), index)
            writes = [(tds[j], key, part) for j, part in zip(selector, parts, strict=True)]
        for td, key, part in writes:  # validate every member first
            if isinstance(td, _kinds.Dense) and isinstance(part, TensorDictBase):
                m_idx = normalize_index(key, td.batch_size)
                m_bs = indexed_batch_size(m_idx, td.batch_size)
                if part.batch_size == m_bs:
                    td._check_set_at(m_idx, m_bs, part, ())
        for td, key, part in writes:
            td[key] = part

    def _scatter_writes(self, index: Any, value: Any) -> list[tuple[Any, Any, Any]]:
        """The (member, index in it, value part) writes of ``lazy[index] = value`` for an
        index that mixes the stack dimension into an advanced index (a boolean mask over
        several dimensions, tensors indexing several dimensions): every element the index
        selects is located (member, coordinates in it), and each member receives its
        elements, in order, through an index of one coordinate tensor per dimension."""
        bs, sd = self._batch_size, self.stack_dim
        ids = torch.arange(bs.numel()).view(bs)[index]  # the selected elements, laid out
        idx_bs = ids.shape
        flat_ids = ids.reshape(-1)
        coords = list(torch.unravel_index(flat_ids, bs))
        owner = coords.pop(sd)
        if isinstance(value, dict):
            value = _kinds.Dense(value, batch_size=idx_bs)
        if isinstance(value, TensorDictBase):
            if value.batch_size != idx_bs:
                try:
                    value = value.expand(idx_bs)
                except RuntimeError:
                    raise index_write_error(value.batch_size, index, idx_bs) from None
            flat: Any = value.reshape(-1)
        elif isinstance(value, (_Tensor, *_NUMBERS)):
            t = torch.as_tensor(value)
            nb = len(idx_bs)
            flat = t.reshape(-1, *t.shape[nb:]) if t.shape[:nb] == idx_bs and nb else None
            value = t
        else:
            flat = None
        writes = []
        for j, td in enumerate(self.tensordicts):
            chosen = (owner == j).nonzero().squeeze(-1)
            if not chosen.numel():
                continue
            part = value if flat is None else flat[chosen]
            if coords:
                key: Any = tuple(c[chosen] for c in coords)
            else:  # members without batch dimensions: the last write of the element wins
                key = Ellipsis
                part = part if flat is None else part[-1]
            writes.append((td, key, part))
        return writes

    def _plan_at(
        self,
        key: str,
        path: tuple[Any, ...],
        value: Any,
        index: Any,
        plan: list[Callable[[], None]],
        non_blocking: bool,
    ) -> None:
        """Plan an indexed in-place write of the entry ``key`` (see ``set_at_``): the
        index is split into the members it selects and the index within them, and each
        member plans its part. Indices that cannot be split (into feature dimensions, or
        mixing the stack dimension into an advanced index) write through a stacked copy."""
        try:
            cls = self.entry_class(key)
        except KeyError as err:
            raise KeyError(f"cannot write in place at {_fmt(path)!r}: {err.args[0]}") from None
        dec = None
        # ``...`` in an index for a tensor stands for its feature dimensions too
        if not (issubclass(cls, _Tensor) and _has_ellipsis(index)):
            try:
                dec = self._decompose(index)
            except IndexError:
                pass
        if dec is None or issubclass(cls, TensorDictBase):
            self._plan_through_copy(key, path, value, index, plan, non_blocking)
            return
        selector, member_index, pos = dec
        tds = self.tensordicts
        m_index = Ellipsis if member_index is _MISSING else member_index
        if type(selector) is int:
            _plan_in(tds[selector], key, path, value, m_index, plan, non_blocking)
            return
        if not selector:
            return
        parts = self._split_leaf_value(key, path, cls, value, index, pos, selector)
        for j, part in zip(selector, parts, strict=True):
            _plan_in(tds[j], key, path, part, m_index, plan, non_blocking)

    def _plan_through_copy(
        self,
        key: str,
        path: tuple[Any, ...],
        value: Any,
        index: Any,
        plan: list[Callable[[], None]],
        non_blocking: bool,
    ) -> None:
        """Plan the write into a stacked copy of the entry, then into the members."""
        stacked = self._gather((key,), NO_DEFAULT)
        if isinstance(stacked, NON_TENSOR):
            bs = self._batch_size
            _check_non_tensor_at(path, stacked, value, index, bs)

            def write_non_tensor_leaf() -> None:
                new = write_non_tensor(stacked, index, value, bs)
                self._set_tuple((key,), new, inplace=False, validated=False)

            plan.append(write_non_tensor_leaf)
            return
        if isinstance(stacked, TensorDictBase):  # writes through to the members itself
            plan.append(lambda: stacked.__setitem__(index, value))
            return
        _check_at(path, stacked, value, index)

        def write_tensor() -> None:
            _write_at(stacked, value, index, non_blocking)
            self._set_tuple((key,), stacked, inplace=True, validated=False)

        plan.append(write_tensor)

    def _split_leaf_value(
        self,
        key: str,
        path: tuple[Any, ...],
        cls: type,
        value: Any,
        index: Any,
        pos: int,
        selector: list[Any],
    ) -> list[Any]:
        """``value`` (written at ``index`` of entry ``key``) split into one part per
        selected member: along the dimension standing for the stack dimension when the
        value has it, else the same value for each."""
        m = len(selector)
        bs = self._batch_size
        span = len(indexed_batch_size(normalize_index(index, bs), bs)) - pos
        if issubclass(cls, _Tensor):
            if isinstance(value, (list, np.ndarray, *_NUMBERS)):
                value = torch.as_tensor(value)
            if not isinstance(value, _Tensor):
                return [value] * m
            member = self.tensordicts[selector[0]]
            span += len(member_item_shape(member, (key,))) - len(member.batch_size)
            shape = value.shape
        elif isinstance(value, NonTensorStack):
            shape = value.batch_size
        else:
            return [value] * m
        if len(shape) < span:
            return [value] * m
        d = len(shape) - span
        if shape[d] == m:
            return list(value.unbind(d))
        if shape[d] == 1:
            return [value[(slice(None),) * d + (0,)]] * m
        raise RuntimeError(
            f"cannot write a value of shape {tuple(shape)} into entry {_fmt(path)!r} at index "
            f"{index!r}: its dimension {d} stands for the {m} stacked tensordicts selected "
            f"(the stack dimension) but has size {shape[d]}."
        )


def member_item_shape(td: TensorDictBase, path: tuple[Any, ...]) -> torch.Size:
    """The shape of a member's entry at ``path`` (its batch size for tensordicts and
    non-tensor leaves), without stacking anything."""
    fn = getattr(td, "get_item_shape", None)
    if fn is not None:
        return fn(path)  # type: ignore[no-any-return]
    value = td._get_tuple(path, NO_DEFAULT)
    return value.shape if isinstance(value, _Tensor) else value.batch_size


def _has_ellipsis(index: Any) -> bool:
    return index is Ellipsis or (type(index) is tuple and any(i is Ellipsis for i in index))


def _split_at(value: Any, idx_bs: torch.Size, pos: int, n: int, index: Any) -> list[Any]:
    """``value`` (written at an index selecting ``idx_bs``) split along ``pos`` into ``n``."""
    if isinstance(value, dict):
        value = _kinds.Dense(value, batch_size=idx_bs)
    if isinstance(value, TensorDictBase):
        if value.batch_size != idx_bs:
            try:
                value = value.expand(idx_bs)
            except RuntimeError:
                raise index_write_error(value.batch_size, index, idx_bs) from None
        return list(value.unbind(pos))
    if isinstance(value, (_Tensor, *_NUMBERS)):
        t = torch.as_tensor(value)
        if t.ndim >= len(idx_bs) - pos:  # the value spans the stack dimension
            try:
                t = (
                    t.expand(*idx_bs, *t.shape[len(idx_bs) :])
                    if t.shape[: len(idx_bs)] != (idx_bs)
                    else t
                )
            except RuntimeError:
                raise RuntimeError(
                    f"cannot write a tensor of shape {tuple(t.shape)} at index {index!r} "
                    f"(selected batch shape {tuple(idx_bs)})."
                ) from None
            return list(t.unbind(pos))
        return [t] * n
    return [value] * n
