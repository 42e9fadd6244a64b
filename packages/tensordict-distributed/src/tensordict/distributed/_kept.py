"""What a repeated operation learned about an object, kept while the object lives.

Transfers and reductions of the same tensordict repeat (every training step): the
layout worked out the first time (what to pack, where to land, how to bucket) is kept
per tensordict, weakly referenced, and reused while the tensordict's leaves are the same
objects with the same layout (:func:`layout_of`); each user checks that itself.
"""

from __future__ import annotations

import weakref
from typing import Any, Generic, TypeVar

import torch

from tensordict._plugins.api import NonTensorData

T = TypeVar("T")


class Kept(Generic[T]):
    """A value per live object (by identity), dropped when the object is collected.

    >>> class Box: pass
    >>> kept, box = Kept[str](), Box()
    >>> kept.put(box, "learned"); kept.get(box)
    'learned'
    >>> del box; len(kept._values)
    0
    """

    def __init__(self) -> None:
        self._values: dict[int, tuple[Any, T]] = {}

    def get(self, obj: Any) -> T | None:
        entry = self._values.get(id(obj))
        if entry is None or entry[0]() is not obj:
            return None
        return entry[1]

    def put(self, obj: Any, value: T) -> None:
        """Keep ``value`` for ``obj`` (nothing when ``obj`` cannot be weakly referenced)."""
        key = id(obj)
        try:
            ref = weakref.ref(obj, lambda _, key=key: self._values.pop(key, None))
        except TypeError:
            return
        self._values[key] = (ref, value)


def layout_of(obj: Any) -> Any:
    """What a kept layout depends on: a tensor's shape, stride, dtype and memory (its
    address changes when ``.data`` or ``set_`` gives it other memory in place: views
    kept of it would be stale), a non-tensor entry's value."""
    if isinstance(obj, torch.Tensor):
        return (obj.shape, obj.stride(), obj.dtype, obj.device, obj.data_ptr())
    if isinstance(obj, NonTensorData):
        return ("value", obj.data, obj.batch_size)
    return ("values", obj.tolist(), obj.batch_size)
