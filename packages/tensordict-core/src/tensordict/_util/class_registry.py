"""Classes that saved or sent tensordicts may name, found without importing any module.

Loaders (``tensordict.memmap``, ``from_consolidated`` …) read class names from data;
they must never import code because of them. Distributions that define tensordict-like
classes (tensorclasses, ``TensorDict`` subclasses) register them here when they are
created, so a loader in the same process can find them by name — including classes
defined inside functions, which no module attribute reaches.

>>> class Point:
...     pass
>>> _ = register_class(Point)
>>> lookup_class(f"{Point.__module__}.{Point.__qualname__}") is Point
True
"""

from __future__ import annotations

import weakref
from typing import TypeVar

_T = TypeVar("_T", bound=type)
_REGISTRY: weakref.WeakValueDictionary[str, type] = weakref.WeakValueDictionary()


def register_class(cls: _T) -> _T:
    """Record ``cls`` under ``module.qualname``; returns it (usable as a decorator)."""
    _REGISTRY[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return cls


def lookup_class(name: str) -> type | None:
    """The registered class named ``module.qualname``, or None (classes are held weakly)."""
    return _REGISTRY.get(name)
