"""Zarr stores: :class:`ZarrTensorDict`, ``TensorDict.to_zarr``/``from_zarr``, the
top-level :func:`from_zarr` and ``TensorDict.from_schema(storage="zarr")`` (extra
``zarr``: ``pip install tensordict-memmap[zarr]``; ``zarr`` is imported on first use).

A tensordict is a zarr group: tensors are chunked arrays, nested tensordicts are
subgroups, a :class:`~tensordict.NonTensorStack` of strings is a string array, and other
non-tensor values are JSON bytes in a ``uint8`` array (pickle only with
``allow_pickle=True``, on writing and again on reading). Each group's batch size, names
and key order are in its ``"__tensordict__"`` attribute, as the reference library writes
them, so stores move between the two. Nothing is read until asked for: ``ztd["key"]``
reads one array, ``ztd[rows]`` reads only the chunks holding the rows into an in-memory
:class:`~tensordict.TensorDict`; writes (``set``, ``ztd[rows] = td``) go to the store.
bfloat16 (which zarr has no type for) is refused with a :class:`TypeError` naming the key.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tensordict import NonTensorData, NonTensorStack, TensorDict
from tensordict._plugins.api import (
    BackedTensorDict,
    InplaceWriteError,
    _check_at,
    common_leading,
    import_extra,
)
from tensordict._plugins.api import kinds as _kinds
from tensordict._plugins.api import tabular as _tabular
from tensordict.base import NO_DEFAULT, TensorDictBase
from tensordict.memmap import _codec, _fs

ZARR_INSTALL = "tensordict-memmap[zarr]"
ATTR = "__tensordict__"
STACK_ATTR = "__tensordict_stack__"
NON_TENSOR_ATTR = "__tensordict_non_tensor__"


def zarr_module(what: str) -> Any:
    """``zarr``, or the :class:`ModuleNotFoundError` naming ``tensordict-memmap[zarr]``."""
    return import_extra("zarr", ZARR_INSTALL, what)


def _node_name(key: str) -> str:
    """The zarr node name storing ``key`` (keys that are not plain names are hex-encoded)."""
    if _fs.is_plain_name(key) and not key.startswith(("__", "%")) and key != "zarr.json":
        return key
    return "%" + key.encode("utf-8").hex()


def _is_string(array: Any) -> bool:
    kind = np.dtype(array.dtype).kind if isinstance(array.dtype, np.dtype) else None
    return kind in ("U", "S", "O", "T") or kind is None


class ZarrTensorDict(BackedTensorDict):
    """A tensordict stored in a zarr group, read lazily and written through.

    Build it with :func:`from_zarr` (open a store) or ``TensorDict.to_zarr`` (write one).

    >>> import os, tempfile, torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict(obs=torch.arange(12.0).view(6, 2), info=TensorDict(r=torch.ones(6), batch_size=[6]),
    ...                 batch_size=[6])
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = td.to_zarr(os.path.join(tmp, "data.zarr"), chunks=(2,))
    ...     z = TensorDict.from_zarr(os.path.join(tmp, "data.zarr"))
    ...     print(type(z).__name__, z.batch_size, z[4:]["obs"])
    ZarrTensorDict torch.Size([6]) tensor([[ 8.,  9.],
            [10., 11.]])
    """

    def __init__(
        self,
        *,
        group: Any,
        batch_size: Sequence[int] | torch.Size | None = None,
        device: torch.device | str | None = None,
        non_tensor_as_stack: bool = False,
        allow_pickle: bool | None = None,
        array_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self._group = group
        self._device = None if device is None else torch.device(device)
        self._non_tensor_as_stack = non_tensor_as_stack
        self._allow_pickle = _codec.check_allow_pickle(allow_pickle)
        self._array_kwargs = dict(array_kwargs or {})
        self._children: dict[str, ZarrTensorDict] = {}
        meta = self._meta()
        if batch_size is None:
            stored = meta.get("batch_size")
            batch_size = stored if isinstance(stored, list) else []
        self._batch_size = torch.Size(batch_size)
        self._check_batch(self._batch_size)

    # ------------------------------------------------------------------ store access
    @property
    def group(self) -> Any:
        """The zarr group."""
        return self._group

    def _path(self) -> str:
        return f"{self._group.store}{self._group.path and '/' + self._group.path}"

    def _meta(self) -> dict[str, Any]:
        meta = self._group.attrs.get(ATTR)
        return dict(meta) if isinstance(meta, dict) else {}

    def _set_meta(self, **changes: Any) -> None:
        meta = self._meta()
        meta.update(changes)
        meta.setdefault("version", 1)
        self._group.attrs[ATTR] = meta

    def _writable(self) -> None:
        if self._group.read_only:
            raise RuntimeError(
                f"the zarr store {self._path()!r} is open read-only (mode='r'); open it with "
                "mode='r+' or 'a' to write."
            )

    def _entries(self) -> Iterator[tuple[str, str]]:
        """``(key, "group" | "array")`` in the stored key order (then any other node)."""
        zarr = zarr_module("ZarrTensorDict")
        names = {name: node for name, node in self._group.members()}
        meta = self._meta()
        keys_of = dict(meta.get("keys", {}))
        order = [_node_name(k) for k in meta.get("order", []) if _node_name(k) in names]
        order += sorted(n for n in names if n not in set(order))
        for name in order:
            kind = "group" if isinstance(names[name], zarr.Group) else "array"
            yield keys_of.get(name, name), kind

    def _members(self) -> Iterator[tuple[str, str]]:
        """``(key, "group" | "tensor" | "non_tensor")``: arrays of strings and encoded
        values are non-tensor entries."""
        for key, kind in self._entries():
            if kind == "array":
                node = self._group[_node_name(key)]
                kind = "non_tensor" if _is_string(node) or _is_encoded(node) else "tensor"
            yield key, kind

    def _leaf_meta(self, key: str) -> tuple[torch.Size, torch.dtype] | None:
        zarr = zarr_module("ZarrTensorDict")
        try:
            node = self._group[_node_name(key)]
        except KeyError:
            return None
        if not isinstance(node, zarr.Array) or _is_string(node) or _is_encoded(node):
            return None
        return torch.Size(node.shape), torch.from_numpy(np.empty(0, node.dtype)).dtype

    def _read_names(self) -> list[str | None] | None:
        names = self._meta().get("names")
        return list(names) if isinstance(names, list) else None

    def _write_names(self, names: list[str | None] | None) -> None:
        self._set_meta(names=names)

    def _where(self) -> str:
        return f"the zarr group {self._path()!r}"

    def _shallow(self, device: Any = NO_DEFAULT) -> ZarrTensorDict:
        return ZarrTensorDict(
            group=self._group,
            batch_size=self._batch_size,
            device=self._device if device is NO_DEFAULT else device,
            non_tensor_as_stack=self._non_tensor_as_stack,
            allow_pickle=self._allow_pickle,
            array_kwargs=self._array_kwargs,
        )

    def _remove(self, key: str) -> None:
        self._writable()
        name = _node_name(key)
        del self._group[name]
        self._children.pop(key, None)
        meta = self._meta()
        order = [k for k in meta.get("order", []) if k != key]
        keys = {n: k for n, k in dict(meta.get("keys", {})).items() if n != name}
        self._set_meta(order=order, keys=keys)

    def _plan_at(
        self,
        key: str,
        path: tuple[str, ...],
        value: Any,
        index: Any,
        plan: list[Callable[[], None]],
        non_blocking: bool,
    ) -> None:
        """A row write into a numeric array goes to the chunks that hold the rows (after
        the same checks as in memory); anything else through a copy of the entry."""
        meta = self._leaf_meta(key)
        if meta is None or isinstance(value, (NonTensorData, NonTensorStack)):
            super()._plan_at(key, path, value, index, plan, non_blocking)
            return
        self._writable()  # in place: allowed while locked
        _check_at(path, torch.empty(meta[0], dtype=torch.uint8, device="meta"), value, index)
        node = self._group[_node_name(key)]
        data = torch.as_tensor(value).detach().cpu()
        rows = torch.zeros(meta[0], dtype=torch.uint8, device="meta")[index].shape
        array = _numpy(data.to(meta[1]).expand(rows), path, "ZarrTensorDict")
        plan.append(lambda: _write_rows(node, index, array))

    def _shapes(self) -> list[tuple[int, ...]]:
        zarr = zarr_module("ZarrTensorDict")
        shapes = []
        for _, node in self._group.members(max_depth=None):
            if isinstance(node, zarr.Array) and not _is_string(node) and not _is_encoded(node):
                shapes.append(tuple(node.shape))
        return shapes

    def _check_batch(self, batch: torch.Size) -> None:
        zarr = zarr_module("ZarrTensorDict")
        n = len(batch)
        for name, node in self._group.members():
            # strings that to_zarr did not write as a stack are one value, of any shape
            plain_strings = (
                isinstance(node, zarr.Array) and _is_string(node) and STACK_ATTR not in node.attrs
            )
            if isinstance(node, zarr.Array) and not _is_encoded(node) and not plain_strings:
                if tuple(node.shape[:n]) != tuple(batch):
                    raise RuntimeError(
                        f"the batch size {list(batch)} does not match the array {name!r} of "
                        f"shape {list(node.shape)} in {self._path()!r}: its leading dimensions "
                        "must equal the batch size."
                    )

    def _child(self, key: str) -> ZarrTensorDict:
        child = self._children.get(key)
        if child is None:
            group = self._group[_node_name(key)]
            stored = group.attrs.get(ATTR)
            child = ZarrTensorDict(
                group=group,
                batch_size=None if isinstance(stored, dict) else self._batch_size,
                device=self._device,
                non_tensor_as_stack=self._non_tensor_as_stack,
                allow_pickle=self._allow_pickle,
                array_kwargs=self._array_kwargs,
            )
            self._children[key] = child
        return child

    def _read(self, key: str, array: Any, index: Any = None) -> Any:
        if _is_encoded(array):
            value = self._decode(key, array)
            if index is None:
                return value
            return value[index] if isinstance(value, NonTensorStack) else value
        data = array[...] if index is None else _read_rows(array, index)
        if _is_string(array):
            values = np.asarray(data).tolist()
            batch = (
                self._batch_size if index is None else torch.zeros(self._batch_size)[index].shape
            )
            if (STACK_ATTR in array.attrs or self._non_tensor_as_stack) and np.ndim(data):
                stack = NonTensorStack.from_list(values, ndim=max(np.ndim(data), 0) or None)
                # rows that all hold one value read as one NonTensorData, as indexing a stack does
                return stack if index is None or not stack.batch_dims else stack[...]
            return NonTensorData(values, batch_size=batch)
        tensor = torch.from_numpy(np.ascontiguousarray(data))
        return tensor if self._device is None else tensor.to(self._device)

    def _decode(self, key: str, array: Any) -> Any:
        spec = dict(array.attrs[NON_TENSOR_ATTR])
        raw = bytes(np.asarray(array[...], dtype=np.uint8).tobytes())
        if spec.get("encoding") == "pickle":
            value = _codec.unpickle_or_refuse(
                Path(f"{self._path()}/{key}"), self._allow_pickle, read=lambda: raw
            )
        else:
            value = json.loads(raw.decode("utf-8"))
        if spec.get("stack"):
            return NonTensorStack.from_list(value, ndim=len(self._batch_size) or None)
        return NonTensorData(value, batch_size=self._batch_size)

    # ------------------------------------------------------------------ primitives
    @property
    def batch_size(self) -> torch.Size:
        """The batch size (settable; checked against the arrays)."""
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Sequence[int]) -> None:
        batch = torch.Size(value)
        self._check_batch(batch)
        self._batch_size = batch
        if not self._group.read_only:
            self._set_meta(batch_size=list(batch))

    def _get_str(self, key: str, default: Any) -> Any:
        zarr = zarr_module("ZarrTensorDict")
        name = _node_name(key)
        try:
            node = self._group[name]
        except KeyError:
            node = None
        if isinstance(node, zarr.Group):
            return self._child(key)
        if node is not None:
            return self._read(key, node)
        if default is NO_DEFAULT:
            raise KeyError(f"key {key!r} not found in the zarr group {self._path()!r}")
        return default

    def _set_str(
        self, key: str, value: Any, *, inplace: bool, validated: bool, non_blocking: bool = False
    ) -> ZarrTensorDict:
        self._check_set(key, inplace)
        write_entry(
            self._group,
            key,
            value,
            self._batch_size,
            self._allow_pickle,
            self._array_kwargs,
            inplace,
        )
        self._children.pop(key, None)
        meta = self._meta()
        order = list(meta.get("order", []))
        if key not in order:
            order.append(key)
        keys = dict(meta.get("keys", {}))
        if _node_name(key) != key:
            keys[_node_name(key)] = key
        self._set_meta(order=order, keys=keys)
        return self

    # ------------------------------------------------------------------ indexing
    def _index(self, index: Any) -> TensorDict:
        """The selected rows of every array, read from the chunks that hold them."""
        new_bs = torch.zeros(self._batch_size, dtype=torch.uint8)[index].shape
        entries: dict[str, Any] = {}
        for key, kind in self._entries():
            if kind == "group":
                entries[key] = self._child(key)._index(index)
            else:
                value = self._read(key, self._group[_node_name(key)], index)
                if isinstance(value, NonTensorData):
                    value = NonTensorData(value.data, batch_size=new_bs)
                entries[key] = value
        return TensorDict(entries, batch_size=new_bs, device=self._device)

    # ------------------------------------------------------------------ conversions
    def close(self) -> None:
        """Nothing to release: zarr keeps no file open between reads."""

    def __repr__(self) -> str:
        lines = []
        for key, kind in self._entries():
            node = self._group[_node_name(key)]
            if kind == "group":
                text = f"ZarrTensorDict(path={node.path!r})"
            elif _is_encoded(node):
                text = "NonTensorData"
            else:
                text = f"Array(shape={tuple(node.shape)}, dtype={node.dtype}, chunks={node.chunks})"
            lines.append(f"        {key}: {text}")
        body = ",\n".join(lines)
        return (
            f"ZarrTensorDict(\n    fields={{\n{body}}},\n    batch_size={self._batch_size},\n"
            f"    store={self._path()!r}, read_only={self._group.read_only})"
        )


# ----------------------------------------------------------------------------- writing
def _fit_chunks(shape: Sequence[int], kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with ``chunks``/``shards`` given for the leading dims only (``(1024,)``)
    completed with the whole trailing dims of ``shape``."""
    out = dict(kwargs)
    for name in ("chunks", "shards"):
        value = out.get(name)
        if isinstance(value, (tuple, list)) and len(value) < len(shape):
            out[name] = (*value, *shape[len(value) :])
    return out


