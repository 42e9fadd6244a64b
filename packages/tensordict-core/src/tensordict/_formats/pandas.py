"""pandas DataFrames and tensordicts: ``TensorDict.to_pandas``/``from_pandas`` and the
top-level :func:`from_pandas` (extra ``pandas``: ``pip install tensordict-core[pandas]``;
``pandas`` is imported on the first call).

One row per element of the single batch dimension, one column per leaf. A DataFrame
column holds one value per row, so every tensor must have the shape ``[rows]`` (use
:func:`~tensordict.to_arrow` or ``to_parquet`` for trailing dims). Nested keys need a
``separator``: ``("obs", "x")`` becomes the column ``"obs.x"`` with ``separator="."``
and reads back as the same key. Numeric and boolean columns become tensors of the same
dtype; a categorical column the tensor of its integer codes (``Series.cat.codes``: int8
for up to 127 categories, ``-1`` where a value is missing; the categories are not kept,
as in the reference); every other column (strings, timestamps, objects) a
:class:`~tensordict.NonTensorStack` of its values. bfloat16 and other dtypes NumPy has
no type for are refused with a :class:`TypeError` naming the key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from tensordict._formats import tabular as _tabular
from tensordict._kinds import kinds as _kinds
from tensordict._leaves.nontensor import NonTensorData, NonTensorStack
from tensordict._plugins.siblings import import_extra

if TYPE_CHECKING:  # pragma: no cover
    import pandas
    from typing_extensions import Self


#: the tensor dtypes a DataFrame column holds (NumPy's).
PANDAS_DTYPES = frozenset(
    {
        torch.bool,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.uint16,
        torch.uint32,
        torch.uint64,
        torch.float16,
        torch.float32,
        torch.float64,
        torch.complex64,
        torch.complex128,
    }
)
PANDAS_HOLDS = "bool, int8 to int64, uint8 to uint64, float16 to float64, complex64, complex128"


def pandas_module(what: str) -> Any:
    """``pandas``, or the :class:`ModuleNotFoundError` naming ``tensordict-core[pandas]``."""
    return import_extra("pandas", _tabular.PANDAS_INSTALL, what)


def to_pandas(td: Any, *, separator: str | None = None) -> pandas.DataFrame:
    """``td`` (one batch dimension) as a DataFrame with one column per leaf (see
    :meth:`TensorDictBase.to_pandas <tensordict.TensorDictBase.to_pandas>`)."""
    return dataframe(pandas_module("to_pandas"), td, separator, "to_pandas")


def dataframe(pd: Any, td: Any, separator: str | None, what: str) -> Any:
    """The DataFrame of ``to_pandas``; errors name ``what`` (``to_csv`` …)."""
    td = _tabular.as_tensordict(td, what)
    n = _tabular.rows(td, what)
    data = {}
    for column, key, value in _tabular.flat_columns(td, separator, what):
        values = column_values(value, key, n, what, "a DataFrame column", column)
        # an empty list would make a float column: keep it an object one
        data[column] = (
            pd.Series(values, dtype=object) if isinstance(values, list) and not n else values
        )
    if not data:
        return pd.DataFrame(index=pd.RangeIndex(n))
    return pd.DataFrame(data)


def column_values(
    value: Any, key: tuple[str, ...], n: int, what: str, holder: str, column: str | None = None
) -> Any:
    """A leaf as one column: a 1-D NumPy array for a tensor (checked dtype and shape), a
    list of Python values for a non-tensor entry. ``column`` (the column's name, default
    the key) names the entry in errors."""
    if isinstance(value, (NonTensorData, NonTensorStack)):
        values = _tabular.non_tensor_values(value, n)
        if isinstance(value, NonTensorStack) and value.batch_dims != 1:
            raise ValueError(
                f"{what}: the non-tensor entry {_tabular.key_text(key)} has the batch size "
                f"{list(value.batch_size)}; {holder} holds one value per row."
            )
        return values
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"{what}: the entry {_tabular.key_text(key)} is a {type(value).__name__}, which "
            f"{holder} cannot hold."
        )
    if value.is_nested or value.ndim != 1:
        name = _tabular.key_text(key) if column is None else repr(column)
        raise ValueError(
            f"Cannot convert tensor with shape {value.shape} at key {name} to a single "
            f"DataFrame column ({what}). Only 1D tensors (matching the batch size, [{n}]) "
            "are supported: use to_arrow() or to_parquet() for entries with more "
            "dimensions, or reshape them into several entries."
        )
    t = _tabular.plain_tensor(value)
    if t.dtype not in PANDAS_DTYPES:
        _tabular.refuse_dtype(what, key, t.dtype, holder, PANDAS_HOLDS)
    return t.numpy()


def from_pandas(
    dataframe: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: torch.device | None = None,
    batch_size: torch.Size | None = None,
    separator: str | None = None,
    dtype: torch.dtype | None = None,
) -> _kinds.Base:
    """A tensordict with one entry per column of a pandas DataFrame (batch size
    ``[len(dataframe)]`` unless ``batch_size`` or ``auto_batch_size`` says otherwise).

    Keyword Args:
        auto_batch_size: compute the batch size from the entries (at most
            ``batch_dims`` dimensions) instead of using the number of rows.
        batch_dims: with ``auto_batch_size``, the most batch dimensions to keep.
        device: the device of the result.
        batch_size: the batch size of the result.
        separator: split column names at it into nested keys (``"obs.x"`` ->
            ``("obs", "x")`` with ``separator="."``).
        dtype: cast every tensor to it.

    Numeric and boolean columns become tensors (a copy); a categorical column the tensor
    of its codes (``-1`` for a missing value; the categories are dropped, as in the
    reference); a nullable column (``Int64``, ``boolean`` …) holding missing values raises
    a :class:`ValueError` naming it; other columns become a
    :class:`~tensordict.NonTensorStack` of their values. ``auto_batch_size=True`` with a
    ``batch_size`` raises a :class:`TypeError`.

    >>> import pandas as pd
    >>> from tensordict import from_pandas
    >>> df = pd.DataFrame({"obs.x": [1.0, 2.0], "obs.y": [3, 4], "name": ["a", "b"]})
    >>> td = from_pandas(df, separator=".")
    >>> td["obs", "y"], td.get("name").tolist()
    (tensor([3, 4]), ['a', 'b'])
    >>> from_pandas(pd.DataFrame({"c": pd.Categorical(["b", "a", None])}))["c"]
    tensor([ 1,  0, -1], dtype=torch.int8)
    """
    _tabular.check_batch_keywords("from_pandas", auto_batch_size, batch_size)
    pd = pandas_module("from_pandas")
    if isinstance(dataframe, pd.Series):
        dataframe = dataframe.to_frame()
    if not isinstance(dataframe, pd.DataFrame):
        raise TypeError(f"from_pandas needs a pandas DataFrame, got {type(dataframe).__name__}.")
    entries = []
    for name, series in dataframe.items():
        key = _tabular.split_column(name, separator)
        entries.append((key, series_value(pd, series, key)))
    td = _tabular.build(entries, len(dataframe))
    return _tabular.finish(  # type: ignore[no-any-return]
        td,
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        device=device,
        batch_size=batch_size,
        dtype=dtype,
    )


def series_value(pd: Any, series: Any, key: tuple[str, ...]) -> Any:
    """One DataFrame column as a tensor (numeric, boolean or the codes of a categorical)
    or a non-tensor stack."""
    kind = series.dtype
    if isinstance(kind, pd.CategoricalDtype):
        return torch.from_numpy(series.cat.codes.to_numpy(copy=True))
    if isinstance(kind, np.dtype):
        if kind.kind in "biufc":
            return torch.from_numpy(series.to_numpy(copy=True))
    elif pd.api.types.is_bool_dtype(kind) or pd.api.types.is_numeric_dtype(kind):
        numpy_dtype = getattr(kind, "numpy_dtype", None)
        if numpy_dtype is not None and np.dtype(numpy_dtype).kind in "biufc":
            missing = int(series.isna().sum())
            if missing:
                raise ValueError(
                    f"from_pandas: the column {_tabular.key_text(key)} ({kind}) has {missing} "
                    "missing value(s), which a tensor cannot hold. Fill them first "
                    "(DataFrame.fillna) or read the table with from_arrow(..., nulls='fill')."
                )
            return torch.from_numpy(series.to_numpy(dtype=numpy_dtype, copy=True))
    return NonTensorStack.from_list(series.tolist(), ndim=1)


class PandasOps:
    """Mixin of :class:`~tensordict.TensorDictBase`: ``to_pandas`` and ``from_pandas``."""

    def to_pandas(self, *, separator: str | None = None) -> pandas.DataFrame:
        """A pandas DataFrame with one row per element of the (single) batch dimension and
        one column per leaf; needs ``pip install tensordict-core[pandas]``.

        Every tensor must have the shape ``[rows]`` and a dtype NumPy holds (a
        :class:`TypeError` names the key otherwise, nothing is cast). Nested keys need
        ``separator``: ``("obs", "x")`` becomes ``"obs.x"`` with ``separator="."``.
        Non-tensor entries become columns of their Python values.

        >>> import torch
        >>> from tensordict import NonTensorStack, TensorDict
        >>> td = TensorDict(a=torch.arange(2), obs=TensorDict(x=torch.ones(2), batch_size=[2]),
        ...                 s=NonTensorStack("u", "v"), batch_size=[2])
        >>> df = td.to_pandas(separator=".")
        >>> list(df.columns), str(df["obs.x"].dtype)
        (['a', 'obs.x', 's'], 'float32')
        >>> bool((TensorDict.from_pandas(df, separator=".") == td).all())
        True
        """
        return to_pandas(self, separator=separator)

    @classmethod
    def from_pandas(
        cls,
        dataframe: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: torch.device | None = None,
        batch_size: torch.Size | None = None,
        separator: str | None = None,
        dtype: torch.dtype | None = None,
    ) -> Self:
        """A tensordict from a pandas DataFrame: see :func:`tensordict.from_pandas`.

        >>> import pandas as pd
        >>> from tensordict import TensorDict
        >>> TensorDict.from_pandas(pd.DataFrame({"a": [1, 2, 3]}))["a"]
        tensor([1, 2, 3])
        """
        return from_pandas(  # type: ignore[return-value]
            dataframe,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
            separator=separator,
            dtype=dtype,
        )


__all__ = ["PandasOps", "from_pandas", "to_pandas"]
