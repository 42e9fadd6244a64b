"""The field machinery shared by tensorclasses and :class:`TypedTensorDict`.

A field is a class annotation (processed by :mod:`dataclasses`, so ``field()``,
``default_factory``, ``ClassVar``, ``InitVar`` and inheritance behave as in a dataclass).
For each field this module decides, from its type hint and the class flags:

* how a value written to it is converted before it is stored (:func:`caster`): kept as
  it is, cast to a tensor, kept as a non-tensor value (``nocast``), or converted to the
  annotated type (``autocast``);
* how it is read (:func:`install_descriptors`). The instance's ``__dict__`` *is* the
  storage of its tensordict, so a field that always holds tensors or tensordicts is read
  by plain attribute lookup, at the speed of a dataclass attribute. A field that may
  hold non-tensor data gets a data descriptor that unwraps it.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import sys
import types
import typing
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from tensordict import NonTensorData, NonTensorStack, TensorDict, TensorDictBase
from tensordict._plugins.api import NON_TENSOR_TYPES as _NON_TENSOR_TYPES
from tensordict._plugins.api import modes as _modes
from tensordict._plugins.api import unwrap_non_tensor

_NON_TENSOR = (NonTensorData, NonTensorStack)
#: Values that a tensordict casts to a tensor (what ``nocast`` keeps as they are).
_CASTABLE = (bool, int, float, complex, np.ndarray, np.number, np.bool_)
_CONTAINERS = (dict, list, tuple, set, collections.abc.Mapping)
_UNRESOLVED = object()
MISSING: Any = dataclasses.MISSING


@dataclasses.dataclass(frozen=True)
class Flags:
    """The class options of a tensorclass (see :func:`~tensordict.tensorclass.tensorclass`)."""

    autocast: bool = False
    nocast: bool = False
    frozen: bool = False
    shadow: bool = False
    tensor_only: bool = False
    skip_post_init_on_rebuild: bool = False
    cast_filter: Callable[..., bool] | None = None
    kw_only: bool = False

    def check(self, where: str) -> None:
        """Raise ``TypeError`` for exclusive options given together."""
        chosen = [n for n in ("autocast", "nocast", "tensor_only") if getattr(self, n)]
        if len(chosen) > 1:
            raise TypeError(
                f"{where}: the options {' and '.join(chosen)} are exclusive "
                "(autocast, nocast and tensor_only: choose one)."
            )


FLAG_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Flags))


@dataclasses.dataclass
class FieldSpec:
    """What the class knows about one field."""

    name: str
    hint: Any  # the resolved type hint (``_UNRESOLVED`` when it could not be evaluated)
    default: Any = MISSING
    default_factory: Any = MISSING
    #: True when every value the hint allows is a tensor or a tensor collection: such a
    #: field is read straight from the storage (no unwrapping).
    plain: bool = False
    cast: Callable[[Any, Any], Any] | None = None
    #: Non-tensor values read as the Python value (``False``: as the stored
    #: ``NonTensorData``, for typed tensordicts and fields annotated ``NonTensorData``).
    unwrap: bool = True
    #: A tensor written to it needs no conversion: ``__setattr__`` hands it straight to
    #: the tensordict (plain field, no cast, class not frozen).
    fast: bool = False
    #: Annotated with tensor types only in a class that holds them to it (``tensor_only``,
    #: typed tensordicts): a value that does not become a tensor is refused.
    tensor_typed: bool = False


# ----------------------------------------------------------------------------- hints


_SKIPPED_MODULES = ("tensordict.tensorclass", "dataclasses", "abc", "typing", "typing_extensions")


def defining_namespace() -> dict[str, Any]:
    """The local names of the code that defines the class being processed (a class made
    inside a function may be annotated with other local classes); empty at module level."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(_SKIPPED_MODULES):
            return {} if frame.f_locals is frame.f_globals else dict(frame.f_locals)
        frame = frame.f_back
    return {}


