"""Operations of ``LazyStackedTensorDict`` carried out member by member.

* :class:`LazyShapeOps` — batch-shape operations. Each maps the stack dimension to its new
  position and applies the matching operation to every member; operations that would
  merge the stack dimension with others (``view``/``reshape``/``flatten`` across it) run
  on a dense copy.
* :class:`LazyMemberOps` — ``apply``, dict-like and device methods. Everything that can
  fail is checked on every member before any member is written, so bad input leaves the
  stack unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict._base.apply_ops import DEFAULT_APPLY, ApplySpec
from tensordict._dense.dict_ops import commit_in_place, plan_update_, with_entries
from tensordict._engine.tree import run_plan
from tensordict._keys.nested import unravel_key
from tensordict._keys.shape import (
    flip_dims,
    infer_shape,
    movedim_order,
    narrow_slice,
    normalize_dim,
    parse_batch_size,
    unpack_shape,
)
from tensordict._keys.shape_context import (
    inverse_flatten,
    inverse_permute,
    inverse_squeeze,
    inverse_transpose,
    inverse_unflatten,
    inverse_unsqueeze,
    inverse_view,
    keeps_lock,
    undoable,
)
from tensordict._kinds import kinds as _kinds
from tensordict._kinds import lock as _lock
from tensordict._kinds.inplace import adopt
from tensordict._kinds.inplace import check as check_inplace
from tensordict._kinds.writes import write_inplace
from tensordict._util.errors import lock_error
from tensordict._util.sentinels import NO_DEFAULT
from tensordict._wire.consolidate import consolidated_to
from tensordict.base import TensorDictBase, _key_tuple

if TYPE_CHECKING:  # pragma: no cover
    from tensordict._lazy.stack import LazyStackedTensorDict

_Tensor = torch.Tensor


def _member_dim(d: int, sd: int) -> int:
    """Position in a member of the stacked tensordict's dimension ``d`` (``d != sd``)."""
    return d if d < sd else d - 1


