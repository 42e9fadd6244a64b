"""tensordict.memmap: tensordicts on disk (the ``tensordict-memmap`` distribution).

This subpackage will own:

* :class:`MemoryMappedTensor`, a tensor backed by a memory-mapped file;
* the on-disk side of ``TensorDict.memmap``/``memmap_``/``memmap_like``/
  ``memmap_refresh_``, ``save``/``dumps`` and ``load``/``load_``/``load_memmap``/
  ``load_memmap_``, which core's forwarders call into on first use;
* the top-level ``tensordict.memmap``, ``save``, ``load``, ``load_memmap``,
  ``is_memmap`` and ``from_h5`` functions;
* :class:`PersistentTensorDict`, a tensordict view of an HDF5 file, with ``from_h5`` and
  ``to_h5``. HDF5 support needs the ``h5`` extra (``pip install tensordict-memmap[h5]``);
  ``h5py`` is imported only when HDF5 is actually used, never when this package is.

It depends on ``tensordict-core`` only.

Once this subpackage is imported, Python binds ``tensordict.memmap`` to the subpackage
itself, shadowing the top-level ``tensordict.memmap(...)`` function of the same name. So
that ``tensordict.memmap(td, prefix)`` keeps working, this module is callable: calling it
calls its ``memmap`` attribute.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__version__ = "0.1.0"

_DISTRIBUTION = "tensordict-memmap"


class _CallableModule(types.ModuleType):
    """A module that forwards calls to its ``memmap`` attribute (the function)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            function = self.__dict__["memmap"]
        except KeyError:
            raise NotImplementedError(
                f"tensordict.memmap(...): the installed '{_DISTRIBUTION}' distribution "
                "does not provide the 'memmap' function yet"
            ) from None
        return function(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
