"""Writing tensordicts out as Python structures: the bodies of ``tolist()``, ``numpy()``
and the namedtuple classes of ``to_namedtuple()``, with the helpers that split tensors and
zip columns into nested lists.

>>> import torch
>>> from tensordict import TensorDict
>>> from tensordict._formats.to_python import _tolist
>>> _tolist(TensorDict(a=torch.arange(2), batch_size=[2]), 1, True)
[{'a': 0}, {'a': 1}]
"""

from __future__ import annotations

import keyword
from collections import namedtuple
from collections.abc import Mapping
from typing import Any

import torch

from tensordict._keys.nested import unravel_key
from tensordict._kinds import kinds as _kinds
from tensordict._leaves.nontensor import DATA_TYPES, is_non_tensor

_Tensor = torch.Tensor

#: the namedtuple class made for each key tuple (``to_namedtuple`` without ``dest_cls``)
_NAMEDTUPLE_CLASSES: dict[tuple[str, ...], type] = {}


def _namedtuple_cls(keys: tuple[str, ...]) -> type:
    """The ``GenericDict`` namedtuple class with fields ``keys`` (one class per key set)."""
    cls = _NAMEDTUPLE_CLASSES.get(keys)
    if cls is None:
        for key in keys:
            if not key.isidentifier() or keyword.iskeyword(key) or key.startswith("_"):
                raise ValueError(
                    f"to_namedtuple: key {key!r} cannot be a namedtuple field (fields must be "
                    "identifiers that are not keywords and do not start with '_'); use "
                    "to_dict() or to_pytree() instead."
                )
        if len(_NAMEDTUPLE_CLASSES) > 1024:
            _NAMEDTUPLE_CLASSES.clear()
        cls = _NAMEDTUPLE_CLASSES[keys] = namedtuple("GenericDict", keys)
    return cls


def _store(td: Any) -> Mapping[str, Any]:
    """The raw entries of a tensordict (non-tensor values still wrapped)."""
    store = td._tensordict if isinstance(td, _kinds.Dense) else None
    if type(store) is dict:
        return store
    return dict(td.items())


def _split(tensor: Any, depth: int) -> Any:
    """``tensor`` unbound over its first ``depth`` dimensions, as nested lists."""
    if depth == 0:
        return tensor
    if depth == 1:
        return list(tensor.unbind(0))
    return [_split(t, depth - 1) for t in tensor.unbind(0)]


def _zip_nested(keys: list[str], columns: list[Any], depth: int) -> Any:
    """Turn per-key nested lists (``depth`` deep) into nested lists of dicts."""
    if depth == 0:
        return dict(zip(keys, columns, strict=True))
    if not columns:
        return []
    n = len(columns[0])
    return [_zip_nested(keys, [c[i] for c in columns], depth - 1) for i in range(n)]


def _unbind_nested(td: Any, depth: int) -> Any:
    if depth == 0:
        return td
    return [_unbind_nested(t, depth - 1) for t in td.unbind(0)]


def _to_numpy(td: Any, prefix: tuple[Any, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in _store(td).items():
        if isinstance(value, _Tensor):
            try:
                out[key] = value.numpy(force=True)
            except TypeError:
                raise TypeError(
                    f"numpy(): entry {unravel_key(prefix + (key,))!r} has dtype {value.dtype}, "
                    "which numpy does not support; cast it first (for instance with .float())."
                ) from None
        elif type(value) in DATA_TYPES:
            out[key] = value.data
        elif is_non_tensor(value):
            out[key] = value.tolist()
        elif hasattr(value, "items") and hasattr(value, "batch_size"):
            out[key] = _to_numpy(value, prefix + (key,))
        else:
            out[key] = value
    return out


def _tolist(td: Any, nb: int, convert_tensors: bool, first: bool = True) -> Any:
    """The body of ``tolist()``: every entry split over ``nb`` dims, then zipped. A nested
    tensordict's extra batch dims become lists too when ``first`` (``tolist_first``)."""
    store = td._tensordict if isinstance(td, _kinds.Dense) else None
    if type(store) is not dict:  # other tensordict types: one element at a time
        if nb == 0:
            return _tolist_element(td, convert_tensors)
        return [_tolist(sub, nb - 1, convert_tensors, first) for sub in td.unbind(0)]
    keys = []
    columns = []
    for key, value in store.items():
        keys.append(key)
        if isinstance(value, _Tensor):
            columns.append(value.tolist() if convert_tensors else _split(value, nb))
        elif type(value) in DATA_TYPES:
            columns.append(value.tolist() if nb else value.data)
        elif is_non_tensor(value):
            columns.append(value.tolist())
        else:
            sub_nb = len(value.batch_size)
            if sub_nb == nb or (nb == 0 and first):
                columns.append(_tolist(value, sub_nb, convert_tensors, first))
            else:  # split the nested one over the parent's dims; it keeps its own extra dims
                extra = sub_nb - nb if first else 0
                columns.append(
                    _map_depth(
                        _unbind_nested(value, nb),
                        nb,
                        lambda sub, extra=extra: _tolist(sub, extra, convert_tensors, first),
                    )
                )
    return _zip_nested(keys, columns, nb)


def _map_depth(nested: Any, depth: int, fn: Any) -> Any:
    if depth == 0:
        return fn(nested)
    return [_map_depth(x, depth - 1, fn) for x in nested]


def _tolist_element(td: Any, convert_tensors: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in td.items():
        if isinstance(value, _Tensor):
            out[key] = value.tolist() if convert_tensors else value
        elif type(value) in DATA_TYPES:
            out[key] = value.data
        elif hasattr(value, "tolist"):
            out[key] = value.tolist(convert_tensors=convert_tensors)
        else:
            out[key] = value
    return out
