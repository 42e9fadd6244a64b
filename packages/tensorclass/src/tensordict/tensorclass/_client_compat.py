"""What clients of the reference read off tensorclasses although the reference keeps it
private: a class-level ``__getattr__`` (TorchRL chains its own attribute fallback onto
``Cls.__getattr__`` at import). Listed on the docs' compatibility page.

Instances of a tensorclass have no ``__getattr__`` of their own, so that reading a field
stays a plain attribute read; the metaclass serves ``Cls.__getattr__`` on demand instead,
as the function :func:`tensorclass_getattr`, which raises the usual ``AttributeError``.
"""

from __future__ import annotations

from typing import Any


def tensorclass_getattr(self: Any, name: str) -> Any:
    """The attribute fallback of a tensorclass instance: no attribute ``name``.

    >>> import torch
    >>> from tensordict import TensorClass
    >>> class Pair(TensorClass):
    ...     a: torch.Tensor
    >>> Pair.__getattr__(Pair(a=torch.zeros(())), "b")
    Traceback (most recent call last):
    AttributeError: 'Pair' object has no attribute 'b'
    """
    raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


class _ClassLevelGetattr:
    """The metaclass attribute ``__getattr__``: ``Cls.__getattr__`` gives a function that,
    called as a client does (``Cls.__getattr__(instance, name)``), is
    :func:`tensorclass_getattr`, and called by Python for a class attribute that is
    missing (``getattr(Cls, name)``), raises the usual ``AttributeError``."""

    def __get__(self, cls: Any, meta: Any = None) -> Any:
        if cls is None:
            return self

        def __getattr__(*args: Any) -> Any:
            if len(args) == 2:
                return tensorclass_getattr(*args)
            raise AttributeError(f"type object {cls.__name__!r} has no attribute {args[0]!r}")

        return __getattr__


class ClassGetattr(type):
    """Metaclass of tensorclasses at run time: adds the class-level ``__getattr__`` (see
    :class:`_ClassLevelGetattr`); instances keep plain attribute reads.

    >>> import torch
    >>> from tensordict import TensorClass
    >>> class Pair(TensorClass):
    ...     a: torch.Tensor
    >>> hasattr(Pair, "missing"), getattr(Pair, "missing", 0)
    (False, 0)
    """

    __getattr__ = _ClassLevelGetattr()  # type: ignore[misc]