def _is_encoded(array: Any) -> bool:
    return NON_TENSOR_ATTR in array.attrs


def _numpy(value: torch.Tensor, key: tuple[str, ...], what: str) -> np.ndarray:
    t = _tabular.plain_tensor(value)
    if (
        t.dtype is torch.bfloat16
        or t.is_quantized
        or t.dtype.itemsize == 1
        and t.is_floating_point()
    ):
        _tabular.refuse_dtype(
            what, key, t.dtype, "zarr", "bool, int8-64, uint8-64, float16-64, complex64/128"
        )
    if t.is_nested:
        raise TypeError(
            f"{what}: the jagged tensor {_tabular.key_text(key)} has no zarr array type."
        )
    return t.numpy()


def _encoded(
    value: Any, stack: bool, allow_pickle: bool, where: str
) -> tuple[np.ndarray, dict[str, Any]]:
    spec: dict[str, Any]
    if _codec.is_json_exact(value):
        raw, spec = json.dumps(value).encode("utf-8"), {"encoding": "json"}
    else:
        raw, spec = _codec.pickle_or_refuse(value, allow_pickle, where), {"encoding": "pickle"}
    if stack:
        spec["stack"] = True
    return np.frombuffer(raw, dtype=np.uint8).copy(), spec


def write_entry(
    group: Any,
    key: str,
    value: Any,
    batch_size: torch.Size,
    allow_pickle: bool,
    array_kwargs: dict[str, Any],
    inplace: bool = False,
) -> None:
    """Write one entry (tensor, nested tensordict or non-tensor value) under ``group``."""
    zarr = zarr_module("to_zarr")
    name = _node_name(key)
    if _kinds.is_tensorclass(value):
        value = value._tensordict
    if isinstance(value, dict):
        value = TensorDict(value, batch_size=batch_size)
    existing = group.get(name)
    if isinstance(value, TensorDictBase):
        if existing is not None:
            del group[name]
        write_group(group.create_group(name), value, allow_pickle, array_kwargs)
        return
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    if isinstance(value, torch.Tensor):
        array = _numpy(value, (key,), "to_zarr")
        if tuple(array.shape[: len(batch_size)]) != tuple(batch_size):
            raise RuntimeError(
                f"batch dimension mismatch for key {key!r}: shape {list(array.shape)} does not "
                f"start with the batch size {list(batch_size)}."
            )
        if inplace and isinstance(existing, zarr.Array) and not _is_encoded(existing):
            try:
                fits = torch.Size(np.broadcast_shapes(array.shape, existing.shape)) == torch.Size(
                    existing.shape
                )
            except ValueError:
                fits = False
            if not fits or _is_string(existing):
                raise InplaceWriteError(
                    f"cannot write a value of shape {list(array.shape)} in place into the "
                    f"entry {key!r} of shape {list(existing.shape)} in {group.store}: in "
                    "place, the value must have (or broadcast to) the entry's shape; replace "
                    "the entry with set() instead."
                )
            existing[...] = np.broadcast_to(array, existing.shape)
            return
        if existing is not None:
            del group[name]
        group.create_array(name, data=array, **_fit_chunks(array.shape, array_kwargs))
        return
    if existing is not None:
        del group[name]
    if not isinstance(value, (NonTensorData, NonTensorStack)):
        value = NonTensorData(value, batch_size=batch_size)
    if isinstance(value, NonTensorStack):
        values = value.tolist()
        flat: Any = np.asarray(values, dtype=object).reshape(-1) if value.batch_dims else []
        if value.batch_dims and all(type(v) is str for v in flat):
            arr = group.create_array(name, shape=tuple(value.batch_size), dtype=str)
            arr[...] = np.asarray(values, dtype=object)
            arr.attrs[STACK_ATTR] = list(value.batch_size)
            return
        data, spec = _encoded(values, True, allow_pickle, f"to_zarr: the entry {key!r}")
    else:
        data, spec = _encoded(value.data, False, allow_pickle, f"to_zarr: the entry {key!r}")
    arr = group.create_array(name, data=data)
    arr.attrs[NON_TENSOR_ATTR] = spec


