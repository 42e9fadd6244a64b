"""Packing every leaf of a tensordict into one feature tensor, and back.

``flat, layout = td.pack()`` concatenates the leaves, each flattened after the batch
dimensions, in sorted key order, into a tensor of shape ``(*batch_size, F)``;
:class:`PackLayout` records where each leaf went and :meth:`PackLayout.unpack` rebuilds
a tensordict whose leaves are views of ``flat`` — for a batch that was indexed, too.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from tensordict._keys.nested import NestedKey, unravel_key
from tensordict._kinds import kinds as _kinds
from tensordict._leaves.nontensor import is_non_tensor

__all__ = ["PackLayout", "pack"]


@dataclasses.dataclass(frozen=True)
class PackLayout:
    """Where each leaf of a packed tensordict lives in the packed tensor.

    Frozen, hashable and compared by value. ``keys`` are the leaf keys in column order,
    ``shapes`` their feature shapes (after the batch dims), ``dim`` the packed dimension
    counted from the end, ``nested`` the nested tensordicts (key, batch shape after the
    root's batch dims, class), ``device`` and ``cls`` those of the packed tensordict.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> flat, layout = TensorDict(p=torch.zeros(5), v=torch.ones(5, 3), batch_size=[5]).pack()
    >>> layout.keys, layout.offsets, layout.numel
    (('p', 'v'), (0, 1), 4)
    """

    keys: tuple[NestedKey, ...]
    shapes: tuple[torch.Size, ...]
    dim: int = -1
    nested: tuple[tuple[NestedKey, torch.Size, type | None], ...] = ()
    device: torch.device | None = None
    cls: type | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shapes", tuple(torch.Size(s) for s in self.shapes))
        object.__setattr__(self, "nested", tuple((k, torch.Size(s), c) for k, s, c in self.nested))

    @property
    def offsets(self) -> tuple[int, ...]:
        """The first column of each leaf."""
        out, pos = [], 0
        for shape in self.shapes:
            out.append(pos)
            pos += math.prod(shape)
        return tuple(out)

    @property
    def numel(self) -> int:
        """The number of columns of the packed tensor."""
        return sum(math.prod(s) for s in self.shapes)

    def unpack(self, flat: torch.Tensor) -> Any:
        """A tensordict whose leaves are views of ``flat`` (its batch size: ``flat``'s
        shape without the packed dimension).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(p=torch.zeros(5), v=torch.ones(5, 3), batch_size=[5])
        >>> flat, layout = td.pack()
        >>> out = layout.unpack(flat[:2])
        >>> out["v"].shape, out["p"].data_ptr() == flat.data_ptr()
        (torch.Size([2, 3]), True)
        """
        d = self.dim % flat.ndim
        if flat.shape[d] != self.numel:
            raise ValueError(
                f"PackLayout.unpack: the packed dim {self.dim} of the tensor of shape "
                f"{tuple(flat.shape)} has {flat.shape[d]} columns, the layout {self.numel}."
            )
        moved = flat.movedim(d, -1)
        batch = moved.shape[:-1]
        out = _kinds.Dense(batch_size=batch, device=flat.device if self.device else None)
        for key, sub_bs, _cls in self.nested:
            out.set(key, _kinds.Dense(batch_size=batch + sub_bs))
        for key, shape, start in zip(self.keys, self.shapes, self.offsets, strict=True):
            n = math.prod(shape)
            out.set(
                key,
                moved[..., start : start + n].unflatten(-1, shape) if shape else moved[..., start],
            )
        return out


def pack(
    td: Any, dim: int = -1, *, layout: PackLayout | None = None
) -> tuple[torch.Tensor, PackLayout]:
    """The body of ``TensorDictBase.pack`` (see there)."""
    nb = td.batch_dims
    d = dim if dim < 0 else dim - (nb + 1)  # counted from the end
    if not -(nb + 1) <= d < 0:
        raise IndexError(f"pack: dim={dim} is out of range for {nb} batch dimension(s).")
    leaves = {}
    nested = []
    for key, value in td.items(include_nested=True, leaves_only=False, sort=True):
        if is_non_tensor(value):
            raise TypeError(
                f"pack: entry {key!r} is non-tensor data; drop it with filter_non_tensor_data()."
            )
        if isinstance(value, torch.Tensor):
            leaves[key] = value
        else:
            nested.append((key, value.batch_size[nb:], None))
    keys = tuple(leaves) if layout is None else layout.keys
    if layout is not None:
        if layout.dim != d:
            raise ValueError(f"pack: dim={dim} does not match the layout's dim {layout.dim}.")
        extra = set(leaves) - set(keys)
        if extra or any(k not in leaves for k in keys):
            raise KeyError(
                f"pack: the leaves {sorted(map(str, leaves))} do not match the layout's keys "
                f"{[str(k) for k in keys]}."
            )
    columns = []
    shapes = []
    for i, key in enumerate(keys):
        value = leaves[key]
        shape = value.shape[nb:]
        if layout is not None and shape != layout.shapes[i]:
            raise ValueError(
                f"pack: entry {unravel_key(key)!r} has feature shape {tuple(shape)}, the "
                f"layout {tuple(layout.shapes[i])}."
            )
        shapes.append(shape)
        columns.append(value.reshape(*td.batch_size, -1))
    dtypes = {c.dtype for c in columns}
    if len(dtypes) > 1:
        raise TypeError(f"pack: the leaves must share one dtype, got {sorted(map(str, dtypes))}.")
    flat = torch.cat(columns, -1) if columns else torch.zeros(*td.batch_size, 0)
    if d != -1:
        flat = flat.movedim(-1, d).contiguous()
    elif not flat.is_contiguous():
        flat = flat.contiguous()
    if layout is None:
        layout = PackLayout(
            tuple(k for k in keys), tuple(shapes), d, tuple(nested), td.device, None
        )
    return flat, layout
