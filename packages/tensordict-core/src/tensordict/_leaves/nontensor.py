"""Non-tensor leaves: Python values carried through tensordict operations.

The one-value leaves (:class:`NonTensorData`, :class:`MetaData`) are defined in
:mod:`tensordict._leaves.nontensor_data`, :class:`NonTensorStack` in
:mod:`tensordict._leaves.nontensor_stack` (its ragged form, for leaves of different batch sizes,
in :mod:`tensordict._leaves.nontensor_ragged`), their operations as tensors (comparisons, stacking,
``torch`` functions) in :mod:`tensordict._leaves.nontensor_ops`; this module gathers them for
the rest of the library and adds the kind checks.
"""

from __future__ import annotations

from typing import Any

from tensordict._leaves.nontensor_data import (
    DATA_TYPES,
    NON_TENSOR_TYPES,
    MetaData,
    NonTensorData,
    NonTensorDataBase,
    batch_shape_after,
)
from tensordict._leaves.nontensor_ops import cat_non_tensor, stack_non_tensor, write_non_tensor
from tensordict._leaves.nontensor_ragged import RaggedNonTensorStack
from tensordict._leaves.nontensor_stack import NonTensorStack
from tensordict._plugins import forwarders as _forwarders

for _cls in (NonTensorDataBase, NonTensorStack):  # stack.memmap(prefix) and the like
    _forwarders.install(_cls, _forwarders.NON_TENSOR_FORWARDERS)
del _cls

#: Every non-tensor leaf type (``MetaData`` is a ``NonTensorData``).
NON_TENSOR: tuple[type[NonTensorDataBase], type[NonTensorStack]] = (
    NonTensorDataBase,
    NonTensorStack,
)


def is_non_tensor(data: Any) -> bool:
    """Whether ``data`` (an instance or a class) is a non-tensor leaf.

    >>> from tensordict import MetaData, NonTensorData, NonTensorStack, is_non_tensor
    >>> is_non_tensor(NonTensorData("a")), is_non_tensor(NonTensorStack("a", "b"))
    (True, True)
    >>> is_non_tensor(1), is_non_tensor(MetaData)
    (False, True)
    """
    cls = data if isinstance(data, type) else type(data)
    return issubclass(cls, NON_TENSOR)


def unwrap_non_tensor(value: Any) -> Any:
    """The Python value(s) of a non-tensor leaf (a :class:`~tensordict.utils.LinkedList`
    for stacks, which writes item assignments back); other values as they are.

    >>> from tensordict import NonTensorData, NonTensorStack
    >>> unwrap_non_tensor(NonTensorData("a")), unwrap_non_tensor(NonTensorStack("a", "b"))
    ('a', LinkedList(['a', 'b']))
    """
    if isinstance(value, NonTensorDataBase):
        return value._data
    if isinstance(value, NonTensorStack):
        return value._linked_list()
    return value


__all__ = [
    "DATA_TYPES",
    "NON_TENSOR",
    "NON_TENSOR_TYPES",
    "MetaData",
    "NonTensorData",
    "NonTensorDataBase",
    "NonTensorStack",
    "RaggedNonTensorStack",
    "batch_shape_after",
    "cat_non_tensor",
    "is_non_tensor",
    "stack_non_tensor",
    "unwrap_non_tensor",
    "write_non_tensor",
]
