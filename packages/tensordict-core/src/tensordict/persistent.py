"""``tensordict.persistent``: the reference's module path of
:class:`~tensordict.PersistentTensorDict` (a tensordict on an HDF5 file), which the
``tensordict-memmap`` distribution provides (``pip install tensordict-memmap[h5]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tensordict._plugins.siblings import module_forwarder

if TYPE_CHECKING:  # the names a sibling provides, for type checkers
    from tensordict.memmap import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
        PersistentTensorDict as PersistentTensorDict,
    )

__all__ = ["PersistentTensorDict"]

__getattr__, __dir__ = module_forwarder(
    __name__, "memmap", {"PersistentTensorDict": "PersistentTensorDict"}
)
