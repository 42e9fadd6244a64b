"""The legacy module path ``tensordict.tensordict``, kept for code written against it.

Older tutorials import from here (``from tensordict.tensordict import TensorDict``); every
name is the same object as the one at the top level of :mod:`tensordict`.

>>> from tensordict.tensordict import TensorDict
>>> import tensordict
>>> TensorDict is tensordict.TensorDict
True
"""

from __future__ import annotations

from typing import Any

from tensordict._combine.functional import dense_stack_tds
from tensordict._dense.td import TensorDict
from tensordict._formats.from_python import make_tensordict
from tensordict._functions.pad import pad, pad_sequence
from tensordict._functions.testing import assert_allclose_td
from tensordict._keys.nested import NestedKey
from tensordict._kinds.kinds import is_tensorclass
from tensordict._lazy.stack import LazyStackedTensorDict
from tensordict._plugins.siblings import LAZY_TOP_LEVEL, sibling_attr
from tensordict._shared.key_sets import merge_tensordicts
from tensordict.base import NO_DEFAULT, TensorDictBase, is_tensor_collection
from tensordict.utils import expand_as_right, expand_right

__all__ = [
    "NO_DEFAULT",
    "LazyStackedTensorDict",
    "NestedKey",
    "TensorDict",
    "TensorDictBase",
    "assert_allclose_td",
    "dense_stack_tds",
    "expand_as_right",
    "expand_right",
    "is_tensor_collection",
    "is_tensorclass",
    "make_tensordict",
    "merge_tensordicts",
    "pad",
    "pad_sequence",
]


def __getattr__(name: str) -> Any:
    # ``MemoryMappedTensor`` and the other sibling names resolve as at the top level.
    if name not in LAZY_TOP_LEVEL:
        raise AttributeError(f"module 'tensordict.tensordict' has no attribute {name!r}")
    subpackage, attr = LAZY_TOP_LEVEL[name]
    return sibling_attr(subpackage, attr, f"tensordict.tensordict.{name}")