def write_group(group: Any, td: Any, allow_pickle: bool, array_kwargs: dict[str, Any]) -> None:
    """Write every entry of ``td`` into ``group``, with its batch size, names and key order."""
    names = None
    try:
        names = list(td.names)
    except (AttributeError, RuntimeError):
        names = None
    if names is not None and all(n is None for n in names):
        names = None
    keys = list(td.keys())
    group.attrs[ATTR] = {
        "batch_size": list(td.batch_size),
        "names": names,
        "order": keys,
        "keys": {_node_name(k): k for k in keys if _node_name(k) != k},
        "version": 1,
    }
    for key in keys:
        write_entry(
            group, key, td._get_str(key, NO_DEFAULT), td.batch_size, allow_pickle, array_kwargs
        )


def _read_rows(array: Any, index: Any) -> np.ndarray:
    """``array[index]`` reading only the chunks of the selected rows where zarr can."""
    idx = index if isinstance(index, tuple) else (index,)
    if all(isinstance(i, (int, slice)) or i is Ellipsis for i in idx) and all(
        not isinstance(i, slice) or i.step is None or i.step > 0 for i in idx
    ):
        return np.asarray(array[idx])
    first, rest = idx[0], idx[1:]
    if isinstance(first, (list, np.ndarray, torch.Tensor)) and all(
        isinstance(i, slice) and i == slice(None) for i in rest
    ):
        ids = torch.as_tensor(first)
        if ids.dtype == torch.bool:
            ids = ids.nonzero().squeeze(-1)
        ids_np = ids.numpy().astype(np.int64)
        ids_np = np.where(ids_np < 0, ids_np + array.shape[0], ids_np)
        return np.asarray(array.oindex[(ids_np,)])
    out: np.ndarray = torch.from_numpy(np.asarray(array[...]))[index].numpy()
    return out


