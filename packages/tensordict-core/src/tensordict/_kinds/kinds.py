"""The concrete kinds of tensordict, bound once: code asks ``isinstance`` against them.

This is a bottom module: it imports nothing of ``tensordict`` but the non-tensor leaf
types and the ``TensorCollection`` marker. The classes are bound by the modules that define them, when ``import tensordict``
imports those (:mod:`tensordict.base` binds :data:`Base`, :mod:`tensordict._dense.td`
:data:`Dense`, :mod:`tensordict._lazy.stack` :data:`Lazy`), so any module may test or build a
kind without importing the module defining it — that import would close a circle:

* ``isinstance(x, _kinds.Base)`` — any tensordict (dense, lazy stack, or a sibling's type);
* ``isinstance(x, _kinds.Dense)`` — a dense :class:`~tensordict.TensorDict` (or subclass),
  whose private ``_tensordict`` storage may be walked directly;
* ``isinstance(x, _kinds.Lazy)`` — a :class:`~tensordict.LazyStackedTensorDict`, whose
  entries live in its members (``tensordicts``);
* ``isinstance(x, NON_TENSOR)`` — a non-tensor leaf (one value or a stack of values);
* ``isinstance(x, TensorCollection)`` (:mod:`tensordict._leaves.collection`) — any tensor
  collection: a tensordict of any kind or a tensorclass;
* :func:`is_tensor_collection` — a collection or a non-tensor leaf.

>>> import torch
>>> from tensordict import TensorDict, lazy_stack
>>> from tensordict._kinds import kinds as _kinds
>>> td = TensorDict(a=torch.zeros(2), batch_size=[2])
>>> isinstance(td, _kinds.Dense), isinstance(lazy_stack([td, td]), _kinds.Lazy)
(True, True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tensordict._leaves.collection import TensorCollection
from tensordict._leaves.nontensor import NON_TENSOR

if TYPE_CHECKING:  # pragma: no cover - the bound classes, as type checkers see them
    from tensordict._dense.td import TensorDict as Dense
    from tensordict._lazy.stack import LazyStackedTensorDict as Lazy
    from tensordict.base import TensorDictBase as Base

    #: the mixins shared by every concrete kind see the whole ``TensorDictBase`` interface
    SharedMixin = Base

    class DenseMixin(Base):
        """What the mixins of ``TensorDict`` see of it: its storage and constructors."""

        _tensordict: dict[str, Any]
        _batch_size: torch.Size
        _device: torch.device | None
        _names: list[str | None] | None

        @classmethod
        def _new_unsafe(
            cls,
            source: dict[str, Any],
            batch_size: torch.Size,
            device: torch.device | None = None,
            names: list[str | None] | None = None,
        ) -> Dense: ...
        def _validate_value(
            self, key: Any, value: Any, non_blocking: bool = False, prefix: tuple[str, ...] = ()
        ) -> Any: ...

    class LazyMixin(Base):
        """What the mixins of ``LazyStackedTensorDict`` see of it: its members."""

        tensordicts: list[Base]
        stack_dim: int
        _batch_size: torch.Size
        _td_dim_name: str | None

        def _gather(self, key: tuple[str, ...], default: Any) -> Any: ...
        def _common_keys(self) -> list[str]: ...
        def _stack_values(self, key: tuple[str, ...], values: list[Any]) -> Any: ...
        def _unbind_like(self, other: Any, op: str) -> list[Any]: ...
        def _has_names(self) -> bool: ...
else:

    class _Unbound:
        """Placeholder until the defining module is imported (matches nothing)."""

    Base = Dense = Lazy = _Unbound
    # The mixins of the concrete classes derive from these for type checkers only.
    DenseMixin = LazyMixin = SharedMixin = object

_NAMES = ("Base", "Dense", "Lazy")

__all__ = [
    "NON_TENSOR",
    "Base",
    "Dense",
    "DenseMixin",
    "Lazy",
    "LazyMixin",
    "SharedMixin",
    "bind",
    "default_is_leaf",
    "is_leaf_default",
    "is_leaf_nontensor",
    "is_nested",
    "is_tensor_collection",
    "is_tensorclass",
    "lazy_members",
]


def bind(**kinds: type) -> None:
    """Bind concrete classes by kind name (``Base``, ``Dense``, ``Lazy``); called once by
    the module that defines each class."""
    for name, cls in kinds.items():
        if name not in _NAMES:
            raise ValueError(f"unknown tensordict kind {name!r}; expected one of {_NAMES}.")
        globals()[name] = cls


def is_tensor_collection(datatype: Any) -> bool:
    """Whether ``datatype`` (an instance or a class) is a tensordict-like collection.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> is_tensor_collection(TensorDict()), is_tensor_collection(torch.zeros(1))
    (True, False)
    """
    cls = datatype if isinstance(datatype, type) else type(datatype)
    return (
        issubclass(cls, (TensorCollection, *NON_TENSOR))
        or getattr(cls, "_is_tensorclass", False) is True
    )


def is_leaf_default(cls: type) -> bool:
    """The default leaf rule of ``keys``/``values``/``items``: tensors are leaves;
    tensordicts and non-tensor entries are not, so ``leaves_only=True`` skips the
    non-tensor entries, as the reference's default (pass :func:`is_leaf_nontensor` to list
    them with the tensors).

    >>> import torch
    >>> from tensordict import NonTensorData, TensorDict
    >>> is_leaf_default(torch.Tensor), is_leaf_default(NonTensorData), is_leaf_default(TensorDict)
    (True, False, False)
    """
    return not issubclass(cls, (Base, *NON_TENSOR))


def default_is_leaf(cls: type) -> bool:
    """Whether entries of type ``cls`` are leaves by the reference library's default rule:
    anything but a tensor collection; non-tensor entries are not leaves either (pass
    :func:`is_leaf_nontensor` to count them).

    >>> import torch
    >>> from tensordict import NonTensorData, TensorDict, default_is_leaf
    >>> default_is_leaf(torch.Tensor), default_is_leaf(NonTensorData), default_is_leaf(TensorDict)
    (True, False, False)
    """
    return not is_tensor_collection(cls)


def is_leaf_nontensor(cls: type) -> bool:
    """Whether entries of type ``cls`` are tensors or non-tensor leaves (an ``is_leaf``
    that lists non-tensor entries with the tensors).

    >>> import torch
    >>> from tensordict import NonTensorData, TensorDict, is_leaf_nontensor
    >>> is_leaf_nontensor(torch.Tensor), is_leaf_nontensor(NonTensorData), is_leaf_nontensor(int)
    (True, True, False)
    """
    return issubclass(cls, (torch.Tensor, *NON_TENSOR))


def lazy_members(td: Any) -> list[Any] | None:
    """The members of a lazy stack (``None`` for anything else).

    >>> from tensordict import TensorDict, lazy_stack
    >>> len(lazy_members(lazy_stack([TensorDict(), TensorDict()]))), lazy_members(TensorDict())
    (2, None)
    """
    return td.tensordicts if isinstance(td, Lazy) else None


def is_tensorclass(obj: Any) -> bool:
    """Whether ``obj`` is a tensorclass (a class made by ``@tensorclass``) or an instance.

    Reads the ``_is_tensorclass`` marker, so it works without importing the
    ``tensorclass`` distribution.

    >>> from tensordict import TensorDict
    >>> is_tensorclass(TensorDict()), is_tensorclass(type("T", (), {"_is_tensorclass": True}))
    (False, True)
    """
    cls = obj if isinstance(obj, type) else type(obj)
    return getattr(cls, "_is_tensorclass", False) is True


def is_nested(value: Any) -> bool:
    """Whether ``value`` is a nested tensordict (a collection, not a non-tensor leaf).

    >>> from tensordict import NonTensorData, TensorDict
    >>> is_nested(TensorDict()), is_nested(NonTensorData("x"))
    (True, False)
    """
    return is_tensor_collection(value) and not isinstance(value, NON_TENSOR)
