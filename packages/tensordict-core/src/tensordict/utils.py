"""Public helpers of ``tensordict.utils``."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any, Literal, overload

import torch

from tensordict._keys import NestedKey, unravel_key, unravel_key_list
from tensordict._nontensor import is_non_tensor
from tensordict.base import TensorDictBase, is_tensor_collection

__all__ = [
    "NestedKey",
    "expand_as_right",
    "expand_right",
    "is_batchedtensor",
    "is_non_tensor",
    "is_tensor_collection",
    "isin",
    "logger",
    "remove_duplicates",
    "unravel_key",
    "unravel_key_list",
]


#: The library's logger (``logging.getLogger("tensordict")``); its level comes from the
#: ``TD_LOGGING_LEVEL`` environment variable (default ``INFO``).
logger = logging.getLogger("tensordict")
logger.setLevel(os.environ.get("TD_LOGGING_LEVEL", "INFO").upper())
logger.addHandler(logging.NullHandler())


@overload
def expand_as_right(tensor: torch.Tensor, dest: torch.Tensor | TensorDictBase) -> torch.Tensor: ...
@overload
def expand_as_right(
    tensor: TensorDictBase, dest: torch.Tensor | TensorDictBase
) -> TensorDictBase: ...
def expand_as_right(tensor: Any, dest: Any) -> Any:
    """Expand ``tensor`` to ``dest``'s shape by adding trailing singleton dimensions.

    >>> import torch
    >>> expand_as_right(torch.tensor([1, 2]), torch.zeros(2, 3)).tolist()
    [[1, 1, 1], [2, 2, 2]]
    """
    if dest.ndim < tensor.ndim:
        raise RuntimeError(
            f"expand_as_right: tensor of shape {tuple(tensor.shape)} has more dimensions than "
            f"the destination shape {tuple(dest.shape)}."
        )
    if dest.shape[: tensor.ndim] != tensor.shape:
        raise RuntimeError(
            f"expand_as_right: the leading dimensions of the destination {tuple(dest.shape)} "
            f"must equal the tensor's shape {tuple(tensor.shape)}."
        )
    for _ in range(dest.ndim - tensor.ndim):
        tensor = tensor.unsqueeze(-1)
    return tensor.expand(dest.shape)


def expand_right(tensor: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """Expand ``tensor`` to ``shape`` by adding trailing singleton dimensions.

    >>> import torch
    >>> expand_right(torch.tensor([1, 2]), (2, 2)).tolist()
    [[1, 1], [2, 2]]
    """
    size = torch.Size(shape)
    tensor = tensor.reshape(tensor.shape + (1,) * (len(size) - tensor.ndim))
    return tensor.expand(size)


def isin(
    input: TensorDictBase, reference: TensorDictBase, key: NestedKey, dim: int = 0
) -> torch.Tensor:
    """Which elements of ``input`` (along ``dim``) have their ``key`` entry in ``reference``.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> a = TensorDict({"k": torch.tensor([1, 2, 3])}, [3])
    >>> b = TensorDict({"k": torch.tensor([3, 1])}, [2])
    >>> isin(a, b, "k").tolist()
    [True, False, True]
    """
    x: torch.Tensor = input.get(key)
    ref: torch.Tensor = reference.get(key)
    x = x.movedim(dim, 0).reshape(x.shape[dim], -1)
    ref = ref.movedim(dim, 0).reshape(ref.shape[dim], -1)
    return (x.unsqueeze(1) == ref.unsqueeze(0)).all(-1).any(-1)


@overload
def remove_duplicates(
    input: TensorDictBase, key: NestedKey, dim: int = 0, *, return_indices: Literal[False] = False
) -> TensorDictBase: ...
@overload
def remove_duplicates(
    input: TensorDictBase, key: NestedKey, dim: int = 0, *, return_indices: Literal[True]
) -> tuple[TensorDictBase, torch.Tensor]: ...
@overload
def remove_duplicates(
    input: TensorDictBase, key: NestedKey, dim: int = 0, *, return_indices: bool
) -> TensorDictBase | tuple[TensorDictBase, torch.Tensor]: ...
def remove_duplicates(
    input: TensorDictBase, key: NestedKey, dim: int = 0, *, return_indices: bool = False
) -> TensorDictBase | tuple[TensorDictBase, torch.Tensor]:
    """Keep the first element of each group sharing the same ``key`` value along ``dim``.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"k": torch.tensor([1, 2, 1, 3])}, [4])
    >>> remove_duplicates(td, "k")["k"].tolist()
    [1, 2, 3]
    """
    values = input.get(key)
    flat = values.movedim(dim, 0).reshape(values.shape[dim], -1)
    _, inverse = torch.unique(flat, dim=0, return_inverse=True)
    first = torch.full(
        (int(inverse.max()) + 1 if inverse.numel() else 0,), flat.shape[0], dtype=torch.long
    )
    first = first.scatter_reduce(0, inverse, torch.arange(flat.shape[0]), reduce="amin")
    keep = first.sort().values
    index = (slice(None),) * dim + (keep,)
    out = input[index]
    return (out, keep) if return_indices else out


def is_batchedtensor(tensor: object) -> bool:
    """Whether ``tensor`` is a functorch batched tensor (inside ``torch.vmap``).

    >>> import torch
    >>> is_batchedtensor(torch.zeros(1))
    False
    """
    if not isinstance(tensor, torch.Tensor):
        return False
    return bool(torch._C._functorch.is_batchedtensor(tensor))