def _write_rows(array: Any, index: Any, data: np.ndarray) -> None:
    if isinstance(index, torch.Tensor):
        index = index.numpy()
    if isinstance(index, np.ndarray) or isinstance(index, list):
        ids = np.asarray(index)
        if ids.dtype == np.bool_:
            ids = ids.nonzero()[0]
        array.oindex[(ids,)] = data
    else:
        array[index] = data


# ----------------------------------------------------------------------------- API
def _open(zarr_file: Any, mode: str, what: str) -> Any:
    zarr = zarr_module(what)
    if isinstance(zarr_file, zarr.Group):
        return zarr_file
    if isinstance(zarr_file, (str, Path)):
        return zarr.open_group(str(zarr_file), mode=mode)
    return zarr.open_group(store=zarr_file, mode=mode)


def from_zarr(
    zarr_file: Any,
    *,
    mode: str = "r",
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    batch_size: torch.Size | None = None,
    non_tensor_as_stack: bool = False,
    allow_pickle: bool | None = None,
) -> ZarrTensorDict:
    """Open a zarr store as a :class:`ZarrTensorDict` (read lazily).

    Args:
        zarr_file: a path (a directory), a zarr store (``zarr.storage.ZipStore`` …) or an
            open ``zarr.Group``.

    Keyword Args:
        mode: as in :func:`zarr.open_group` (``"r"``, ``"r+"``, ``"a"`` …).
        auto_batch_size: set the batch size to the leading dims every array shares (at
            most ``batch_dims``) instead of the stored one.
        batch_dims: the most batch dims ``auto_batch_size`` keeps.
        batch_size: the batch size (default: the stored one, else the leading dims every
            tensor array shares, at most ``batch_dims``, as the reference library reads a
            store it did not write).
        non_tensor_as_stack: read string arrays that ``to_zarr`` did not write as a
            :class:`~tensordict.NonTensorStack` (default: one
            :class:`~tensordict.NonTensorData` holding the list).
        allow_pickle: read pickled non-tensor values (never by default: a
            :class:`RuntimeError` names the entry).

    >>> import os, tempfile, torch
    >>> from tensordict import TensorDict, from_zarr
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = TensorDict(a=torch.arange(4), batch_size=[4]).to_zarr(os.path.join(tmp, "s.zarr"))
    ...     z = from_zarr(os.path.join(tmp, "s.zarr"))
    ...     print(z["a"], z.batch_size)
    tensor([0, 1, 2, 3]) torch.Size([4])
    """
    _tabular.check_batch_keywords("from_zarr", auto_batch_size, batch_size)
    group = _open(zarr_file, mode, "from_zarr")
    recorded = isinstance(group.attrs.get(ATTR), dict) and "batch_size" in group.attrs[ATTR]
    infer = auto_batch_size or not recorded
    out = ZarrTensorDict(
        group=group,
        batch_size=batch_size if batch_size is not None else ([] if infer else None),
        non_tensor_as_stack=non_tensor_as_stack,
        allow_pickle=allow_pickle,
    )
    if batch_size is None and infer:
        out._batch_size = torch.Size(common_leading(out._shapes(), batch_dims))
        out._check_batch(out._batch_size)
    return out