def resolve_hints(cls: Any, namespace: dict[str, Any] | None = None) -> dict[str, Any]:
    """The type hints of ``cls``'s annotations (its bases' included), names that cannot be
    evaluated yet mapped to ``_UNRESOLVED``. Names resolve in the class's module, then in
    ``namespace`` (see :func:`defining_namespace`); the class's own name resolves to
    ``cls``."""
    hints: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        own = klass.__dict__.get("__annotations__", {})
        if not own:
            continue
        module = sys.modules.get(klass.__module__)
        globalns = dict(vars(module)) if module is not None else {}
        localns = dict(namespace or {})
        localns[klass.__name__] = cls if cls.__name__ == klass.__name__ else klass
        localns[cls.__name__] = cls
        for name, ann in own.items():
            for _ in range(3):  # a quoted annotation under ``from __future__ import annotations``
                if not isinstance(ann, str):
                    break
                try:
                    ann = eval(ann, globalns, localns)  # noqa: S307 - the class's own annotation
                except Exception:
                    ann = _UNRESOLVED
            hints[name] = _UNRESOLVED if isinstance(ann, str) else ann
    return hints


def is_resolved(hint: Any) -> bool:
    """Whether an annotation could be evaluated."""
    return hint is not _UNRESOLVED


def has_unresolved(hints: dict[str, Any]) -> bool:
    """Whether some annotation could not be evaluated (a name defined later)."""
    return any(h is _UNRESOLVED for h in hints.values())


