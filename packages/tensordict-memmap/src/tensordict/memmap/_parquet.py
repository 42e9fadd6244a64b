"""Parquet files: ``TensorDict.to_parquet``/``from_parquet`` and the top-level
:func:`from_parquet` (extra ``parquet``: ``pip install tensordict-memmap[parquet]``;
``pyarrow`` is imported on the first call).

The table is the one of :func:`tensordict.to_arrow` (one row per element of the single
batch dimension, one column per entry), written with ``pyarrow.parquet.write_table`` and
read with ``pyarrow.parquet.read_table``, which reads only the ``columns`` asked for.
Without a ``separator`` nested tensordicts are ``struct`` columns; with one they are flat
columns named ``"obs.x"``. Tensors with trailing dims are ``arrow.fixed_shape_tensor``
columns, whose type Parquet keeps, so every dtype Arrow holds (bool, int8-64, uint8-64,
float16-64) round-trips bit for bit; bfloat16, complex and float8 are refused with a
:class:`TypeError` naming the key.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from tensordict._plugins.api import entry_to_arrow, from_arrow, import_extra
from tensordict._plugins.api import kinds as _kinds
from tensordict._plugins.api import tabular as _tabular

PARQUET_INSTALL = "tensordict-memmap[parquet]"


def _pyarrow(what: str) -> tuple[Any, Any]:
    pa = import_extra("pyarrow", PARQUET_INSTALL, what)
    return pa, import_extra("pyarrow.parquet", PARQUET_INSTALL, what)


def arrow_table(pa: Any, td: Any, separator: str | None, what: str) -> Any:
    """The Arrow table of ``td``: struct columns for nested tensordicts, or flat columns
    named with ``separator``."""
    td = _tabular.as_tensordict(td, what)
    n = _tabular.rows(td, what)
    pairs: list[tuple[tuple[str, ...], Any]]
    if separator is None:
        pairs = [((name,), value) for name, value in td.items()]
        names = [name for name, _ in td.items()]
    else:
        flat = list(_tabular.flat_columns(td, separator, what))
        pairs = [(key, value) for _, key, value in flat]
        names = [column for column, _, _ in flat]
    arrays = [entry_to_arrow(pa, value, key, n, what) for key, value in pairs]
    return pa.Table.from_arrays(arrays, names=names)


def _read(pq: Any, path: Any, columns: list[str] | None, kwargs: dict[str, Any]) -> Any:
    """The table of a Parquet file: ``ParquetFile.read`` (one chunk per row group, so
    that single-row-group files convert without a copy) when ``path`` is one file and the
    keywords are its own, else ``pyarrow.parquet.read_table`` (datasets, ``filters`` …)."""
    file_kw = set(inspect.signature(pq.ParquetFile).parameters) - {"source"}
    read_kw = set(inspect.signature(pq.ParquetFile.read).parameters) - {"self", "columns"}
    is_dir = isinstance(path, (str, os.PathLike)) and os.path.isdir(path)
    if is_dir or set(kwargs) - file_kw - read_kw:
        return pq.read_table(path, columns=columns, **kwargs)
    opened = pq.ParquetFile(path, **{k: v for k, v in kwargs.items() if k in file_kw})
    try:
        return opened.read(columns=columns, **{k: v for k, v in kwargs.items() if k in read_kw})
    finally:
        opened.close()


def _check_no_empty_struct(td: Any, what: str) -> None:
    for key, value in td.items(include_nested=True):
        if isinstance(value, _kinds.Base) and not list(value.keys()):
            raise ValueError(
                f"{what}: the nested tensordict {_tabular.key_text(_tabular_key(key))} is "
                "empty, and Parquet cannot store a struct column without fields. Remove it "
                "(td.filter_empty_()) or give it an entry."
            )


def _tabular_key(key: Any) -> tuple[str, ...]:
    return key if isinstance(key, tuple) else (key,)


def td_to_parquet(
    td: Any, path: str | Path, *, separator: str | None = None, **kwargs: Any
) -> None:
    """Write ``td`` (one batch dimension) to a Parquet file, one column per entry.

    Args:
        path: the file to write (or anything ``pyarrow.parquet.write_table`` accepts).

    Keyword Args:
        separator: write nested entries as flat columns whose names join the keys with it
            (``("obs", "x")`` -> ``"obs.x"`` with ``separator="."``); without it they are
            ``struct`` columns.
        **kwargs: passed to ``pyarrow.parquet.write_table`` (``compression="zstd"``,
            ``row_group_size=...`` …).

    >>> import os, tempfile, torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict(x=torch.arange(4.0), img=torch.zeros(4, 2, 2, dtype=torch.uint8),
    ...                 obs=TensorDict(y=torch.arange(4), batch_size=[4]), batch_size=[4])
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     td.to_parquet(os.path.join(tmp, "data.parquet"), separator=".")
    ...     back = TensorDict.from_parquet(os.path.join(tmp, "data.parquet"), separator=".")
    ...     only_x = TensorDict.from_parquet(os.path.join(tmp, "data.parquet"), columns=["x"])
    >>> bool((back == td).all()), list(only_x.keys())
    (True, ['x'])
    """
    pa, pq = _pyarrow("to_parquet")
    if separator is None:
        _check_no_empty_struct(_tabular.as_tensordict(td, "to_parquet"), "to_parquet")
    table = arrow_table(pa, td, separator, "to_parquet")
    pq.write_table(table, path, **kwargs)


def from_parquet(
    path: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: torch.device | None = None,
    batch_size: torch.Size | None = None,
    separator: str | None = None,
    dtype: torch.dtype | None = None,
    columns: list[str] | None = None,
    **kwargs: Any,
) -> Any:
    """Read a Parquet file into a :class:`~tensordict.TensorDict` of batch size
    ``[rows]``; only the ``columns`` asked for are read from the file.

    Args:
        path: the file (or anything ``pyarrow.parquet.read_table`` accepts).

    Keyword Args:
        auto_batch_size: compute the batch size from the entries (at most
            ``batch_dims`` dimensions) instead of using the number of rows.
        batch_dims: with ``auto_batch_size``, the most batch dimensions to keep.
        device: the device of the result.
        batch_size: the batch size of the result.
        separator: split column names at it into nested keys.
        dtype: cast every tensor to it.
        columns: the columns to read (a ``struct`` column by its name, or one of its
            fields as ``"name.field"``); default all.
        **kwargs: passed to ``pyarrow.parquet.read_table`` (``filters=...``,
            ``use_threads=...`` …), except ``nulls`` and ``mask_key``, which are
            :func:`~tensordict.from_arrow`'s (nulls raise by default).

    The columns are converted as :func:`~tensordict.from_arrow` does: numeric columns
    view the memory pyarrow read them into.

    >>> import os, tempfile
    >>> import numpy as np, pyarrow as pa, pyarrow.parquet as pq
    >>> from tensordict import from_parquet
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     pq.write_table(pa.table({"obs/x": np.arange(3.0), "done": [False, False, True]}),
    ...                    os.path.join(tmp, "log.parquet"))
    ...     td = from_parquet(os.path.join(tmp, "log.parquet"), separator="/")
    >>> td["obs", "x"], td["done"]
    (tensor([0., 1., 2.], dtype=torch.float64), tensor([False, False,  True]))
    """
    _tabular.check_batch_keywords("from_parquet", auto_batch_size, batch_size)
    _, pq = _pyarrow("from_parquet")
    nulls = kwargs.pop("nulls", "raise")
    mask_key = kwargs.pop("mask_key", None)
    table = _read(pq, path, columns, kwargs)
    td = from_arrow(table, nulls=nulls, mask_key=mask_key)
    if separator is not None:
        td = td.unflatten_keys(separator)
    return _tabular.finish(
        td,
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        device=device,
        batch_size=batch_size,
        dtype=dtype,
    )


__all__: Sequence[str] = ["from_parquet", "td_to_parquet"]
