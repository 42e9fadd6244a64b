"""tensordict: a dict of tensors that behaves like one tensor.

This is the ``tensordict-core`` distribution. Sibling distributions
(``tensordict-memmap``, ``tensordict-nn``, ``tensordict-distributed``, ``tensorclass``)
install their subpackages into this same namespace; the top-level names they own
resolve lazily (see :mod:`tensordict._siblings`).
"""

from __future__ import annotations

import pkgutil

__path__ = pkgutil.extend_path(__path__, __name__)

from typing import Any

from tensordict._siblings import LAZY_TOP_LEVEL as _LAZY_TOP_LEVEL
from tensordict._siblings import sibling_attr as _sibling_attr

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    try:
        subpackage, attr = _LAZY_TOP_LEVEL[name]
    except KeyError:
        raise AttributeError(f"module 'tensordict' has no attribute {name!r}") from None
    value = _sibling_attr(subpackage, attr, f"tensordict.{name}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_TOP_LEVEL))
