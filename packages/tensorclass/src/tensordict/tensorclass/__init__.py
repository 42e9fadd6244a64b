"""tensordict.tensorclass: dataclasses of tensors (the ``tensorclass`` distribution).

* :class:`TensorClass` (subclass it) and the :func:`tensorclass` decorator make a class
  with annotated fields whose instances behave like a :class:`~tensordict.TensorDict`;
  both are declared with :func:`typing.dataclass_transform`, so type checkers and IDEs
  see the fields and the constructor without stubs;
* :class:`TypedTensorDict` is the same field machinery as a tensordict with ``td["key"]``
  access;
* :func:`from_dataclass` converts dataclasses; :func:`is_tensorclass` tells them apart.

It depends on ``tensordict-core`` only.

Once this subpackage is imported, Python binds ``tensordict.tensorclass`` to the
subpackage itself, shadowing the top-level decorator of the same name. So that
``@tensordict.tensorclass`` and ``from tensordict import tensorclass`` keep working as a
decorator, this module is callable: calling it calls its ``tensorclass`` attribute.
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any

from tensordict import (
    LazyStackedTensorDict,
    MetaData,
    NonTensorData,
    NonTensorStack,
    TensorAttrs,
    TensorCollection,
    TensorDict,
    TensorDictBase,
    is_tensor_collection,
)
from tensordict import is_non_tensor as _is_non_tensor
from tensordict.base import NO_DEFAULT
from tensordict.utils import expand_as_right

__version__ = "0.1.0"

_DISTRIBUTION = "tensorclass"

from dataclasses import is_dataclass  # noqa: E402

from tensordict.tensorclass._tensorclass import (  # noqa: E402
    TensorClass,
    from_dataclass,
    is_tensorclass,
    tensorclass,
)
from tensordict.tensorclass._typed import TypedTensorDict  # noqa: E402

__all__ = [
    "NO_DEFAULT",
    "LazyStackedTensorDict",
    "MetaData",
    "NonTensorData",
    "NonTensorStack",
    "TensorAttrs",
    "TensorClass",
    "TensorCollection",
    "TensorDict",
    "TensorDictBase",
    "TypedTensorDict",
    "expand_as_right",
    "from_dataclass",
    "is_dataclass",
    "is_non_tensor",
    "is_tensor_collection",
    "is_tensorclass",
    "tensorclass",
]


def is_non_tensor(obj: Any) -> bool:
    """Whether ``obj`` (an instance or a class) is a non-tensor leaf
    (:class:`NonTensorData`, :class:`MetaData` or :class:`NonTensorStack`).

    >>> from tensordict.tensorclass import NonTensorData, is_non_tensor
    >>> is_non_tensor(NonTensorData("a")), is_non_tensor("a"), is_non_tensor(NonTensorData)
    (True, False, True)
    """
    return _is_non_tensor(obj)


#: Core names that the reference also exports from this module and that core does not
#: provide yet: read from ``tensordict`` when asked, so they appear here as core adds them.
_FROM_CORE = ("NonTensorDataBase", "capture_non_tensor_stack", "list_to_stack")


def __getattr__(name: str) -> Any:
    if name in _FROM_CORE:
        import tensordict

        return getattr(tensordict, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _CallableModule(types.ModuleType):
    """A module that forwards calls to its ``tensorclass`` attribute (the decorator), and
    shows the decorator's signature to :func:`inspect.signature`."""

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.__dict__["tensorclass"])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            decorator = self.__dict__["tensorclass"]
        except KeyError:
            raise NotImplementedError(
                f"tensordict.tensorclass(...): the installed '{_DISTRIBUTION}' distribution "
                "does not provide the 'tensorclass' decorator yet"
            ) from None
        return decorator(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
