"""The shared base of tensorclasses and typed tensordicts: a class with fields around a
:class:`~tensordict.TensorDict`.

An instance keeps its data in ``self._tensordict`` (a slot) and its ``__dict__`` *is* that
tensordict's storage (when it is dense), so reading a tensor field is a plain attribute
lookup. Every ``TensorDict`` method is forwarded (:mod:`._forward`); writes to fields go
through :meth:`_Wrapper.__setattr__`, which casts them by the class rules (:mod:`._fields`)
and lets the tensordict validate them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from types import FunctionType
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch._ops import HigherOrderOperator

from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase
from tensordict._plugins.api import (
    NON_TENSOR_TYPES,
    lock_error,
    parse_batch_size,
    parse_device,
    unwrap_non_tensor,
)
from tensordict.base import TD_HANDLED_BY_NAME, TD_HANDLED_FUNCTIONS
from tensordict.tensorclass import _fields, _forward, _schema
from tensordict.tensorclass._fields import MISSING, FieldSpec, Flags

_TD = TensorDict
_Tensor = torch.Tensor
_Size = torch.Size
_FACTORY = object()  # default of a field with a default_factory in the generated __init__
#: The keywords of ``update``/``update_`` that are options, not entries.
_UPDATE_OPTIONS = frozenset(
    {
        "clone",
        "inplace",
        "non_blocking",
        "keys_to_update",
        "is_leaf",
        "update_batch_size",
        "ignore_lock",
    }
)


def _sibling_rows() -> tuple[tuple[str, str, str, str], ...]:
    """Core's forwarder rows: the methods other distributions implement (memmap, nn,
    distributed). Those receive the instance itself, so that they can record its class."""
    from tensordict._plugins.api import FORWARDERS

    return tuple((name, sub, hook, kind) for name, sub, hook, kind, _ in FORWARDERS)


class _Wrapper(TensorDictBase):
    """Fields around a tensordict. Subclassed by ``TensorClass`` and ``TypedTensorDict``."""

    __slots__ = ("_tensordict", "_deleted")

    #: The wrapped tensordict (dense, or any other backend: lazy stack, HDF5 ...).
    _tensordict: Any
    #: Names of the fields deleted from this instance (``del obj.field``).
    _deleted: frozenset[str]
    _wraps_tensordict: ClassVar[bool] = True  # (see tensordict._leaves.collection)
    _field_specs: ClassVar[dict[str, FieldSpec]] = {}
    _flags: ClassVar[Flags] = Flags()
    _init_names: ClassVar[tuple[str, ...]] = ()
    _plain_names: ClassVar[tuple[str, ...]] = ()
    _plain_set: ClassVar[frozenset[str]] = frozenset()
    #: Plain fields without casting (class not frozen): a tensor is stored as it is.
    _fast_set: ClassVar[frozenset[str]] = frozenset()
    _frozen: ClassVar[bool] = False
    _bulk_init: ClassVar[bool] = True
    _run_post_init: ClassVar[bool] = False
    _post_init_on_rebuild: ClassVar[bool] = False
    _pending_namespace: ClassVar[dict[str, Any] | None] = None
    #: Whether plain fields are read through descriptors (see _fields.install_descriptors).
    _descriptors: ClassVar[bool] = False
    #: Whether reading a non-tensor field gives the Python value (tensorclass) or the
    #: stored ``NonTensorData`` (typed tensordict).
    _unwrap_values: ClassVar[bool] = True
    #: What the class is called in messages ("tensorclass", "typed tensordict").
    _kind: ClassVar[str] = "tensorclass"
    #: Whether fields annotated with tensor types refuse other values (typed tensordicts;
    #: ``tensor_only`` tensorclasses through their flag), and those fields.
    _strict_fields: ClassVar[bool] = False
    _tensor_typed_names: ClassVar[tuple[str, ...]] = ()
    #: What the generated ``__init__`` of the class reads (see :func:`make_init`).
    _init_state: ClassVar[InitState | None] = None

    if TYPE_CHECKING:

        def __post_init__(self, *initvars: Any) -> None: ...

    # ------------------------------------------------------------------ linking
    def _link(self, td: TensorDictBase) -> None:
        object.__setattr__(self, "_tensordict", td)
        if type(td) is _TD:
            object.__setattr__(self, "__dict__", td._tensordict)
        else:  # fields are not in __dict__: read them through descriptors
            object.__setattr__(self, "__dict__", {})
            if not type(self)._descriptors:
                _fields.use_descriptors(type(self))

    def _relink(self) -> None:
        """After an in-place call: follow a storage the tensordict replaced, and read a
        plain field that now holds non-tensor data through a value descriptor."""
        td = self._tensordict
        if type(td) is _TD:
            store = td._tensordict
            if self.__dict__ is not store:
                object.__setattr__(self, "__dict__", store)
            self._check_plain(store)

    def _check_plain(self, store: dict[str, Any]) -> None:
        cls = type(self)
        for name in cls._plain_names:
            value = store.get(name)
            if value is not None and not isinstance(value, (_Tensor, TensorDictBase)):
                _fields.upgrade(cls, name)
                cls._plain_names = tuple(n for n in cls._plain_names if n != name)
                cls._plain_set = frozenset(cls._plain_names)
                sync_init_state(cls)

    @classmethod
    def _rewrap(cls, td: TensorDictBase) -> Any:
        """A new instance around ``td`` (the result of an operation on an instance)."""
        obj = object.__new__(cls)
        if type(td) is not _TD or _is_compiling():
            obj._link(td)
        else:  # the slot setters themselves (dynamo traces object.__setattr__ only)
            _set_data(obj, td)
            _set_dict(obj, td._tensordict)
        if cls._post_init_on_rebuild:
            obj.__post_init__()
        return obj

    @classmethod
    def _wrap_checked(cls, td: TensorDictBase) -> Any:
        """A new instance around data that comes from outside (``from_tensordict``,
        loads, the class methods)."""
        for name in cls._tensor_typed_names:
            value = _stored_non_tensor(td, name)
            if value is not None:
                raise _schema.tensor_field_error(cls, name, value)
        obj = object.__new__(cls)
        obj._link(td)
        obj._relink()
        if cls._run_post_init:
            obj.__post_init__()
        return obj

    # ------------------------------------------------------------------ construction
    def _init_fields(
        self,
        values: tuple[Any, ...],
        batch_size: Any,
        device: Any,
        names: Any,
        initvars: tuple[Any, ...] = (),
    ) -> None:
        """The generic body of the generated ``__init__`` (see :func:`make_init` for the
        one-pass body most classes run)."""
        cls = type(self)
        if cls._pending_namespace is not None:  # annotations that named later definitions
            from tensordict.tensorclass import _process

            _process.refresh_hints(cls)
        if cls._bulk_init:  # no casting, no custom __setattr__: validate in one pass
            bs = batch_size if type(batch_size) is _Size else parse_batch_size(batch_size)
            dev = None if device is None else parse_device(device)
            nb = len(bs)
            source = {}
            other = False  # a value that is not a tensor: the tensordict validates all
            for name, value in zip(cls._init_names, values):
                if type(value) is _Tensor:
                    if dev is not None and value.device != dev:
                        value = value.to(dev)
                    if value.shape[:nb] != bs:
                        raise _shape_error(cls, name, value, bs)
                elif value is None:
                    continue
                else:
                    if value is _FACTORY:
                        value = cls._field_specs[name].default_factory()
                    other = True
                source[name] = value
            if other:
                td = _TD(source, bs, dev, names)
                for name in cls._tensor_typed_names:  # a value that did not become a tensor
                    if isinstance(td._tensordict.get(name), _fields._NON_TENSOR):
                        raise _schema.tensor_field_error(cls, name, source[name])
            else:
                td = _TD._new_unsafe(source, bs, dev)
                if names is not None:
                    td.names = names
            if _is_compiling():
                self._link(td)
            else:
                _set_data(self, td)
                _set_dict(self, td._tensordict)
            if other and cls._plain_names:
                self._check_plain(td._tensordict)
        else:
            specs = cls._field_specs
            td = _TD(batch_size=batch_size, device=device, names=names)
            self._link(td)
            for name, value in zip(cls._init_names, values):
                if value is _FACTORY:
                    value = specs[name].default_factory()
                if value is not None:
                    setattr(self, name, value)
        if cls._frozen:
            td.lock_()
        if cls._run_post_init:
            self.__post_init__(*initvars)

    @classmethod
    def _from_fields(cls, mapping: dict[str, Any], batch_size: Any, device: Any) -> Any:
        """An instance from a mapping of field values (autocast of nested tensorclasses):
        each value is cast like an assignment; fields left out read ``None``."""
        obj = object.__new__(cls)
        obj._link(_TD(batch_size=batch_size, device=device))
        for name, value in mapping.items():
            if value is not None:
                setattr(obj, name, value)
        if cls._run_post_init:
            obj.__post_init__()
        return obj

    # ------------------------------------------------------------------ fields
    def _missing_field(self, name: str) -> Any:
        try:
            deleted = self._deleted
        except AttributeError:
            deleted = None
        if deleted and name in deleted:
            raise AttributeError(
                f"{type(self).__name__!r} object has no attribute {name!r} (deleted field)"
            )
        td = self._tensordict
        if type(td) is _TD:
            return None
        value = td._get_str(name, None)
        if type(value) in NON_TENSOR_TYPES and type(self)._field_specs[name].unwrap:
            return unwrap_non_tensor(value)
        return value

    def _set_field(self, name: str, value: Any) -> None:
        cls = type(self)
        td = self._tensordict
        if cls._frozen and td.is_locked:  # (unlocked while __init__ runs)
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        if value is None:
            if name in td.keys():
                td.del_(name)
            return
        spec = cls._field_specs[name]
        if spec.cast is not None:
            value = spec.cast(value, td)
        if spec.tensor_typed:
            value = self._tensor_value(name, value)
        if type(td) is _TD:
            td._set_str(name, value, inplace=False, validated=False)
            if _is_compiling():  # as in __setattr__: the attribute, for Dynamo
                object.__setattr__(self, name, td._tensordict[name])
        else:
            td.set(name, value)
        if spec.plain and not isinstance(value, (_Tensor, TensorDictBase)):
            self._relink()

    def _tensor_value(self, name: str, value: Any) -> Any:
        """``value`` as the tensor-typed field ``name`` stores it; :class:`TypeError` (and
        nothing written) when it does not become a tensor (a string, say)."""
        if type(value) is _Tensor or value is None:
            return value
        if not isinstance(value, _fields._NON_TENSOR) and isinstance(value, TensorDictBase):
            return value
        td = self._tensordict
        probe = td if type(td) is _TD else _TD(batch_size=td.batch_size, device=td.device)
        stored = probe._validate_value(name, value)
        if isinstance(stored, _fields._NON_TENSOR):
            raise _schema.tensor_field_error(type(self), name, value)
        return stored

    def _del_field(self, name: str) -> None:
        if type(self)._flags.frozen:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        td = self._tensordict
        if name in td.keys():
            td.del_(name)
        if not type(self)._descriptors:  # a deleted field must not read None: descriptors
            _fields.use_descriptors(type(self))
        try:
            deleted = self._deleted
        except AttributeError:
            deleted = frozenset()
        object.__setattr__(self, "_deleted", deleted | {name})

    def __setattr__(self, name: str, value: Any) -> None:
        # (class attributes read through the instance: a read through the class goes
        # through its metaclass's __getattr__ hook, several times slower)
        if type(value) is _Tensor and name in self._fast_set:
            td = self._tensordict
            if type(td) is _TD:  # the checks of TensorDict.__setitem__, inline
                dev = td._device
                if dev is not None and value.device != dev:
                    value = value.to(dev)
                bs = td._batch_size
                sh = value.shape  # shape[:nb] != bs, without a torch.Size slice for one dim
                if (not sh or sh[0] != bs[0]) if len(bs) == 1 else sh[: len(bs)] != bs:
                    raise _shape_error(type(self), name, value, bs)
                store = td._tensordict
                if td._is_locked and name not in store:
                    raise lock_error(name)
                store[name] = value
                if _is_compiling():  # Dynamo does not see that __dict__ is the store:
                    object.__setattr__(self, name, value)  # tell it the attribute too
                return
        cls = type(self)
        if name in cls._field_specs:
            self._set_field(name, value)
            return
        if cls._frozen and self._tensordict.is_locked:  # batch_size, names ...
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        if name == "device":
            raise RuntimeError(
                f"device cannot be set using tensorclass.device = device on a {cls._kind} "
                f"({cls.__name__}); use .to(device) to move it."
            )
        for klass in cls.__mro__:
            attr = klass.__dict__.get(name, MISSING)
            if attr is not MISSING:
                if hasattr(type(attr), "__set__"):
                    attr.__set__(self, value)
                    return
                break
        raise AttributeError(
            f"Cannot set the attribute {name!r}: {cls.__name__} has no such field. "
            f"Its fields are {sorted(cls._field_specs)}."
        )

    @property
    def _consolidated(self) -> Any:
        """The consolidated storage of the wrapped tensordict (see ``consolidate``)."""
        return self._tensordict._consolidated

    def __delattr__(self, name: str) -> None:
        if name in type(self)._field_specs:
            self._del_field(name)
            return
        object.__delattr__(self, name)

    # ------------------------------------------------------------------ data access
    @property
    def _is_locked(self) -> bool:  # type: ignore[override]
        return bool(self._tensordict._is_locked)

    @property
    def _non_tensordict(self) -> dict[str, Any]:
        """Non-tensor values stored outside the tensordict: none (all of them are in it,
        as :class:`~tensordict.NonTensorData`). Kept for code written against the
        reference layout."""
        return {}

    @classmethod
    def fields(cls) -> tuple[dataclasses.Field[Any], ...]:
        """The dataclass fields of the class.

        >>> import torch
        >>> from tensordict import TensorClass
        >>> class Pair(TensorClass):
        ...     a: torch.Tensor
        ...     label: str = "x"
        >>> [f.name for f in Pair.fields()]
        ['a', 'label']
        """
        return dataclasses.fields(cls)  # type: ignore[arg-type]

    @classmethod
    def from_tensordict(
        cls,
        tensordict: TensorDictBase,
        non_tensordict: dict[str, Any] | None = None,
        safe: bool | None = None,
    ) -> Any:
        """An instance of the class around ``tensordict`` (not copied: writes are shared).

        ``non_tensordict`` gives more field values.

        >>> import torch
        >>> from tensordict import TensorClass, TensorDict
        >>> class Pair(TensorClass):
        ...     a: torch.Tensor
        >>> td = TensorDict(a=torch.zeros(3), batch_size=[3])
        >>> pair = Pair.from_tensordict(td)
        >>> pair.a is td["a"]
        True
        """
        if not isinstance(tensordict, TensorDictBase):
            raise TypeError(
                f"{cls.__name__}.from_tensordict expects a tensordict, got "
                f"{type(tensordict).__name__}."
            )
        tensordict = _forward.unwrap(tensordict)
        # (a ValueError, as the reference)
        keys = [*tensordict.keys(), *(non_tensordict or ())]
        _schema.refuse_unknown(cls, keys, f"{cls.__name__}.from_tensordict", ValueError)
        if non_tensordict:
            for key, value in non_tensordict.items():
                tensordict.set(key, value)
        return cls._wrap_checked(tensordict)

    _from_tensordict = from_tensordict

    @classmethod
    def from_dict(cls, input_dict: Any, *args: Any, **kwargs: Any) -> Any:
        """An instance of the class from a dict of its fields (``TensorDict.from_dict``'s
        arguments: ``batch_size``, ``auto_batch_size`` ...). A key that is not a field
        raises :class:`ValueError` (:class:`TypeError` for a typed tensordict, which also
        needs every field without a default).

        >>> import torch
        >>> from tensordict import TensorClass
        >>> class Pair(TensorClass):
        ...     a: torch.Tensor
        >>> Pair.from_dict({"a": torch.zeros(3)}, auto_batch_size=True).batch_size
        torch.Size([3])
        """
        what = f"{cls.__name__}.from_dict"
        cls._check_new_keys(_schema.keys_of(input_dict), what)
        td = _TD.from_dict(_forward.unwrap(input_dict), *args, **kwargs)
        cls._check_complete(td.keys(), what)
        return _forward._wrap_for(cls, td)

    @classmethod
    def _check_new_keys(cls, keys: Sequence[Any], what: str) -> None:
        """Refuse keys that are not fields, written by ``what`` (a ValueError, as the
        reference for tensorclasses)."""
        _schema.refuse_unknown(cls, keys, what, ValueError)

    @classmethod
    def _check_complete(cls, keys: Any, what: str) -> None:
        """Refuse data without a required field (typed tensordicts); a tensorclass reads
        a field that is not there as ``None``, as its constructor allows."""

    def update(self, input_dict_or_td: Any = None, *args: Any, **kwargs: Any) -> Any:
        """``update`` of the data, for the fields only: a key that is not a field raises
        :class:`ValueError` and nothing is written.

        >>> import torch
        >>> from tensordict import TensorClass
        >>> class Pair(TensorClass):
        ...     a: torch.Tensor
        >>> Pair(a=torch.zeros(2)).update({"a": torch.ones(2)}).a
        tensor([1., 1.])
        """
        self._check_update(input_dict_or_td, kwargs, "update")
        source = _forward.unwrap(input_dict_or_td)
        return _forward.rewrap(self, self._tensordict.update(source, *args, **kwargs))

    def update_(self, input_dict_or_td: Any = None, *args: Any, **kwargs: Any) -> Any:
        """``update_`` of the data (in place), for the fields only: a key that is not a
        field raises :class:`ValueError` and nothing is written.

        >>> import torch
        >>> from tensordict import TensorClass
        >>> class Pair(TensorClass):
        ...     a: torch.Tensor
        >>> Pair(a=torch.zeros(2)).update_({"a": torch.ones(2)}).a
        tensor([1., 1.])
        """
        self._check_update(input_dict_or_td, kwargs, "update_")
        source = _forward.unwrap(input_dict_or_td)
        return _forward.rewrap(self, self._tensordict.update_(source, *args, **kwargs))

    def _check_update(self, source: Any, kwargs: dict[str, Any], method: str) -> None:
        """The checks of ``update``/``update_`` (``kwargs``: their options, and entries)."""
        entries = {k: v for k, v in kwargs.items() if k not in _UPDATE_OPTIONS}
        keys = [*_schema.keys_of(source), *entries]
        selected = kwargs.get("keys_to_update")
        if selected is not None:
            wanted = {_schema.top_name(k) for k in selected}
            keys = [k for k in keys if k in wanted]
        type(self)._check_new_keys(keys, f"{type(self).__name__}.{method}")
        if source is not None:
            self._check_values(source, keys)
        if entries:
            self._check_values(entries, keys)

    def _check_values(self, source: Any, keys: Sequence[Any]) -> None:
        """Refuse a value that does not become a tensor for a tensor-typed field."""
        typed = type(self)._tensor_typed_names
        if not typed or not any(name in keys for name in typed):
            return
        source = _forward.unwrap(source)
        for key in list(source.keys()):
            name = key[0] if type(key) is tuple and len(key) == 1 else key
            if type(name) is str and name in typed:
                self._tensor_value(name, source[key])

    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDict:
        """A dense :class:`~tensordict.TensorDict` copy of the data (tensorclasses nested
        in it become tensordicts too).

        >>> import torch
        >>> from tensordict import TensorClass
        >>> class Pair(TensorClass):
        ...     a: torch.Tensor
        >>> type(Pair(a=torch.zeros(2)).to_tensordict()).__name__
        'TensorDict'
        """
        out: TensorDict = self._tensordict.to_tensordict(retain_none=retain_none)
        return out

    def extend(self, tensordict: Any) -> None:
        """Add instances (or tensordicts) at the end of a lazily stacked instance: a
        sequence of them, or one split along the stack dimension.

        >>> import torch
        >>> from tensordict import TensorClass, lazy_stack
        >>> class Step(TensorClass):
        ...     x: torch.Tensor
        >>> steps = lazy_stack([Step(x=torch.zeros(2)), Step(x=torch.ones(3))])
        >>> steps.extend([Step(x=torch.ones(1))])
        >>> steps.batch_size, steps[2].x.shape
        (torch.Size([3]), torch.Size([1]))
        """
        inner = self._tensordict
        if not isinstance(inner, LazyStackedTensorDict):
            raise TypeError(
                f"extend() adds to a lazily stacked {type(self).__name__} (made by lazy_stack); "
                f"this one holds a {type(inner).__name__}."
            )
        if isinstance(tensordict, (list, tuple)):
            tensordict = [_forward.unwrap(t) for t in tensordict]
        inner.extend(_forward.unwrap(tensordict))

    def from_dict_instance(self, input_dict: Any, *args: Any, **kwargs: Any) -> Any:
        """An instance of the class from a dict shaped like this instance (nested entries
        rebuilt by their own ``from_dict_instance``); fields are cast by the class rules.

        >>> import torch
        >>> from tensordict import TensorClass
        >>> class Count(TensorClass, autocast=True):
        ...     n: int
        >>> Count(n=1).from_dict_instance({"n": 5}).n
        5
        """
        cls = type(self)
        what = f"{cls.__name__}.from_dict_instance"  # (an AttributeError, as the reference)
        _schema.refuse_unknown(cls, _schema.keys_of(input_dict), what, AttributeError)
        out = cls._wrap_checked(self._tensordict.from_dict_instance(input_dict, *args, **kwargs))
        for name, spec in type(self)._field_specs.items():
            value = input_dict.get(name) if hasattr(input_dict, "get") else None
            if spec.cast is not None and value is not None and not isinstance(value, dict):
                setattr(out, name, value)
        return out

    # ------------------------------------------------------------------ indexing
    def __getitem__(self, index: Any) -> Any:
        if type(index) is int or type(index) is slice:
            return type(self)._rewrap(self._tensordict[index])
        if type(index) is str or (type(index) is tuple and index and type(index[0]) is str):
            return self._get_key(index)
        if isinstance(index, TensorDictBase):
            index = _forward.unwrap(index)
        return type(self)._rewrap(self._tensordict[index])

    def _get_key(self, key: Any) -> Any:
        return self._tensordict[key]

    def __setitem__(self, index: Any, value: Any) -> None:
        if type(index) is str or (type(index) is tuple and index and type(index[0]) is str):
            self._set_key(index, value)
            return
        if isinstance(value, _Wrapper):
            if type(value) is not type(self) and set(type(value)._field_specs) != set(
                type(self)._field_specs
            ):
                raise ValueError(
                    f"__setitem__ is only allowed for same-class or compatible class (i.e. same "
                    f"members) assignment: cannot write a {type(value).__name__} (fields "
                    f"{sorted(type(value)._field_specs)}) into a {type(self).__name__} (fields "
                    f"{sorted(type(self)._field_specs)})."
                )
            value = value._tensordict
        if isinstance(index, TensorDictBase):
            index = _forward.unwrap(index)
        self._tensordict[index] = value
        self._relink()

    def _set_key(self, key: Any, value: Any) -> None:
        self._tensordict[key] = value
        self._relink()

    def __iter__(self) -> Iterator[Any]:
        if not self.batch_dims:
            raise TypeError(
                f"iteration over a {type(self).__name__} with no batch dimension "
                "(batch_size=torch.Size([]))."
            )
        return iter(_forward._wrap_for(type(self), self._tensordict.unbind(0)))

    # ------------------------------------------------------------------ torch, copy, pickle
    @classmethod
    def __torch_function__(
        cls,
        func: Callable[..., Any],
        types: tuple[type, ...],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        for t in types:
            if t is not cls and issubclass(t, _Wrapper):  # two classes: no common result
                return NotImplemented
        for arg in args:  # stack/cat of instances with other tensordicts: no class to give
            if (type(arg) is list or type(arg) is tuple) and any(
                isinstance(v, TensorDictBase) and type(v) is not cls for v in arg
            ):
                names = " and ".join(sorted({type(v).__name__ for v in arg}))
                kind = RuntimeError if func is torch.cat else TypeError  # (as the reference)
                raise kind(
                    f"torch.{getattr(func, '__name__', func)}: cannot combine {names} "
                    "instances: the result would have no single class. Convert them first "
                    "(instance.to_tensordict(), or Class.from_tensordict(td))."
                )
        if type(func) is FunctionType:  # as TensorDictBase.__torch_function__ does
            impl = TD_HANDLED_BY_NAME.get(func.__name__) or TD_HANDLED_FUNCTIONS.get(func)
        else:
            impl = TD_HANDLED_FUNCTIONS.get(func)
        if impl is None:
            if isinstance(func, HigherOrderOperator):  # invoke_subgraph & co.: they
                with torch._C.DisableTorchFunctionSubclass():  # flatten instances
                    return func(*args, **(kwargs or {}))  # as pytrees themselves
            return NotImplemented
        args = tuple([_unwrap_deep(a) for a in args])
        if kwargs:
            kwargs = {k: _unwrap_deep(v) for k, v in kwargs.items()}
            return _forward._wrap_for(cls, impl(*args, **kwargs))
        return _forward._wrap_for(cls, impl(*args))

    def __copy__(self) -> Any:
        return type(self)._rewrap(self._tensordict.copy())

    def __deepcopy__(self, memo: dict[str, Any]) -> Any:
        return type(self)._rewrap(self._tensordict.clone())

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self._tensordict))


def _shape_error(cls: Any, name: str, value: Any, batch_size: torch.Size) -> RuntimeError:
    return RuntimeError(
        f"batch dimension mismatch for field {name!r} of {cls.__name__}: the value has shape "
        f"{tuple(value.shape)} but its leading dimensions must equal the batch_size="
        f"{tuple(batch_size)}."
    )


def _stored_non_tensor(td: Any, name: str) -> Any:
    """The non-tensor data ``td`` holds at ``name`` (in a member, for a lazy stack: its
    entries are not read as one), else ``None``."""
    if type(td) is _TD:
        value = td._tensordict.get(name)
        return value if isinstance(value, _fields._NON_TENSOR) else None
    if isinstance(td, LazyStackedTensorDict):
        for member in td.tensordicts:
            value = _stored_non_tensor(member, name)
            if value is not None:
                return value
    return None


def _rebuild(cls: Any, td: TensorDictBase) -> Any:
    """Unpickling: the class around its unpickled tensordict."""
    return cls._wrap_checked(td)


def _unwrap_deep(value: Any) -> Any:
    if isinstance(value, _Wrapper):
        return value._tensordict
    t = type(value)
    if t is list or t is tuple:
        return t([v._tensordict if isinstance(v, _Wrapper) else v for v in value])
    return value


def _sibling_method(name: str, subpackage: str, hook: str, kind: str) -> Any:
    """A method that another distribution implements (``memmap``, ``save``, ``load``,
    ``broadcast`` ...): it receives the instance itself (not its tensordict), so that the
    class can be recorded, and what comes back is wrapped like any other result."""
    from tensordict._plugins.api import siblings as _siblings

    what = f"TensorClass.{name}"
    if kind == "property":

        def getter(self: Any) -> Any:
            return _siblings.forward(subpackage, hook, what, self)

        return property(getter, doc=f"Provided by the {subpackage!r} distribution.")
    if kind == "method":

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = _siblings.forward(subpackage, hook, what, self, *args, **kwargs)
            if result is self or result is self._tensordict:
                self._relink()
                return self
            return _forward._wrap_for(type(self), result)

        method.__name__ = name
        return method

    def class_method(cls: Any, *args: Any, **kwargs: Any) -> Any:
        result = _siblings.forward(subpackage, hook, what, *args, **kwargs)
        return result if isinstance(result, cls) else _forward._wrap_for(cls, result)

    class_method.__name__ = name
    return classmethod(class_method)


def _cast_method(name: str) -> Callable[..., Any]:
    """A dtype shorthand (``float()``, ``bfloat16()`` ...) whose ``cast_filter`` defaults to
    the class's (see the ``cast_filter`` option)."""

    def method(self: Any, **kwargs: Any) -> Any:
        if "cast_filter" not in kwargs and type(self)._flags.cast_filter is not None:
            kwargs["cast_filter"] = type(self)._flags.cast_filter
        return _forward.rewrap(self, getattr(self._tensordict, name)(**kwargs))

    method.__name__ = name
    method.__doc__ = f"``{name}()`` of the data; ``cast_filter`` defaults to the class option."
    return method