def td_from_zarr(
    filename: Any,
    *,
    mode: str = "r",
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    batch_size: torch.Size | None = None,
    non_tensor_as_stack: bool = False,
    allow_pickle: bool | None = None,
) -> ZarrTensorDict:
    """``TensorDict.from_zarr``: :func:`from_zarr` (whose first parameter is named
    ``zarr_file``)."""
    return from_zarr(
        filename,
        mode=mode,
        auto_batch_size=auto_batch_size,
        batch_dims=batch_dims,
        batch_size=batch_size,
        non_tensor_as_stack=non_tensor_as_stack,
        allow_pickle=allow_pickle,
    )


def td_to_zarr(
    td: Any, filename: Any, *, allow_pickle: bool | None = None, **kwargs: Any
) -> ZarrTensorDict:
    """Write ``td`` to a zarr store (a new one by default) and return it opened
    (:class:`ZarrTensorDict`, ``mode="r+"``).

    Args:
        filename: a path, a zarr store or an open ``zarr.Group``.

    Keyword Args:
        allow_pickle: non-tensor values that are not JSON are pickled unless this is
            ``False`` (then they raise a :class:`TypeError` naming the key); reading them
            back, from the result too, needs ``allow_pickle=True``.
        **kwargs: ``mode`` for :func:`zarr.open_group` (default ``"w"``: replace the
            store); the rest go to ``zarr.Group.create_array`` for every tensor
            (``chunks=(1024,)``, ``compressors=...``, ``shards=...``; chunks are chosen by
            zarr by default).

    >>> import os, tempfile, torch
    >>> from tensordict import TensorDict
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     z = TensorDict(img=torch.zeros(8, 4, 4), batch_size=[8]).to_zarr(os.path.join(tmp, "d.zarr"), chunks=(2,))
    ...     print(z.group["img"].chunks, z.batch_size)
    (2, 4, 4) torch.Size([8])
    """
    mode = kwargs.pop("mode", "w")
    pickle_ok = _codec.save_allow_pickle(allow_pickle)
    data = td._tensordict if _kinds.is_tensorclass(td) else td
    if isinstance(data, _kinds.Lazy):
        data = data.to_tensordict()
    group = _open(filename, mode, "to_zarr")
    write_group(group, data, pickle_ok, kwargs)
    # Reading back goes through the store, which others may change: unpickle only on request.
    reads_pickle = _codec.check_allow_pickle(allow_pickle)
    return ZarrTensorDict(group=group, allow_pickle=reads_pickle, array_kwargs=kwargs)


