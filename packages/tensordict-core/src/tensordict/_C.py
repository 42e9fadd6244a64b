"""The reference's deprecated module of nested-key helpers (once a C++ extension), kept
importable for clients (docs: compatibility). Use the ``tensordict.unravel_key*`` functions.
"""

from __future__ import annotations

import warnings

from tensordict._keys.nested import unravel_key_to_tuple as _unravel_key_to_tuple
from tensordict.utils import unravel_key, unravel_key_list

warnings.warn(
    "tensordict._C is deprecated: use tensordict.unravel_key (also for unravel_keys), "
    "tensordict.unravel_key_list and tensordict.unravel_key_to_tuple.",
    DeprecationWarning,
    stacklevel=2,
)

unravel_keys = unravel_key

__all__ = ["_unravel_key_to_tuple", "unravel_key", "unravel_key_list", "unravel_keys"]