class LazyShapeOps(_kinds.LazyMixin):
    """Mixin: batch-shape operations of a lazy stack, applied to its members."""

    def _restack(self, members: list[Any], stack_dim: int, names: bool = True) -> Any:
        if not members:
            raise RuntimeError("cannot restack an empty LazyStackedTensorDict.")
        return _kinds.Lazy._new(members, stack_dim, self._td_dim_name if names else None)

    @undoable(inverse_unsqueeze)
    def unsqueeze(self, dim: int) -> Any:
        """Insert a batch dimension of size 1 at ``dim`` (in every member).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict(batch_size=[3])] * 2)
        >>> out = lazy.unsqueeze(0)
        >>> out.batch_size, out.stack_dim
        (torch.Size([1, 2, 3]), 1)
        """
        sd = self.stack_dim
        d = normalize_dim(dim, len(self._batch_size), extra=1)
        if d <= sd:
            return self._restack([td.unsqueeze(d) for td in self.tensordicts], sd + 1)
        return self._restack([td.unsqueeze(d - 1) for td in self.tensordicts], sd)

    @undoable(inverse_squeeze)
    def squeeze(self, dim: int | Sequence[int] | None = None) -> Any:
        """Remove batch dimensions of size 1; squeezing the stack dimension of a one-member
        stack returns that member (squeezed).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy_stack([TensorDict(batch_size=[1, 3])] * 2).squeeze().batch_size
        torch.Size([2, 3])
        """
        bs, sd = self._batch_size, self.stack_dim
        nb = len(bs)
        if dim is None:
            dims = [i for i, s in enumerate(bs) if s == 1]
        else:
            asked = [dim] if isinstance(dim, int) else list(dim)
            dims = sorted({d for d in (normalize_dim(d, nb) for d in asked) if bs[d] == 1})
        if not dims:
            return self
        member_dims = tuple(_member_dim(d, sd) for d in dims if d != sd)
        members = [td.squeeze(member_dims) if member_dims else td for td in self.tensordicts]
        if sd in dims:
            return members[0]
        return self._restack(members, sd - sum(1 for d in dims if d < sd))

    @undoable(inverse_permute)
    def permute(self, *args: Any, dims: Sequence[int] | None = None) -> Any:
        """Permute the batch dimensions (the stack dimension moves, members are permuted).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> out = lazy_stack([TensorDict({"a": torch.zeros(3, 4)}, [3, 4])] * 2).permute(2, 0, 1)
        >>> out.batch_size, out.stack_dim, out["a"].shape
        (torch.Size([4, 2, 3]), 1, torch.Size([4, 2, 3]))
        """
        dims = unpack_shape(args) if dims is None else tuple(dims)
        nb, sd = len(self._batch_size), self.stack_dim
        perm = [normalize_dim(d, nb) for d in dims]
        if sorted(perm) != list(range(nb)):
            raise RuntimeError(
                f"permute(): {list(dims)} is not a permutation of the {nb} batch dimension(s)."
            )
        member_perm = [_member_dim(p, sd) for p in perm if p != sd]
        return self._restack([td.permute(member_perm) for td in self.tensordicts], perm.index(sd))

    @undoable(inverse_transpose)
    def transpose(self, dim0: int, dim1: int) -> Any:
        """Swap two batch dimensions (see :meth:`permute`)."""
        nb = len(self._batch_size)
        d0, d1 = normalize_dim(dim0, nb), normalize_dim(dim1, nb)
        perm = list(range(nb))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return self.permute(perm)

    def swapaxes(self, axis0: int, axis1: int) -> Any:
        """Alias of :meth:`transpose`."""
        return self.transpose(axis0, axis1)

    def swapdims(self, axis0: int, axis1: int) -> Any:
        """Alias of :meth:`transpose`."""
        return self.transpose(axis0, axis1)

    def movedim(self, source: Any, destination: Any) -> Any:
        """Move batch dimension(s) ``source`` to ``destination`` (see :meth:`permute`)."""
        return self.permute(movedim_order(source, destination, len(self._batch_size)))

    def moveaxis(self, source: Any, destination: Any) -> Any:
        """Alias of :meth:`movedim`."""
        return self.movedim(source, destination)

    @keeps_lock
    def expand(self, *shape: Any, size: Sequence[int] | None = None) -> Any:
        """Expand the batch (new leading dims allowed); the stack dimension keeps its size.

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy_stack([TensorDict({"a": torch.zeros(1)}, [1])] * 2, 1).expand(4, 2, 2)["a"].shape
        torch.Size([4, 2, 2])
        """
        target = list(unpack_shape(shape if size is None else (size,)))
        bs, sd = self._batch_size, self.stack_dim
        extra = len(target) - len(bs)
        if extra < 0:
            raise RuntimeError(
                f"expand(): the target shape {target} has fewer dimensions than "
                f"batch_size={tuple(bs)}."
            )
        new_sd = sd + extra
        if target[new_sd] not in (-1, bs[sd]):
            raise RuntimeError(
                f"expand(): cannot expand the stack dimension {sd} of a LazyStackedTensorDict "
                f"(size {bs[sd]}) to {target[new_sd]}; densify it first (.contiguous())."
            )
        member_shape = target[:new_sd] + target[new_sd + 1 :]
        return self._restack([td.expand(member_shape) for td in self.tensordicts], new_sd)

    def expand_as(self, other: Any) -> Any:
        """Expand to the batch shape of ``other``."""
        return self.expand(other.shape)

    def broadcast_to(self, shape: Sequence[int]) -> Any:
        """Alias of :meth:`expand` with a shape argument."""
        return self.expand(shape)

    def flip(self, dims: Any, *more_dims: int) -> Any:
        """Reverse the order along batch dimensions (the stack dimension reverses the members)."""
        sd = self.stack_dim
        ds = flip_dims((dims, *more_dims), len(self._batch_size))
        member_dims = [_member_dim(d, sd) for d in ds if d != sd]
        members = [td.flip(member_dims) if member_dims else td for td in self.tensordicts]
        if sd in ds:
            members = members[::-1]
        return self._restack(members, sd)

    def fliplr(self) -> Any:
        """Flip batch dimension 1."""
        return self.flip(1)

    def flipud(self) -> Any:
        """Flip batch dimension 0."""
        return self.flip(0)

    def narrow(self, dim: int, start: int, length: int) -> Any:
        """Slice ``length`` entries from ``start`` along batch dimension ``dim``."""
        d = normalize_dim(dim, len(self._batch_size))
        return self[(slice(None),) * d + (narrow_slice(self._batch_size[d], start, length),)]

    # ------------------------------------------------------------------ splitting
    def unbind(self, dim: int = 0) -> tuple[Any, ...]:
        """Split along ``dim``; along the stack dimension this returns the members themselves.

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> tds = [TensorDict({"a": torch.zeros(3)}, [3]) for _ in range(2)]
        >>> lazy = lazy_stack(tds)
        >>> lazy.unbind(0)[1] is tds[1], [t.batch_size for t in lazy.unbind(1)]
        (True, [torch.Size([2]), torch.Size([2]), torch.Size([2])])
        """
        sd = self.stack_dim
        d = normalize_dim(dim, len(self._batch_size))
        if d == sd:
            return tuple(self.tensordicts)
        parts = [td.unbind(_member_dim(d, sd)) for td in self.tensordicts]
        new_sd = sd - 1 if d < sd else sd
        return tuple(self._restack(list(col), new_sd) for col in zip(*parts, strict=True))

    def split(self, split_size: int | Sequence[int], dim: int = 0) -> tuple[Any, ...]:
        """Split along ``dim`` into chunks of ``split_size`` (or the given sizes); along the
        stack dimension each chunk is a lazy stack of the members it holds."""
        bs, sd = self._batch_size, self.stack_dim
        d = normalize_dim(dim, len(bs))
        if d != sd:
            parts = [td.split(split_size, _member_dim(d, sd)) for td in self.tensordicts]
            return tuple(self._restack(list(col), sd) for col in zip(*parts, strict=True))
        size = bs[d]
        if isinstance(split_size, int):
            if split_size <= 0:
                raise ValueError(f"split(): split_size must be positive, got {split_size}.")
            sizes = [min(split_size, size - i) for i in range(0, size, split_size)]
        else:
            sizes = list(split_size)
            if sum(sizes) != size:
                raise RuntimeError(
                    f"split(): sizes {sizes} sum to {sum(sizes)} but batch dimension {d} has "
                    f"size {size}."
                )
        out = []
        start = 0
        for s in sizes:
            out.append(self[(slice(None),) * d + (slice(start, start + s),)])
            start += s
        return tuple(out)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Any, ...]:
        """Split into ``chunks`` nearly equal parts along ``dim``."""
        if chunks <= 0:
            raise ValueError(f"chunk(): chunks must be positive, got {chunks}.")
        size = self._batch_size[normalize_dim(dim, len(self._batch_size))]
        step = -(-size // chunks) if size else 1
        return self.split(max(step, 1), dim)

    def tensor_split(self, indices_or_sections: Any, dim: int = 0) -> tuple[Any, ...]:
        """Split like :func:`torch.tensor_split` along a batch dimension."""
        d = normalize_dim(dim, len(self._batch_size))
        proxy = torch.empty(self._batch_size[d], 0).tensor_split(indices_or_sections, 0)
        return self.split([p.shape[0] for p in proxy], d)

    # ------------------------------------------------------------------ reshaping
    def _keeps_stack(self, shape: torch.Size) -> bool:
        sd = self.stack_dim
        return len(shape) > sd and shape[: sd + 1] == self._batch_size[: sd + 1]

    def _lazy_reshape(self, new: torch.Size) -> Any:
        """``new`` as lazy stacks when it splits the stack dimension (nested lazy stacks,
        one per new dimension) or merges it with the dimensions after it that nested lazy
        stacks hold; ``None`` otherwise."""
        bs, sd = self._batch_size, self.stack_dim
        n, tail = len(self.tensordicts), bs[sd + 1 :]
        if len(new) > len(bs) and new[:sd] == bs[:sd] and (not tail or new[-len(tail) :] == tail):
            sizes = list(new[sd : len(new) - len(tail)])
            if n and all(sizes) and math.prod(sizes) == n:
                return self._split_stack(list(self.tensordicts), sizes)
        if len(new) < len(bs) and new[:sd] == bs[:sd]:
            end = sd + len(bs) - len(new)
            if new[sd + 1 :] == bs[end + 1 :] and new[sd] == math.prod(bs[sd : end + 1]):
                return self._merge_stack(end)
        return None

    def _split_stack(self, members: list[Any], sizes: list[int]) -> Any:
        sd = self.stack_dim
        if len(sizes) == 1:
            return _kinds.Lazy._new(members, sd)
        step = len(members) // sizes[0]
        groups = [members[i * step : (i + 1) * step] for i in range(sizes[0])]
        return _kinds.Lazy._new([self._split_stack(g, sizes[1:]) for g in groups], sd)

    def _merge_stack(self, end: int) -> Any:
        """The stack dimension merged with the dimensions up to ``end`` when the members
        are lazy stacks along the same dimension (recursively); ``None`` otherwise."""
        sd = self.stack_dim
        if end == sd:
            return self
        flat: list[Any] = []
        for td in self.tensordicts:
            if not isinstance(td, _kinds.Lazy) or td.stack_dim != sd:
                return None
            merged = td._merge_stack(end - 1)
            if merged is None:
                return None
            flat.extend(merged.tensordicts)
        return _kinds.Lazy._new(flat, sd) if flat else None

    @undoable(inverse_view)
    def view(self, *shape: Any, size: Any = None, batch_size: Any = None) -> Any:
        """View with a new batch shape; lazy when the dimensions up to the stack dimension
        are kept (else a dense copy is reshaped). ``view(dtype)`` views every leaf."""
        if size is not None:
            shape = (size,)
        if len(shape) == 1 and isinstance(shape[0], torch.dtype):
            dtype = shape[0]
            if batch_size is not None:  # a new batch size: a dense result, as the reference
                return self.contiguous().view(dtype, batch_size=batch_size)
            return self._restack([td.view(dtype) for td in self.tensordicts], self.stack_dim)
        new = infer_shape(unpack_shape(shape), self._batch_size.numel())
        if new == self._batch_size:
            return self
        if self._keeps_stack(new):
            sd = self.stack_dim
            member = new[:sd] + new[sd + 1 :]
            return self._restack([td.view(member) for td in self.tensordicts], sd)
        lazy = self._lazy_reshape(new)
        return lazy if lazy is not None else self.contiguous().view(new)

    @keeps_lock
    def reshape(self, *shape: Any, size: Any = None, inplace: bool = False) -> Any:
        """Reshape the batch (lazy when the dimensions up to the stack dimension are kept).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict({"a": torch.zeros(2, 3)}, [2, 3])] * 2)
        >>> type(lazy.reshape(2, 6)).__name__, type(lazy.reshape(-1)).__name__
        ('LazyStackedTensorDict', 'TensorDict')
        """
        if inplace:
            check_inplace(self, "reshape")
        if size is not None:
            shape = (size,)
        new = infer_shape(unpack_shape(shape), self._batch_size.numel())
        if self._keeps_stack(new):
            sd = self.stack_dim
            member = new[:sd] + new[sd + 1 :]
            return self._restack([td.reshape(member) for td in self.tensordicts], sd)
        lazy = self._lazy_reshape(new)
        return lazy if lazy is not None else self.contiguous().reshape(new)

    @undoable(inverse_flatten)
    def flatten(
        self, start_dim: int | None = None, end_dim: int | None = None, *, inplace: bool = False
    ) -> Any:
        """Merge batch dimensions ``start_dim..end_dim`` (default: all; a dense copy if the
        range holds the stack dimension)."""
        if inplace:
            check_inplace(self, "flatten")
        nb, sd = len(self._batch_size), self.stack_dim
        if nb == 0:
            return self.reshape(1)
        start = normalize_dim(0 if start_dim is None else start_dim, nb, "start_dim")
        end = normalize_dim(-1 if end_dim is None else end_dim, nb, "end_dim")
        if end < start:
            raise RuntimeError(f"flatten(): start_dim={start_dim} comes after end_dim={end_dim}.")
        if start == end:
            return self
        if start <= sd <= end:
            merged = self._merge_stack(end) if start == sd else None
            return merged if merged is not None else self.contiguous().flatten(start, end)
        members = [
            td.flatten(_member_dim(start, sd), _member_dim(end, sd)) for td in self.tensordicts
        ]
        return self._restack(members, sd if sd < start else sd - (end - start))

    @undoable(inverse_unflatten)
    def unflatten(self, dim: int, unflattened_size: Sequence[int], *, inplace: bool = False) -> Any:
        """Split batch dimension ``dim`` into ``unflattened_size``."""
        if inplace:
            check_inplace(self, "unflatten")
        nb, sd = len(self._batch_size), self.stack_dim
        d = normalize_dim(dim, nb)
        sizes = list(unflattened_size)
        if d == sd:
            new = infer_shape(sizes, self._batch_size[sd])
            lazy = self._lazy_reshape(self._batch_size[:sd] + new + self._batch_size[sd + 1 :])
            return lazy if lazy is not None else self.contiguous().unflatten(d, sizes)
        members = [td.unflatten(_member_dim(d, sd), sizes) for td in self.tensordicts]
        return self._restack(members, sd + (len(sizes) - 1 if d < sd else 0))

    def repeat(self, *repeats: Any, inplace: bool = False) -> Any:
        """Repeat along batch dimensions (the members are repeated along the stack one)."""
        if inplace:
            check_inplace(self, "repeat")
        reps = tuple(unpack_shape(repeats))
        bs, sd = self._batch_size, self.stack_dim
        extra = len(reps) - len(bs)
        if extra < 0:
            raise RuntimeError(
                f"repeat(): got {len(reps)} repeat counts for batch_size={tuple(bs)}; need at "
                f"least {len(bs)}."
            )
        new_sd = sd + extra
        times = reps[new_sd]
        member_reps = reps[:new_sd] + reps[new_sd + 1 :]
        members = [td.repeat(*member_reps) for _ in range(times) for td in self.tensordicts]
        return self._restack(members, new_sd)


class LazyMemberOps(_kinds.LazyMixin):
    """Mixin: ``apply``, dict-like and device methods of a lazy stack, member by member."""

    _last_op: Any
    _holds_lock = False  # whether lock_() counted a hold on the members (see _lock)

    def _from_members(self, members: list[Any]) -> LazyStackedTensorDict:
        if not members:
            return _kinds.Lazy._new([], self.stack_dim, self._td_dim_name, self._batch_size)
        return _kinds.Lazy._new(members, self.stack_dim, self._td_dim_name)

    # ------------------------------------------------------------------ apply
    def _tree_map(
        self,
        fn: Callable[..., Any],
        *others: Any,
        spec: ApplySpec = DEFAULT_APPLY,
        batch_size: Sequence[int] | None = None,
        names: Any = NO_DEFAULT,
        prefix: tuple[str, ...] = (),
        out: Any = None,
        plan: list[Any] | None = None,
    ) -> Any:
        """``apply`` member by member (see ``TreeMapOps._tree_map``): ``others`` and
        ``out`` are split along the stack dimension, which ``batch_size`` must keep."""
        tds = self.tensordicts
        sd = self.stack_dim
        split = [self._unbind_like(o, "apply") for o in others]
        member_bs = None
        if batch_size is not None:
            bs = parse_batch_size(batch_size)
            if len(bs) <= sd or bs[sd] != len(tds):
                raise RuntimeError(
                    f"apply: the new batch_size={tuple(bs)} must keep the stack dimension "
                    f"{sd} (of size {len(tds)}) of the LazyStackedTensorDict."
                )
            member_bs = bs[:sd] + bs[sd + 1 :]
        outs = self._unbind_like(out, "apply") if out is not None else [None] * len(tds)
        inplace = spec.inplace
        shared = plan if plan is not None or not inplace else []
        results = []
        for i, td in enumerate(tds):
            results.append(
                td._tree_map(
                    fn,
                    *[o[i] for o in split],
                    spec=spec,
                    batch_size=member_bs,
                    prefix=prefix,
                    out=outs[i],
                    plan=shared,
                )
            )
        if inplace:
            if plan is None and shared:
                run_plan(shared)
            return self if out is None else out
        if all(r is None for r in results):
            return None
        results = [r if r is not None else td.empty() for r, td in zip(results, tds, strict=True)]
        result = self._from_members(results)
        if names is not NO_DEFAULT and names is not None:
            result.names = names
        return result

    # ------------------------------------------------------------------ dict-like
    def update(
        self,
        input_dict_or_td: Any = None,
        clone: bool = False,
        inplace: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Sequence[Any] | None = None,
        is_leaf: Callable[..., Any] | None = None,
        update_batch_size: bool = False,
        ignore_lock: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Write every entry of a dict or tensordict (of the stack's batch size) into the
        members; all members are checked before any is written.

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict(batch_size=[2]) for _ in range(3)])
        >>> lazy.update({"b": torch.ones(3, 2)})["b"].shape
        torch.Size([3, 2])
        """
        input_dict_or_td = with_entries(input_dict_or_td, kwargs)
        source = input_dict_or_td
        if not isinstance(source, TensorDictBase):
            source = _kinds.Dense(source, batch_size=self._batch_size)
        elif update_batch_size and source.batch_size != self._batch_size:
            return self._update_batch_size(source, clone, inplace, keys_to_update, ignore_lock)
        parts = self._unbind_like(source, "update")
        wanted = None if keys_to_update is None else {_key_tuple(k) for k in keys_to_update}
        plans: list[tuple[TensorDictBase, Any, list[Any] | None]] = []
        for td, part in zip(self.tensordicts, parts, strict=True):
            if isinstance(td, _kinds.Dense):
                plan: list[Any] = []
                td._plan_update(part, clone, wanted, (), plan, ignore_lock, not inplace)
                plans.append((td, part, plan))
            else:
                plans.append((td, part, None))
        for td, part, member_plan in plans:
            if member_plan is None:
                td.update(
                    part, clone, inplace, non_blocking=non_blocking, keys_to_update=keys_to_update
                )
                continue
            for target, key, value in member_plan:
                if inplace and key in target._tensordict:
                    write_inplace(key, target._tensordict[key], value, non_blocking)
                else:
                    target._tensordict[key] = value
        return self

    def _update_batch_size(
        self, source: Any, clone: bool, inplace: bool, keys: Any, ignore_lock: bool
    ) -> Any:
        """``update(source, update_batch_size=True)`` with a source of another batch size:
        each member takes its slice of ``source`` (and its batch size). When the stack
        dimension changes size, the stack keeps as many members as ``source`` has slices
        there (new ones are shallow copies of the extra slices), so every entry of the stack
        must be in ``source``. The new members are computed before any is changed."""
        sd, n, sbs = self.stack_dim, len(self.tensordicts), source.batch_size
        if self.is_locked and not ignore_lock:
            raise RuntimeError(
                "update(update_batch_size=True): the LazyStackedTensorDict is locked, so its "
                "batch size cannot change; unlock it first (td.unlock_())."
            )
        if len(sbs) <= sd:
            raise RuntimeError(
                f"update(update_batch_size=True): the source has batch_size={tuple(sbs)}, which "
                f"has no dimension {sd}, the stack dimension of the LazyStackedTensorDict."
            )
        if isinstance(source, _kinds.Lazy) and source.stack_dim == sd:
            parts = list(source.tensordicts)
        else:
            parts = list(source.unbind(sd))
        if len(parts) != n:
            if inplace or keys is not None:
                raise RuntimeError(
                    f"update(update_batch_size=True): the stack dimension changes size ({n} -> "
                    f"{len(parts)}), which inplace=True or keys_to_update cannot do."
                )
            missing = set(self.keys(True)) - set(source.keys(True))
            if missing:
                raise RuntimeError(
                    f"update(update_batch_size=True): the stack dimension changes size ({n} -> "
                    f"{len(parts)}), so every entry must come from the source, but "
                    f"{sorted(map(str, missing))} are not in it."
                )
        updated = []
        for td, part in zip(self.tensordicts, parts):
            work = td._shallow_copy() if isinstance(td, _kinds.Dense) else td.copy()
            work.update(part, clone, inplace, update_batch_size=True, ignore_lock=ignore_lock)
            updated.append(work)
        extra = [part.clone() if clone else part.copy() for part in parts[n:]]
        members = [
            adopt(td, work, "update", keeps_structure=True)
            if isinstance(td, _kinds.Dense)
            else work
            for td, work in zip(self.tensordicts, updated)
        ]
        self.tensordicts[:] = members + extra
        self._batch_size = torch.Size(sbs)
        return self

    def update_(
        self,
        input_dict_or_td: Any = None,
        clone: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Copy every entry of ``input_dict_or_td`` in place into the members' entries;
        every write is checked before any is made.

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict(a=torch.zeros(2)), TensorDict(a=torch.zeros(3))])
        >>> _ = lazy.update_(lazy_stack([TensorDict(a=torch.ones(2)), TensorDict(a=torch.ones(3))]))
        >>> lazy[1]["a"]
        tensor([1., 1., 1.])
        """
        source = with_entries(input_dict_or_td, kwargs)
        wanted = None if keys_to_update is None else {_key_tuple(k) for k in keys_to_update}
        pairs: list[tuple[tuple[Any, ...], Any, Any]] = []
        plan_update_(self, source, wanted, (), pairs)
        commit_in_place(pairs, clone, non_blocking)
        return self

    def select(
        self, *keys: Any, inplace: bool = False, strict: bool = True, as_tensordict: bool = False
    ) -> Any:
        """A lazy stack of the members restricted to ``keys`` (entries shared).

        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict({"a": 0, "b": 1}), TensorDict({"a": 2, "b": 3})])
        >>> list(lazy.select("a").keys())
        ['a']
        """
        results = [td.select(*keys, strict=strict) for td in self.tensordicts]
        if not inplace:
            return self._from_members(results)
        if any(td.is_locked for td in self.tensordicts):
            raise lock_error(keys, "remove keys other than")
        for td in self.tensordicts:
            td.select(*keys, inplace=True, strict=False)
        return self

    def exclude(self, *keys: Any, inplace: bool = False) -> Any:
        """A lazy stack of the members without ``keys`` (missing keys are ignored)."""
        if inplace:
            if any(td.is_locked for td in self.tensordicts):
                raise lock_error(keys, "delete")
            for td in self.tensordicts:
                td.exclude(*keys, inplace=True)
            return self
        return self._from_members([td.exclude(*keys) for td in self.tensordicts])

    def filter_non_tensor_data(self) -> Any:
        """A lazy stack of the members without their non-tensor entries."""
        return self._from_members([td.filter_non_tensor_data() for td in self.tensordicts])

    def rename_key_(self, old_key: Any, new_key: Any, safe: bool = False) -> Any:
        """Rename ``old_key`` to ``new_key`` in every member (checked on all first)."""
        old, new = _key_tuple(old_key), _key_tuple(new_key)
        for i, td in enumerate(self.tensordicts):
            if td._get_tuple(old, None) is None:
                raise KeyError(
                    f"rename_key_: key {unravel_key(old)!r} is not in tensordict {i} of the stack."
                )
            if safe and td._get_tuple(new, None) is not None:
                raise KeyError(
                    f"rename_key_(safe=True): key {unravel_key(new)!r} is already present in "
                    f"{type(self).__name__}; pass safe=False to overwrite it."
                )
            if td.is_locked:
                raise lock_error(unravel_key(old), "rename")
        for td in self.tensordicts:
            td.rename_key_(old, new, safe=safe)
        return self

    def fill_(self, key: Any, value: Any) -> Any:
        """Fill the entry ``key`` of every member with ``value``."""
        path = _key_tuple(key)
        for i, td in enumerate(self.tensordicts):
            if td._get_tuple(path, None) is None:
                raise KeyError(f"fill_(): key {unravel_key(path)!r} is not in tensordict {i}.")
        for td in self.tensordicts:
            td.fill_(path, value)
        return self

    def clear(self) -> Any:
        """Remove every entry of every member."""
        if any(td.is_locked for td in self.tensordicts):
            raise lock_error(self._common_keys(), "delete")
        for td in self.tensordicts:
            td.clear()
        return self

    def clone(self, recurse: bool = True, **kwargs: Any) -> Any:
        """A lazy stack of the members' clones (``recurse=False``: shallow copies).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict({"a": torch.zeros(2)}, [2])] * 2)
        >>> c = lazy.clone()
        >>> type(c).__name__, c.tensordicts[0]["a"] is lazy.tensordicts[0]["a"]
        ('LazyStackedTensorDict', False)
        """
        return self._from_members([td.clone(recurse) for td in self.tensordicts])

    def copy(self) -> Any:
        """A shallow copy: new member containers, the same tensors."""
        return self.clone(recurse=False)

    def empty(
        self,
        recurse: bool = False,
        *,
        batch_size: Sequence[int] | None = None,
        device: Any = NO_DEFAULT,
        names: Any = NO_DEFAULT,
    ) -> Any:
        """A lazy stack of the members' :meth:`~TensorDict.empty` (for its own batch size,
        as the reference; an empty dense tensordict for another one)."""
        if batch_size is not None and torch.Size(batch_size) != self.batch_size:
            return _kinds.Dense(
                batch_size=batch_size,
                device=None if device is NO_DEFAULT else device,
                names=None if names is NO_DEFAULT else names,
            )
        out = self._from_members([td.empty(recurse, device=device) for td in self.tensordicts])
        if names is not NO_DEFAULT:
            out.names = names
        return out

    def is_empty(self) -> bool:
        """Whether no member has a leaf."""
        return all(td.is_empty() for td in self.tensordicts)

    def flatten_keys(self, separator: str = ".", inplace: bool = False, is_leaf: Any = None) -> Any:
        """Flatten nested keys of every member."""
        results = [td.flatten_keys(separator, is_leaf=is_leaf) for td in self.tensordicts]
        if inplace:
            for td in self.tensordicts:
                td.flatten_keys(separator, inplace=True, is_leaf=is_leaf)
            return self
        return self._from_members(results)

    def unflatten_keys(self, separator: str = ".", inplace: bool = False) -> Any:
        """Unflatten ``"a.b"`` keys of every member."""
        results = [td.unflatten_keys(separator) for td in self.tensordicts]
        if inplace:
            for td in self.tensordicts:
                td.unflatten_keys(separator, inplace=True)
            return self
        return self._from_members(results)

    # ------------------------------------------------------------------ names, batch size
    def rename_(self, *names: Any, **rename_map: str) -> Any:
        """Rename the batch dimensions in place (positional names or ``old=new``).

        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy_stack([TensorDict(batch_size=[3])] * 2).rename_("s", "t").names
        ['s', 't']
        """
        if names and rename_map:
            raise ValueError("pass either positional names or a rename map, not both.")
        current = self.names
        if rename_map:
            for old in rename_map:
                if old not in current:
                    raise ValueError(f"no batch dimension is named {old!r} (names: {current}).")
            self.names = [rename_map.get(n, n) if n is not None else None for n in current]
        else:
            if len(names) == 1 and isinstance(names[0], (list, tuple)):
                names = tuple(names[0])
            self.names = list(names)
        return self

    def rename(self, *names: Any, **rename_map: str) -> Any:
        """A shallow copy with renamed batch dimensions."""
        return self.copy().rename_(*names, **rename_map)

    def refine_names(self, *names: Any) -> Any:
        """Name the batch dimensions in place; ``...`` keeps the current names."""
        names_l = (
            list(names[0])
            if len(names) == 1 and isinstance(names[0], (list, tuple))
            else list(names)
        )
        current = self.names
        nb = len(self._batch_size)
        if Ellipsis in names_l:
            i = names_l.index(Ellipsis)
            names_l[i : i + 1] = current[i : i + nb - (len(names_l) - 1)]
        if len(names_l) != nb:
            raise ValueError(f"refine_names got {len(names_l)} names for {nb} batch dimension(s).")
        for old, new in zip(current, names_l, strict=True):
            if old is not None and new != old:
                raise RuntimeError(
                    f"refine_names: cannot coerce TensorDict dimension name {old!r} into {new!r}; "
                    "use rename_()."
                )
        self.names = names_l
        return self

    def auto_batch_size_(
        self, batch_dims: int | None = None, keep_compliant_size: bool = False
    ) -> Any:
        """Grow (or cut to ``batch_dims``) the batch size to what every member's entries
        share; the stack dimension is always kept.

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict({"a": torch.zeros(3, 4)}), TensorDict({"a": torch.ones(3, 5)})])
        >>> lazy.auto_batch_size_().batch_size
        torch.Size([2, 3])
        """
        sd = self.stack_dim
        for td in self.tensordicts:
            td.auto_batch_size_()
        shapes = [td.batch_size for td in self.tensordicts]
        common: list[int] = list(shapes[0]) if shapes else []
        for shape in shapes[1:]:
            n = 0
            for a, b in zip(common, shape, strict=False):
                if a != b:
                    break
                n += 1
            common = common[:n]
        if batch_dims is not None:
            common = common[: max(batch_dims - 1, 0)]
        if len(common) < sd:
            raise RuntimeError(
                f"auto_batch_size_: the members share only {len(common)} batch dimension(s), "
                f"fewer than the stack dimension {sd} needs."
            )
        for td in self.tensordicts:
            td.batch_size = torch.Size(common)
        self._batch_size = torch.Size((*common[:sd], len(self.tensordicts), *common[sd:]))
        return self

    def auto_device_(self) -> Any:
        """Set every member's device to the one its leaves share (see ``TensorDict``)."""
        for td in self.tensordicts:
            td.auto_device_()
        return self

    # ------------------------------------------------------------------ lock
    def lock_(self) -> Any:
        """Lock every member; usable as a context manager that unlocks on exit. A member
        of a locked stack cannot be unlocked on its own."""
        was_locked = self._holds_lock
        if not was_locked:
            for td in self.tensordicts:
                if isinstance(td, _kinds.Dense):
                    _lock.hold(self, td)
                else:
                    td.lock_()
            self._holds_lock = True
        # already locked: the context leaves it locked on exit
        self._last_op = None if was_locked else ("lock_", self._undo_lock)
        return self

    def unlock_(self) -> Any:
        """Unlock every member (all checked first); as a context manager, re-locks on exit."""
        was_locked = self._holds_lock
        # the stack holds each member once per place it has in the stack
        members: dict[int, Any] = {}
        places: dict[int, int] = {}
        for td in self.tensordicts:
            members[id(td)] = td
            places[id(td)] = places.get(id(td), 0) + 1
        if not was_locked:  # no holds to release
            places = dict.fromkeys(places, 0)
        plans = [
            _lock.plan_unlock(td, places[k]) if isinstance(td, _kinds.Dense) else None
            for k, td in members.items()
        ]
        member: Any
        for (k, member), plan in zip(members.items(), plans, strict=True):
            if plan is None:
                member.unlock_()
                continue
            member._lock_parents = max(0, member._lock_parents - places[k])
            if not member._lock_parents:
                _lock.unlock(member, plan)
        _lock.drop_holds(self)
        self._holds_lock = False
        self._last_op = ("unlock_", self._undo_unlock) if was_locked else None
        return self

    def _undo_lock(self) -> None:
        self.unlock_()

    def _undo_unlock(self) -> None:
        self.lock_()

    # ------------------------------------------------------------------ devices
    def to(self, *args: Any, **kwargs: Any) -> Any:
        """Move/cast every member (see :meth:`TensorDict.to`); ``self`` when nothing changes.

        A consolidated stack moves to another device as one buffer copy (the result is
        consolidated too).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict({"a": torch.zeros(2)}, [2])] * 2).consolidate()
        >>> moved = lazy.to("meta")
        >>> type(moved).__name__, moved["a"].device, moved.is_consolidated()
        ('LazyStackedTensorDict', device(type='meta'), True)
        """
        if kwargs.get("batch_size") is not None:  # as the reference: TypeError
            raise TypeError(
                "to(batch_size=...) cannot set the batch size of a LazyStackedTensorDict (its "
                "members keep theirs); make it dense first with td.contiguous()."
            )
        if self._consolidated is not None:
            return consolidated_to(self, args, kwargs, self._to_members)
        return self._to_members(*args, **kwargs)

    def _to_members(self, *args: Any, **kwargs: Any) -> Any:
        results = [td.to(*args, **kwargs) for td in self.tensordicts]
        if all(r is td for r, td in zip(results, self.tensordicts, strict=True)):
            return self
        return self._from_members(results)

    def cpu(self, **kwargs: Any) -> Any:
        """Move every member to the CPU."""
        return self.to("cpu", **kwargs)

    def cuda(self, device: int | torch.device | None = None, **kwargs: Any) -> Any:
        """Move every member to a CUDA device."""
        target: str | torch.device
        if device is None:
            target = "cuda"
        elif isinstance(device, int):
            target = torch.device("cuda", device)
        else:
            target = device
        return self.to(target, **kwargs)

    def share_memory_(self) -> Any:
        """Move every member to shared memory (and lock them)."""
        for td in self.tensordicts:
            td.share_memory_()
        return self

    def pin_memory(self, num_threads: int | None = None, inplace: bool = False) -> Any:
        """Pin every member's leaves in page-locked memory."""
        results = [td.pin_memory(num_threads, inplace=inplace) for td in self.tensordicts]
        return self if inplace else self._from_members(results)

    def pin_memory_(self, num_threads: int = 0) -> Any:
        """In-place :meth:`pin_memory`."""
        return self.pin_memory(num_threads, inplace=True)

    def clear_device_(self) -> Any:
        """Drop the device of every member."""
        for td in self.tensordicts:
            td.clear_device_()
        return self
