"""Numpy structured arrays <-> tensordicts, without copies where memory allows.

:func:`from_struct_array` views each numeric field of a structured array as a tensor
(``torch.from_numpy`` on the strided field view); :func:`to_struct_array` goes back. When
the tensors of a tensordict lie interleaved in one block of CPU memory with the same batch
strides — as after ``from_struct_array``, or after indexing its result — the structured
array returned is a view over that memory (a dtype with explicit field offsets); otherwise
a new array is filled.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tensordict._keys.nested import unravel_key
from tensordict._keys.shape import parse_batch_size, parse_device
from tensordict._kinds import kinds as _kinds
from tensordict._leaves.nontensor import DATA_TYPES, NonTensorData, NonTensorStack, is_non_tensor

_Tensor = torch.Tensor

#: torch dtype -> numpy dtype, for the dtypes numpy has.
NUMPY_DTYPES: dict[torch.dtype, np.dtype] = {}
for _dt in (
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
):
    NUMPY_DTYPES[_dt] = torch.empty(0, dtype=_dt).numpy().dtype
del _dt


# ---------------------------------------------------------------------- numpy -> td
def from_struct_array(
    struct_array: Any, what: str, device: Any = None, batch_size: Any = None
) -> _kinds.Dense:
    """The body of ``TensorDict.from_struct_array`` (without auto batch-size)."""
    if not isinstance(struct_array, np.ndarray) or struct_array.dtype.names is None:
        got = (
            f"an array of dtype {struct_array.dtype}"
            if isinstance(struct_array, np.ndarray)
            else type(struct_array).__name__
        )
        raise TypeError(
            f"{what} expects a numpy structured array (a dtype with named fields), got {got}."
        )
    out = struct_to_td(struct_array, device)
    if batch_size is not None:
        out.batch_size = parse_batch_size(batch_size)
    return out


def struct_to_td(struct_array: np.ndarray, device: Any = None) -> _kinds.Dense:
    """A tensordict of batch size ``struct_array.shape`` viewing its fields."""
    device = parse_device(device)
    bs = torch.Size(struct_array.shape)
    names = struct_array.dtype.names
    assert names is not None
    source: dict[str, Any] = {}
    for name in names:
        field = struct_array[name]
        if field.dtype.names is not None:
            source[name] = struct_to_td(field, device)
        else:
            source[name] = _field_value(field, bs, device)
    return _kinds.Dense._new_unsafe(source, bs, device)


def _field_value(field: np.ndarray, bs: torch.Size, device: torch.device | None) -> Any:
    if field.dtype.kind in "biufc":
        try:
            tensor = torch.from_numpy(field)
        except (TypeError, ValueError):
            # misaligned (packed) or byte-swapped fields cannot be viewed: copy them
            try:
                native = np.empty(field.shape, dtype=field.dtype.newbyteorder("="))
                native[...] = field
                tensor = torch.from_numpy(native)
            except TypeError:  # a dtype torch does not have (e.g. float128)
                return NonTensorData._make(field, bs, device)
        if device is not None and tensor.device != device:
            tensor = tensor.to(device)
        return tensor
    # strings, bytes, objects, dates: non-tensor data, one value per element
    if not bs or field.size == 0:
        return NonTensorData._make(field.item() if field.ndim == 0 else field, bs, device)
    return NonTensorStack.from_list(field.tolist(), device=device, ndim=len(bs))


# ---------------------------------------------------------------------- td -> numpy
def to_struct_array(td: Any) -> np.ndarray:
    """The body of ``TensorDictBase.to_struct_array``."""
    view = _view(td)
    if view is not None:
        return view
    bs = tuple(td.batch_size)
    out = np.empty(bs, _dtype_of(td, len(bs), bs, ()))
    _fill(out, td, len(bs))
    return out


def _entries(td: Any) -> dict[str, Any]:
    store = td._tensordict if isinstance(td, _kinds.Dense) else None
    return store if type(store) is dict else dict(td.items())


def _non_tensor_array(value: Any, bs: tuple[Any, ...]) -> tuple[np.ndarray | None, Any]:
    """``(array, field format)`` for a non-tensor entry; array ``None``: fill one by one."""
    data = value.data if type(value) in DATA_TYPES else value.tolist()
    try:
        array = np.asarray(data)
    except ValueError:  # ragged lists and the like
        return None, np.dtype(object)
    nb = len(bs)
    if array.ndim >= nb and array.shape[:nb] == bs:
        return array, (array.dtype, array.shape[nb:])
    if array.ndim == 0:
        return array, array.dtype
    return None, np.dtype(object)


def _dtype_of(td: Any, nb: int, bs: tuple[Any, ...], prefix: tuple[Any, ...]) -> np.dtype:
    fields: list[tuple[Any, ...]] = []
    for key, value in _entries(td).items():
        if isinstance(value, _Tensor):
            np_dtype = NUMPY_DTYPES.get(value.dtype)
            if np_dtype is None:
                raise TypeError(
                    f"to_struct_array: entry {unravel_key(prefix + (key,))!r} has dtype "
                    f"{value.dtype}, which numpy does not support; cast it first (for "
                    "instance with .float())."
                )
            fields.append((key, np_dtype, tuple(value.shape[nb:])))
        elif is_non_tensor(value):
            _, fmt = _non_tensor_array(value, bs)
            fields.append((key, fmt))
        else:
            sub_bs = tuple(value.batch_size)
            sub = _dtype_of(value, len(sub_bs), sub_bs, prefix + (key,))
            fields.append((key, sub, sub_bs[nb:]))
    return np.dtype(fields)


def _fill(out: np.ndarray, td: Any, nb: int) -> None:
    bs = out.shape
    for key, value in _entries(td).items():
        if isinstance(value, _Tensor):
            out[key] = value.detach().cpu().resolve_conj().resolve_neg().numpy()
        elif is_non_tensor(value):
            array, _ = _non_tensor_array(value, bs)
            if array is not None:
                out[key] = array
            else:
                field = out[key]
                data = value.data if type(value) in DATA_TYPES else value.tolist()
                for index in np.ndindex(*bs):
                    field[index] = data
        else:
            _fill(out[key], value, len(value.batch_size))


class _Memory:
    """A raw block of memory exposed to numpy; keeps the objects owning it alive."""

    def __init__(self, address: int, nbytes: int, owners: list[Any]) -> None:
        self.__array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (address, False),
            "version": 3,
        }
        self.owners = owners


class _Layout:
    """What :func:`_view` gathers: leaf addresses, memory ranges and batch strides."""

    def __init__(self, bs: tuple[Any, ...]) -> None:
        self.bs = bs
        self.strides: list[int | None] = [None] * len(bs)
        self.ranges: list[tuple[int, int]] = []
        self.owners: list[Any] = []

    def batch_strides(self, strides: tuple[Any, ...]) -> bool:
        """Record a leaf's batch strides (in bytes); ``False`` if they disagree."""
        for i, size in enumerate(self.bs):
            if size == 1:
                continue
            stride = strides[i]
            if stride < 0:
                return False
            if self.strides[i] is None:
                self.strides[i] = stride
            elif self.strides[i] != stride:
                return False
        return True


