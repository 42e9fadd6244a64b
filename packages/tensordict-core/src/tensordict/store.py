"""``tensordict.store``: the reference's module path of the tensordicts kept on a
key-value server (:class:`TensorDictStore`, :class:`LazyStackedTensorDictStore`), which the
``tensordict-distributed`` distribution provides (``pip install
tensordict-distributed[redis]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from tensordict._plugins.siblings import module_forwarder

if TYPE_CHECKING:  # the names a sibling provides, for type checkers
    from tensordict.distributed import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
        LazyStackedTensorDictStore as LazyStackedTensorDictStore,
    )
    from tensordict.distributed import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
        TensorDictStore as TensorDictStore,
    )

#: The server kinds a store's ``backend=`` names (all speak the Redis protocol).
STORE_BACKENDS = Literal["redis", "dragonfly"]

__all__ = ["LazyStackedTensorDictStore", "STORE_BACKENDS", "TensorDictStore"]

__getattr__, __dir__ = module_forwarder(
    __name__,
    "distributed",
    {
        "TensorDictStore": "TensorDictStore",
        "LazyStackedTensorDictStore": "LazyStackedTensorDictStore",
    },
)
