"""Arrow tables and tensordicts: :func:`to_arrow` and :func:`from_arrow` (extra ``arrow``:
``pip install tensordict-core[arrow]``; ``pyarrow`` is imported on the first call).

One row per element of the single batch dimension, one column per entry:

=======================================  ==============================================
tensordict                               Arrow
=======================================  ==============================================
1-D tensor (bool, int, uint, float16-64)  primitive column (a view for numbers, no copy)
tensor with trailing dims                 ``arrow.fixed_shape_tensor`` column
jagged tensor (``layout=torch.jagged``)   ``large_list`` column
nested tensordict                         ``struct`` column
non-tensor entry (strings …)              the column ``pyarrow.array`` infers
=======================================  ==============================================

and back: numeric columns without nulls are viewed without a copy (the tensor shares the
Arrow buffer), boolean columns are copied (Arrow packs them as bits), ``fixed_size_list``
and ``arrow.fixed_shape_tensor`` columns give trailing dims, ``list``/``large_list`` of
numbers give jagged tensors, ``struct`` columns nested tensordicts, and every other column
(strings, binary, timestamps, dictionary-encoded columns, whose decoded values are kept
even when they are numbers, as in the reference) a :class:`~tensordict.NonTensorStack`
of Python values. A dtype that Arrow cannot hold
(bfloat16, complex, float8 …) is refused with a :class:`TypeError` naming the key.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch

from tensordict._formats import tabular as _tabular
from tensordict._keys.nested import NestedKey
from tensordict._kinds import kinds as _kinds
from tensordict._leaves.nontensor import NonTensorData, NonTensorStack
from tensordict._plugins.siblings import import_extra

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow


#: torch dtype -> numpy dtype of the Arrow type that holds it exactly.
TORCH_TO_NUMPY: dict[torch.dtype, Any] = {
    torch.bool: np.bool_,
    torch.int8: np.int8,
    torch.int16: np.int16,
    torch.int32: np.int32,
    torch.int64: np.int64,
    torch.uint8: np.uint8,
    torch.uint16: np.uint16,
    torch.uint32: np.uint32,
    torch.uint64: np.uint64,
    torch.float16: np.float16,
    torch.float32: np.float32,
    torch.float64: np.float64,
}
#: ``str(arrow type)`` -> (torch dtype, numpy dtype, itemsize) of the numeric Arrow types.
ARROW_NUMERIC: dict[str, tuple[torch.dtype, Any, int]] = {
    "int8": (torch.int8, np.int8, 1),
    "int16": (torch.int16, np.int16, 2),
    "int32": (torch.int32, np.int32, 4),
    "int64": (torch.int64, np.int64, 8),
    "uint8": (torch.uint8, np.uint8, 1),
    "uint16": (torch.uint16, np.uint16, 2),
    "uint32": (torch.uint32, np.uint32, 4),
    "uint64": (torch.uint64, np.uint64, 8),
    "halffloat": (torch.float16, np.float16, 2),
    "float": (torch.float32, np.float32, 4),
    "double": (torch.float64, np.float64, 8),
}
#: pyarrow type factory -> (torch dtype, numpy dtype, itemsize), as ARROW_NUMERIC.
_PA_FACTORIES: dict[str, tuple[torch.dtype, Any, int]] = {
    "int8": ARROW_NUMERIC["int8"],
    "int16": ARROW_NUMERIC["int16"],
    "int32": ARROW_NUMERIC["int32"],
    "int64": ARROW_NUMERIC["int64"],
    "uint8": ARROW_NUMERIC["uint8"],
    "uint16": ARROW_NUMERIC["uint16"],
    "uint32": ARROW_NUMERIC["uint32"],
    "uint64": ARROW_NUMERIC["uint64"],
    "float16": ARROW_NUMERIC["halffloat"],
    "float32": ARROW_NUMERIC["float"],
    "float64": ARROW_NUMERIC["double"],
}
_NUMERIC_BY_ID: dict[int, tuple[torch.dtype, Any, int]] = {}  # filled on first use
ARROW_HOLDS = "bool, int8 to int64, uint8 to uint64, float16, float32 and float64"


def pyarrow_module(what: str) -> Any:
    """``pyarrow``, or the :class:`ModuleNotFoundError` naming ``tensordict-core[arrow]``."""
    return import_extra("pyarrow", _tabular.ARROW_INSTALL, what)


# ----------------------------------------------------------------------------- to Arrow
def to_arrow(td: _kinds.Base) -> pyarrow.Table:
    """An Arrow table with one row per element of ``td``'s single batch dimension and one
    column per entry (see :mod:`tensordict._formats.arrow` for the mapping). Numeric columns view
    the tensors' memory; nothing is cast.

    >>> import torch
    >>> from tensordict import TensorDict, to_arrow
    >>> td = TensorDict(x=torch.arange(3.0), img=torch.zeros(3, 2, 2, dtype=torch.uint8),
    ...                 obs=TensorDict(y=torch.tensor([1, 2, 3]), batch_size=[3]), batch_size=[3])
    >>> table = to_arrow(td)
    >>> table.column_names, table.num_rows
    (['x', 'img', 'obs'], 3)
    >>> str(table.schema.field("obs").type)
    'struct<y: int64>'
    """
    pa = pyarrow_module("to_arrow")
    td = _tabular.as_tensordict(td, "to_arrow")
    n = _tabular.rows(td, "to_arrow")
    items = td._tensordict.items() if isinstance(td, _kinds.Dense) else td.items()
    names: list[str] = []
    arrays: list[Any] = []
    for name, value in items:
        names.append(str(name))
        if (
            type(value) is torch.Tensor
            and value.ndim == 1
            and value.device.type == "cpu"
            and not value.requires_grad
            and value.dtype in TORCH_TO_NUMPY
            and value.is_contiguous()
            and not value.is_conj()
            and not value.is_neg()
        ):  # the common case, without the generic walk
            arrays.append(pa.array(value.numpy()))
        else:
            arrays.append(entry_to_arrow(pa, value, (str(name),), n, "to_arrow"))
    return pa.Table.from_arrays(arrays, names=names)


def entry_to_arrow(pa: Any, value: Any, key: tuple[str, ...], n: int, what: str) -> Any:
    """One entry of a tensordict as an Arrow array of ``n`` rows."""
    if _kinds.is_tensorclass(value):
        value = value._tensordict
    if isinstance(value, _kinds.Base):
        items = list(value.items())
        if not items:
            return pa.StructArray.from_buffers(pa.struct([]), n, [None])
        children = [entry_to_arrow(pa, v, (*key, str(k)), n, what) for k, v in items]
        return pa.StructArray.from_arrays(children, names=[str(k) for k, _ in items])
    if isinstance(value, torch.Tensor):
        return tensor_to_arrow(pa, value, key, what)
    if isinstance(value, (NonTensorData, NonTensorStack)):
        values = _tabular.non_tensor_values(value, n)
        try:
            return pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as err:
            raise TypeError(
                f"{what}: the non-tensor entry {_tabular.key_text(key)} holds values that "
                f"Arrow cannot hold ({err})."
            ) from None
    raise TypeError(
        f"{what}: the entry {_tabular.key_text(key)} is a {type(value).__name__}, which has "
        "no Arrow column type."
    )


def tensor_to_arrow(pa: Any, tensor: torch.Tensor, key: tuple[str, ...], what: str) -> Any:
    """A tensor of shape ``[rows, *trailing]`` as an Arrow array: a primitive array for
    1-D tensors, an ``arrow.fixed_shape_tensor`` array otherwise, a ``large_list`` array
    for a jagged tensor. Contiguous numeric tensors are viewed, not copied."""
    if tensor.is_nested:
        return _jagged_to_arrow(pa, tensor, key, what)
    t = _tabular.plain_tensor(tensor)
    if t.dtype not in TORCH_TO_NUMPY:
        _tabular.refuse_dtype(what, key, t.dtype, "Arrow", ARROW_HOLDS)
    array = np.ascontiguousarray(t.numpy())
    if t.ndim == 1:
        return pa.array(array)
    flat = pa.array(array.reshape(-1))
    inner = [int(d) for d in t.shape[1:]]
    storage = pa.Array.from_buffers(
        pa.list_(flat.type, math.prod(inner)), len(t), [None], children=[flat]
    )
    return pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(flat.type, inner), storage)


def _jagged_to_arrow(pa: Any, tensor: torch.Tensor, key: tuple[str, ...], what: str) -> Any:
    if tensor.layout is not torch.jagged or getattr(tensor, "_ragged_idx", 1) != 1:
        raise ValueError(
            f"{what}: the nested tensor {_tabular.key_text(key)} must be jagged "
            "(layout=torch.jagged) with its ragged dimension right after the batch one."
        )
    values = tensor_to_arrow(pa, tensor.values(), key, what)
    offsets = tensor.offsets()  # type: ignore[attr-defined]
    offsets = _tabular.plain_tensor(offsets).to(torch.int64).numpy()
    return pa.LargeListArray.from_arrays(pa.array(offsets), values)


# ----------------------------------------------------------------------------- from Arrow
def from_arrow(
    table: Any,
    *,
    copy: bool | None = None,
    nulls: Literal["raise", "fill", "mask"] = "raise",
    mask_key: NestedKey | None = None,
    device: torch.device | str | int | None = None,
) -> _kinds.Dense:
    """A :class:`~tensordict.TensorDict` of batch size ``[num_rows]`` with one entry per
    column of an Arrow table (see :mod:`tensordict._formats.arrow` for the mapping).

    Args:
        table: a ``pyarrow.Table`` or ``RecordBatch``, or anything :func:`pyarrow.table`
            accepts (an object with ``__arrow_c_stream__``, a dict of arrays …).

    Keyword Args:
        copy: ``None`` views the numeric columns whose Arrow buffers are mutable and
            copies the read-only ones (a memory-mapped file, for instance), ``True``
            copies every column, ``False`` views every numeric column it can (writing
            into a view of a read-only buffer is then undefined).
        nulls: ``"raise"`` (a :class:`ValueError` naming the column), ``"fill"`` (NaN for
            floating point, 0 or ``False`` otherwise, ``None`` in non-tensor columns,
            an empty row in jagged ones) or ``"mask"`` (as ``"fill"``, plus a boolean
            entry ``(*mask_key, *key)``, ``True`` where the row has no null, for each
            entry that has nulls).
        mask_key: where ``nulls="mask"`` puts the masks (default ``"_mask"``).
        device: the device of the result (default: CPU tensors, no device).

    A column of several chunks is first concatenated (a copy).

    >>> import numpy as np
    >>> import pyarrow as pa
    >>> from tensordict import from_arrow
    >>> table = pa.table({"x": np.arange(3, dtype=np.float32), "s": ["a", "b", None]})
    >>> td = from_arrow(table, nulls="mask")
    >>> td["x"], td.get("s").tolist(), td["_mask", "s"]
    (tensor([0., 1., 2.]), ['a', 'b', None], tensor([ True,  True, False]))
    >>> td["x"].data_ptr() == table.column("x").chunk(0).buffers()[1].address  # no copy
    True
    """
    pa = pyarrow_module("from_arrow")
    mask_prefix = _tabular.mask_key_tuple(nulls, mask_key)
    if copy is not None and type(copy) is not bool:
        raise TypeError(f"copy must be True, False or None, got {copy!r}.")
    table = as_table(pa, table)
    reader = ArrowReader(pa, copy=copy, nulls=nulls)
    entries: list[tuple[tuple[str, ...], Any]] = []
    for name, column in zip(table.column_names, table.columns):
        reader.read(column, (name,), entries)
    entries += [((*mask_prefix, *key), mask) for key, mask in reader.masks]
    td = _tabular.build(entries, table.num_rows)
    return td if device is None else td.to(device)  # type: ignore[no-any-return]


def as_table(pa: Any, table: Any) -> Any:
    """``table`` as a ``pyarrow.Table``."""
    if isinstance(table, pa.Table):
        return table
    if isinstance(table, pa.RecordBatch):
        return pa.Table.from_batches([table])
    try:
        return pa.table(table)
    except (TypeError, ValueError, pa.ArrowException) as err:
        raise TypeError(
            "from_arrow needs a pyarrow.Table or RecordBatch, or an object that "
            f"pyarrow.table() accepts; got {type(table).__name__} ({err})."
        ) from None


class ArrowReader:
    """Turns Arrow arrays into tensordict entries under one ``copy``/``nulls`` policy,
    collecting the masks of ``nulls="mask"`` in :attr:`masks`."""

    def __init__(self, pa: Any, *, copy: bool | None, nulls: str) -> None:
        self.pa = pa
        self.pc = import_extra("pyarrow.compute", _tabular.ARROW_INSTALL, "from_arrow")
        self.copy = copy
        self.nulls = nulls
        self.masks: list[tuple[tuple[str, ...], torch.Tensor]] = []
        #: Arrow type id -> (torch dtype, numpy dtype, itemsize) of the numeric types
        if not _NUMERIC_BY_ID:
            _NUMERIC_BY_ID.update({getattr(pa, n)().id: v for n, v in _PA_FACTORIES.items()})
        self._numeric = _NUMERIC_BY_ID

    def read(
        self, column: Any, key: tuple[str, ...], out: list[tuple[tuple[str, ...], Any]]
    ) -> None:
        """Append the entries of one column (several for a struct) to ``out``."""
        pa = self.pa
        arr = column
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
        kind = arr.type
        numeric = self._numeric.get(kind.id)
        if numeric is not None and not arr.null_count:  # the common case, straight to a view
            tensor = self._view(arr, *numeric)
            out.append((key, tensor.clone() if self.copy else tensor))
            return None
        if pa.types.is_dictionary(kind):
            out.append((key, self.decoded(arr, key)))
            return None
        if isinstance(kind, pa.ExtensionType) and not isinstance(kind, pa.FixedShapeTensorType):
            return self.read(arr.storage, key, out)
        if pa.types.is_struct(kind):
            children = arr.flatten()  # the struct's own nulls are merged into each field
            if not children:
                out.append((key, _kinds.Dense(batch_size=[len(arr)])))
            for field, child in zip(kind, children):
                self.read(child, (*key, field.name), out)
            return None
        out.append((key, self.leaf(arr, key)))
        return None

    # ------------------------------------------------------------------ leaves
    def leaf(self, arr: Any, key: tuple[str, ...]) -> Any:
        pa = self.pa
        dense = self.dense(arr)
        if dense is not None:
            tensor, valid = dense
            if valid is None:
                return tensor.clone() if self.copy else tensor
            self._nulls(key, int((~valid).sum()))
            tensor = tensor.clone()
            tensor[~torch.from_numpy(np.ascontiguousarray(valid))] = _fill(tensor.dtype)
            self._mask(key, np.asarray(valid.reshape(len(arr), -1).all(1)))
            return tensor
        kind = arr.type
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            jagged = self.jagged(arr, key)
            if jagged is not None:
                return jagged
        if arr.null_count:
            self._nulls(key, arr.null_count)
            self._mask(key, self._valid(arr))
        return NonTensorStack.from_list(arr.to_pylist(), ndim=1)

    def decoded(self, arr: Any, key: tuple[str, ...]) -> NonTensorStack:
        """A dictionary-encoded array as a :class:`NonTensorStack` of its decoded values
        (the categories a pandas categorical is written with); a null row follows the
        ``nulls`` policy."""
        if arr.null_count:
            self._nulls(key, arr.null_count)
            self._mask(key, self._valid(arr))
        return NonTensorStack.from_list(arr.to_pylist(), ndim=1)

    def dense(self, arr: Any) -> tuple[torch.Tensor, np.ndarray | None] | None:
        """``(tensor [rows, *dims], element validity or None)`` of a numeric, boolean,
        fixed-size list or fixed-shape tensor array; ``None`` for any other type."""
        pa = self.pa
        kind = arr.type
        n = len(arr)
        if isinstance(kind, pa.FixedShapeTensorType):
            res = self.dense(arr.storage)
            if res is None:
                return None
            tensor, valid = res
            # the values are laid out as ``shape``; the tensors' dims are ``shape`` permuted
            shape = [int(d) for d in kind.shape]
            perm = list(kind.permutation) if kind.permutation else list(range(len(shape)))
            physical = [n, *shape]
            order = [0, *(1 + p for p in perm)]
            tensor = tensor.reshape(physical).permute(order)
            if valid is not None:
                valid = valid.reshape(physical).transpose(order)
            return tensor, valid
        if pa.types.is_fixed_size_list(kind):
            size = kind.list_size
            res = self.dense(arr.values.slice(arr.offset * size, n * size))
            if res is None:
                return None
            tensor, valid = res
            tensor = tensor.reshape(n, size, *tensor.shape[1:])
            if valid is not None:
                valid = valid.reshape(tensor.shape)
            if arr.null_count:
                rows = self._valid(arr).reshape(n, *[1] * (tensor.ndim - 1))
                full = np.broadcast_to(rows, tuple(tensor.shape))
                valid = full if valid is None else valid & full
            return tensor, valid
        valid = self._valid(arr) if arr.null_count else None
        if pa.types.is_boolean(kind):
            filled = self.pc.fill_null(arr, False) if arr.null_count else arr
            return torch.from_numpy(filled.to_numpy(zero_copy_only=False).astype(np.bool_)), valid
        numeric = ARROW_NUMERIC.get(str(kind))
        if numeric is None:
            return None
        return self._view(arr, *numeric), valid

    def jagged(self, arr: Any, key: tuple[str, ...]) -> torch.Tensor | None:
        """A ``list``/``large_list`` array of numbers as a jagged tensor (``None`` when its
        values are not numbers)."""
        pa = self.pa
        row_valid = None
        if arr.null_count:
            row_valid = self._valid(arr)
            self._nulls(key, arr.null_count)
            arr = self.pc.if_else(self.pc.is_valid(arr), arr, pa.scalar([], type=arr.type))
        offsets = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        start = int(offsets[0])
        res = self.dense(arr.values.slice(start, int(offsets[-1]) - start))
        if res is None:
            return None
        values, valid = res
        offsets -= start
        if valid is not None:
            bad = ~valid.reshape(len(values), -1).all(1)
            self._nulls(key, int(bad.sum()))
            values = values.clone()
            values[~torch.from_numpy(np.ascontiguousarray(valid))] = _fill(values.dtype)
            cum = np.concatenate([[0], np.cumsum(bad)])
            ok = cum[offsets[1:]] == cum[offsets[:-1]]
            row_valid = ok if row_valid is None else row_valid & ok
        if row_valid is not None:
            self._mask(key, row_valid)
        elif self.copy:
            values = values.clone()
        return torch.nested.nested_tensor_from_jagged(values, torch.from_numpy(offsets))

    # ------------------------------------------------------------------ helpers
    def _view(self, arr: Any, dtype: torch.dtype, np_dtype: Any, itemsize: int) -> torch.Tensor:
        """The values of a numeric array, viewed (no copy) where the policy allows."""
        n = len(arr)
        buf = arr.buffers()[1]
        if n == 0 or buf is None:
            return torch.empty(0, dtype=dtype)
        array = np.frombuffer(buf, dtype=np_dtype, count=n, offset=arr.offset * itemsize)
        if array.flags.writeable:
            return torch.from_numpy(array)
        if self.copy is None:
            return torch.from_numpy(array.copy())
        with warnings.catch_warnings():  # copy=False on a read-only buffer: viewed anyway
            warnings.simplefilter("ignore", UserWarning)
            return torch.from_numpy(array)

    def _valid(self, arr: Any) -> np.ndarray:
        return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=np.bool_)

    def _nulls(self, key: tuple[str, ...], count: int) -> None:
        if count and self.nulls == "raise":
            raise ValueError(
                f"from_arrow: the column {_tabular.key_text(key)} has {count} null value(s). "
                "Pass nulls='fill' to fill them (NaN, 0, False or None), or nulls='mask' to "
                "fill them and add a mask entry."
            )

    def _mask(self, key: tuple[str, ...], valid: np.ndarray) -> None:
        if self.nulls == "mask" and not valid.all():
            self.masks.append((key, torch.from_numpy(np.ascontiguousarray(valid))))


def _fill(dtype: torch.dtype) -> float | int | bool:
    if dtype.is_floating_point:
        return math.nan
    return False if dtype is torch.bool else 0
