"""CSV files: ``TensorDict.to_csv``/``from_csv`` and the top-level :func:`from_csv`
(extra ``csv``: ``pip install tensordict-memmap[csv]``; ``pandas`` is imported on the
first call and does the writing and the parsing).

The columns are those of ``TensorDict.to_pandas``: one row per element of the single batch
dimension, one column per leaf, nested keys joined with ``separator``, every tensor of
shape ``[rows]``. Text keeps values, not dtypes: floats are written with the shortest
representation that reads back as the same number, so int64, float64, bool and string
columns round-trip exactly, and the other numeric dtypes come back exactly with
``dtype=`` (a column of float32 values reads as float64 holding the same values).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tensordict._plugins.api import dataframe, from_pandas, import_extra, tabular

CSV_INSTALL = "tensordict-memmap[csv]"


def td_to_csv(td: Any, path: str | Path, *, separator: str | None = None, **kwargs: Any) -> None:
    """Write ``td`` (one batch dimension) to a CSV file, one column per leaf, with a
    header row and no index column.

    Keyword Args:
        separator: join nested keys with it into column names (required when ``td`` has
            nested tensordicts).
        **kwargs: passed to ``pandas.DataFrame.to_csv`` (``sep=";"`` …).

    >>> import os, tempfile, torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict(x=torch.tensor([0.1, 2.5]), n=TensorDict(k=torch.tensor([3, 4]), batch_size=[2]),
    ...                 batch_size=[2])
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     td.to_csv(os.path.join(tmp, "data.csv"), separator=".")
    ...     print(open(os.path.join(tmp, "data.csv")).read().strip())
    ...     back = TensorDict.from_csv(os.path.join(tmp, "data.csv"), separator=".")
    x,n.k
    0.1,3
    2.5,4
    >>> back["x"].dtype, bool((back["x"].float() == td["x"]).all()), back["n", "k"]
    (torch.float64, True, tensor([3, 4]))
    """
    pd = import_extra("pandas", CSV_INSTALL, "to_csv")
    kwargs.setdefault("index", False)
    dataframe(pd, td, separator, "to_csv").to_csv(path, **kwargs)


def from_csv(
    path: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: torch.device | None = None,
    batch_size: torch.Size | None = None,
    separator: str | None = None,
    dtype: torch.dtype | None = None,
    **kwargs: Any,
) -> Any:
    """Read a CSV file (with a header row) into a tensordict of batch size ``[rows]``:
    numeric and boolean columns become tensors, the others a
    :class:`~tensordict.NonTensorStack` of strings.

    ``auto_batch_size``, ``batch_dims``, ``device``, ``batch_size``, ``separator`` and
    ``dtype`` work as in :func:`tensordict.from_pandas`.

    Keyword Args:
        **kwargs: passed to ``pandas.read_csv`` (``sep=";"``, ``usecols=[...]`` …).

    >>> import io
    >>> from tensordict import from_csv
    >>> td = from_csv(io.StringIO("step;loss\\n0;0.5\\n1;0.25\\n"), sep=";")
    >>> td["step"], td["loss"]
    (tensor([0, 1]), tensor([0.5000, 0.2500], dtype=torch.float64))
    """
    tabular.check_batch_keywords("from_csv", auto_batch_size, batch_size)
    pd = import_extra("pandas", CSV_INSTALL, "from_csv")
    return from_pandas(
        pd.read_csv(path, **kwargs),
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        device=device,
        batch_size=batch_size,
        separator=separator,
        dtype=dtype,
    )
