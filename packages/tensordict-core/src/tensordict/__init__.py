"""tensordict: a dict of tensors that behaves like one tensor.

This is the ``tensordict-core`` distribution. Sibling distributions
(``tensordict-memmap``, ``tensordict-nn``, ``tensordict-distributed``, ``tensorclass``)
install their subpackages into this same namespace; the top-level names they own
resolve lazily (see :mod:`tensordict._plugins.siblings`).
"""

from __future__ import annotations

import pkgutil

__path__ = pkgutil.extend_path(__path__, __name__)

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the sibling names that resolve lazily (see __getattr__), for type checkers
    from tensordict.tensorclass import (  # type: ignore[import-not-found, unused-ignore]
        TensorClass as TensorClass,
    )
    from tensordict.tensorclass import (  # type: ignore[import-not-found, unused-ignore]
        TypedTensorDict as TypedTensorDict,
    )
    from tensordict.tensorclass import (  # type: ignore[import-not-found, unused-ignore]
        from_dataclass as from_dataclass,
    )
    from tensordict.tensorclass import (  # type: ignore[import-not-found, unused-ignore]
        tensorclass as tensorclass,
    )

from tensordict._plugins.siblings import LAZY_TOP_LEVEL as _LAZY_TOP_LEVEL
from tensordict._plugins.siblings import import_sibling as _import_sibling
from tensordict._plugins.siblings import sibling_attr as _sibling_attr

__version__ = "0.1.0"

from tensordict import utils
from tensordict._base import installed as _installed
from tensordict._base.attrs import TensorAttrs
from tensordict._combine.functional import (
    cat,
    dense_stack_tds,
    lazy_stack,
    maybe_dense_stack,
    stack,
)
from tensordict._dense import legacy_view as _legacy_view  # noqa: F401 - registers its torch functions / views
from tensordict._dense.td import TensorDict
from tensordict._engine import ops as _ops
from tensordict._engine import ops_batch as _ops_batch
from tensordict._engine import ops_reduce as _ops_reduce
from tensordict._formats.arrow import from_arrow, to_arrow
from tensordict._formats.from_python import fromkeys, make_tensordict
from tensordict._formats.pack import PackLayout
from tensordict._formats.pandas import from_pandas
from tensordict._formats.repr import td_repr as _td_repr
from tensordict._formats.repr_parse import parse_tensor_dict_string
from tensordict._functions import autograd as _autograd  # noqa: F401 - registers its torch functions / views
from tensordict._functions import losses as _losses  # noqa: F401 - registers its torch functions / views
from tensordict._functions.grouping import collate, group_by
from tensordict._functions.pad import pad, pad_sequence, unpad_sequence
from tensordict._functions.testing import assert_allclose_td, assert_close
from tensordict._keys.nested import NestedKey, unravel_key_to_tuple
from tensordict._kinds.kinds import default_is_leaf, is_leaf_nontensor, is_tensorclass
from tensordict._lazy.stack import LazyStackedTensorDict
from tensordict._leaves.collection import TensorCollection
from tensordict._leaves.nontensor import (
    MetaData,
    NonTensorData,
    NonTensorDataBase,
    NonTensorStack,
    is_non_tensor,
)
from tensordict._leaves.unbatched import UnbatchedTensor
from tensordict._shared import install as _shared_install
from tensordict._shared.key_sets import merge_tensordicts
from tensordict._torch import pytree as _pytree
from tensordict._util.legacy import lazy_legacy, set_lazy_legacy
from tensordict._util.modes import (
    capture_non_tensor_stack,
    list_to_stack,
    set_capture_non_tensor_stack,
    set_list_to_stack,
)
from tensordict._util.printoptions import get_printoptions, set_printoptions
from tensordict._wire.read import from_consolidated
from tensordict.base import (
    TensorDictBase,
    get_defaults_to_none,
    is_tensor_collection,
    set_get_defaults_to_none,
)
from tensordict.utils import (
    KEY_SEPARATOR,
    is_batchedtensor,
    is_bool,
    is_floating,
    is_inexact,
    is_integer,
    unravel_key,
    unravel_key_list,
)