def zarr_from_schema(
    schema: dict[Any, tuple[Sequence[int] | torch.Size, torch.dtype]],
    batch_size: torch.Size,
    *,
    filename: Any,
    **kwargs: Any,
) -> ZarrTensorDict:
    """``TensorDict.from_schema(storage="zarr", filename=...)``: a store of zero-filled
    chunked arrays (nothing is written but the metadata: zarr's fill value is 0)."""
    zarr = zarr_module("from_schema(storage='zarr')")
    mode = kwargs.pop("mode", "w")
    root = _open(filename, mode, "from_schema(storage='zarr')")
    groups: dict[tuple[str, ...], Any] = {(): root}
    orders: dict[tuple[str, ...], list[str]] = {(): []}
    for raw_key, (shape, dtype) in schema.items():
        key = raw_key if isinstance(raw_key, tuple) else (raw_key,)
        for cut in range(1, len(key)):
            if key[:cut] not in groups:
                groups[key[:cut]] = groups[key[: cut - 1]].create_group(_node_name(key[cut - 1]))
                orders[key[:cut]] = []
                orders[key[: cut - 1]].append(key[cut - 1])
        probe = torch.zeros((), dtype=dtype)
        np_dtype = _numpy(probe, key, "from_schema(storage='zarr')").dtype
        full = (*batch_size, *shape)
        groups[key[:-1]].create_array(
            _node_name(key[-1]),
            shape=full,
            dtype=np_dtype,
            fill_value=0,
            **_fit_chunks(full, kwargs),
        )
        orders[key[:-1]].append(key[-1])
    for path, group in groups.items():
        order = orders[path]
        group.attrs[ATTR] = {
            "batch_size": list(batch_size),
            "names": None,
            "order": order,
            "keys": {_node_name(k): k for k in order if _node_name(k) != k},
            "version": 1,
        }
    del zarr
    return ZarrTensorDict(group=root, array_kwargs=kwargs)
