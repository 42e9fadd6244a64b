"""Conversions between tensordicts and other Python structures.

``from_*`` classmethods build a :class:`~tensordict.TensorDict` from dicts, tuples,
namedtuples, dataclasses, lists, numpy structured arrays and pytrees; ``to_*`` methods go
back. :class:`ConversionOps` is a base of :class:`~tensordict.TensorDictBase`, so every
tensordict type has them. Numpy structured arrays live in :mod:`tensordict._formats.struct_array`,
pytrees in :mod:`tensordict._torch.pytree`; this module holds the rest.

One recursive function, :func:`convert`, decides how a value inside a collection is stored:
mappings, tuples, namedtuples, dataclass instances and structured arrays become nested
tensordicts; tensordicts (and tensorclasses) are kept; anything else is left to the
``TensorDict`` constructor (tensors kept, numbers cast, other objects wrapped as
non-tensor data).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import torch

from tensordict._formats import struct_array as _struct_array
from tensordict._formats import tabular as _tabular
from tensordict._formats.from_python import (
    _auto,
    _dataclass_fields,
    _finish,
    _from_h5,
    _from_list_any,
    _from_mapping,
    _is_dataframe,
    _is_h5,
    _is_namedtuple,
    _out_cls,
    _stack_list,
    convert,
    fromkeys,
    make_tensordict,
)
from tensordict._formats.to_python import (
    _namedtuple_cls,
    _store,
    _to_numpy,
    _tolist,
    _unbind_nested,
)
from tensordict._kinds import kinds as _kinds
from tensordict._kinds.kinds import is_tensor_collection
from tensordict._leaves.nontensor import DATA_TYPES, NON_TENSOR, is_non_tensor
from tensordict._plugins import siblings as _siblings
from tensordict._torch import pytree as _pytree

_Tensor = torch.Tensor

__all__ = ["ConversionOps", "convert", "fromkeys", "make_tensordict", "to_dense"]


# ---------------------------------------------------------------------- the mixin
class ConversionOps:
    """Mixin of :class:`~tensordict.TensorDictBase`: conversions to and from other structures."""

    # -------------------------------------------------------------- dicts
    @classmethod
    def from_dict(
        cls,
        input_dict: Any,
        *,
        auto_batch_size: bool | None = None,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: torch.device | str | int | None = None,
        batch_dims: int | None = None,
        names: Sequence[str | None] | None = None,
    ) -> _kinds.Dense:
        """A tensordict from a (nested) dictionary.

        Nested mappings become nested tensordicts; tuples, namedtuples, dataclasses and
        structured arrays inside it are converted as by :meth:`from_any`. Without
        ``batch_size`` the batch size is ``[]``, unless ``auto_batch_size=True`` (or
        ``batch_dims``), which makes it the longest leading shape the entries share (at
        most ``batch_dims`` dimensions), level by level.

        Args:
            input_dict: the mapping (or tensordict) to convert.

        Keyword Args:
            auto_batch_size: compute the batch size from the entries.
            batch_size: the batch size (exclusive with ``auto_batch_size``).
            device: cast every tensor to this device.
            batch_dims: with ``auto_batch_size``, the most batch dimensions to keep.
            names: names of the batch dimensions.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = {"a": torch.zeros(3, 4), "b": {"c": torch.ones(3, 4, 5)}}
        >>> TensorDict.from_dict(data).batch_size
        torch.Size([])
        >>> td = TensorDict.from_dict(data, auto_batch_size=True)
        >>> td.batch_size, td["b"].batch_size
        (torch.Size([3, 4]), torch.Size([3, 4, 5]))
        >>> TensorDict.from_dict(data, batch_dims=1).batch_size
        torch.Size([3])
        """
        what = f"{cls.__name__}.from_dict"
        auto = _auto(what, auto_batch_size, batch_dims, batch_size)
        if not isinstance(input_dict, Mapping) and not hasattr(input_dict, "items"):
            raise TypeError(f"{what} expects a mapping, got {type(input_dict).__name__}.")
        out = _from_mapping(
            _out_cls(cls),
            input_dict,
            () if batch_size is None else batch_size,
            device,
            auto,
            (),
            None if auto else names,
        )
        return _finish(out, auto, batch_dims, names if auto else None)

    def from_dict_instance(
        self,
        input_dict: Any,
        *,
        auto_batch_size: bool | None = None,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: torch.device | str | int | None = None,
        batch_dims: int | None = None,
        names: Sequence[str | None] | None = None,
    ) -> _kinds.Dense:
        """Like :meth:`from_dict`, but nested entries take the type of this tensordict's.

        A nested mapping whose key holds a nested tensordict (or tensorclass) here is
        converted with that entry's own ``from_dict_instance``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> template = TensorDict({"a": torch.zeros(2), "b": {"c": torch.zeros(2)}}, [2])
        >>> out = template.from_dict_instance({"a": torch.ones(3), "b": {"c": torch.ones(3)}})
        >>> out["b", "c"]
        tensor([1., 1., 1.])
        """
        what = f"{type(self).__name__}.from_dict_instance"
        auto = _auto(what, auto_batch_size, batch_dims, batch_size)
        if not isinstance(input_dict, Mapping) and not hasattr(input_dict, "items"):
            raise TypeError(f"{what} expects a mapping, got {type(input_dict).__name__}.")
        bs = () if batch_size is None else batch_size
        source = {}
        for key, value in input_dict.items():
            if isinstance(value, Mapping) and isinstance(key, str):
                current = _store(self).get(key)
                if current is not None and hasattr(current, "from_dict_instance"):
                    source[key] = current.from_dict_instance(value, batch_size=bs, device=device)
                    continue
            source[key] = value
        return type(self).from_dict(
            source,
            auto_batch_size=auto,
            batch_size=batch_size,
            device=device,
            batch_dims=batch_dims,
            names=names,
        )

    def to_dict(
        self,
        *,
        retain_none: bool = True,
        convert_tensors: bool = False,
        tolist_first: bool = False,
    ) -> dict[str, Any]:
        """The content as nested plain dicts; non-tensor entries as their values.

        Args:
            retain_none: keep entries whose value is ``None`` (else drop them).
            convert_tensors: turn tensors into (nested) Python lists.
            tolist_first: convert nested tensordicts with :meth:`tolist`, so that one with
                batch dimensions becomes a list of dicts (one per element).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2), "b": {"c": "text"}}, [2])
        >>> td.to_dict()
        {'a': tensor([0., 0.]), 'b': {'c': 'text'}}
        >>> td.to_dict(convert_tensors=True)
        {'a': [0.0, 0.0], 'b': {'c': 'text'}}
        """
        out: dict[str, Any] = {}
        for key, value in _store(self).items():
            if isinstance(value, _Tensor):
                out[key] = value.tolist() if convert_tensors else value
            elif type(value) in DATA_TYPES:
                if value.data is None and not retain_none:
                    continue
                out[key] = value.data
            elif is_non_tensor(value):
                out[key] = value.tolist()
            elif tolist_first and hasattr(value, "tolist"):
                out[key] = value.tolist(convert_tensors=convert_tensors)
            elif hasattr(value, "to_dict"):
                out[key] = value.to_dict(retain_none=retain_none, convert_tensors=convert_tensors)
            elif value is None and not retain_none:
                continue
            else:
                out[key] = value
        return out

    def numpy(self) -> dict[str, Any]:
        """The content as nested dicts of numpy arrays (non-tensor entries as their values).

        CPU tensors that need no copy share their memory with the arrays.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = torch.zeros(2)
        >>> arrays = TensorDict({"a": t, "b": {"c": "text"}}, [2]).numpy()
        >>> arrays
        {'a': array([0., 0.], dtype=float32), 'b': {'c': 'text'}}
        >>> arrays["a"][0] = 1.0; t
        tensor([1., 0.])
        """
        return _to_numpy(self, ())

    def tolist(
        self,
        *,
        convert_nodes: bool = True,
        convert_tensors: bool = False,
        tolist_first: bool = False,
        as_linked_list: bool = False,
    ) -> Any:
        """Nested Python lists over the batch dimensions, one dict per batch element.

        A tensordict without batch dimensions gives one dict. Nested tensordicts with more
        batch dimensions than their parent become lists themselves.

        Args:
            convert_nodes: if ``False``, the elements are tensordicts instead of dicts.
            convert_tensors: turn the tensors into Python lists and numbers.
            tolist_first: a nested tensordict with more batch dimensions than its parent
                becomes a list over its own extra dimensions too (by default, a dict of
                its entries).
            as_linked_list: accepted for compatibility; a plain list is returned (writes
                into it do not reach the tensordict).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.arange(4).view(2, 2), "b": "x"}, [2])
        >>> td.tolist()
        [{'a': tensor([0, 1]), 'b': 'x'}, {'a': tensor([2, 3]), 'b': 'x'}]
        >>> td.tolist(convert_tensors=True)
        [{'a': [0, 1], 'b': 'x'}, {'a': [2, 3], 'b': 'x'}]
        >>> td.tolist(convert_nodes=False)[1]["a"]
        tensor([2, 3])
        """
        nb = len(cast(Any, self).batch_size)
        if not convert_nodes:
            if convert_tensors:
                raise TypeError(
                    "tolist(convert_tensors=True) needs convert_nodes=True: tensors can only be "
                    "turned into lists inside dicts."
                )
            return _unbind_nested(self, nb)
        return _tolist(self, nb, convert_tensors, tolist_first)

    # -------------------------------------------------------------- any object
    @classmethod
    def from_any(
        cls,
        obj: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: torch.device | str | int | None = None,
        batch_size: Sequence[int] | torch.Size | int | None = None,
    ) -> Any:
        """Recursively convert a dict, tuple, namedtuple, dataclass, structured array or
        pandas DataFrame.

        Dispatches to :meth:`from_dict`, :meth:`from_tuple`, :meth:`from_namedtuple`,
        :meth:`from_dataclass`, :meth:`from_struct_array` or :meth:`from_pandas` (whose
        ``batch_dims`` only bounds ``auto_batch_size``); HDF5 objects go to ``from_h5``
        (``pip install tensordict-memmap[h5]``). Tensordicts are returned as they are, and
        so is any other object (a tensor, a number). ``batch_size`` with
        ``auto_batch_size=True`` raises a :class:`TypeError`, except for a dict (where
        ``batch_size`` wins), as in the reference.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict.from_any({"obs": (torch.zeros(3), torch.ones(3))}, auto_batch_size=True)
        >>> td["obs", "1"], td.batch_size
        (tensor([1., 1., 1.]), torch.Size([3]))
        >>> TensorDict.from_any(td) is td
        True
        >>> import pandas as pd
        >>> TensorDict.from_any(pd.DataFrame({"x": [1.0, 2.0]}), device="cpu")["x"]
        tensor([1., 2.], dtype=torch.float64)
        """
        if is_tensor_collection(obj):
            return obj
        if _is_dataframe(obj):
            return cls.from_pandas(  # type: ignore[attr-defined]
                obj,
                auto_batch_size=auto_batch_size,
                batch_dims=batch_dims,
                device=device,
                batch_size=batch_size,
            )
        what = f"{cls.__name__}.from_any"
        auto = _auto(what, auto_batch_size, batch_dims, batch_size)
        # ``auto_batch_size=True`` reaches the converters even with a ``batch_size``:
        # from_dict lets the batch size win, the others refuse the pair
        kwargs: dict[str, Any] = dict(
            auto_batch_size=auto or bool(auto_batch_size),
            batch_dims=batch_dims,
            device=device,
            batch_size=batch_size,
        )
        if _is_h5(obj):  # before Mapping: an HDF5 group is one
            del kwargs["device"]
            if auto_batch_size:  # auto_batch_size wins for a file, as in the reference
                kwargs["batch_size"] = None
            return _from_h5(obj, what, **kwargs)
        if isinstance(obj, Mapping):
            return cls.from_dict(obj, **kwargs)
        if isinstance(obj, tuple):
            if _is_namedtuple(obj):
                return cls.from_namedtuple(obj, **kwargs)
            return cls.from_tuple(obj, **kwargs)
        if isinstance(obj, np.ndarray) and obj.dtype.names is not None:
            return cls.from_struct_array(obj, **kwargs)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return cls.from_dataclass(obj, **kwargs)
        if isinstance(obj, list):
            return _from_list_any(obj, device)
        return obj

    @classmethod
    def from_namedtuple(
        cls,
        named_tuple: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: torch.device | str | int | None = None,
        batch_size: Sequence[int] | torch.Size | int | None = None,
    ) -> _kinds.Dense:
        """A tensordict from a namedtuple (nested namedtuples become nested tensordicts).

        >>> import torch
        >>> from collections import namedtuple
        >>> from tensordict import TensorDict
        >>> Point = namedtuple("Point", ["x", "y"])
        >>> td = TensorDict.from_namedtuple(Point(torch.zeros(2), Point(1, 2)), batch_size=[])
        >>> td["y", "x"]
        tensor(1)
        """
        what = f"{cls.__name__}.from_namedtuple"
        auto = _auto(what, auto_batch_size, batch_dims, batch_size, exclusive=True)
        if not _is_namedtuple(named_tuple):
            raise TypeError(f"{what} expects a namedtuple, got {type(named_tuple).__name__}.")
        out = _from_mapping(
            _out_cls(cls),
            named_tuple._asdict(),
            () if batch_size is None else batch_size,
            device,
            auto,
            (),
        )
        return _finish(out, auto, batch_dims)

    def to_namedtuple(self, dest_cls: type | None = None) -> Any:
        """The content as (nested) namedtuples; non-tensor entries as their values.

        Each level gets a ``GenericDict`` namedtuple class whose fields are its keys, or
        ``dest_cls`` for the top level.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(3), "nested": {"s": "zero!"}}, [3])
        >>> td.to_namedtuple()
        GenericDict(a=tensor([0., 0., 0.]), nested=GenericDict(s='zero!'))
        """
        values = {}
        for key, value in _store(self).items():
            if isinstance(value, _Tensor):
                values[key] = value
            elif type(value) in DATA_TYPES:
                values[key] = value.data
            elif is_non_tensor(value):
                values[key] = value.tolist()
            elif hasattr(value, "to_namedtuple"):
                values[key] = value.to_namedtuple()
            else:
                values[key] = value
        if dest_cls is None:
            dest_cls = _namedtuple_cls(tuple(values))
            return dest_cls(*values.values())
        return dest_cls(**values)

    @classmethod
    def from_tuple(
        cls,
        obj: tuple[Any, ...],
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: torch.device | str | int | None = None,
        batch_size: Sequence[int] | torch.Size | int | None = None,
    ) -> _kinds.Dense:
        """A tensordict from a tuple: the i-th item is stored under the key ``str(i)``.

        >>> from tensordict import TensorDict
        >>> td = TensorDict.from_tuple((1, 2, (3, 4)))
        >>> td["0"], td["2", "1"]
        (tensor(1), tensor(4))
        """
        what = f"{cls.__name__}.from_tuple"
        auto = _auto(what, auto_batch_size, batch_dims, batch_size, exclusive=True)
        if not isinstance(obj, tuple):
            raise TypeError(f"{what} expects a tuple, got {type(obj).__name__}.")
        out = _from_mapping(
            _out_cls(cls),
            {str(i): v for i, v in enumerate(obj)},
            () if batch_size is None else batch_size,
            device,
            auto,
            (),
        )
        return _finish(out, auto, batch_dims)

    @classmethod
    def from_dataclass(
        cls,
        dataclass: Any,
        *,
        dest_cls: type | None = None,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        as_tensorclass: bool = False,
        device: torch.device | str | int | None = None,
        batch_size: Sequence[int] | torch.Size | int | None = None,
    ) -> Any:
        """A tensordict whose keys are the fields of a dataclass instance.

        Field values are converted as by :meth:`from_any`. With ``as_tensorclass=True``
        the conversion is the tensorclass one (``pip install tensorclass``), which
        returns a tensorclass instead (``dest_cls`` picks its class).

        >>> import dataclasses, torch
        >>> from tensordict import TensorDict
        >>> @dataclasses.dataclass
        ... class Obs:
        ...     pixels: torch.Tensor
        ...     label: str
        >>> td = TensorDict.from_dataclass(Obs(torch.zeros(4, 3), "cat"), auto_batch_size=True)
        >>> td.batch_size, td["label"]
        (torch.Size([4, 3]), 'cat')
        """
        what = f"{cls.__name__}.from_dataclass"
        if as_tensorclass:
            if not isinstance(dataclass, type):  # an instance: its batch size is refused too
                _tabular.check_batch_keywords("from_dataclass", auto_batch_size, batch_size)
            return _siblings.forward(
                "tensorclass",
                "from_dataclass",
                f"{what}(..., as_tensorclass=True)",
                dataclass,
                dest_cls=dest_cls,
                auto_batch_size=auto_batch_size,
                batch_dims=batch_dims,
                device=device,
                batch_size=batch_size,
            )
        auto = _auto(what, auto_batch_size, batch_dims, batch_size, exclusive=True)
        if not dataclasses.is_dataclass(dataclass) or isinstance(dataclass, type):
            raise TypeError(
                f"{what} expects a dataclass instance, got "
                f"{dataclass.__name__ if isinstance(dataclass, type) else type(dataclass).__name__}"
                f"{' (a class; pass as_tensorclass=True to convert the class)' if isinstance(dataclass, type) else ''}."
            )
        out = _from_mapping(
            _out_cls(cls),
            _dataclass_fields(dataclass),
            () if batch_size is None else batch_size,
            device,
            auto,
            (),
        )
        return _finish(out, auto, batch_dims)

    @classmethod
    def from_list(
        cls,
        input: Sequence[Any],
        *,
        auto_batch_size: bool | None = None,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: torch.device | str | int | None = None,
        batch_dims: int | None = None,
        names: Sequence[str | None] | None = None,
        lazy: bool | None = None,
    ) -> _kinds.Dense:
        """Stack a (nested) list of tensordicts or dicts into one tensordict.

        Each level of list nesting adds a leading batch dimension; dicts (and other
        collections) are converted as by :meth:`from_any` first. ``lazy=True`` stacks
        lazily, ``False`` densely; ``None`` densely when the elements have the same keys
        and shapes, lazily otherwise.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict.from_list([{"a": torch.zeros(3)}, {"a": torch.ones(3)}])
        >>> td.batch_size, td["a"][:, 0]
        (torch.Size([2]), tensor([0., 1.]))
        >>> TensorDict.from_list([[{"a": 0}, {"a": 1}], [{"a": 2}, {"a": 3}]])["a"]
        tensor([[0, 1],
                [2, 3]])
        """
        what = "TensorDict.from_list"
        auto = _auto(what, auto_batch_size, batch_dims, batch_size)
        if not isinstance(input, (list, tuple)):
            raise TypeError(f"{what} expects a list, got {type(input).__name__}.")
        out = _stack_list(input, device, (), lazy)
        if batch_size is not None:
            out.batch_size = batch_size  # type: ignore[assignment]
        return _finish(out, auto, batch_dims, names)

    # -------------------------------------------------------------- numpy struct arrays
    @classmethod
    def from_struct_array(
        cls,
        struct_array: np.ndarray,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: torch.device | str | int | None = None,
        batch_size: Sequence[int] | torch.Size | int | None = None,
    ) -> _kinds.Dense:
        """A tensordict viewing the fields of a numpy structured array (zero-copy).

        The batch size is the array's shape unless ``batch_size`` or
        ``auto_batch_size`` say otherwise. Numeric fields become tensors sharing the
        array's memory (a field numpy cannot hand over without a copy, such as a
        misaligned or byte-swapped one, is copied); nested structured fields become
        nested tensordicts; string and object fields are kept as numpy arrays
        (non-tensor data, also views). Passing a ``device`` other than the CPU copies.

        >>> import numpy as np
        >>> from tensordict import TensorDict
        >>> x = np.array([("Rex", 9, 81.0), ("Fido", 3, 27.0)],
        ...              dtype=[("name", "U10"), ("age", "i4"), ("weight", "f4")])
        >>> td = TensorDict.from_struct_array(x)
        >>> x["age"] += 1
        >>> td["age"], td.batch_size
        (tensor([10,  4], dtype=torch.int32), torch.Size([2]))
        >>> bool((td.to_struct_array() == x).all())
        True
        """
        what = f"{cls.__name__}.from_struct_array"
        auto = _auto(what, auto_batch_size, batch_dims, batch_size, exclusive=True)
        out = _struct_array.from_struct_array(struct_array, what, device, batch_size)
        return _finish(out, auto, batch_dims)

    def to_struct_array(self) -> np.ndarray:
        """The content as a numpy structured array of shape ``batch_size``.

        When the tensors already lie interleaved in one block of CPU memory (as after
        :meth:`from_struct_array`, or indexing its result) the array is a view of them;
        otherwise it is a new array. Nested tensordicts become nested structured fields;
        string values become string fields.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.arange(2), "b": {"c": torch.ones(2, 3)}}, [2])
        >>> arr = td.to_struct_array()
        >>> arr.dtype
        dtype([('a', '<i8'), ('b', [('c', '<f4', (3,))])])
        >>> arr["b"]["c"][1]
        array([1., 1., 1.], dtype=float32)
        """
        return _struct_array.to_struct_array(self)

    # -------------------------------------------------------------- pytrees
    @classmethod
    def from_pytree(
        cls,
        pytree: Any,
        *,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
    ) -> _kinds.Dense:
        """A tensordict from a pytree of lists, tuples, namedtuples and dicts; see :meth:`to_pytree`.

        Every level records its type in a non-tensor entry ``"_pytree_type"``, so
        :meth:`to_pytree` rebuilds the same structure: dict keys that are not plain
        strings (ints, tuples, objects) are kept in that record and their values stored
        under ``"0"``, ``"1"``, …; tensordicts inside the pytree come back as
        tensordicts. Numbers and arrays become tensors (so they come back as tensors);
        other objects are stored as non-tensor data.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> tree = {"x": [torch.zeros(2), (torch.ones(2), "label")], "y": torch.ones(1)}
        >>> td = TensorDict.from_pytree(tree)
        >>> td["x", "1", "1"], td["y"]
        ('label', tensor([1.]))
        >>> back = td.to_pytree()
        >>> list(back), type(back["x"][1]).__name__, back["x"][1][1]
        (['x', 'y'], 'tuple', 'label')
        >>> odd = TensorDict.from_pytree({3: torch.zeros(1), (1, "a"): "v"})
        >>> odd["1"], odd.to_pytree()
        ('v', {3: tensor([0.]), (1, 'a'): 'v'})
        """
        what = f"{cls.__name__}.from_pytree"
        auto = _auto(what, auto_batch_size, batch_dims, batch_size)
        out = _pytree.from_pytree(pytree, () if batch_size is None else batch_size, auto)
        return _finish(out, auto, batch_dims)

    def to_pytree(self) -> Any:
        """The pytree :meth:`from_pytree` built this tensordict from.

        A level without a ``"_pytree_type"`` record becomes a dict.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(1), "b": {"c": "x"}}).to_pytree()
        {'a': tensor([0.]), 'b': {'c': 'x'}}
        >>> TensorDict.from_pytree([torch.zeros(1), {(1, 2): "y"}]).to_pytree()
        [tensor([0.]), {(1, 2): 'y'}]
        """
        return _pytree.to_pytree(self)


# ---------------------------------------------------------------------- module functions


def to_dense(td: _kinds.Base, *, clone: bool, layout: torch.layout | None = None) -> _kinds.Dense:
    """``td`` as a dense :class:`TensorDict`: nested lazy stacks stacked, tensors copied
    when ``clone``."""
    if isinstance(td, _kinds.Lazy):
        return td._dense(layout)
    if not isinstance(td, _kinds.Dense):
        return _kinds.Dense(
            {
                k: to_dense(v, clone=clone, layout=layout) if isinstance(v, _kinds.Base) else v
                for k, v in td.items()
            },
            batch_size=td.batch_size,
        )
    out: dict[str, Any] = {}
    changed = clone
    for key, value in td._tensordict.items():
        if isinstance(value, _Tensor):
            out[key] = value.clone() if clone else value
        elif isinstance(value, _kinds.Base):
            sub = to_dense(value, clone=clone, layout=layout)
            changed = changed or sub is not value
            out[key] = sub
        elif clone and isinstance(value, NON_TENSOR):
            out[key] = value.clone()
        else:
            out[key] = value
    if not changed:
        return td
    names = list(td._names) if td._names is not None else None
    return _kinds.Dense._new_unsafe(out, td.batch_size, td.device, names)
