"""What the sibling distributions (memmap, nn, distributed, tensorclass) may use of core's
private code: the one module they import besides the public ones (``tensordict``,
``tensordict.base``, ``tensordict.utils``, …). Core's folders can move; this list stays.
``tools/check_imports.py`` refuses any other private import from a sibling.

* kinds and leaf types: :mod:`~tensordict._kinds.kinds` (``kinds``), key views, non-tensor
  data and stacks, ``NON_TENSOR``;
* keys, shapes and indices: ``NestedKey``, ``unravel_key``, ``normalize_index``,
  ``parse_batch_size``/``parse_device``;
* ``BackedTensorDict``, the base of storage-backed tensordicts (HDF5, zarr, Redis);
* the mixins a new kind of tensordict takes from core (indexed reads/writes, key sets,
  memory, state dicts, padding, consolidation) and the walker's dtype casts;
* the consolidation codec and the wire format (``wire``, ``consolidated_buffer``, …);
* the sibling registry (``siblings``, ``import_extra``, ``FORWARDERS``), the class registry,
  modes, errors, futures, repr helpers, the tabular formats and the pytree nodes.

This module imports all of core; core itself never imports it.

>>> from tensordict._plugins import api
>>> api.unravel_key(("a", ("b",)))
('a', 'b')
"""

from __future__ import annotations

from tensordict._backed import contract as backed_contract
from tensordict._backed import families as backed_families
from tensordict._backed.base import BackedTensorDict, common_leading
from tensordict._dense.dict_ops import with_entries
from tensordict._engine.ops import CASTS, QUANTIZED_CASTS, _cast
from tensordict._formats import tabular
from tensordict._formats.arrow import entry_to_arrow, from_arrow
from tensordict._formats.pandas import dataframe, from_pandas
from tensordict._formats.repr import _td_repr, leaf_repr
from tensordict._functions.pad import PadOps
from tensordict._keys.first_class import is_first_class
from tensordict._keys.index import normalize_index
from tensordict._keys.nested import NestedKey, is_nested_key, unravel_key
from tensordict._keys.shape import parse_batch_size, parse_device
from tensordict._kinds import kinds
from tensordict._kinds.kinds import is_tensorclass, lazy_members
from tensordict._kinds.views import TensorDictKeysView
from tensordict._kinds.writes import write_inplace
from tensordict._leaves.nontensor import (
    NON_TENSOR,
    NON_TENSOR_TYPES,
    NonTensorData,
    NonTensorStack,
    is_non_tensor,
    unwrap_non_tensor,
)
from tensordict._plugins import siblings
from tensordict._plugins.forwarders import FORWARDERS
from tensordict._plugins.siblings import import_extra
from tensordict._shared.indexed import IndexedOps, _check_at
from tensordict._shared.key_sets import KeySetOps
from tensordict._shared.memory import MemoryOps
from tensordict._shared.state_dict import StateDictOps
from tensordict._torch import pytree
from tensordict._util import modes
from tensordict._util.class_registry import lookup_class, register_class
from tensordict._util.errors import InplaceWriteError, lock_error, missing_key
from tensordict._util.futures import TensorDictFuture
from tensordict._wire import wire
from tensordict._wire.consolidate import (
    ConsolidateOps,
    _unpickle_consolidated,
    consolidated_buffer,
    current_metadata,
)
from tensordict._wire.read import _DTYPES

__all__ = [
    "BackedTensorDict",
    "CASTS",
    "FORWARDERS",
    "NON_TENSOR",
    "NON_TENSOR_TYPES",
    "QUANTIZED_CASTS",
    "_DTYPES",
    "ConsolidateOps",
    "IndexedOps",
    "InplaceWriteError",
    "KeySetOps",
    "MemoryOps",
    "NestedKey",
    "NonTensorData",
    "NonTensorStack",
    "PadOps",
    "StateDictOps",
    "TensorDictFuture",
    "TensorDictKeysView",
    "_cast",
    "_check_at",
    "backed_contract",
    "backed_families",
    "common_leading",
    "_td_repr",
    "_unpickle_consolidated",
    "consolidated_buffer",
    "current_metadata",
    "dataframe",
    "entry_to_arrow",
    "from_arrow",
    "from_pandas",
    "import_extra",
    "is_first_class",
    "is_nested_key",
    "is_non_tensor",
    "is_tensorclass",
    "kinds",
    "lazy_members",
    "leaf_repr",
    "lock_error",
    "lookup_class",
    "missing_key",
    "modes",
    "normalize_index",
    "parse_batch_size",
    "parse_device",
    "pytree",
    "register_class",
    "siblings",
    "tabular",
    "unravel_key",
    "unwrap_non_tensor",
    "wire",
    "with_entries",
    "write_inplace",
]
