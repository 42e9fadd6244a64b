"""``tensordict.typedtensordict``: the reference's module path of
:class:`~tensordict.TypedTensorDict`, which the ``tensorclass`` distribution provides
(``pip install tensorclass``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tensordict._plugins.siblings import module_forwarder

if TYPE_CHECKING:  # the names a sibling provides, for type checkers
    from tensordict.tensorclass import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
        TypedTensorDict as TypedTensorDict,
    )

__all__ = ["TypedTensorDict"]

__getattr__, __dir__ = module_forwarder(
    __name__, "tensorclass", {"TypedTensorDict": "TypedTensorDict"}
)
