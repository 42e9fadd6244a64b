"""Tensordicts rebuilt from their leaves in traced code (``torch.compile``,
``torch.export``), where the eager rules of :mod:`tensordict._torch.pytree_td` cannot run:
Dynamo cannot read a tensor's vmap level, and comparing a traced size with the recorded
one would pin it. The batch size comes from the leaves' shapes instead, and from what
``torch.vmap`` is doing (:data:`VMAP_MODE`, kept by :mod:`tensordict._torch.vmap_dims`).

A spec is a :class:`~tensordict._torch.pytree_td.LevelSpec` tuple: ``(keys, layout,
batch_size, device, names, carried, level, size, plain, locked)``.

>>> import torch
>>> from tensordict import TensorDict
>>> compiled = torch.compile(lambda td: td.apply(torch.sin), backend="eager", fullgraph=True)
>>> compiled(TensorDict(a=torch.zeros(3), batch_size=[3])).batch_size
torch.Size([3])
"""

from __future__ import annotations

from typing import Any

import torch

from tensordict._kinds import kinds as _kinds

_Tensor = torch.Tensor

#: what ``torch.vmap`` is doing: the last entry's first item is "enter" while inputs enter
#: a level, "out" while outputs leave it ("in"/"full": computing dims)
VMAP_MODE: list[tuple[str, int]] = []


def compiled_tree(cls: Any, spec: Any, children: list[Any]) -> Any:
    """A plain tree rebuilt in compiled code, from its leaves' shapes (Dynamo cannot read
    vmap levels): entering a ``torch.vmap`` level removes the batch dim the leaves lost,
    leaving it inserts the dim they gained, anything else keeps the batch size; ``None``
    when the shapes say otherwise (the eager rules then apply)."""
    if not all(isinstance(child, _Tensor) for child in children):
        return None
    bs = tuple(spec[2])
    nb = len(bs)
    shape = tuple(children[0].shape)
    mode = VMAP_MODE[-1][0] if VMAP_MODE else None
    new: tuple[Any, ...] | None = None
    if mode == "enter":
        for d in range(nb):
            cand = bs[:d] + bs[d + 1 :]
            if shape[: nb - 1] == cand:
                new = cand
                break
    elif mode == "out":
        for d in range(min(nb, len(shape) - 1) + 1):
            if shape[:d] == bs[:d] and shape[d + 1 : nb + 1] == bs[d:]:
                new = bs[:d] + (shape[d],) + bs[d:]
                break
    elif shape[:nb] == bs:
        new = bs
    if new is None:
        return None
    change = len(new) - nb  # -1, 0 or 1 dim, the same for every nested level
    return _sized_level(cls, spec, children, 0, new, change)


def _sized_level(
    cls: Any, spec: Any, children: list[Any], pos: int, top: tuple[Any, ...], change: int
) -> Any:
    """A plain level whose batch size starts with ``top`` (the top level's new one) and
    goes on with the recorded sizes past the top's."""
    keys, layout, bs, device, _, _, _, size, _, _ = spec
    ntop = len(top) - change
    new = torch.Size(top + tuple(bs[ntop:]))
    if layout is None:
        store = dict(zip(keys, children[pos : pos + size], strict=True))
    else:
        store = {}
        for key, sub in layout:
            if sub is None:
                store[key] = children[pos]
                pos += 1
            else:
                store[key] = _sized_level(_kinds.Dense, sub, children, pos, top, change)
                pos += sub[7]
    return cls._new_unsafe(store, new, device if change == 0 else None, None)


def symbolic(first: torch.Tensor, spec: Any) -> bool:
    """Whether the leaf ``first`` has a symbolic size among the batch dims (traced by
    ``torch.export``/``torch.compile`` with dynamic shapes), or the spec a size recorded
    while tracing (a ``SymInt``, or ``-1`` where it was saved)."""
    bs = spec[2]
    if not bs:
        return False
    for d in bs:  # a SymInt recorded while tracing, or -1 saved for one
        if type(d) is not int or d == -1:
            return True
    return not all(type(d) is int for d in first.shape[: len(bs)])


def traced_level(cls: Any, spec: Any, children: list[Any], pos: int) -> Any:
    """A plain level (and its merged levels) whose leaves have symbolic batch sizes: the
    batch size is read from its first leaf, not compared with the recorded one (a
    comparison would pin the dynamic size to the example's)."""
    keys, layout, bs, device, _, _, _, size, _, _ = spec
    nb = len(bs)
    if layout is None:
        store = dict(zip(keys, children[pos : pos + size], strict=True))
        first = children[pos] if size else None
    else:
        store = {}
        first = None
        for key, sub in layout:
            if sub is None:
                value = children[pos]
                pos += 1
                if first is None:
                    first = value
            else:
                value = traced_level(_kinds.Dense, sub, children, pos)
                pos += sub[7]
                if first is None:
                    first = _ShapeOf(value.batch_size)
            store[key] = value
    new = bs if first is None else torch.Size(first.shape[:nb])
    return cls._new_unsafe(store, new, device, None)


class _ShapeOf:
    """A nested level standing for a leaf: its batch size is a prefix of the parent's."""

    __slots__ = ("shape",)

    def __init__(self, shape: torch.Size) -> None:
        self.shape = shape
