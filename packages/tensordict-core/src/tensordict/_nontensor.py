"""Non-tensor leaves: a Python value carried through tensordict operations.

A ``NonTensorData`` wraps one value (a string, a number, any object) that is shared by
every element of the tensordict's batch. Shape operations change its batch size and
leave the value as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from tensordict._shape import parse_batch_size, parse_device


class NonTensorData:
    """A non-tensor value stored in a tensordict, with the batch size of its parent.

    >>> from tensordict import TensorDict
    >>> td = TensorDict({"label": "cat"}, batch_size=[3])
    >>> td["label"]
    'cat'
    >>> td[1:]["label"], td.get_non_tensor("label")
    ('cat', 'cat')
    >>> NonTensorData("cat", batch_size=[2])
    NonTensorData(data=cat, batch_size=torch.Size([2]), device=None)
    """

    __slots__ = ("data", "_batch_size", "_device")

    data: Any
    _batch_size: torch.Size
    _device: torch.device | None

    def __init__(
        self,
        data: Any,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: torch.device | str | int | None = None,
        names: Sequence[str | None] | None = None,
    ) -> None:
        if isinstance(data, NonTensorData):
            data = data.data
        self.data = data
        self._batch_size = parse_batch_size(batch_size)
        self._device = parse_device(device)

    @classmethod
    def _make(cls, data: Any, batch_size: torch.Size, device: torch.device | None) -> NonTensorData:
        out = cls.__new__(cls)
        out.data = data
        out._batch_size = batch_size
        out._device = device
        return out

    @property
    def batch_size(self) -> torch.Size:
        """The batch size (that of the tensordict holding the value)."""
        return self._batch_size

    shape = batch_size

    @property
    def device(self) -> torch.device | None:
        """The device of the tensordict holding the value (informative only)."""
        return self._device

    @property
    def batch_dims(self) -> int:
        """Number of batch dimensions."""
        return len(self._batch_size)

    def tolist(self) -> Any:
        """The value, repeated over the batch dimensions as nested lists.

        >>> NonTensorData("x", batch_size=[2]).tolist()
        ['x', 'x']
        """
        out = self.data
        for size in reversed(self._batch_size):
            out = [out] * size
        return out

    def _with(self, batch_size: torch.Size, device: torch.device | None = None) -> NonTensorData:
        return NonTensorData._make(
            self.data, batch_size, self._device if device is None else device
        )

    def clone(self, recurse: bool = True) -> NonTensorData:
        """A new wrapper around the same value."""
        return self._with(self._batch_size)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NonTensorData):
            return bool(self.data == other.data and self._batch_size == other._batch_size)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"NonTensorData(data={self.data}, batch_size={self._batch_size}, device={self._device})"
        )


def is_non_tensor(obj: Any) -> bool:
    """Whether ``obj`` (an instance or a class) is a non-tensor leaf.

    >>> is_non_tensor(NonTensorData("a")), is_non_tensor(1)
    (True, False)
    """
    cls = obj if isinstance(obj, type) else type(obj)
    return issubclass(cls, NonTensorData)
