"""Padding: :func:`pad` grows batch dimensions, :func:`pad_sequence` stacks tensordicts of
different lengths after padding them to a common one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from tensordict._combine.functional import stack
from tensordict._engine.tree import leaf_items
from tensordict._keys.nested import NestedKey, key_as_tuple, unravel_key
from tensordict._kinds import kinds as _kinds
from tensordict._kinds.inplace import adopt
from tensordict._kinds.inplace import check as check_inplace
from tensordict._leaves.collection import data_of, wrapped
from tensordict._leaves.nontensor import MetaData, NonTensorData, NonTensorStack, is_non_tensor
from tensordict._leaves.unbatched import UNBATCHED_TYPES
from tensordict.base import TensorDictBase

_Tensor = torch.Tensor


def _pad_tensor(t: _Tensor, widths: Sequence[tuple[int, int]], value: Any) -> _Tensor:
    """``t`` with ``widths[d] = (before, after)`` elements of ``value`` added on dim ``d``
    (a negative amount crops)."""
    if not any(b or a for b, a in widths):
        return t
    shape = list(t.shape)
    src, dst = [], []
    for d, (before, after) in enumerate(widths):
        size = shape[d]
        lo, hi = max(0, -before), size - max(0, -after)
        src.append(slice(lo, max(lo, hi)))
        dst.append(slice(max(0, before), max(0, before) + max(0, hi - lo)))
        shape[d] = size + before + after
    out = torch.full(shape, value, dtype=t.dtype, device=t.device)
    out[tuple(dst)] = t[tuple(src)]
    return out


def _pad_stack(
    stack: Any, widths: Sequence[tuple[int, int]], inplace: bool = False
) -> NonTensorStack:
    """A :class:`NonTensorStack` (or the values of a ``NonTensorData``, one per element)
    padded with ``None`` by ``widths``; ``inplace`` changes ``stack`` itself."""
    if isinstance(stack, NonTensorData):
        index = torch.zeros(stack.batch_size, dtype=torch.long)
        values = [stack.data, None]
    else:
        index, values = stack._index, [*stack._values, None]
    new_index = _pad_tensor(index, widths, len(values) - 1)
    if not inplace:
        return NonTensorStack._from_parts(values, new_index, stack.device)
    stack._values, stack._index = values, new_index
    return stack  # type: ignore[no-any-return]


def _pad_td(
    td: Any,
    widths: Sequence[tuple[int, int]],
    value: Any,
    prefix: tuple[str, ...] = (),
    inplace: bool = False,
) -> _kinds.Dense:
    """``td`` padded by ``widths``; ``value`` is a number or a ``{key tuple: number}``
    mapping (entries it does not name get 0). Non-tensor entries get ``None``; with
    ``inplace`` the non-tensor stacks are padded in place (the caller adopts the rest)."""
    bs = list(td.batch_size)
    for d, (before, after) in enumerate(widths):
        bs[d] += before + after
    new_bs = torch.Size(bs)
    padding = any(b or a for b, a in widths)
    out: dict[str, Any] = {}
    store = td._tensordict if isinstance(td, _kinds.Dense) else None
    items = store.items() if store is not None else td.items()
    for key, entry in items:
        if type(entry) in UNBATCHED_TYPES:  # no batch dimension: carried whole
            out[key] = entry._with(new_bs)
        elif isinstance(entry, _Tensor):
            fill = value.get(prefix + (key,), 0.0) if isinstance(value, dict) else value
            out[key] = _pad_tensor(entry, widths, fill)
        elif isinstance(entry, MetaData) or (isinstance(entry, NonTensorData) and not padding):
            out[key] = entry._with(new_bs)
        elif is_non_tensor(entry):  # values per element: the new ones are None
            out[key] = _pad_stack(entry, widths, inplace and not isinstance(entry, NonTensorData))
        elif isinstance(entry, TensorDictBase):
            out[key] = _pad_td(entry, widths, value, prefix + (key,), inplace)
        else:  # pragma: no cover - non-dense containers yield unwrapped values
            out[key] = NonTensorData._make(entry, new_bs, td.device)
    return _kinds.Dense._new_unsafe(
        out, new_bs, td.device, list(td._names) if getattr(td, "_names", None) else None
    )


def _widths(what: str, batch_size: torch.Size, pad_size: Sequence[int]) -> list[tuple[int, int]]:
    """``pad_size`` as ``(before, after)`` pairs, checked against ``batch_size``."""
    sizes = list(pad_size)
    nb = len(batch_size)
    if len(sizes) % 2 or len(sizes) > 2 * nb:
        raise ValueError(
            f"{what}: pad_size must hold (before, after) pairs for at most the {nb} batch "
            f"dimension(s) of batch size {tuple(batch_size)}; got {sizes}."
        )
    if any(not isinstance(s, int) or isinstance(s, bool) for s in sizes):
        raise ValueError(f"{what}: pad_size must hold integers, got {sizes}.")
    widths = [(sizes[i], sizes[i + 1]) for i in range(0, len(sizes), 2)]
    for d, (before, after) in enumerate(widths):
        if batch_size[d] + before + after < 0:
            raise RuntimeError(
                f"{what}: pad_size {sizes} gives a negative output size "
                f"{batch_size[d] + before + after} for batch dimension {d} of size "
                f"{batch_size[d]} (negative amounts crop; they cannot remove more than there is)."
            )
    return widths


def pad(
    tensordict: TensorDictBase,
    pad_size: Sequence[int],
    value: float = 0.0,
    inplace: bool = False,
    safe: bool = True,
) -> _kinds.Dense:
    """Pad the batch dimensions of every entry with ``value`` (negative amounts crop).

    ``pad_size`` lists ``(before, after)`` amounts from the *first* batch dimension on:
    ``[dim0_before, dim0_after, dim1_before, dim1_after, ...]``; trailing batch
    dimensions it does not cover are not padded. Feature dimensions are never padded.
    Non-tensor entries become :class:`~tensordict.NonTensorStack` entries padded with
    ``None``; a ``NonTensorStack`` can be padded directly too.

    With ``inplace=True`` the tensordict itself holds the result: its nested tensordicts
    and non-tensor stacks keep their identity; the members of a lazy stack are padded in
    place (and members are added or removed along its stack dimension). The arguments
    are always checked before anything changes (a crop past the size raises
    ``RuntimeError``), so ``safe`` (kept for compatibility) changes nothing.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.ones(3, 4, 1), "b": {"c": torch.ones(3, 4)}}, [3, 4])
    >>> out = pad(td, [0, 1, 2, 0], value=-1.0)
    >>> out.batch_size, out["b", "c"][:, 0].tolist()
    (torch.Size([4, 6]), [-1.0, -1.0, -1.0, -1.0])
    >>> pad(td, [-1, 0]).batch_size
    torch.Size([2, 4])
    """
    if is_non_tensor(tensordict):
        leaf: Any = tensordict
        widths = _widths("pad", leaf.batch_size, pad_size)
        if inplace and isinstance(leaf, NonTensorData):
            raise RuntimeError(
                "pad(inplace=True) cannot preserve the identity of a NonTensorData: padding "
                "makes it a NonTensorStack (one value per element); use inplace=False."
            )
        return _pad_stack(leaf, widths, inplace)  # type: ignore[return-value]
    if not isinstance(tensordict, TensorDictBase):
        raise TypeError(f"pad expects a tensordict, got {type(tensordict).__name__}.")
    widths = _widths("pad", tensordict.batch_size, pad_size)
    if inplace and isinstance(tensordict, _kinds.Lazy):
        return _pad_lazy_(tensordict, widths, value)  # type: ignore[no-any-return]
    if inplace:
        check_inplace(tensordict, "pad")
        result = _pad_td(tensordict, widths, value, inplace=True)
        return adopt(tensordict, result, "pad")  # type: ignore[no-any-return]
    return _pad_td(tensordict, widths, value)


def _pad_lazy_(lazy: Any, widths: list[tuple[int, int]], value: Any) -> Any:
    """``pad(lazy, ..., inplace=True)``: pad the members in place along their dims, add
    (filled) or remove members along the stack dimension."""
    if lazy.is_locked:
        raise RuntimeError(
            "pad(inplace=True) would change the batch size of a locked LazyStackedTensorDict; "
            "unlock it first (td.unlock_()) or use inplace=False."
        )
    sd = lazy.stack_dim
    member_widths = [w for d, w in enumerate(widths) if d != sd]
    for member in lazy.tensordicts:
        if not isinstance(member, (_kinds.Dense, _kinds.Lazy)):
            check_inplace(member, "pad")
    for member in lazy.tensordicts:
        if any(b or a for b, a in member_widths):
            pad(member, [x for w in member_widths for x in w], value, inplace=True)
    before, after = widths[sd] if sd < len(widths) else (0, 0)
    members = list(lazy.tensordicts)
    if before < 0:
        del members[:-before]
    if after < 0:
        del members[len(members) + after :]
    if before > 0 or after > 0:
        filler = _filled(lazy.tensordicts[0], value)
        members = (
            [filler.clone() for _ in range(max(before, 0))]
            + members
            + [filler.clone() for _ in range(max(after, 0))]
        )
    lazy.tensordicts[:] = members
    bs = list(lazy.batch_size)
    for d, (b, a) in enumerate(widths):
        bs[d] += b + a
    lazy._batch_size = torch.Size(bs)
    return lazy


def _filled(td: Any, value: Any, prefix: tuple[str, ...] = ()) -> _kinds.Dense:
    """A dense tensordict shaped like ``td`` whose tensors hold ``value`` (``None`` for
    non-tensor entries): a new member added by padding a lazy stack."""
    widths = [(0, 0)] * td.batch_dims
    out = _pad_td(td, widths, value, prefix) if isinstance(td, _kinds.Dense) else td.to_tensordict()
    for key, entry in list(out._tensordict.items()):
        if isinstance(entry, _Tensor):
            fill = value.get(prefix + (key,), 0.0) if isinstance(value, dict) else value
            out._tensordict[key] = torch.full_like(entry, fill)
        elif isinstance(entry, _kinds.Dense):
            out._tensordict[key] = _filled(entry, value, prefix + (key,))
        elif is_non_tensor(entry) and not isinstance(entry, MetaData):
            out._tensordict[key] = NonTensorData._make(None, entry.batch_size, entry.device)
    return out


def pad_sequence(
    list_of_tensordicts: Sequence[TensorDictBase],
    pad_dim: int = 0,
    padding_value: float | Mapping[NestedKey, float] = 0.0,
    out: TensorDictBase | None = None,
    return_mask: bool | NestedKey = False,
    padding_side: str = "right",
    *,
    device: torch.device | str | None = None,
) -> _kinds.Dense:
    """Pad tensordicts to a common length along ``pad_dim`` and stack them (new dim 0).

    ``pad_dim`` counts the dimensions of the entries (batch dimensions first). If it
    is a batch dimension, every entry is padded to the longest batch; otherwise each
    entry is padded to the longest length that *it* has across the tensordicts.
    Non-tensor entries are stacked unchanged.

    ``padding_value`` is one number or a mapping from keys to numbers (entries it does not
    name are padded with 0). ``padding_side="left"`` pads before the data instead of after.

    With ``return_mask=True`` the result also holds ``"masks"`` (or the key given as
    ``return_mask``): for each entry, a boolean tensor marking the real (un-padded)
    positions, of shape ``[N, *shape]`` where ``shape`` is the entry's padded shape up to
    ``pad_dim`` (and at least the batch dimensions).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> tds = [TensorDict({"a": torch.ones(n, 2)}) for n in (1, 3)]
    >>> out = pad_sequence(tds, return_mask=True)
    >>> out["a"].shape, out["masks", "a"].tolist()
    (torch.Size([2, 3, 2]), [[True, False, False], [True, True, True]])
    """
    tds = list(list_of_tensordicts)
    if not tds:
        raise ValueError("pad_sequence needs at least one tensordict.")
    inner = wrapped(tds)
    if inner is not None:  # tensorclasses: pad their data, give the same class back
        result = pad_sequence(
            inner[0],
            pad_dim,
            padding_value,
            data_of(out) if out is not None else None,
            return_mask,
            padding_side,
            device=device,
        )
        return out if out is not None else inner[1](result)  # type: ignore[return-value]
    if padding_side not in ("right", "left"):
        raise ValueError(
            f"pad_sequence: padding_side must be 'right' or 'left', got {padding_side!r}."
        )
    left = padding_side == "left"
    if isinstance(padding_value, Mapping):
        padding_value = {key_as_tuple(k): v for k, v in padding_value.items()}
    mask_key: Any = None
    if return_mask is not False and return_mask is not None:
        mask_key = "masks" if return_mask is True else return_mask
    for i, td in enumerate(tds):
        if not isinstance(td, TensorDictBase):
            raise TypeError(f"pad_sequence: item {i} is a {type(td).__name__}, not a tensordict.")
    nb = tds[0].batch_dims
    if any(td.batch_dims != nb for td in tds):
        raise ValueError(
            "pad_sequence: the tensordicts must have the same number of batch dimensions; got "
            f"batch sizes {[tuple(td.batch_size) for td in tds]}."
        )
    if pad_dim < 0:
        raise ValueError(f"pad_sequence: pad_dim must be non-negative, got {pad_dim}.")
    if pad_dim < nb:
        longest = max(td.batch_size[pad_dim] for td in tds)
        for i, td in enumerate(tds):
            other = [s for d, s in enumerate(td.batch_size) if d != pad_dim]
            ref = [s for d, s in enumerate(tds[0].batch_size) if d != pad_dim]
            if other != ref:
                raise ValueError(
                    f"pad_sequence: tensordict {i} has batch size {tuple(td.batch_size)}, which "
                    f"differs from tensordict 0's {tuple(tds[0].batch_size)} outside pad_dim "
                    f"{pad_dim}."
                )
    leaf_lists = [_leaves(td) for td in tds]
    keys = list(leaf_lists[0])
    for i, leaves in enumerate(leaf_lists[1:], 1):
        if set(leaves) != set(keys):
            raise KeyError(
                f"pad_sequence: tensordict {i} has different keys from tensordict 0: only in 0: "
                f"{sorted(map(str, set(keys) - set(leaves)))}, only in {i}: "
                f"{sorted(map(str, set(leaves) - set(keys)))}."
            )
    targets: dict[tuple[str, ...], int] = {}
    for key in keys:
        lengths = []
        for leaves in leaf_lists:
            value = leaves[key]
            if isinstance(value, _Tensor):
                if value.ndim <= pad_dim:
                    raise ValueError(
                        f"pad_sequence: entry {unravel_key(key)!r} has shape "
                        f"{tuple(value.shape)}, which has no dimension pad_dim={pad_dim}."
                    )
                lengths.append(value.shape[pad_dim])
        if lengths:
            targets[key] = longest if pad_dim < nb else max(lengths)
    padded = []
    masks = []
    new_td: Any
    for td, leaves in zip(tds, leaf_lists):
        if pad_dim < nb:
            widths = [(0, 0)] * nb
            missing = longest - td.batch_size[pad_dim]
            widths[pad_dim] = (missing, 0) if left else (0, missing)
            new_td = _pad_td(td, widths, padding_value)
        else:
            new_td = td.copy() if isinstance(td, _kinds.Dense) else td.to_tensordict()
            for key, target in targets.items():
                value = leaves[key]
                widths = [(0, 0)] * value.ndim
                missing = target - value.shape[pad_dim]
                widths[pad_dim] = (missing, 0) if left else (0, missing)
                fill = (
                    padding_value.get(key, 0.0)
                    if isinstance(padding_value, dict)
                    else padding_value
                )
                new_td._set_tuple(
                    key, _pad_tensor(value, widths, fill), inplace=False, validated=True
                )
        padded.append(new_td)
        if mask_key is not None:
            masks.append(_masks(new_td, leaves, targets, pad_dim, nb, left))
    result = stack(padded, 0)
    if mask_key is not None:
        result.set(mask_key, stack(masks, 0))
    if device is not None:
        result = result.to(device)
    if out is not None:
        out.update(result)
        return out  # type: ignore[return-value]
    return result


def _leaves(td: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    out: dict[tuple[str, ...], Any] = {}
    store = td._tensordict if isinstance(td, _kinds.Dense) else None
    items = store.items() if store is not None else td.items()
    for key, value in items:
        path = prefix + (key,)
        if isinstance(value, TensorDictBase):
            out.update(_leaves(value, path))
        else:
            out[path] = value
    return out


def _masks(
    td: _kinds.Dense,
    leaves: dict[tuple[str, ...], Any],
    targets: dict[tuple[str, ...], int],
    pad_dim: int,
    nb: int,
    left: bool = False,
) -> _kinds.Dense:
    out = _kinds.Dense._new_unsafe({}, td.batch_size, td.device)
    upto = max(pad_dim + 1, nb)
    for key, target in targets.items():
        value = leaves[key]
        shape = list(value.shape[:upto])
        shape[pad_dim] = target
        mask = torch.zeros(shape, dtype=torch.bool, device=value.device)
        length = value.shape[pad_dim]
        mask.narrow(pad_dim, target - length if left else 0, length).fill_(True)
        out._set_tuple(key, mask, inplace=False, validated=False)
    return out


class PadOps(_kinds.SharedMixin):
    """Mixin of :class:`~tensordict.TensorDict` and :class:`~tensordict.LazyStackedTensorDict`:
    ``pad`` and ``to_padded_tensor`` (a lazy stack has its own ``to_padded_tensor``)."""

    def to_padded_tensor(
        self, padding: float = 0.0, mask_key: NestedKey | None = None
    ) -> _kinds.Dense:
        """Replace every nested (jagged or strided) tensor leaf by its padded version;
        ragged batch dimensions (``-1``) take their padded size.

        With ``mask_key``, a boolean mask of the valid positions (shape: the padded
        shape up to the ragged dimension) is written there; every nested leaf must then
        have the same ragged lengths.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> nt = torch.nested.nested_tensor([torch.ones(1, 2), torch.ones(3, 2)], layout=torch.jagged)
        >>> out = TensorDict({"x": nt}, [2]).to_padded_tensor(mask_key="mask")
        >>> out["x"].shape, out["mask"].tolist()
        (torch.Size([2, 3, 2]), [[True, False, False], [True, True, True]])
        """
        mask = None
        mask_from = None
        nested = [(p, v) for p, v in leaf_items(self) if isinstance(v, _Tensor) and v.is_nested]
        if mask_key is not None:
            for path, value in nested:
                m = _valid_mask(value)
                if mask is None:
                    mask, mask_from = m, path
                elif m.shape != mask.shape or not torch.equal(m, mask):
                    raise ValueError(
                        f"to_padded_tensor(mask_key=...): the nested entries {unravel_key(mask_from)!r} "  # type: ignore[arg-type]
                        f"and {unravel_key(path)!r} have different ragged lengths; one mask cannot "
                        "describe both."
                    )
        ids = {id(v) for _, v in nested}
        out = self._map_tensors(
            lambda t: torch.nested.to_padded_tensor(t, padding) if id(t) in ids else t
        )
        if -1 in out.batch_size and nested:  # ragged batch dims get the padded size
            path = nested[0][0]
            padded = out.get(path)
            out.batch_size = [
                padded.shape[d] if s == -1 else s for d, s in enumerate(out.batch_size)
            ]
        if mask is not None and mask_key is not None:
            out.set(mask_key, mask)
        return out  # type: ignore[return-value]

    def pad(
        self, pad_size: Sequence[int], value: float = 0.0, inplace: bool = False, safe: bool = True
    ) -> _kinds.Dense:
        """Pad the batch dimensions (see :func:`tensordict.pad`).

        The result is a dense :class:`~tensordict.TensorDict`, also for a lazy stack
        (padded like its dense form, :meth:`to_tensordict`; ``inplace=True`` is not
        supported there).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> TensorDict({"a": torch.ones(2)}, [2]).pad([1, 0])["a"]
        tensor([0., 1., 1.])
        >>> lazy = lazy_stack([TensorDict({"a": torch.ones(2)}, [2])] * 2)
        >>> lazy.pad([0, 1, 1, 0])["a"]
        tensor([[0., 1., 1.],
                [0., 1., 1.],
                [0., 0., 0.]])
        """
        if inplace:
            return pad(self, pad_size, value, inplace=True, safe=safe)
        me: Any = self  # (typed as Any: a shared method, defined for every kind)
        src = me if isinstance(me, _kinds.Dense) else self.to_tensordict()
        return pad(src, pad_size, value, safe=safe)


def _ragged_dim(nt: _Tensor) -> int:
    """The (first) ragged dimension of a nested tensor, jagged or strided."""
    if nt.layout is torch.jagged:
        return next(i for i, s in enumerate(nt.shape) if not isinstance(s, int))
    for d in range(nt.dim()):
        try:
            nt.size(d)
        except RuntimeError:  # a strided nested tensor has no size there
            return d
    return nt.dim() - 1


def _valid_mask(nt: _Tensor) -> _Tensor:
    """For a nested tensor: ``True`` where the padded tensor holds data (up to the
    ragged dimension)."""
    ragged = _ragged_dim(nt)
    ones = torch.ones_like(nt, dtype=torch.uint8)
    full = torch.nested.to_padded_tensor(ones, 0).bool()
    while full.ndim > ragged + 1:
        full = full.any(-1)
    return full  # type: ignore[no-any-return]


def _run(mask_row: _Tensor, pad_dim: int, key: Any) -> tuple[int, int]:
    """``(start, length)`` of the one run of ``True`` of a mask row along ``pad_dim``."""
    m = mask_row.movedim(pad_dim, 0) if mask_row.ndim > pad_dim else mask_row
    m = m.reshape(m.shape[0], -1).any(-1) if m.ndim > 1 else m
    where = m.nonzero().flatten().tolist()
    if not where:
        return 0, 0
    start, stop = where[0], where[-1] + 1
    if len(where) != stop - start:
        raise ValueError(
            f"unpad_sequence: the valid positions of entry {unravel_key(key)!r} are not one "
            f"contiguous run along pad_dim={pad_dim} (positions {where})."
        )
    return start, stop - start


def unpad_sequence(
    padded: TensorDictBase, mask: TensorDictBase | _Tensor | None = None, *, pad_dim: int = 0
) -> Any:
    """Split a batch made by :func:`pad_sequence` back into its samples (a lazy stack).

    ``mask`` marks the valid positions: a tensordict of masks laid out as the ``"masks"``
    entry that ``pad_sequence(..., return_mask=True)`` writes, or one boolean tensor of
    shape ``[len(padded), max_len]`` for every entry; by default the ``"masks"`` entry of
    ``padded`` (left out of the result). Each sample keeps, in every entry, the valid run
    of positions along ``pad_dim`` (counted in the samples' dims); the entries are views.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> tds = [TensorDict(a=torch.arange(n), batch_size=[n]) for n in (3, 5)]
    >>> samples = unpad_sequence(pad_sequence(tds, return_mask=True, padding_side="left"))
    >>> [s["a"].tolist() for s in samples.tensordicts]
    [[0, 1, 2], [0, 1, 2, 3, 4]]
    """
    if not padded.batch_dims:
        raise ValueError("unpad_sequence: the padded tensordict has no batch dimension.")
    if mask is None:
        if "masks" not in padded.keys():
            raise ValueError(
                "unpad_sequence: no mask given and no 'masks' entry (pass return_mask=True to "
                "pad_sequence, or mask=...)."
            )
        mask = padded.get("masks")
        padded = padded.exclude("masks")
    n = padded.batch_size[0]
    if isinstance(mask, _Tensor) and (mask.ndim != 2 or mask.shape[0] != n):
        raise ValueError(
            f"unpad_sequence: a tensor mask must have shape [{n}, max_len], got "
            f"{tuple(mask.shape)}."
        )
    samples = []
    for i in range(n):
        row = padded[i]
        member_dims = row.batch_dims
        cuts = {}
        for key, value in leaf_items(row):
            if not isinstance(value, _Tensor):
                continue
            if isinstance(mask, _Tensor):
                m = mask[i]
            else:
                if key not in mask.keys(include_nested=True):
                    raise KeyError(f"unpad_sequence: the masks have no entry {unravel_key(key)!r}.")
                m = mask.get(key)[i]
            cuts[key] = _run(m, pad_dim, key)
        if pad_dim < member_dims:  # a batch dim: the sample's batch size shrinks too
            runs = set(cuts.values())
            if len(runs) > 1:
                raise ValueError(
                    f"unpad_sequence: along the batch dim pad_dim={pad_dim} the entries of "
                    f"sample {i} have different valid runs {sorted(runs)}."
                )
            start, length = runs.pop() if runs else (0, row.batch_size[pad_dim])
            samples.append(row.narrow(pad_dim, start, length))
            continue
        sample = row.copy()
        for key, (start, length) in cuts.items():
            sample._set_tuple(
                key,
                row._get_tuple(key, None).narrow(pad_dim, start, length),
                inplace=False,
                validated=True,
            )
        samples.append(sample)
    return _kinds.Lazy(*samples, stack_dim=0)
