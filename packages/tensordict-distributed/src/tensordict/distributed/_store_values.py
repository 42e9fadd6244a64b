"""How a store's entries and rows are written: JSON for non-tensor values (nothing is
pickled), runs of consecutive rows, in-place fits, and the test that tells a key from rows.
Used by :mod:`._store` and :mod:`._store_rows` (and the lazy store)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import torch

from tensordict._plugins.api import (
    InplaceWriteError,
    NonTensorData,
    NonTensorStack,
    write_inplace,
)
from tensordict.distributed import _redis


def _is_json(value: Any) -> bool:
    try:
        return json.loads(json.dumps(value)) == value
    except (TypeError, ValueError):
        return False


def _runs(rows: Sequence[int]) -> list[tuple[int, int]]:
    """Consecutive rows grouped into ``(start, stop)`` runs, in order.

    >>> _runs([3, 4, 5, 1, 2, 7])
    [(3, 6), (1, 3), (7, 8)]
    """
    out: list[tuple[int, int]] = []
    for r in rows:
        if out and out[-1][1] == r:
            out[-1] = (out[-1][0], r + 1)
        else:
            out.append((r, r + 1))
    return out


def non_tensor_stack(flat: Sequence[Any], shape: Sequence[int], device: Any) -> Any:
    """A :class:`NonTensorStack` of ``shape`` holding the flat (C order) values ``flat``."""
    if not shape:
        raise ValueError("a non-tensor stack has at least one dimension.")
    if math.prod(shape) == 0:
        return NonTensorData(None, batch_size=list(shape), device=device).maybe_to_stack()
    return NonTensorStack.from_list(_redis.nest(flat, shape), device=device, ndim=len(shape))


def _element_json(path_repr: str, value: Any) -> str:
    if not _is_json(value):
        raise TypeError(
            f"TensorDictStore: the value {value!r} at {path_repr} is not JSON data; "
            "non-tensor values are stored as JSON (nothing is pickled). Nothing was written."
        )
    return json.dumps(value)


def is_key(index: Any) -> bool:
    """Whether ``store[index]`` names an entry (a string or a tuple of strings) rather
    than rows."""
    return isinstance(index, str) or (
        isinstance(index, tuple) and bool(index) and all(isinstance(i, str) for i in index)
    )


def fit_in_place(path: Any, value: torch.Tensor, dtype: torch.dtype, shape: Any) -> torch.Tensor:
    """``value`` with the ``dtype`` and ``shape`` of the entry at ``path`` it is written
    into in place, as core writes into a tensordict in memory (broadcast and cast), else
    :class:`InplaceWriteError`, raised before anything is written."""
    fitted = torch.empty(tuple(shape), dtype=dtype)
    try:
        write_inplace(path, fitted, value, False)
    except InplaceWriteError as err:
        raise InplaceWriteError(f"TensorDictStore: nothing was written. {err}") from None
    return fitted
