"""``tensordict.tabular``: the reference's deprecated module of table helpers.

Importing it warns; use ``TensorDict.from_pandas``, ``from_csv``, ``from_parquet``,
``from_json`` and the ``to_*`` methods instead (see the formats page of the docs).
"""

from __future__ import annotations

import warnings
from typing import Any

from tensordict._formats import tabular as _tabular

warnings.warn(
    "tensordict.tabular is deprecated: use TensorDict.from_pandas, from_csv, from_parquet, "
    "from_json and the to_pandas, to_csv, to_parquet and to_json methods.",
    DeprecationWarning,
    stacklevel=2,
)


def __getattr__(name: str) -> Any:
    return getattr(_tabular, name)