def _contiguous(shape: tuple[Any, ...], strides: tuple[Any, ...], itemsize: int) -> bool:
    """Whether dims of ``shape`` with byte ``strides`` are C-contiguous."""
    expected = itemsize
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _leaf(value: Any, layout: _Layout, nb: int) -> tuple[int, Any] | None:
    """``(address, field format)`` of one leaf, or ``None`` if it cannot be viewed."""
    if isinstance(value, _Tensor):
        if (
            value.device.type != "cpu"
            or value.layout != torch.strided
            or value.requires_grad
            or value.is_conj()
            or value.is_neg()
        ):
            return None
        np_dtype = NUMPY_DTYPES.get(value.dtype)
        if np_dtype is None:
            return None
        itemsize = value.element_size()
        shape = tuple(value.shape)
        strides = tuple(s * itemsize for s in value.stride())
        if not _contiguous(shape[nb:], strides[nb:], itemsize):
            return None
        if not layout.batch_strides(strides):
            return None
        storage = value.untyped_storage()
        layout.ranges.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))
        layout.owners.append(value)
        return value.data_ptr(), (np_dtype, shape[nb:])
    if type(value) is NonTensorData and isinstance(value.data, np.ndarray):
        array = value.data
        if array.dtype.hasobject or array.shape[:nb] != layout.bs:
            return None
        itemsize = array.dtype.itemsize
        shape, strides = array.shape, array.strides
        if not _contiguous(shape[nb:], strides[nb:], itemsize):
            return None
        if not layout.batch_strides(strides):
            return None
        address = array.__array_interface__["data"][0]
        end = address + sum((n - 1) * s for n, s in zip(shape, strides, strict=True))
        layout.ranges.append((address, end + itemsize))
        layout.owners.append(array)
        return address, (array.dtype, shape[nb:])
    return None


def _struct_layout(td: Any, layout: _Layout, nb: int) -> tuple[int, np.dtype] | None:
    """``(address, dtype with explicit offsets)`` of a (nested) tensordict, or ``None``."""
    found = []
    for key, value in _entries(td).items():
        if isinstance(value, _Tensor) or type(value) is NonTensorData:
            leaf = _leaf(value, layout, nb)
        elif is_non_tensor(value) or len(value.batch_size) != nb:
            return None
        else:
            leaf = _struct_layout(value, layout, nb)
        if leaf is None:
            return None
        address, fmt = leaf
        found.append((key, address, np.dtype(fmt)))
    if not found:
        return None
    base = min(address for _, address, _ in found)
    end = base
    for _, address, dtype in sorted(found, key=lambda f: f[1]):
        if address < end:  # two fields overlap
            return None
        end = address + dtype.itemsize
    dtype = np.dtype(
        {
            "names": [key for key, _, _ in found],
            "formats": [dtype for _, _, dtype in found],
            "offsets": [address - base for _, address, _ in found],
            "itemsize": max(address - base + dtype.itemsize for _, address, dtype in found),
        }
    )
    return base, dtype


def _view(td: Any) -> np.ndarray | None:
    """A structured array viewing the tensordict's memory, or ``None`` if there is none."""
    bs = tuple(td.batch_size)
    if any(size == 0 for size in bs):
        return None
    layout = _Layout(bs)
    found = _struct_layout(td, layout, len(bs))
    if found is None:
        return None
    base, dtype = found
    strides = tuple(0 if s is None else s for s in layout.strides)
    nbytes = sum((n - 1) * s for n, s in zip(bs, strides, strict=True)) + dtype.itemsize
    # every byte the view spans must belong to the leaves' own memory
    covered = base
    for start, stop in sorted(layout.ranges):
        if start > covered:
            break
        covered = max(covered, stop)
    if covered < base + nbytes:
        return None
    memory = np.asarray(_Memory(base, nbytes, layout.owners))
    view: np.ndarray = np.ndarray(bs, dtype, buffer=memory, offset=0, strides=strides)
    return view
