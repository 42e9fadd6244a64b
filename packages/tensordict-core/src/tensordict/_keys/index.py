"""Index normalisation: turn a user index into one tuple that applies to every leaf.

The index is normalised once against the batch dimensions (ellipsis expanded, lists and
arrays turned into tensors, masks and integers checked) so that every leaf, whatever
its trailing feature dimensions, is indexed along its batch dimensions only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from tensordict._util.errors import EllipsisError

_Tensor = torch.Tensor


def _as_tensor_index(item: Any) -> torch.Tensor:
    if isinstance(item, np.ndarray):
        return torch.from_numpy(item)
    if isinstance(item, range):
        return torch.arange(item.start, item.stop, item.step)
    out = torch.as_tensor(item)
    if out.dtype not in (torch.bool, torch.long, torch.int, torch.int16, torch.int8, torch.uint8):
        raise IndexError(f"index lists must hold integers or booleans, got {item!r}.")
    return out


def normalize_index(index: Any, batch_size: torch.Size) -> Any:
    """Return ``index`` in a form that indexes the batch dimensions of any leaf.

    >>> import torch
    >>> normalize_index((..., 0), torch.Size([2, 3]))
    (slice(None, None, None), 0)
    >>> normalize_index([0, 1], torch.Size([2]))
    tensor([0, 1])
    >>> normalize_index(5, torch.Size([2]))
    Traceback (most recent call last):
    IndexError: index 5 is out of bounds for batch dimension 0 with size 2 (batch_size=torch.Size([2])).
    """
    cls = type(index)
    if cls is int:
        _check_int(index, 0, batch_size)
        return index
    if cls is slice:
        if not batch_size:
            raise IndexError(
                "cannot slice a tensordict with no batch dimension (batch_size=torch.Size([]))."
            )
        return index
    if cls is not tuple:
        index = (index,)
    items: list[Any] = []
    dim = 0
    ellipsis_at = None
    # Dimensions the ellipsis stands for, so that items after it are checked against the
    # trailing batch dimensions.
    has_ellipsis = any(item is Ellipsis for item in index)
    elided = len(batch_size) - sum(map(_dims_consumed, index)) if has_ellipsis else 0
    for item in index:
        t = type(item)
        if t is int:
            _check_int(item, dim, batch_size)
            dim += 1
        elif t is slice:
            dim += 1
        elif item is None:
            pass
        elif item is Ellipsis:
            if ellipsis_at is not None:
                raise EllipsisError(
                    f"an index can only have a single ellipsis ('...'), got {index!r}."
                )
            ellipsis_at = len(items)
            dim += max(elided, 0)
        elif isinstance(item, _Tensor):
            dim = _check_tensor(item, dim, batch_size)
        elif isinstance(item, (list, range, np.ndarray)):
            item = _as_tensor_index(item)
            dim = _check_tensor(item, dim, batch_size)
        elif isinstance(item, bool) or isinstance(item, np.bool_):
            item = torch.tensor(bool(item))
        elif isinstance(item, (int, np.integer)):
            item = int(item)
            _check_int(item, dim, batch_size)
            dim += 1
        else:
            raise IndexError(
                f"unsupported index element {item!r} (type {type(item).__name__}); expected "
                "int, slice, None, Ellipsis, a tensor, a list or a tuple of these."
            )
        items.append(item)
    if dim > len(batch_size):
        raise IndexError(
            f"too many indices for a tensordict with batch_size={batch_size}: the index "
            f"{index!r} indexes {dim} dimension(s) but there are only {len(batch_size)}."
        )
    if ellipsis_at is not None:
        items[ellipsis_at : ellipsis_at + 1] = [slice(None)] * max(elided, 0)
    if len(items) == 1 and type(items[0]) is not tuple:
        return items[0]
    return tuple(items)


def _dims_consumed(item: Any) -> int:
    """How many batch dimensions one index element consumes."""
    t = type(item)
    if t is int or t is slice:
        return 1
    if item is None or item is Ellipsis or isinstance(item, (bool, np.bool_)):
        return 0
    if isinstance(item, (list, range, np.ndarray)):
        item = _as_tensor_index(item)
    if isinstance(item, _Tensor) and item.dtype is torch.bool:
        return item.ndim
    return 1


def _check_int(i: int, dim: int, batch_size: torch.Size) -> None:
    if dim >= len(batch_size):
        raise IndexError(f"too many indices for a tensordict with batch_size={batch_size}.")
    size = batch_size[dim]
    if size == -1:  # a ragged dim of a lazy stack: each member checks its own size
        return
    if not -size <= i < size:
        raise IndexError(
            f"index {i} is out of bounds for batch dimension {dim} with size {size} "
            f"(batch_size={batch_size})."
        )


def _check_tensor(item: torch.Tensor, dim: int, batch_size: torch.Size) -> int:
    if item.dtype is torch.bool:
        n = item.ndim
        expected = batch_size[dim : dim + n]
        if item.shape != expected:
            raise IndexError(
                f"boolean mask of shape {item.shape} does not match the batch dimensions "
                f"{list(range(dim, dim + n))} of shape {expected} "
                f"(batch_size={batch_size})."
            )
        return dim + n
    if item.is_floating_point() or item.is_complex():
        raise IndexError(
            f"tensors used as indices must be long, int or bool tensors, got {item.dtype}."
        )
    return dim + 1


def index_names(
    index: Any, names: Sequence[str | None] | None, new_ndim: int
) -> list[str | None] | None:
    """Dimension names after indexing, or ``None`` when the result is unnamed.

    >>> import torch
    >>> index_names((0, slice(None)), ["a", "b"], 1)
    ['b']
    >>> index_names((None, slice(None)), ["a"], 2)
    [None, 'a']
    """
    if names is None:
        return None
    if type(index) is not tuple:
        index = (index,)
    out: list[str | None] = []
    dim = 0
    n_tensors = 0
    for item in index:
        t = type(item)
        if t is int:
            dim += 1
        elif t is slice:
            out.append(names[dim])
            dim += 1
        elif item is None:
            out.append(None)
        elif isinstance(item, _Tensor):
            n_tensors += 1
            if item.dtype is torch.bool:
                out.append(None)  # a mask makes a new dimension (as in the reference)
                dim += item.ndim
            else:
                if item.ndim == 0:
                    dim += 1
                    continue
                out.extend([names[dim]] * item.ndim)  # the name repeats (as the reference)
                dim += 1
    out.extend(names[dim:])
    if n_tensors > 1 or len(out) != new_ndim:
        return [None] * new_ndim
    return out


def indexed_batch_size(index: Any, batch_size: torch.Size) -> torch.Size:
    """Batch size after indexing (``index`` already normalised), without touching data.

    >>> import torch
    >>> indexed_batch_size((slice(None), torch.tensor([0, 0, 1])), torch.Size([2, 3]))
    torch.Size([2, 3])
    """
    items = index if type(index) is tuple else (index,)
    out: list[int] = []
    dim = 0
    for item in items:  # ints, slices and None need no tensor
        t = type(item)
        if t is int:
            dim += 1
        elif t is slice:
            out.append(len(range(*item.indices(batch_size[dim]))))
            dim += 1
        elif item is None:
            out.append(1)
        else:
            break
    else:
        return torch.Size(out + list(batch_size[dim:]))
    device = None
    for item in items:
        if isinstance(item, _Tensor):
            device = item.device
            break
    proxy = torch.empty((*batch_size, 0), device=device)
    return proxy[index].shape[:-1]
