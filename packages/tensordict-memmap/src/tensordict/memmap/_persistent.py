"""``PersistentTensorDict``: a tensordict view of an HDF5 file (extra ``h5``).

Datasets are tensors, groups are nested tensordicts, and nothing is read until asked
for: ``ptd["key"]`` reads one dataset, ``ptd[rows]`` reads only the selected rows of
every dataset (into an in-memory :class:`~tensordict.TensorDict`). Writes (``set``,
``ptd[rows] = td``) go to the file. Each group's batch size, dimension names and
non-tensor values live in a JSON attribute (``"tensordict"``) of the group, so
``to_h5``/``from_h5`` round-trip; a file written by other tools (the reference library
records no batch size) gets its batch size from the caller, else each group gets the
largest batch size its datasets share, as the reference library reads it. In-place
writes (``set_``, ``update_``, ``ptd[rows] = td``) keep every dataset's shape. Once the
file is closed, any access raises ``RuntimeError`` naming it. ``h5py`` is imported only
when HDF5 is used.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tensordict import NonTensorData, NonTensorStack, TensorDict
from tensordict._plugins.api import (
    BackedTensorDict,
    InplaceWriteError,
    common_leading,
    is_tensorclass,
)
from tensordict._plugins.api import tabular as _tabular
from tensordict.base import NO_DEFAULT, TensorDictBase
from tensordict.memmap import _codec, _fs
from tensordict.memmap._persistent_ops import H5Writes, _as_array, _write_rows

ATTR = "tensordict"
_EXTRA = "pip install tensordict-memmap[h5]"


def _h5py() -> Any:
    try:
        import h5py
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(f"HDF5 support needs the 'h5py' package: {_EXTRA}") from err
    return h5py


class PersistentTensorDict(H5Writes, BackedTensorDict):
    """A tensordict stored in an HDF5 file, read lazily and written through.

    Args:
        batch_size: the batch size (default: the one recorded in the file, else
            inferred from the datasets' common leading dimensions when
            ``validate_batch_size`` is false, else ``[]``).
        filename: the file to open (or give ``group``, an open ``h5py`` group).
        mode: ``"r"``, ``"r+"``, ``"w"`` or ``"a"`` (h5py's modes).
        device: device the tensors are moved to when read.
        validate_batch_size: check that every dataset starts with the batch size.
        non_tensor_as_stack: read arrays of strings as a ``NonTensorStack``.
        allow_pickle: accepted for compatibility; HDF5 values are never pickled.
        **kwargs: options for ``create_dataset`` (``compression="gzip"`` …).

    >>> import tempfile, torch
    >>> from tensordict import TensorDict, PersistentTensorDict
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     td = TensorDict({"obs": torch.arange(6).view(3, 2), "info": {"r": torch.ones(3)}}, [3])
    ...     with PersistentTensorDict.from_dict(td, filename=tmp + "/data.h5") as h5:
    ...         print(h5[1:]["obs"], h5.batch_size)
    ...     with TensorDict.from_h5(tmp + "/data.h5") as h5:
    ...         print(h5["info", "r"], h5.to_tensordict().batch_size)
    tensor([[2, 3],
            [4, 5]]) torch.Size([3])
    tensor([1., 1., 1.]) torch.Size([3])
    """

    LOCKING = None

    def __init__(
        self,
        *,
        batch_size: Sequence[int] | torch.Size | None = None,
        filename: str | Path | None = None,
        group: Any = None,
        mode: str = "r",
        backend: str = "h5",
        device: torch.device | str | None = None,
        validate_batch_size: bool = True,
        non_tensor_as_stack: bool = False,
        allow_pickle: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if backend != "h5":
            raise NotImplementedError(f"backend={backend!r}: only 'h5' is supported")
        h5py = _h5py()
        _codec.check_allow_pickle(allow_pickle)
        if (filename is None) == (group is None):
            raise ValueError("PersistentTensorDict needs exactly one of filename= or group=")
        if group is None:
            group = h5py.File(filename, mode)
        self._h5group = group
        self.file = group.file
        self._filename = str(group.file.filename)
        #: groups without a recorded batch size get the largest one their datasets share
        self._infer_batch = False
        self._mode = mode
        self._kwargs = dict(kwargs)
        self._device = None if device is None else torch.device(device)
        self._non_tensor_as_stack = non_tensor_as_stack
        self._children: dict[str, PersistentTensorDict] = {}
        meta = self._meta()
        if batch_size is None:
            stored = meta.get("batch_size")
            if isinstance(stored, list):
                batch_size = stored
            elif not validate_batch_size:
                batch_size = common_leading(self._shapes(), None)
            else:
                batch_size = []
        self._batch_size = torch.Size(batch_size)
        self._names = meta.get("names")
        if validate_batch_size:
            self._check_batch(self._batch_size)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_h5(
        cls,
        filename: Any,
        *,
        mode: str = "r",
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        batch_size: Sequence[int] | torch.Size | None = None,
        non_tensor_as_stack: bool = False,
    ) -> PersistentTensorDict:
        """Open an HDF5 file (a path, or an open ``h5py`` file or group).

        The batch size is ``batch_size`` if given, else the one recorded by ``to_h5``,
        else the datasets' common leading dimensions (at most ``batch_dims``; with
        ``auto_batch_size`` even when one is recorded). A nested group without a recorded
        batch size gets the common leading dimensions of its own datasets, as the
        reference library does for the files it writes (which record none).
        """
        _tabular.check_batch_keywords("from_h5", auto_batch_size, batch_size)
        h5py = _h5py()
        group = filename if isinstance(filename, (h5py.File, h5py.Group)) else None
        kwargs: dict[str, Any] = {"group": group} if group is not None else {"filename": filename}
        out = cls(
            batch_size=batch_size or [],
            mode=mode,
            non_tensor_as_stack=non_tensor_as_stack,
            **kwargs,
        )
        if batch_size is None:
            stored = out._meta().get("batch_size")
            if isinstance(stored, list) and not auto_batch_size:
                out._batch_size = torch.Size(stored)
            else:
                out._batch_size = torch.Size(common_leading(out._shapes(), batch_dims))
                out._infer_batch = True
            out._check_batch(out._batch_size)
        return out

    @classmethod
    def from_dict(  # type: ignore[override]
        cls,
        input_dict: Any,
        filename: str | Path,
        *,
        auto_batch_size: bool = False,
        batch_size: Sequence[int] | torch.Size | None = None,
        device: torch.device | str | None = None,
        backend: str = "h5",
        batch_dims: int | None = None,
        allow_pickle: bool | None = None,
        **kwargs: Any,
    ) -> PersistentTensorDict:
        """Write a tensordict (or nested dict of tensors) to a new HDF5 file and open it.

        A dict gets ``batch_size``, or (``auto_batch_size``, or no batch size given) the
        leading dimensions its tensors share, at most ``batch_dims``. ``mode`` (in
        ``kwargs``, default ``"w"``) opens the file; other ``kwargs`` go to
        ``create_dataset`` for every dataset (``compression="gzip"`` …).
        """
        if is_tensorclass(input_dict):
            input_dict = input_dict._tensordict
        if not isinstance(input_dict, TensorDictBase):
            input_dict = TensorDict.from_dict(
                input_dict,
                batch_size=batch_size,
                auto_batch_size=auto_batch_size or batch_size is None,
                batch_dims=batch_dims,
            )
        elif batch_size is not None:
            input_dict = input_dict.clone(False)
            input_dict.batch_size = batch_size
        elif auto_batch_size:
            input_dict = input_dict.clone(False).auto_batch_size_(batch_dims)
        out = cls(
            batch_size=input_dict.batch_size,
            filename=filename,
            mode=kwargs.pop("mode", "w"),
            device=device,
            backend=backend,
            allow_pickle=allow_pickle,
            **kwargs,
        )
        out._write_level(input_dict)
        return out

    # ------------------------------------------------------------------ file access
    def _meta(self) -> dict[str, Any]:
        raw = self._group.attrs.get(ATTR)
        if raw is None:
            return {}
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8")
        try:
            meta = json.loads(raw)
        except ValueError as err:
            raise ValueError(
                f"{self.file.filename!r}{self._group.name}: bad {ATTR!r} attribute ({err})"
            ) from None
        return meta if isinstance(meta, dict) else {}

    def _set_meta(self, **changes: Any) -> None:
        meta = self._meta()
        meta.update(changes)
        self._group.attrs[ATTR] = json.dumps(meta)

    def _key_names(self) -> dict[str, str]:
        """HDF5 member name -> key, for keys stored under an encoded name."""
        return dict(self._meta().get("keys", {}))

    def _name(self, key: str) -> str:
        if _fs.is_plain_name(key) and not key.startswith("%"):
            return key
        return _fs.encode_key(key)

    def _entries(self) -> Iterator[tuple[str, str]]:
        h5py = _h5py()
        names = self._key_names()
        for name, obj in self._group.items():
            kind = "group" if isinstance(obj, h5py.Group) else "dataset"
            yield names.get(name, name), kind
        for key in self._meta().get("non_tensor", {}):
            yield key, "non_tensor"

    def _members(self) -> Iterator[tuple[str, str]]:
        """``(key, "group" | "tensor" | "non_tensor")``: datasets of strings and the values
        of the group's attribute are non-tensor entries."""
        for key, kind in self._entries():
            if kind == "dataset" and _is_string_dataset(self._group[self._name(key)]):
                kind = "non_tensor"
            yield key, "tensor" if kind == "dataset" else kind

    def _leaf_meta(self, key: str) -> tuple[torch.Size, torch.dtype] | None:
        dataset = self._dataset(key)
        if dataset is None or dataset.dtype.kind in "SOU":
            return None
        return torch.Size(dataset.shape), torch.from_numpy(np.empty(0, dataset.dtype)).dtype

    def _dataset(self, key: str) -> Any:
        """The h5py dataset of ``key`` (None for a group, a non-tensor or a missing key)."""
        obj = self._group.get(self._name(key))
        return obj if obj is not None and hasattr(obj, "dtype") else None

    def _read_names(self) -> list[str | None] | None:
        return self._names

    def _write_names(self, names: list[str | None] | None) -> None:
        self._set_meta(names=names)
        self._names = names

    def _where(self) -> str:
        return f"the HDF5 file {self._filename!r} (group {self._h5group.name!r})"

    def _shapes(self) -> list[tuple[int, ...]]:
        """Shapes of every dataset under this group (nested groups included)."""
        return _dataset_shapes(self._group)

    def _check_batch(self, batch: torch.Size) -> None:
        h5py = _h5py()
        n = len(batch)
        for obj in self._group.values():
            shape = tuple(obj.shape) if isinstance(obj, h5py.Dataset) else None
            if shape is not None and shape[:n] != tuple(batch):
                raise RuntimeError(
                    f"batch size {list(batch)} does not match the dataset {obj.name!r} of shape "
                    f"{list(shape)} in {self.file.filename!r}: its leading dimensions must equal "
                    "the batch size."
                )

    @property
    def _group(self) -> Any:
        """The h5py group; ``RuntimeError`` naming the file once it is closed."""
        group = self._h5group
        if not group:  # h5py: an object of a closed file is not valid
            raise RuntimeError(
                f"the HDF5 file {self._filename!r} of this PersistentTensorDict is closed; "
                "reopen it with PersistentTensorDict.from_h5(filename, mode=...)."
            )
        return group

    def _writable(self) -> None:
        self._group  # noqa: B018 - raises once the file is closed
        if self.file.mode == "r":
            raise RuntimeError(
                f"{self.file.filename!r} is open read-only (mode='r'); open it with mode='r+' "
                "or 'a' to write."
            )

    def _child(self, key: str) -> PersistentTensorDict:
        child = self._children.get(key)
        if child is None or not child._h5group:
            group = self._group[self._name(key)]
            meta_batch = None
            raw = group.attrs.get(ATTR)
            if raw is None:
                meta_batch = list(self._batch_size)
                if self._infer_batch:  # its own largest batch size (at least the parent's)
                    shapes = _dataset_shapes(group)
                    if shapes:
                        meta_batch = common_leading(shapes, None)
            child = PersistentTensorDict(
                group=group,
                batch_size=meta_batch,
                mode=self._mode,
                device=self._device,
                non_tensor_as_stack=self._non_tensor_as_stack,
                **self._kwargs,
            )
            child._infer_batch = self._infer_batch
            self._children[key] = child
        return child

    def _read(self, dataset: Any, index: Any = None) -> Any:
        h5py = _h5py()
        if h5py.check_string_dtype(dataset.dtype) is not None or dataset.dtype.kind in "SOU":
            value = dataset[()] if index is None else dataset[index]
            if isinstance(value, np.ndarray):
                if self._non_tensor_as_stack and value.ndim:
                    return NonTensorStack.from_list(value.tolist())
                value = value.tolist()
            return NonTensorData(value, batch_size=self._batch_size if index is None else [])
        array = dataset[()] if index is None else _read_rows(dataset, index)
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        return tensor if self._device is None else tensor.to(self._device)

    # ------------------------------------------------------------------ primitives
    @property
    def batch_size(self) -> torch.Size:
        """The batch size (settable; checked against the datasets)."""
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Sequence[int]) -> None:
        batch = torch.Size(value)
        self._check_batch(batch)
        self._batch_size = batch
        if self.file.mode != "r":
            self._set_meta(batch_size=list(batch))

    @property
    def kwargs(self) -> dict[str, Any]:
        """The ``create_dataset`` options used for new datasets."""
        return dict(self._kwargs)

    def _get_str(self, key: str, default: Any) -> Any:
        h5py = _h5py()
        name = self._name(key)
        if name in self._group:
            obj = self._group[name]
            if isinstance(obj, h5py.Group):
                return self._child(key)
            return self._read(obj)
        non_tensor = self._meta().get("non_tensor", {})
        if key in non_tensor:
            entry = non_tensor[key]
            if "stack" in entry:
                return NonTensorStack.from_list(
                    entry["stack"], ndim=len(entry.get("shape", [])) or None
                )
            return NonTensorData(entry.get("value"), batch_size=self._batch_size)
        if default is NO_DEFAULT:
            raise KeyError(f"key {key!r} not found in {self.file.filename!r}{self._group.name}")
        return default

    def _set_str(
        self, key: str, value: Any, *, inplace: bool, validated: bool, non_blocking: bool = False
    ) -> PersistentTensorDict:
        self._check_set(key, inplace)
        name = self._name(key)
        if is_tensorclass(value):
            value = value._tensordict
        if isinstance(value, dict):
            value = TensorDict.from_dict(value, batch_size=self._batch_size)
        existing = self._group.get(name) if inplace else None
        if existing is not None and not _is_string_dataset(existing):
            self._write_in_place(key, existing, value)
            return self
        if name != key:
            names = self._key_names()
            names[name] = key
            self._set_meta(keys=names)
        if isinstance(value, (NonTensorData, NonTensorStack)) or not isinstance(
            value, (torch.Tensor, TensorDictBase, np.ndarray)
        ):
            self._set_non_tensor(key, value)
            return self
        self._drop_non_tensor(key)
        if isinstance(value, TensorDictBase):
            if name in self._group:
                del self._group[name]
                self._children.pop(key, None)
            group = self._group.require_group(name)
            child = PersistentTensorDict(
                group=group,
                batch_size=value.batch_size,
                mode=self._mode,
                device=self._device,
                **self._kwargs,
            )
            child._write_level(value)
            self._children[key] = child
            return self
        array = _to_numpy(value, key)
        if tuple(array.shape[: len(self._batch_size)]) != tuple(self._batch_size):
            raise RuntimeError(
                f"batch dimension mismatch for key {key!r}: shape {list(array.shape)} does not "
                f"start with the batch size {list(self._batch_size)}."
            )
        if name in self._group:
            del self._group[name]
        self._group.create_dataset(name, data=array, **self._kwargs)
        return self

    def _write_in_place(self, key: str, existing: Any, value: Any) -> None:
        """``set_``/``set(..., inplace=True)`` into the existing dataset or group ``existing``:
        the value must be of the same kind and have (or broadcast to) the dataset's shape;
        checked before anything is written."""
        h5py = _h5py()
        where = f"{self._filename!r} (group {self._group.name!r})"
        if isinstance(existing, h5py.Group):
            if not isinstance(value, TensorDictBase):
                raise InplaceWriteError(
                    f"cannot write a {type(value).__name__} in place into entry {key!r} of "
                    f"{where}, which holds a tensordict (an HDF5 group)."
                )
            self._child(key).update_(value)
            return
        if isinstance(value, (TensorDictBase, NonTensorData, NonTensorStack, str, bytes)):
            raise InplaceWriteError(
                f"cannot write a {type(value).__name__} in place into entry {key!r} of "
                f"{where}, which holds a tensor (an HDF5 dataset); replace it with set()."
            )
        shape = tuple(value.shape) if hasattr(value, "shape") else tuple(np.shape(value))
        try:
            fits = torch.broadcast_shapes(shape, existing.shape) == torch.Size(existing.shape)
        except RuntimeError:
            fits = False
        if not fits:
            raise InplaceWriteError(
                f"cannot write a value of shape {shape} in place into entry {key!r} of shape "
                f"{tuple(existing.shape)} in {where}: in place, the value must have (or "
                "broadcast to) the entry's shape; replace the entry with set() instead."
            )
        _write_rows(existing, Ellipsis, _as_array(value, existing.dtype, key))

    def _set_non_tensor(self, key: str, value: Any) -> None:
        if isinstance(value, NonTensorStack):
            entry: dict[str, Any] = {"stack": value.tolist(), "shape": list(value.batch_size)}
        else:
            data = value.data if isinstance(value, NonTensorData) else value
            entry = {"value": data}
        if not _codec.is_json_exact(entry):
            raise TypeError(
                f"the non-tensor value at {key!r} cannot be stored in HDF5: it is not JSON "
                f"({type(value).__name__})."
            )
        name = self._name(key)
        if name in self._group:
            del self._group[name]
        non_tensor = dict(self._meta().get("non_tensor", {}))
        non_tensor[key] = entry
        self._set_meta(non_tensor=non_tensor)

    def _drop_non_tensor(self, key: str) -> None:
        non_tensor = self._meta().get("non_tensor", {})
        if key in non_tensor:
            del non_tensor[key]
            self._set_meta(non_tensor=non_tensor)

    def _write_level(self, td: TensorDictBase) -> None:
        names = None
        try:
            names = list(td.names)
            if all(n is None for n in names):
                names = None
        except (AttributeError, RuntimeError):
            names = None
        self._set_meta(batch_size=list(td.batch_size), names=names)
        self._batch_size = td.batch_size
        self._names = names
        for key in td.keys():
            self._set_str(key, td._get_str(key, NO_DEFAULT), inplace=False, validated=True)

    # ------------------------------------------------------------------ indexing
    def _index(self, index: Any) -> TensorDict:
        """The selected rows of every dataset, read into memory (nothing else is read)."""
        bs = self._batch_size
        probe = torch.zeros((), dtype=torch.uint8).expand(bs)[index]
        new_bs = probe.shape
        entries: dict[str, Any] = {}
        h5py = _h5py()
        for key, kind in self._entries():
            if kind == "group":
                entries[key] = self._child(key)._index(index)
            elif kind == "dataset":
                obj = self._group[self._name(key)]
                if h5py.check_string_dtype(obj.dtype) is not None or obj.dtype.kind in "SOU":
                    entries[key] = NonTensorData(self._read(obj).data, batch_size=new_bs)
                else:
                    tensor = torch.from_numpy(np.ascontiguousarray(_read_rows(obj, index, bs)))
                    entries[key] = tensor if self._device is None else tensor.to(self._device)
            else:
                value = self._get_str(key, NO_DEFAULT)
                entries[key] = (
                    value[index]
                    if isinstance(value, NonTensorStack)
                    else NonTensorData(value.data, batch_size=new_bs)
                )
        return TensorDict(entries, batch_size=new_bs, device=self._device)

    # ------------------------------------------------------------------ conversions
    def _shallow(self, device: Any = NO_DEFAULT) -> PersistentTensorDict:
        """Another object on the same group (``device``: where its reads go)."""
        return PersistentTensorDict(
            group=self._group,
            batch_size=self._batch_size,
            mode=self._mode,
            device=self._device if device is NO_DEFAULT else device,
            non_tensor_as_stack=self._non_tensor_as_stack,
            **self._kwargs,
        )

    def close(self) -> None:
        """Close the HDF5 file."""
        self.file.close()

    def __getstate__(self) -> dict[str, Any]:
        mode = self._mode if self._mode in ("r", "r+", "a") else "r+"
        return {
            "filename": self._filename,
            "group": self._group.name,
            "mode": mode,
            "batch_size": list(self._batch_size),
            "device": self._device,
            "kwargs": self._kwargs,
            "non_tensor_as_stack": self._non_tensor_as_stack,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        h5py = _h5py()
        file = h5py.File(state["filename"], state["mode"])
        group = file[state["group"]]
        self.__init__(  # type: ignore[misc]
            batch_size=state["batch_size"],
            group=group,
            mode=state["mode"],
            device=state["device"],
            non_tensor_as_stack=state["non_tensor_as_stack"],
            **state["kwargs"],
        )

    def __repr__(self) -> str:
        if not self._h5group:
            return f"PersistentTensorDict(closed file {self._filename!r})"
        h5py = _h5py()
        lines = []
        for key, kind in self._entries():
            if kind == "group":
                text = f"PersistentTensorDict(group={self._group[self._name(key)].name!r})"
            elif kind == "dataset":
                obj = self._group[self._name(key)]
                text = f"Dataset(shape={tuple(obj.shape)}, dtype={obj.dtype})"
            else:
                text = "NonTensorData"
            lines.append(f"        {key}: {text}")
        del h5py
        body = ",\n".join(lines)
        return (
            f"PersistentTensorDict(\n    fields={{\n{body}}},\n    batch_size={self._batch_size},\n"
            f"    file={self.file.filename!r}, group={self._group.name!r}, mode={self._mode!r})"
        )


def _is_string_dataset(obj: Any) -> bool:
    """An h5py dataset of strings (a non-tensor value), or a group (False)."""
    h5py = _h5py()
    return isinstance(obj, h5py.Dataset) and (
        h5py.check_string_dtype(obj.dtype) is not None or obj.dtype.kind in "SOU"
    )


def _dataset_shapes(group: Any) -> list[tuple[int, ...]]:
    """Shapes of the (non-string) datasets under ``group``, nested groups included."""
    h5py = _h5py()
    shapes: list[tuple[int, ...]] = []

    def visit(_: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset) and not _is_string_dataset(obj):
            shapes.append(tuple(obj.shape))

    group.visititems(visit)
    return shapes


def _to_numpy(value: Any, key: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    tensor = value.detach().as_subclass(torch.Tensor).cpu()
    if tensor.dtype == torch.bfloat16:
        raise TypeError(
            f"HDF5 cannot store the bfloat16 tensor {key!r}: cast it (e.g. .float()) first."
        )
    return tensor.numpy()


def _read_rows(dataset: Any, index: Any, batch: torch.Size | None = None) -> np.ndarray:
    """``dataset[index]`` reading only the selected rows (h5py needs increasing indices)."""
    idx = index if isinstance(index, tuple) else (index,)
    simple = all(isinstance(i, (int, slice)) or i is Ellipsis for i in idx) and all(
        not isinstance(i, slice) or i.step is None or i.step > 0 for i in idx
    )
    if simple:
        return np.asarray(dataset[idx])
    first, rest = idx[0], idx[1:]
    if isinstance(first, (list, np.ndarray, torch.Tensor)) and all(
        isinstance(i, slice) and i == slice(None) for i in rest
    ):
        ids = torch.as_tensor(first)
        if ids.dtype == torch.bool:
            ids = ids.nonzero().squeeze(-1)
        ids_np = ids.numpy().astype(np.int64)
        ids_np = np.where(ids_np < 0, ids_np + dataset.shape[0], ids_np)
        uniq, inverse = np.unique(ids_np, return_inverse=True)
        return np.asarray(dataset[uniq])[inverse]
    # anything else: read everything, index in memory
    return torch.from_numpy(np.asarray(dataset[()]))[index].numpy()


def from_h5(
    h5_file: Any,
    *,
    mode: str = "r",
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    batch_size: Sequence[int] | torch.Size | None = None,
    non_tensor_as_stack: bool = False,
) -> PersistentTensorDict:
    """Open an HDF5 file as a :class:`PersistentTensorDict` (see its ``from_h5``)."""
    return PersistentTensorDict.from_h5(
        h5_file,
        mode=mode,
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        batch_size=batch_size,
        non_tensor_as_stack=non_tensor_as_stack,
    )


#: ``TensorDict.from_h5(filename, ...)``: the classmethod names its first parameter
#: ``filename`` where the top-level :func:`from_h5` says ``h5_file``, as the reference does
td_from_h5 = PersistentTensorDict.from_h5


def td_to_h5(td: Any, filename: str | Path, **kwargs: Any) -> PersistentTensorDict:
    """``TensorDict.to_h5``: write ``td`` to an HDF5 file (kwargs go to ``create_dataset``)."""
    return PersistentTensorDict.from_dict(td, filename=filename, **kwargs)