# on the classes TensorDictBase derives from (see tensordict._base.installed)
_shared_install.install(TensorDictBase, _installed.SharedMethods)
_ops.install(_installed.ElementwiseMethods)
_ops_reduce.install(_installed.ReductionMethods)
_ops_batch.install(_installed.BatchMethods)
TensorDictBase.__repr__ = _td_repr  # type: ignore[method-assign,assignment]
_pytree.register_defaults()

# Top-level conversions (the classmethods of TensorDict, bound).


def from_dict(
    d: Any,
    *,
    auto_batch_size: bool | None = None,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Any = None,
    names: Any = None,
) -> TensorDict:
    """A tensordict from a (nested) dictionary (see :meth:`TensorDict.from_dict`).

    >>> import torch
    >>> from_dict({"a": torch.zeros(3, 2)}, auto_batch_size=True).batch_size
    torch.Size([3, 2])
    """
    return TensorDict.from_dict(
        d,
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        device=device,
        batch_size=batch_size,
        names=names,
    )


from_any = TensorDict.from_any
from_namedtuple = TensorDict.from_namedtuple
from_tuple = TensorDict.from_tuple
from_struct_array = TensorDict.from_struct_array
from_pytree = TensorDict.from_pytree

__all__ = [
    "KEY_SEPARATOR",
    "LazyStackedTensorDict",
    "MetaData",
    "NestedKey",
    "NonTensorDataBase",
    "NonTensorData",
    "NonTensorStack",
    "TensorDict",
    "PackLayout",
    "TensorAttrs",
    "TensorCollection",
    "TensorDictBase",
    "UnbatchedTensor",
    "assert_allclose_td",
    "assert_close",
    "capture_non_tensor_stack",
    "cat",
    "collate",
    "default_is_leaf",
    "dense_stack_tds",
    "from_any",
    "from_arrow",
    "from_consolidated",
    "from_dict",
    "from_namedtuple",
    "from_pandas",
    "from_pytree",
    "from_struct_array",
    "from_tuple",
    "fromkeys",
    "get_defaults_to_none",
    "get_printoptions",
    "group_by",
    "is_batchedtensor",
    "is_bool",
    "is_floating",
    "is_inexact",
    "is_integer",
    "is_leaf_nontensor",
    "is_non_tensor",
    "is_tensor_collection",
    "is_tensorclass",
    "lazy_legacy",
    "lazy_stack",
    "list_to_stack",
    "make_tensordict",
    "maybe_dense_stack",
    "merge_tensordicts",
    "pad",
    "pad_sequence",
    "parse_tensor_dict_string",
    "set_capture_non_tensor_stack",
    "set_get_defaults_to_none",
    "set_lazy_legacy",
    "set_list_to_stack",
    "set_printoptions",
    "stack",
    "to_arrow",
    "unravel_key",
    "unravel_key_list",
    "unravel_key_to_tuple",
    "unpad_sequence",
    "utils",
]


def __getattr__(name: str) -> Any:
    try:
        subpackage, attr = _LAZY_TOP_LEVEL[name]
    except KeyError:
        raise AttributeError(f"module 'tensordict' has no attribute {name!r}") from None
    if name == subpackage:
        # ``tensordict.memmap`` / ``tensordict.tensorclass`` name both a subpackage and a
        # function: the subpackage module is callable and forwards to the function, so
        # returning the module keeps ``import tensordict.tensorclass`` and the call working
        # whatever is accessed first.
        value = _import_sibling(subpackage, f"tensordict.{name}")
    else:
        value = _sibling_attr(subpackage, attr, f"tensordict.{name}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_TOP_LEVEL))
