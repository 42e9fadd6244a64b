"""Indexing a ``TensorDict`` with torch's first-class dimensions (``td[d0]``): the
dense side of :mod:`tensordict._keys.first_class`."""

from __future__ import annotations

from typing import Any

import torch

from tensordict._keys import first_class
from tensordict._leaves.nontensor import NonTensorData
from tensordict._leaves.unbatched import UNBATCHED_TYPES
from tensordict.base import TensorDictBase

_Tensor = torch.Tensor


def index_first_class(td: Any, index: Any) -> Any:
    """``td[d0, ...]`` for a dense ``td``: every leaf indexed the same way (leaves become
    first-class-dim tensors), the bound batch dims leave the batch size and the names.

    >>> import torch
    >>> from functorch import dim as ftdim
    >>> from tensordict import TensorDict
    >>> d0 = ftdim.dims(1)
    >>> index_first_class(TensorDict(a=torch.zeros(3, 2), batch_size=[3]), d0)["a"].dims
    (d0,)
    """
    bs = td._batch_size
    index, bound = first_class.bind(index, len(bs))  # "..." reaches batch dims only
    new_bs = torch.Size(first_class.kept(bs, bound))
    out: dict[str, Any] = {}
    for key, value in td._tensordict.items():
        if type(value) in UNBATCHED_TYPES:
            out[key] = value._with(new_bs)
        elif isinstance(value, _Tensor) or first_class.is_first_class(value):
            if getattr(value, "_is_memmap_tensor", False):
                raise ValueError(
                    f"Using first class dimension indices with MemoryMappedTensor entries is "
                    f"not supported (entry {key!r}): index a copy in memory "
                    f"(td.clone(), or td.to_tensordict())."
                )
            out[key] = value[index]
        elif isinstance(value, NonTensorData):
            out[key] = value._with(new_bs, td._device)
        elif isinstance(value, TensorDictBase):
            out[key] = value[index]
        else:
            raise ValueError(
                f"cannot index entry {key!r} ({type(value).__name__}) with first-class "
                f"dims: one value per element cannot take a first-class dim."
            )
    names = None
    if td._names is not None:
        names = first_class.kept(td._names, bound)
        if all(n is None for n in names):
            names = None
    return type(td)._new_unsafe(out, new_bs, td._device, names)
