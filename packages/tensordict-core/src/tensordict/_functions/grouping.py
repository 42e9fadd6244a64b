"""Splitting a tensordict into groups of rows, and collating samples into a batch.

* :func:`group_by` — the rows (along the first batch dimension) that share the value of
  an entry, one tensordict per value.
* :func:`collate` — a ``collate_fn`` for :class:`torch.utils.data.DataLoader` whose
  samples are tensordicts (or hold them), with padded or nested variable-length entries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from tensordict._combine.functional import maybe_dense_stack, stack
from tensordict._functions.pad import pad_sequence
from tensordict._keys.nested import NestedKey, unravel_key
from tensordict._kinds.kinds import is_tensor_collection
from tensordict._leaves.nontensor import NonTensorData, is_non_tensor
from tensordict.base import NO_DEFAULT

__all__ = ["collate", "group_by"]


def group_by(tensordict: Any, key: NestedKey) -> tuple[Any, tuple[Any, ...]]:
    """Split ``tensordict`` into the groups of rows that share the value of ``key``.

    Rows run along the first batch dimension. Returns ``(values, groups)``: the sorted
    unique values (a tensor for a tensor entry — rows of it when the entry has more
    dimensions —, a list for a non-tensor entry) and one tensordict per value, holding
    the matching rows in their original order.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict(uid=torch.tensor([2, 0, 2, 1, 0]), r=torch.arange(5.0), batch_size=[5])
    >>> values, groups = group_by(td, "uid")
    >>> values, [g["r"].tolist() for g in groups]
    (tensor([0, 1, 2]), [[1.0, 4.0], [3.0], [0.0, 2.0]])
    """
    if not tensordict.batch_dims:
        raise ValueError("group_by: the tensordict needs at least one batch dimension.")
    if key not in tensordict.keys(include_nested=True):
        raise KeyError(f"group_by: no entry {unravel_key(key)!r} in the tensordict.")
    entry = tensordict._get_tuple(_tuple(key), NO_DEFAULT)
    if isinstance(entry, torch.Tensor):
        rows = entry.reshape(entry.shape[0], -1) if entry.ndim > 1 else entry
        values, inverse = torch.unique(rows, dim=0, return_inverse=True)
        order = torch.argsort(inverse, stable=True)
        counts = torch.bincount(inverse, minlength=values.shape[0]).tolist()
        gathered = tensordict[order]
        groups = tuple(gathered.split(counts, 0)) if counts else ()
        if entry.ndim > 1:
            values = values.reshape(-1, *entry.shape[1:])
        return values, groups
    if not is_non_tensor(entry):
        raise TypeError(f"group_by: the entry {unravel_key(key)!r} is a tensordict, not a value.")
    n = tensordict.batch_size[0]
    rows = [entry.data] * n if isinstance(entry, NonTensorData) else entry.tolist()
    items = [_hashable(v) for v in rows]
    try:
        unique = sorted(set(items))
    except TypeError as err:
        raise TypeError(
            f"group_by: the values of {unravel_key(key)!r} must be hashable and sortable ({err})."
        ) from None
    groups = tuple(
        tensordict[torch.tensor([i for i, v in enumerate(items) if v == u], dtype=torch.long)]
        for u in unique
    )
    return unique, groups


def _hashable(value: Any) -> Any:
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


def _tuple(key: NestedKey) -> tuple[str, ...]:
    flat = unravel_key(key)
    return (flat,) if isinstance(flat, str) else flat


def collate(
    batch: Any,
    *,
    pad_keys: Mapping[NestedKey, float] | None = None,
    nested_keys: Sequence[NestedKey] | None = None,
    mask_key: NestedKey | None = None,
) -> Any:
    """Collate a list of samples into a batch (a ``collate_fn`` for ``DataLoader``).

    Tensordicts are stacked with :func:`~tensordict.maybe_dense_stack` (dense when the
    samples agree, lazy otherwise), tensors with :func:`torch.stack`, mappings and tuples
    entry by entry; anything else goes to :func:`torch.utils.data.default_collate`. For
    tensordict samples, ``pad_keys`` maps entries to their padding value (padded along
    their first dimension, as :func:`~tensordict.pad_sequence` does; ``mask_key`` stores
    the masks of the valid positions), and ``nested_keys`` become jagged nested tensors.
    Anything other than a non-empty list is returned as is.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> batch = collate([(TensorDict(x=torch.zeros(3)), i) for i in range(4)])
    >>> batch[0].batch_size, batch[1]
    (torch.Size([4]), tensor([0, 1, 2, 3]))
    >>> out = collate([TensorDict(ids=torch.ones(n)) for n in (2, 3)], pad_keys={"ids": -1})
    >>> out["ids"]
    tensor([[ 1.,  1., -1.],
            [ 1.,  1.,  1.]])
    """
    if not isinstance(batch, list) or not batch:
        return batch
    first = batch[0]
    if is_tensor_collection(first) and not is_non_tensor(first):
        if pad_keys or nested_keys:
            return _collate_ragged(batch, pad_keys or {}, list(nested_keys or ()), mask_key)
        if mask_key is not None:
            raise ValueError("collate: mask_key needs pad_keys.")
        return maybe_dense_stack(batch, 0)
    if isinstance(first, torch.Tensor):
        return torch.stack(batch, 0)
    kwargs = {"pad_keys": pad_keys, "nested_keys": nested_keys, "mask_key": mask_key}
    if isinstance(first, Mapping):
        return {k: collate([sample[k] for sample in batch], **kwargs) for k in first}  # type: ignore[arg-type]
    if isinstance(first, tuple):
        items = [collate(list(column), **kwargs) for column in zip(*batch, strict=True)]  # type: ignore[arg-type]
        return type(first)(*items) if hasattr(first, "_fields") else tuple(items)
    return torch.utils.data.default_collate(batch)


def _collate_ragged(
    batch: list[Any], pad_keys: Mapping[NestedKey, float], nested: list[NestedKey], mask_key: Any
) -> Any:
    padded = {unravel_key(k): v for k, v in pad_keys.items()}
    nested_flat = [unravel_key(k) for k in nested]
    both = set(padded) & set(nested_flat)
    if both:
        raise ValueError(f"collate: {sorted(map(str, both))} in both pad_keys and nested_keys.")
    if padded and any(sample.batch_dims for sample in batch):
        raise ValueError("collate: pad_keys needs samples with an empty batch size.")
    if mask_key is not None and not padded:
        raise ValueError("collate: mask_key needs pad_keys.")
    for i, sample in enumerate(batch):
        for key in (*padded, *nested_flat):
            if key not in sample.keys(include_nested=True):
                raise KeyError(f"collate: sample {i} has no entry {key!r}.")
        if mask_key is not None and mask_key in sample.keys(include_nested=True):
            raise ValueError(f"collate: mask_key {mask_key!r} is an entry of sample {i}.")
    special = [*padded, *nested_flat]
    rest = stack([sample.exclude(*special) for sample in batch], 0)
    for key in nested_flat:
        rest.set(key, torch.nested.nested_tensor([s.get(key) for s in batch], layout=torch.jagged))
    if padded:
        selected = [sample.select(*padded) for sample in batch]
        out = pad_sequence(
            selected, padding_value=padded, return_mask=mask_key if mask_key is not None else False
        )
        rest.update(out)
    return rest
