"""The methods each kind of tensordict implements its own way, declared on the base class.

A dense ``TensorDict`` reshapes its stored tensors, a lazy stack its members, a
storage-backed tensordict reads through its backend: ``clone``, ``select``,
``reshape`` and the others of :data:`KIND_METHODS` have no generic implementation.
:func:`declare` puts a placeholder for each on ``TensorDictBase``, so every subclass has
the whole interface; calling one that the subclass does not define raises
:class:`NotImplementedError` naming the class and the method, instead of an
``AttributeError`` far from the cause. The contract test checks that every concrete kind
of core defines them all.

>>> from tensordict import TensorDictBase
>>> class Partial(TensorDictBase):
...     pass
>>> Partial.__new__(Partial).reshape(2)
Traceback (most recent call last):
NotImplementedError: Partial does not implement reshape(): it is implemented by each kind of tensordict (see TensorDict.reshape); convert with to_tensordict() first, or define it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: methods without a generic implementation: each kind defines them
KIND_METHODS = (
    "auto_batch_size_", "auto_device_", "broadcast_to", "chunk", "clear", "clear_device_",
    "clone", "copy", "cpu", "cuda", "del_", "empty", "exclude", "expand", "expand_as",
    "flatten", "flatten_keys", "flip", "fliplr", "flipud", "is_empty", "lock_", "moveaxis",
    "movedim", "narrow", "permute", "pin_memory", "pin_memory_", "refine_names", "rename",
    "rename_", "rename_key_", "repeat", "reshape", "select", "share_memory_", "split",
    "squeeze", "swapaxes", "swapdims", "tensor_split", "to", "transpose", "unbind",
    "unflatten", "unflatten_keys", "unlock_", "unsqueeze", "update", "update_", "view",
)  # fmt: skip

#: properties without a generic implementation (reading one raises an ``AttributeError``
#: that is also a ``NotImplementedError``, so ``hasattr`` stays safe)
KIND_PROPERTIES = ("is_locked", "names")


class KindMethodError(NotImplementedError, AttributeError):
    """A property of the tensordict interface that this kind does not implement."""


def _message(cls: type, name: str) -> str:
    return (
        f"{cls.__name__} does not implement {name}(): it is implemented by each kind of "
        f"tensordict (see TensorDict.{name}); convert with to_tensordict() first, or define it."
    )


def _placeholder(name: str) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(_message(type(self), name))

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Implemented by each kind of tensordict: see ``TensorDict.{name}``."
    method.__kind_method__ = True  # type: ignore[attr-defined]
    return method


def _property(name: str) -> property:
    def getter(self: Any) -> Any:
        raise KindMethodError(_message(type(self), name))

    getter.__name__ = name
    getter.__kind_method__ = True  # type: ignore[attr-defined]
    return property(
        getter, doc=f"Implemented by each kind of tensordict: see ``TensorDict.{name}``."
    )


def declare(base: type) -> None:
    """Put the placeholders of :data:`KIND_METHODS` and :data:`KIND_PROPERTIES` on
    ``base`` (where it does not define the name itself)."""
    for name in KIND_METHODS:
        if name not in vars(base):
            setattr(base, name, _placeholder(name))
    for name in KIND_PROPERTIES:
        if name not in vars(base):
            setattr(base, name, _property(name))


def is_placeholder(attr: Any) -> bool:
    """Whether a class attribute is one of the placeholders (not an implementation).

    >>> from tensordict import TensorDict, TensorDictBase
    >>> is_placeholder(TensorDictBase.__dict__["clone"]), is_placeholder(TensorDict.clone)
    (True, False)
    """
    target = attr.fget if isinstance(attr, property) else attr
    return bool(getattr(target, "__kind_method__", False))
