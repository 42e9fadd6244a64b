"""Indexing with torch's first-class dimensions (``functorch.dim``).

``td[d0]`` binds batch dim 0 of every leaf to the first-class dim ``d0``: the leaves
become first-class-dim tensors (``functorch.dim.Tensor``, which are not ``torch.Tensor``
instances) and the tensordict keeps the batch dims left positional. ``td[d0, d1]`` binds
two, ``td[:, d0]`` the second. Names of the bound dims go.

Nothing here imports ``functorch.dim``: its objects are recognised by their module, so a
tensordict that never meets one never loads it.

>>> import torch
>>> from functorch import dim as ftdim
>>> from tensordict import TensorDict
>>> d0 = ftdim.dims(1)
>>> td = TensorDict(a=torch.zeros(3, 4, 5), batch_size=[3, 4], names=["env", "time"])
>>> out = td[d0]
>>> out.batch_size, out.names, out["a"].dims
(torch.Size([4]), ['time'], (d0,))
"""

from __future__ import annotations

from typing import Any

_MODULE = "functorch.dim"


def is_first_class(value: Any) -> bool:
    """Whether ``value`` is a first-class dim or a first-class-dim tensor.

    >>> import torch
    >>> is_first_class(torch.zeros(2))
    False
    """
    return type(value).__module__ == _MODULE


def has_dim_index(index: Any) -> bool:
    """Whether ``index`` (an index or a tuple of them) holds a first-class dim.

    >>> has_dim_index((slice(None), 0))
    False
    """
    if type(index) is tuple:
        return any(map(is_first_class, index))
    return is_first_class(index)


def bind(index: Any, batch_dims: int) -> tuple[tuple[Any, ...], list[int]]:
    """A first-class-dim ``index`` as one element per batch dim it reaches (``...``
    expanded to full slices of batch dims), and the batch dims it binds (first-class dims
    and ints; full slices keep theirs). Raises ``IndexError`` for other elements, two
    ``...`` or more elements than batch dims.

    >>> bind((slice(None), 1), 3)[1], bind((..., 0), 3)
    ([1], ((slice(None, None, None), slice(None, None, None), 0), [2]))
    """
    items = index if type(index) is tuple else (index,)
    # (identity tests: a first-class dim compares with == as a tensor does)
    ellipses = [i for i, item in enumerate(items) if item is Ellipsis]
    if len(ellipses) > 1:
        raise IndexError("an index can only have one ellipsis (...).")
    if ellipses:
        at = ellipses[0]
        fill = batch_dims - (len(items) - 1)
        items = items[:at] + (slice(None),) * max(fill, 0) + items[at + 1 :]
    if len(items) > batch_dims:
        raise IndexError(
            f"too many indices for a tensordict with {batch_dims} batch dims: {len(items)} "
            "(first-class dims index batch dims only)."
        )
    bound = []
    for pos, item in enumerate(items):
        if is_first_class(item) or type(item) is int:
            bound.append(pos)
        elif not (
            type(item) is slice and item.start is None and item.stop is None and item.step is None
        ):
            raise IndexError(
                f"a first-class-dim index may hold first-class dims, ints, full slices (:) "
                f"and one ellipsis (...); got {item!r} at position {pos}."
            )
    return items, bound


def kept(values: Any, bound: list[int]) -> list[Any]:
    """``values`` (a batch size or names) without the bound positions.

    >>> kept([3, 4, 5], [0, 2])
    [4]
    """
    return [v for i, v in enumerate(values) if i not in bound]