def _union_args(hint: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(hint)
    return None


def _members(hint: Any) -> tuple[Any, ...]:
    """The alternatives of a hint without ``None`` (``Optional[T]`` -> ``(T,)``)."""
    args = _union_args(hint)
    if args is None:
        return (hint,)
    out: list[Any] = []
    for a in args:
        if a is type(None):
            continue
        out.extend(_members(a))
    return tuple(out)


def _as_class(hint: Any) -> type | None:
    if isinstance(hint, type):
        return hint
    origin = typing.get_origin(hint)
    return origin if isinstance(origin, type) else None


_LEGACY_TENSOR_TYPE = type(torch.FloatTensor)  # torch.IntTensor & co are not Tensor subclasses


def _is_tensorish(hint: Any) -> bool:
    """A tensor type or a tensor collection (tensordict, tensorclass) type."""
    if isinstance(hint, _LEGACY_TENSOR_TYPE):
        return True
    cls = _as_class(hint)
    if cls is None:
        return False
    return issubclass(cls, torch.Tensor) or (
        issubclass(cls, TensorDictBase) and not issubclass(cls, _NON_TENSOR)
    )


def is_tensor_hint(hint: Any) -> bool:
    """Whether ``hint`` allows tensors only (``torch.Tensor``, a subclass, ``Optional`` of
    them); tensordict types are not tensors here.

    >>> import torch
    >>> from typing import Optional
    >>> from tensordict.tensorclass._fields import is_tensor_hint
    >>> is_tensor_hint(Optional[torch.Tensor]), is_tensor_hint(torch.Tensor | str)
    (True, False)
    """
    if hint is _UNRESOLVED or hint is Any:
        return False
    for member in _members(hint):
        if isinstance(member, _LEGACY_TENSOR_TYPE):
            continue
        cls = _as_class(member)
        if cls is None or not issubclass(cls, torch.Tensor):
            return False
    return True


def is_plain(hint: Any) -> bool:
    """Whether every value allowed by ``hint`` is stored as it is (no non-tensor wrapper)."""
    if hint is _UNRESOLVED or hint is Any:
        return False
    return all(_is_tensorish(m) for m in _members(hint))


def check_tensor_only(cls: Any, hints: dict[str, Any]) -> None:
    """``tensor_only`` classes accept tensor, tensor-collection or non-tensor-data hints."""
    for name, hint in hints.items():
        ok = hint is not _UNRESOLVED and all(
            _is_tensorish(m) or issubclass(_as_class(m) or type(None), NonTensorData)
            for m in _members(hint)
        )
        if not ok:
            raise TypeError(
                f"{cls.__name__}.{name}: tensor_only requires types to be Tensor, "
                f"Tensor-subtrypes or None (or a tensordict / tensorclass), got {hint!r}."
            )


# ----------------------------------------------------------------------------- casting


def _to_mapping(value: Any) -> dict[Any, Any] | None:
    if isinstance(value, TensorDictBase) or not isinstance(value, collections.abc.Mapping):
        return None
    return dict(value)


def _mapping_to_td(value: Any, batch_size: torch.Size, device: Any) -> TensorDict:
    """A (nested) mapping as a TensorDict; tensordicts inside it are kept as they are."""
    src = {}
    for k, v in value.items():
        sub = _to_mapping(v)
        src[k] = _mapping_to_td(sub, batch_size, device) if sub is not None else v
    return TensorDict(src, batch_size=batch_size, device=device)


def _autocast_to(hint: Any) -> Callable[[Any, Any], Any] | None:
    """The ``autocast`` conversion for an exact (non-union) hint."""
    cls = _as_class(hint)
    if hint is Any or hint is _UNRESOLVED or cls is None:
        return None
    if issubclass(cls, torch.Tensor):

        def to_tensor(value: Any, owner: Any) -> Any:
            if isinstance(value, torch.Tensor):
                return value
            if isinstance(value, _CASTABLE):
                return torch.as_tensor(value)
            raise TypeError(
                f"cannot cast a {type(value).__name__} to a tensor for a field annotated "
                f"{getattr(hint, '__name__', hint)} (autocast)."
            )

        return to_tensor
    if issubclass(cls, TensorDictBase):
        rewrap = getattr(cls, "_wraps_tensordict", False)

        def to_collection(value: Any, owner: Any) -> Any:
            mapping = _to_mapping(value)
            if mapping is None:
                return value
            if rewrap:  # a tensorclass: its own constructor casts the fields
                maker: Any = cls  # a tensorclass (not typed as one here)
                return maker._from_fields(mapping, owner.batch_size, owner.device)
            return TensorDict(mapping, batch_size=owner.batch_size, device=owner.device)

        return to_collection
    if cls is np.ndarray:
        return lambda value, owner: _non_tensor(
            value if isinstance(value, np.ndarray) else np.asarray(_py(value)), owner
        )

    target: Any = cls

    def to_type(value: Any, owner: Any) -> Any:
        if not isinstance(value, target):
            value = target(_py(value))
        return _non_tensor(value, owner)

    return to_type


def _py(value: Any) -> Any:
    """A 0-d tensor as a Python scalar (what ``int()`` and friends take)."""
    if isinstance(value, torch.Tensor) and value.ndim == 0:
        return value.item()
    return value


def _list_or_value(value: Any, owner: Any) -> Any:
    """A ``list`` field: in ``set_list_to_stack(True)`` mode (the default) a list is one
    value per batch element (a ``NonTensorStack``, checked against the batch size), as
    a list written to a tensordict; otherwise one value."""
    if type(value) is list and _modes.list_to_stack():
        return value
    return _non_tensor(value, owner)


def _non_tensor(value: Any, owner: Any) -> Any:
    if isinstance(value, (torch.Tensor, TensorDictBase, *_NON_TENSOR)) or value is None:
        return value
    return NonTensorData(value, batch_size=owner.batch_size, device=owner.device)


_SCALARS = (int, float, bool, complex)


def _scalar(value: Any, owner: Any) -> Any:
    """A Python number for a field annotated ``int``/``float``/``bool``: cast to a tensor
    (as any number) when the batch size is empty, kept as it is when a 0-d tensor cannot
    fit the batch size."""
    if type(value) in _SCALARS and owner.batch_size:
        return NonTensorData(value, batch_size=owner.batch_size, device=owner.device)
    return value


def _keep_castable(value: Any, owner: Any) -> Any:
    """``nocast``: numbers and arrays are stored as they are."""
    if isinstance(value, _CASTABLE):
        return NonTensorData(value, batch_size=owner.batch_size, device=owner.device)
    return value


def caster(flags: Flags, hint: Any) -> Callable[[Any, Any], Any] | None:
    """The conversion applied to a value written to a field (``None``: core's rules)."""
    if flags.nocast:
        return _keep_castable
    members = _members(hint)
    if flags.tensor_only:
        only = _as_class(members[0]) if len(members) == 1 else None
        if only is not None and issubclass(only, NonTensorData):
            return _non_tensor
        if any(
            (c := _as_class(m)) is not None
            and issubclass(c, TensorDictBase)
            and not getattr(c, "_wraps_tensordict", False)
            for m in members
        ):
            return lambda value, owner: (
                _mapping_to_td(m, owner.batch_size, owner.device)
                if (m := _to_mapping(value)) is not None
                else value
            )
        return None
    if not flags.autocast:
        cls: Any = _as_class(hint)
        if cls is not None and issubclass(cls, _CONTAINERS) and not _is_collection_type(cls):
            # a dict/list field keeps its value (not made a tensordict); a list follows
            # core's list rule (set_list_to_stack) as in the reference
            return _list_or_value if issubclass(cls, list) else _non_tensor
        if members and all(_as_class(m) in _SCALARS for m in members):
            return _scalar  # an int/float/bool field: a tensor when it fits the batch
        return None
    if _union_args(hint) is not None:  # autocast: unions are not converted

        def keep(value: Any, owner: Any) -> Any:
            if isinstance(value, (torch.Tensor, TensorDictBase)):
                return value
            return _non_tensor(value, owner)

        return keep
    return _autocast_to(hint)


def _is_collection_type(cls: type) -> bool:
    return issubclass(cls, TensorDictBase)


# ----------------------------------------------------------------------------- reading


class PlainField:
    """The class attribute of a field read straight from the instance's storage.

    It is a non-data descriptor: the instance ``__dict__`` (the tensordict's storage) is
    looked up first, so it only runs when the field is not stored (``None``, or a wrapped
    tensordict that is not dense).
    """

    __slots__ = ("name", "default")

    def __init__(self, name: str, default: Any) -> None:
        self.name = name
        self.default = default

    def __get__(self, obj: Any, cls: type | None = None) -> Any:
        if obj is None:
            if self.default is MISSING:
                owner = getattr(cls, "__name__", "?")
                raise AttributeError(f"type object {owner!r} has no attribute {self.name!r}")
            return self.default
        return obj._missing_field(self.name)


class ValueField(PlainField):
    """The class attribute of a field that may hold non-tensor data (a data descriptor).

    Non-tensor entries are unwrapped (``NonTensorData`` -> its value, a stack -> a list)
    unless the class keeps them wrapped (:class:`TypedTensorDict`).
    """

    __slots__ = ("unwrap",)

    def __init__(self, name: str, default: Any, unwrap: bool = True) -> None:
        super().__init__(name, default)
        self.unwrap = unwrap

    def __get__(self, obj: Any, cls: type | None = None) -> Any:
        if obj is None:
            return PlainField.__get__(self, obj, cls)
        value = obj.__dict__.get(self.name, MISSING)
        if value is MISSING:
            return obj._missing_field(self.name)
        if self.unwrap and type(value) in _NON_TENSOR_TYPES:
            return unwrap_non_tensor(value)
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        obj._set_field(self.name, value)

    def __delete__(self, obj: Any) -> None:
        obj._del_field(self.name)


def keeps_wrapper(hint: Any) -> bool:
    """Whether a field annotated ``hint`` reads its ``NonTensorData`` as stored."""
    cls = _as_class(hint)
    return cls is not None and issubclass(cls, NonTensorData)


def install_descriptors(cls: Any, specs: dict[str, FieldSpec]) -> None:
    """Put the class attribute of every field on ``cls``.

    A plain field gets ``None``: CPython specialises the attribute read of an instance
    whose class has no ``__getattr__`` and no descriptor of that name, which makes reading
    a stored field as fast as a dataclass attribute read, and a field that is not stored
    reads ``None``. Once an instance of the class wraps a tensordict that is not dense (a
    lazy stack: fields are not in the instance ``__dict__``), or a field is deleted, the
    class switches to :class:`PlainField` descriptors (:func:`use_descriptors`). A field
    that may hold non-tensor data gets a :class:`ValueField`.
    """
    for name, spec in specs.items():
        if spec.plain:
            setattr(cls, name, PlainField(name, spec.default) if cls._descriptors else None)
        else:
            setattr(cls, name, ValueField(name, spec.default, spec.unwrap))


def use_descriptors(cls: Any) -> None:
    """Read the plain fields of ``cls`` through :class:`PlainField` (see
    :func:`install_descriptors`)."""
    cls._descriptors = True
    for name, spec in cls._field_specs.items():
        if spec.plain:
            setattr(cls, name, PlainField(name, spec.default))


def upgrade(cls: Any, name: str) -> None:
    """A plain field was given a non-tensor value (a ``torch.Tensor`` field set to a
    string, say): read it through a :class:`ValueField` from now on."""
    spec = cls._field_specs[name]
    spec.plain = spec.fast = False
    cls._fast_set = frozenset(n for n in cls._fast_set if n != name)
    setattr(cls, name, ValueField(name, spec.default, spec.unwrap))
