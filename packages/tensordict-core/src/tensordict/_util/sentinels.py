"""Sentinels: ``NO_DEFAULT``, "argument not given" where ``None`` means something.

>>> from tensordict._util.sentinels import NO_DEFAULT
>>> NO_DEFAULT, bool(NO_DEFAULT)
(NO_DEFAULT, False)
"""

from __future__ import annotations

import enum
from typing import Any


class _NoDefault(enum.Enum):
    # An enum member (not a plain instance) so that torch.compile can rebuild it where it
    # is a default argument of a method called on a tensordict made inside the compiled code.
    NO_DEFAULT = "NO_DEFAULT"

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __bool__(self) -> bool:
        return False


#: Sentinel for "argument not given" (``None`` is a meaningful default in several places).
NO_DEFAULT: Any = _NoDefault.NO_DEFAULT
