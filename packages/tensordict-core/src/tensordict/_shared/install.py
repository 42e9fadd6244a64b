"""The methods every kind of tensordict shares, installed for ``TensorDictBase``.

Indexed reads and writes, key sets, memory accounting, state dicts, padding and
consolidation are written once, in terms of the primitives each kind implements
(``_get_str``, ``_set_str``, ``keys`` …). :func:`install` puts them on a
class :class:`~tensordict.TensorDictBase` derives from (``tensordict._base.installed``)
when ``import tensordict`` runs, so that every subclass (a sibling's storage-backed
tensordict, a user's) has them, and that patching ``TensorDictBase.update_at_`` reaches
every kind. A kind overrides one by defining it
(a lazy stack plans its indexed writes member by member).

>>> import torch
>>> from tensordict import TensorDict, TensorDictBase
>>> TensorDict.update_at_ is TensorDictBase.update_at_
True
"""

from __future__ import annotations

from typing import Any

from tensordict._functions.pad import PadOps
from tensordict._shared.indexed import IndexedOps
from tensordict._shared.key_sets import KeySetOps
from tensordict._shared.memory import MemoryOps
from tensordict._shared.state_dict import StateDictOps
from tensordict._wire.consolidate import ConsolidateOps

#: the mixins whose methods every kind shares
SHARED = (ConsolidateOps, StateDictOps, KeySetOps, IndexedOps, MemoryOps, PadOps)

#: the names :func:`install` puts on the base class (filled by it)
INSTALLED: list[str] = []


def install(base: Any, holder: Any = None) -> None:
    """Put the methods of :data:`SHARED` on ``holder`` (a class ``base`` derives from;
    ``base`` itself by default); a name ``base`` already defines is an error (one
    implementation per name)."""
    target = base if holder is None else holder
    for mixin in SHARED:
        for name, attr in vars(mixin).items():
            if name.startswith("__") or name in ("_abc_impl",):
                continue
            if name in vars(base):
                raise RuntimeError(f"{mixin.__name__}.{name} would replace {base.__name__}.{name}.")
            setattr(target, name, attr)
            INSTALLED.append(name)
