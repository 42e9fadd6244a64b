"""The HDF5 writes of :class:`~tensordict.memmap.PersistentTensorDict` that its base,
:class:`~tensordict._plugins.api.BackedTensorDict`, leaves to each backend: an indexed
write into a dataset (``_plan_at``, used by ``set_at_``, ``update_at_``, ``update_``,
``ptd[rows] = td``), the removal of an entry and a move within the file (``rename_key_``).
Every write is checked before anything reaches the file, so bad input leaves it unchanged.

>>> import tempfile, torch
>>> from tensordict import PersistentTensorDict, TensorDict
>>> with tempfile.TemporaryDirectory() as tmp:
...     data = TensorDict({"a": torch.zeros(3, 2), "b": torch.ones(3)}, [3])
...     h5 = PersistentTensorDict.from_dict(data, filename=tmp + "/d.h5")
...     h5[1:] = TensorDict({"a": torch.ones(2, 2)}, [2])  # two rows of one dataset
...     _ = h5.rename_key_("b", ("n", "b"))  # moved inside the file
...     print(h5["a"].sum().item(), list(h5.keys(True, True, sort=True)))
...     h5.close()
4.0 ['a', ('n', 'b')]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from tensordict import NonTensorData, NonTensorStack
from tensordict._plugins.api import _check_at, unravel_key
from tensordict.base import NO_DEFAULT


class H5Writes:
    """Mixin: the HDF5 writes of :class:`PersistentTensorDict` (see the module)."""

    # provided by PersistentTensorDict
    _children: dict[str, Any]
    _group: Any
    file: Any
    _writable: Callable[[], None]
    _get_str: Callable[..., Any]
    _set_str: Callable[..., Any]
    _name: Callable[[str], str]
    _meta: Callable[[], dict[str, Any]]
    _set_meta: Callable[..., None]
    _key_names: Callable[[], dict[str, str]]

    def _plan_at(
        self,
        key: str,
        path: tuple[str, ...],
        value: Any,
        index: Any,
        plan: list[Callable[[], None]],
        non_blocking: bool,
    ) -> None:
        """Check an indexed in-place write of the entry ``key`` (``set_at_``,
        ``update_at_``, ``update_``…) and append the write to the file to ``plan``."""
        self._writable()  # in place: allowed while locked, as for a TensorDict
        name = self._name(key)
        target = self._group.get(name)
        if target is None and key in self._meta().get("non_tensor", {}):
            if index is Ellipsis:
                plan.append(lambda: self._set_str(key, value, inplace=True, validated=True))
                return
            current = self._get_str(key, NO_DEFAULT)
            updated = current.clone()
            updated[index] = value
            plan.append(lambda: self._set_str(key, updated, inplace=True, validated=True))
            return
        if target is None or not hasattr(target, "dtype"):
            raise KeyError(
                f"cannot write in place at {unravel_key(path)!r}: no such dataset in "
                f"{self.file.filename!r}{self._group.name}."
            )
        probe = torch.empty(target.shape, dtype=torch.uint8, device="meta")
        _check_at(path, probe, value, index)
        array = _as_array(value, target.dtype, key)
        plan.append(lambda: _write_rows(target, index, array))

    def _remove(self, key: str) -> None:
        name = self._name(key)
        if name in self._group:
            del self._group[name]
            self._children.pop(key, None)
            names = self._key_names()
            if name in names:
                del names[name]
                self._set_meta(keys=names)
        non_tensor = self._meta().get("non_tensor", {})
        if key in non_tensor:
            del non_tensor[key]
            self._set_meta(non_tensor=non_tensor)

    def _move(self, old: str, dst: Any, new: str) -> bool:
        """Move the dataset or group ``old`` to ``new`` of ``dst`` inside the file (a
        non-tensor entry, kept in the group's attribute, is not moved here: False)."""
        name = self._name(old)
        if name not in self._group or not isinstance(dst, H5Writes):
            return False
        target = dst._name(new)
        self._group.move(name, f"{dst._group.name.rstrip('/')}/{target}")
        self._remove_name(name)
        dst._children.pop(new, None)
        self._children.pop(old, None)
        if target != new:
            names = dst._key_names()
            names[target] = new
            dst._set_meta(keys=names)
        return True

    def _remove_name(self, name: str) -> None:
        names = self._key_names()
        if name in names:
            del names[name]
            self._set_meta(keys=names)


def _as_array(value: Any, dtype: Any, key: str) -> np.ndarray:
    if isinstance(value, NonTensorData | NonTensorStack):
        raise TypeError(f"cannot write the non-tensor value {value!r} into the dataset {key!r}")
    tensor = torch.as_tensor(value)
    tensor = tensor.detach().as_subclass(torch.Tensor).cpu()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return np.asarray(tensor.numpy(), dtype=dtype)


def _write_rows(dataset: Any, index: Any, array: np.ndarray) -> None:
    """``dataset[index] = array``; indices h5py cannot take (tensors, unsorted or
    repeated rows, masks) go through a read-modify-write of the dataset."""
    idx = index if isinstance(index, tuple) else (index,)
    simple = all(isinstance(i, int | slice) or i is Ellipsis for i in idx) and all(
        not isinstance(i, slice) or i.step is None or i.step > 0 for i in idx
    )
    if simple:
        dataset[index] = np.broadcast_to(array, dataset[index].shape) if array.ndim else array
        return
    full = torch.from_numpy(np.asarray(dataset[()]))
    full[index] = torch.from_numpy(np.ascontiguousarray(array))
    dataset[...] = full.numpy()
