"""``tensordict.testing``: the reference's (deprecated) module of test fixtures.

It holds ``MyDistData``, a two-field tensorclass (``a``, ``b``) that distributed tests send
across processes to check that the class comes back. Reading it warns, as in the
reference, and needs the ``tensorclass`` distribution.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import torch

from tensordict._plugins.siblings import import_sibling

__all__: list[str] = []


def _my_dist_data() -> type:
    tensorclass = import_sibling("tensorclass", "tensordict.testing.MyDistData").tensorclass

    class MyDistData:
        """A tensorclass of two tensors, for tests that send a tensorclass across processes."""

        a: torch.Tensor
        b: torch.Tensor

    MyDistData.__module__ = __name__
    return tensorclass(MyDistData)  # type: ignore[no-any-return]


def __getattr__(name: str) -> Any:
    if name != "MyDistData":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        "tensordict.testing.MyDistData is a test fixture kept for compatibility; "
        "define your own tensorclass instead.",
        DeprecationWarning,
        stacklevel=2,
    )
    value = _my_dist_data()
    setattr(sys.modules[__name__], name, value)
    return value