def _to(self: Any, *args: Any, cast_filter: Any = MISSING, **kwargs: Any) -> Any:
    """``to(...)`` of the data. A dtype cast applies only to the leaves ``cast_filter(key,
    leaf)`` selects; ``cast_filter`` defaults to the class option (``None``: every leaf)."""
    if cast_filter is MISSING:
        cast_filter = type(self)._flags.cast_filter
    td = self._tensordict
    dtype = kwargs.get("dtype", args[0] if args and isinstance(args[0], torch.dtype) else None)
    if cast_filter is None or dtype is None or len(args) + len(kwargs) != 1:
        return _forward.rewrap(self, td.to(*args, **kwargs))
    from tensordict._plugins.api import _cast

    return _forward.rewrap(self, _cast(td, lambda x: x.to(dtype), cast_filter))


def _install_casts() -> None:
    from tensordict._plugins.api import CASTS, QUANTIZED_CASTS

    for name in (*CASTS, *QUANTIZED_CASTS):
        setattr(_Wrapper, name, _cast_method(name))
    setattr(_Wrapper, "to", _to)  # noqa: B010 - installed like the other forwarders


for _name, _sub, _hook, _kind in _sibling_rows():
    setattr(_Wrapper, _name, _sibling_method(_name, _sub, _hook, _kind))
