"""Reading Python objects into tensordicts: the one recursive :func:`convert` that decides
how a value inside a collection is stored, and the builders on top of it (the stacking of
``from_list``, :func:`make_tensordict`, :func:`fromkeys`).

Mappings, tuples, namedtuples, dataclass instances and structured arrays become nested
tensordicts; tensordicts (and tensorclasses) are kept; anything else is left to the
``TensorDict`` constructor (tensors kept, numbers cast, other objects wrapped as
non-tensor data). The ``from_*`` classmethods of :class:`~tensordict._formats.convert.ConversionOps`
call these.

>>> import torch
>>> from tensordict._formats.from_python import fromkeys
>>> fromkeys(["a", ("b", "c")], 0)["b", "c"]
tensor(0)
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import torch

from tensordict._formats import pandas as _pandas
from tensordict._formats import struct_array as _struct_array
from tensordict._formats import tabular as _tabular
from tensordict._kinds import kinds as _kinds
from tensordict._kinds.kinds import is_tensor_collection
from tensordict._leaves.nontensor import NonTensorStack, is_non_tensor
from tensordict._plugins import siblings as _siblings

_Tensor = torch.Tensor

__all__ = ["convert", "fromkeys", "make_tensordict"]


def _tensordict_cls() -> type[_kinds.Dense]:
    return _kinds.Dense


def _out_cls(cls: type) -> type[_kinds.Dense]:
    """``cls`` when it is a ``TensorDict`` subclass, else ``TensorDict`` itself."""
    td_cls = _tensordict_cls()
    return cls if isinstance(cls, type) and issubclass(cls, td_cls) else td_cls


def _auto(
    what: str,
    auto_batch_size: bool | None,
    batch_dims: int | None,
    batch_size: Any,
    exclusive: bool = False,
) -> bool:
    """Check the batch-size keywords of a ``from_*`` method; whether to auto-size.

    ``batch_size`` with ``auto_batch_size=True`` is a ``TypeError`` when ``exclusive``
    (``from_tuple``, ``from_namedtuple``, ``from_dataclass``, ``from_struct_array``);
    otherwise (``from_dict``, ``from_pytree`` …) the given ``batch_size`` wins. Both as
    in the reference; so is the ``ValueError`` of ``batch_dims`` with ``batch_size``.
    """
    if exclusive:  # named as the reference names it: "from_tuple", not "TensorDict.from_tuple"
        _tabular.check_batch_keywords(what.rpartition(".")[2], auto_batch_size, batch_size)
    if batch_size is not None and batch_dims is not None:
        raise ValueError(
            f"{what}: cannot pass both batch_size and batch_dims (which bounds the inferred "
            "batch size); pass one."
        )
    if batch_size is not None:
        return False
    return bool(auto_batch_size) or batch_dims is not None


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def _is_h5(obj: Any) -> bool:
    return type(obj).__module__.partition(".")[0] == "h5py"


def _is_dataframe(obj: Any) -> bool:
    """Whether ``obj`` is a pandas DataFrame (without importing pandas: a DataFrame
    exists only once pandas is imported)."""
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(obj, pd.DataFrame)


def convert(
    value: Any,
    batch_size: Any = (),
    device: Any = None,
    copy_tds: bool = False,
    path: tuple[Any, ...] = (),
) -> Any:
    """How ``value`` is stored inside a tensordict built by the ``from_*`` conversions.

    Collections (mappings, tuples, namedtuples, dataclass instances, structured arrays)
    become tensordicts of batch size ``batch_size``; tensordicts are kept (shallow-copied
    when ``copy_tds``, so a later in-place batch-size change cannot reach the caller's
    object); other values are returned unchanged. ``path`` (the key of ``value``) only
    serves error messages.

    >>> import torch
    >>> from tensordict._formats.convert import convert
    >>> convert({"a": (torch.zeros(2), "x")})["a", "1"]
    'x'
    >>> convert(3)
    3
    """
    if isinstance(value, _Tensor):
        return value

    td_cls = _tensordict_cls()
    if is_tensor_collection(value):
        return value.copy() if copy_tds and type(value) is td_cls else value
    if _is_h5(value):  # before Mapping: an HDF5 group is one
        return _from_h5(value, "TensorDict.from_any")
    if _is_dataframe(value):  # one row per element of its own batch dimension
        return _pandas.from_pandas(value, device=device)
    if isinstance(value, Mapping):
        items = value
    elif isinstance(value, tuple):
        items = (
            cast(Any, value)._asdict()
            if _is_namedtuple(value)
            else {str(i): v for i, v in enumerate(value)}
        )
    elif isinstance(value, np.ndarray) and value.dtype.names is not None:
        return _struct_array.struct_to_td(value, device)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = _dataclass_fields(value)
    else:
        return value
    return _from_mapping(td_cls, items, batch_size, device, copy_tds, path)


def _dataclass_fields(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def _from_h5(obj: Any, what: str, **kwargs: Any) -> Any:
    if not hasattr(obj, "keys"):  # an HDF5 dataset: its array
        return torch.as_tensor(obj[()])
    return _siblings.forward("memmap", "from_h5", f"{what} (HDF5 input)", obj, **kwargs)


def _from_mapping(
    cls: type[_kinds.Dense],
    mapping: Any,
    batch_size: Any,
    device: Any,
    copy_tds: bool,
    path: tuple[Any, ...],
    names: Any = None,
) -> _kinds.Dense:
    """A tensordict of class ``cls`` from ``mapping``, converting values recursively."""
    source = {}
    for key, value in mapping.items():
        if not isinstance(value, _Tensor):
            value = convert(value, batch_size, device, copy_tds, path + (key,))
        source[key] = value
    try:
        return cls(source, batch_size=batch_size, device=device, names=names)
    except (RuntimeError, ValueError, TypeError) as err:
        if not path:
            raise
        where = path[0] if len(path) == 1 else path
        raise type(err)(f"{err} (in the nested entry {where!r})") from None


def _finish(
    td: _kinds.Dense, auto: bool, batch_dims: int | None, names: Any = None
) -> _kinds.Dense:
    if auto:
        td.auto_batch_size_(batch_dims)
    if names is not None:
        td.names = names
    return td


def _stack_list(
    items: Sequence[Any], device: Any, path: tuple[int, ...], lazy: bool | None = None
) -> _kinds.Dense:
    from tensordict._combine.functional import lazy_stack, maybe_dense_stack, stack

    if not items:
        return _tensordict_cls()(batch_size=[0], device=device)
    tds = []
    for i, item in enumerate(items):
        if isinstance(item, list):
            tds.append(_stack_list(item, device, path + (i,), lazy))
            continue
        td = convert(item, (), device)
        if not is_tensor_collection(td) or is_non_tensor(td):
            raise TypeError(
                f"TensorDict.from_list: element {list(path + (i,))} is a {type(item).__name__}; "
                "expected a tensordict, a dict (or another collection from_any converts) or a "
                "list of them."
            )
        if device is not None and td.device != torch.device(device):
            td = td.to(device)
        tds.append(td)
    if lazy is None:
        return maybe_dense_stack(tds, 0)  # type: ignore[return-value]
    return lazy_stack(tds, 0) if lazy else stack(tds, 0)


def make_tensordict(
    input_dict: Mapping[str, Any] | None = None,
    batch_size: Sequence[int] | torch.Size | int | None = None,
    device: torch.device | str | int | None = None,
    auto_batch_size: bool | None = None,
    **kwargs: Any,
) -> _kinds.Dense:
    """A tensordict from keyword arguments and/or a (nested) dict.

    Without ``batch_size`` the batch size is the largest the entries allow (unless
    ``auto_batch_size=False``, which gives ``[]``). Nested dicts become nested
    tensordicts, with their own (possibly longer) batch size.

    >>> import torch
    >>> from tensordict import make_tensordict
    >>> td = make_tensordict(a=torch.zeros(3, 4), b={"c": torch.zeros(3, 4, 5)})
    >>> td.batch_size, td["b"].batch_size
    (torch.Size([3, 4]), torch.Size([3, 4, 5]))
    >>> make_tensordict({"a": torch.zeros(3, 4)}, batch_size=[3]).batch_size
    torch.Size([3])
    """
    source: Any = input_dict
    if source is not None:
        if not hasattr(source, "items"):
            raise TypeError(
                f"make_tensordict expects a mapping as input_dict, got {type(source).__name__}."
            )
        kwargs = {**dict(source.items()), **kwargs}
    if auto_batch_size is None:
        auto_batch_size = batch_size is None
    return _tensordict_cls().from_dict(
        kwargs, batch_size=batch_size, device=device, auto_batch_size=auto_batch_size
    )


def fromkeys(keys: Any, value: Any = 0) -> _kinds.Dense:
    """A new tensordict with ``keys`` (nested keys allowed) all set to ``value``.

    Same as :meth:`TensorDict.fromkeys <tensordict.TensorDictBase.fromkeys>`.

    >>> from tensordict import fromkeys
    >>> td = fromkeys(["a", ("b", "c")], 1)
    >>> td["a"], td["b", "c"]
    (tensor(1), tensor(1))
    """
    return _tensordict_cls().fromkeys(keys, value)


def _from_list_any(obj: list[Any], device: Any) -> Any:
    """``from_any`` of a list: a tensor when the values make one (numbers in a regular
    nesting), else a :class:`NonTensorStack` of the values."""
    try:
        return torch.tensor(obj, device=device)
    except (TypeError, ValueError, RuntimeError):
        return NonTensorStack.from_list(obj, device=device)
