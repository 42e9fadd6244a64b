"""tensordict.memmap: tensordicts on disk (the ``tensordict-memmap`` distribution).

* :class:`MemoryMappedTensor`, a tensor backed by a memory-mapped file or by anonymous
  shared memory;
* the on-disk side of ``TensorDict.memmap``/``memmap_``/``memmap_like``/
  ``memmap_refresh_``, ``save``/``dumps``, ``load``/``load_``/``load_memmap``/
  ``load_memmap_``, ``make_memmap*``, ``is_memmap`` and ``saved_path``, which core's
  forwarders call into on first use (the ``td_*`` hooks);
* the top-level ``tensordict.memmap``, ``save``, ``load``, ``load_memmap`` and
  ``is_memmap`` functions;
* single-file archives (:func:`pack_memmap`, :func:`unpack_memmap`,
  :func:`append_memmap`, :func:`is_memmap_archive`, :func:`refresh_archive_checksums`),
  safetensors files (:func:`to_safetensors`, :func:`from_safetensors`, extra
  ``safetensors``) and :class:`PersistentTensorDict`, a tensordict view of an HDF5 file
  (extra ``h5``). ``h5py`` and ``safetensors`` are imported only when used;
* the file formats of pipelines: Parquet (``to_parquet``/:func:`from_parquet`, extra
  ``parquet``), CSV (``to_csv``/:func:`from_csv`, extra ``csv``), JSON
  (``to_json``/:func:`from_json`), zarr (``to_zarr``/:func:`from_zarr`,
  :class:`ZarrTensorDict`, extra ``zarr``) and MosaicML Streaming shards (``to_mds``,
  extra ``mds``); each format library is imported on first use.

It depends on ``tensordict-core`` (and ``tqdm`` for progress bars) only.

Once this subpackage is imported, Python binds ``tensordict.memmap`` to the subpackage
itself, shadowing the top-level ``tensordict.memmap(...)`` function of the same name. So
that ``tensordict.memmap(td, prefix)`` keeps working, this module is callable: calling it
calls its ``memmap`` attribute.
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any

# the td_* hooks are what core's TensorDict forwarders call (see tensordict._plugins.forwarders)
from tensordict.memmap._api import (
    is_memmap,
    load,
    load_memmap,
    memmap,
    save,
)
from tensordict.memmap._api import (
    td_is_memmap as td_is_memmap,
)
from tensordict.memmap._api import (
    td_load_ as td_load_,
)
from tensordict.memmap._api import (
    td_load_memmap_ as td_load_memmap_,
)
from tensordict.memmap._api import (
    td_make_memmap as td_make_memmap,
)
from tensordict.memmap._api import (
    td_make_memmap_from_storage as td_make_memmap_from_storage,
)
from tensordict.memmap._api import (
    td_make_memmap_from_tensor as td_make_memmap_from_tensor,
)
from tensordict.memmap._api import (
    td_memmap as td_memmap,
)
from tensordict.memmap._api import (
    td_memmap_ as td_memmap_,
)
from tensordict.memmap._api import (
    td_memmap_like as td_memmap_like,
)
from tensordict.memmap._api import (
    td_memmap_refresh_ as td_memmap_refresh_,
)
from tensordict.memmap._api import (
    td_save as td_save,
)
from tensordict.memmap._api import (
    td_saved_path as td_saved_path,
)
from tensordict.memmap._append import append_memmap
from tensordict.memmap._archive import (
    is_memmap_archive,
    pack_memmap,
    refresh_archive_checksums,
    unpack_memmap,
)
from tensordict.memmap._classes import register_class
from tensordict.memmap._csv import from_csv
from tensordict.memmap._csv import td_to_csv as td_to_csv
from tensordict.memmap._json import from_json
from tensordict.memmap._json import td_to_json as td_to_json
from tensordict.memmap._mds import td_to_mds as td_to_mds
from tensordict.memmap._parquet import from_parquet
from tensordict.memmap._parquet import td_to_parquet as td_to_parquet
from tensordict.memmap._persistent import PersistentTensorDict, from_h5
from tensordict.memmap._persistent import td_from_h5 as td_from_h5
from tensordict.memmap._persistent import td_to_h5 as td_to_h5
from tensordict.memmap._safetensors import from_safetensors, to_safetensors
from tensordict.memmap._tensor import MemoryMappedTensor
from tensordict.memmap._zarr import ZarrTensorDict, from_zarr
from tensordict.memmap._zarr import td_from_zarr as td_from_zarr
from tensordict.memmap._zarr import td_to_zarr as td_to_zarr
from tensordict.memmap._zarr import zarr_from_schema as zarr_from_schema

MemoryMappedTensor.__module__ = __name__
PersistentTensorDict.__module__ = __name__
ZarrTensorDict.__module__ = __name__

__version__ = "0.1.0"

_DISTRIBUTION = "tensordict-memmap"

__all__ = [
    "MemoryMappedTensor",
    "PersistentTensorDict",
    "from_h5",
    "append_memmap",
    "is_memmap",
    "is_memmap_archive",
    "pack_memmap",
    "refresh_archive_checksums",
    "unpack_memmap",
    "load",
    "load_memmap",
    "memmap",
    "register_class",
    "save",
    "to_safetensors",
    "from_safetensors",
    "ZarrTensorDict",
    "from_csv",
    "from_json",
    "from_parquet",
    "from_zarr",
]


class _CallableModule(types.ModuleType):
    """A module that forwards calls to its ``memmap`` attribute (the function), and shows
    that function's signature to :func:`inspect.signature`."""

    @property
    def __signature__(self) -> inspect.Signature | None:
        function = self.__dict__.get("memmap")
        return None if function is None else inspect.signature(function)

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