_install_casts()
_forward.install(_Wrapper)
# The setters of the ``_tensordict`` slot and of ``__dict__``, called directly: half the
# cost of ``object.__setattr__``, on the path of every operation's result.
_set_data = _Wrapper.__dict__["_tensordict"].__set__
_set_dict = next(
    k.__dict__["__dict__"] for k in _Wrapper.__mro__ if "__dict__" in k.__dict__
).__set__
_is_compiling = torch.compiler.is_dynamo_compiling


# ----------------------------------------------------------------------------- __init__


class InitState:
    """What the generated ``__init__`` of one class reads on every call, in slots (the
    class's own attributes are read through its metaclass, several times slower). Kept
    equal to the class attributes by :func:`sync_init_state`."""

    __slots__ = ("fast", "frozen", "post_init", "tensor_typed", "plain")

    def __init__(self) -> None:
        self.fast = False  # _bulk_init and no annotation left to resolve
        self.frozen = False
        self.post_init = False
        self.tensor_typed: frozenset[str] = frozenset()
        self.plain: frozenset[str] = frozenset()


def sync_init_state(cls: Any) -> None:
    """Copy the class attributes the generated ``__init__`` reads into its state."""
    state = cls.__dict__.get("_init_state")
    if state is None:
        return
    state.fast = cls._bulk_init and cls._pending_namespace is None
    state.frozen = cls._frozen
    state.post_init = cls._run_post_init
    state.tensor_typed = frozenset(cls._tensor_typed_names)
    state.plain = cls._plain_set


LAZY_TYPES = (LazyStackedTensorDict,)
