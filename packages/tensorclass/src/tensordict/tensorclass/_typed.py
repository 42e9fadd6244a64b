"""``TypedTensorDict``: a tensordict whose fields are class annotations.

It is built by the same field machinery as :class:`~tensordict.TensorClass`
(:mod:`._process`, :mod:`._fields`, :mod:`._wrapper`); what differs is the dict-like
surface: ``state["key"]`` reads an entry, non-tensor entries read as their
:class:`~tensordict.NonTensorData`, the fields are keyword-only, a field may be declared
``NotRequired[...]`` (as in a ``TypedDict``), the class lists its keys in
``__required_keys__`` / ``__optional_keys__``, and the only options are ``shadow`` and
``frozen`` (the constructor locks the instance).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import typing
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import typing_extensions

from tensordict import TensorDictBase
from tensordict.tensorclass import _fields, _forward, _process, _schema
from tensordict.tensorclass._fields import MISSING, Flags
from tensordict.tensorclass._typing import (
    BatchSizeField,
    DeviceField,
    NamesField,
    SelfReturning,
    TypedTensorDictMeta,
)
from tensordict.tensorclass._wrapper import _Wrapper

_OPTIONS = ("shadow", "frozen")
_IGNORED = ("autocast", "nocast", "tensor_only")
_CONSTRUCTOR_KEYWORDS = ("batch_size", "device", "names", "lock", "non_blocking")


class TypedTensorDict(SelfReturning, _Wrapper, metaclass=TypedTensorDictMeta):  # type: ignore[misc]
    """A :class:`~tensordict.TensorDictBase` whose fields are declared as annotations.

    .. warning:: Experimental: the API can change in a minor release.

    Fields read as attributes (``state.eta``) and as keys (``state["eta"]``); the
    constructor takes them by keyword (a missing required field, or a name that is not
    a field, raises ``TypeError``) plus ``batch_size``, ``device`` and ``names``. A field
    is optional when it has a default or is annotated ``NotRequired[...]``; one left out
    without a default is not stored, and reading it raises ``AttributeError`` until it is
    set. ``__required_keys__`` and ``__optional_keys__`` (frozensets) list the fields.
    The annotations are the contract: assigning an attribute or writing a key that is
    not a field raises (``AttributeError`` for ``obj.name = ...``, ``set`` and
    ``td[key] = ...``; ``ValueError`` for ``update`` and ``from_dict``/``from_tensordict``),
    as does removing a required field (``AttributeError``), and a field annotated with
    tensor types refuses a value that does not become a tensor (``TypeError``). Refused
    calls change nothing. Subclasses add fields. Every tensordict operation returns the
    same class. :meth:`from_tensordict` gives typed access to an existing tensordict
    without copying.

    Options, in the class statement (``class S(TypedTensorDict, frozen=True)``) or in
    brackets (``TypedTensorDict["frozen"]``): ``shadow`` (field names may hide members
    such as ``batch_size``; without it such a field raises ``AttributeError``) and
    ``frozen`` (the constructor locks the instance). ``autocast``, ``nocast`` and
    ``tensor_only`` are accepted with a ``DeprecationWarning`` and have no effect; any
    other class keyword raises ``TypeError``, any other name in brackets ``ValueError``.

    >>> import torch
    >>> from tensordict import TensorDict, TypedTensorDict
    >>> class State(TypedTensorDict):
    ...     eta: torch.Tensor
    ...     X: torch.Tensor
    >>> state = State(eta=torch.zeros(5, 3), X=torch.zeros(5, 4), batch_size=[5])
    >>> state.eta.shape, state["X"].shape, type(state[0]).__name__
    (torch.Size([5, 3]), torch.Size([5, 4]), 'State')
    >>> td = TensorDict(eta=torch.zeros(5, 3), X=torch.zeros(5, 4), batch_size=[5])
    >>> State.from_tensordict(td).eta is td["eta"]
    True
    >>> sorted(State.__required_keys__), sorted(State.__optional_keys__)
    (['X', 'eta'], [])
    """

    __slots__ = ()
    _kind: ClassVar[str] = "typed tensordict"
    _strict_fields: ClassVar[bool] = True
    _unwrap_values: ClassVar[bool] = False
    _options_only: ClassVar[bool] = False
    #: The fields without a default (the constructor needs them) / the others.
    __required_keys__: ClassVar[frozenset[str]] = frozenset()
    __optional_keys__: ClassVar[frozenset[str]] = frozenset()
    #: ``NotRequired`` fields without a default: reading one that is not set raises.
    _unset_raises: ClassVar[frozenset[str]] = frozenset()

    if TYPE_CHECKING:  # keyword-only fields of the base, for the synthesised __init__
        batch_size: BatchSizeField = dataclasses.field(default=None, kw_only=True)  # type: ignore[assignment,override]
        device: DeviceField = dataclasses.field(default=None, kw_only=True)  # type: ignore[assignment]
        names: NamesField = dataclasses.field(default=None, kw_only=True)  # type: ignore[assignment,override]
    else:

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise TypeError(
                f"{type(self).__name__} is a base class without fields: subclass it with "
                "annotated fields and instantiate that."
            )

    def __init_subclass__(cls, **options: Any) -> None:
        super().__init_subclass__()
        unknown = [name for name in options if name not in (*_OPTIONS, *_IGNORED)]
        if unknown:
            raise TypeError(
                f"{cls.__name__}: unknown TypedTensorDict option(s) "
                f"{', '.join(map(repr, unknown))} in the class keywords; the options are "
                f"{', '.join(_OPTIONS)} ({', '.join(_IGNORED)} are accepted and ignored)."
            )
        ignored = sorted(n for n in _IGNORED if options.pop(n, False))
        if ignored:
            warnings.warn(
                f"{cls.__name__}: the option(s) {ignored} have no effect on a TypedTensorDict.",
                DeprecationWarning,
                stacklevel=2,
            )
        parent = next(b for b in cls.__mro__[1:] if issubclass(b, _Wrapper))
        flags = dataclasses.replace(parent._flags, kw_only=True, **options)
        if cls.__dict__.get("_options_only"):
            cls._flags = flags
            return
        if not flags.shadow:
            _refuse_shadowing(cls)
        unset_raises = _default_not_required(cls)
        _pin_defaults(cls)
        _process.process(cls, flags, unwrap=False)
        _strip_qualifiers(cls)
        cls._unset_raises = unset_raises & cls._field_specs.keys()
        if cls._unset_raises:  # unset fields read through descriptors, which raise
            _fields.use_descriptors(cls)
        required = frozenset(_schema.required_names(cls))
        cls.__required_keys__ = required
        cls.__optional_keys__ = frozenset(cls._field_specs) - required
        init = cls.__dict__["__init__"]
        if getattr(init, "_generated", False):
            cls.__init__ = _checked_init(cls, init)  # type: ignore[method-assign]

    def __class_getitem__(cls, options: Any) -> type:
        names = options if type(options) is tuple else (options,)
        for name in names:
            if name not in (*_OPTIONS, *_IGNORED):
                raise ValueError(
                    f"Unknown TypedTensorDict option: {name!r} (in {cls.__name__}[...]). "
                    f"Valid options: {', '.join(_OPTIONS)} ({', '.join(_IGNORED)} are "
                    "accepted and ignored)."
                )
        return _process.options_class(cls, names, (*_OPTIONS, *_IGNORED))

    def _missing_field(self, name: str) -> Any:
        value = super()._missing_field(name)
        cls = type(self)
        if value is None and name in cls._unset_raises and name not in self._tensordict.keys():
            raise AttributeError(
                f"{cls.__name__}.{name} is not set: the field is NotRequired and was left "
                f"out. Set it first, or read it with .get({name!r}, default)."
            )
        return value

    def _set_field(self, name: str, value: Any) -> None:
        if type(self)._flags.frozen:
            raise RuntimeError(
                f"cannot assign to field {name!r}: {type(self).__name__} is frozen (locked)."
            )
        super()._set_field(name, value)

    @classmethod
    def from_tensordict(  # type: ignore[override]
        cls, td: TensorDictBase, *, check: bool = True
    ) -> Any:
        """Wrap ``td`` (any tensordict: dense, lazy stack, ...) in the class, without copying:
        writes through either one are seen by the other.

        ``check=True`` raises ``TypeError`` when ``td`` misses a field without a default,
        and ``ValueError`` when it has a key that is not a field.

        >>> import torch
        >>> from tensordict import TensorDict, TypedTensorDict
        >>> class S(TypedTensorDict):
        ...     x: torch.Tensor
        >>> td = TensorDict(x=torch.zeros(3), batch_size=[3])
        >>> s = S.from_tensordict(td)
        >>> s.x += 1
        >>> td["x"]
        tensor([1., 1., 1.])
        """
        if not isinstance(td, TensorDictBase):
            raise TypeError(
                f"{cls.__name__}.from_tensordict expects a tensordict, got {type(td).__name__}."
            )
        td = _forward.unwrap(td)
        if check:
            keys = set(td.keys())
            missing = sorted(
                name
                for name, spec in cls._field_specs.items()
                if name not in keys and spec.default is MISSING and spec.default_factory is MISSING
            )
            if missing:
                raise TypeError(
                    f"{cls.__name__}.from_tensordict() missing required field(s): "
                    f"{', '.join(missing)}"
                )
            what = f"{cls.__name__}.from_tensordict"
            _schema.refuse_unknown(cls, keys, what, ValueError)
        return cls._wrap_checked(td)

    _from_tensordict = from_tensordict  # type: ignore[assignment]

    @classmethod
    def _check_complete(cls, keys: Any, what: str) -> None:
        _schema.refuse_missing(cls, keys, f"{what}()")

    # ------------------------------------------------------------------ the key contract
    def _check_write(self, key: Any, value: Any, what: str) -> Any:
        """``value`` for ``key`` once checked: the key names a field (else
        ``AttributeError``), a tensor-typed field gets a tensor (else ``TypeError``)."""
        cls = type(self)
        _schema.refuse_unknown(cls, [key], f"{cls.__name__}.{what}", AttributeError)
        name = key[0] if type(key) is tuple and len(key) == 1 else key
        if type(name) is str and name in cls._tensor_typed_names:
            return self._tensor_value(name, value)
        return value

    def set(self, key: Any, item: Any, inplace: bool = False, **kwargs: Any) -> Any:
        """Write ``item`` at ``key`` (a field, or a key inside one): a key that is not a
        field raises ``AttributeError``.

        >>> import torch
        >>> from tensordict import TypedTensorDict
        >>> class S(TypedTensorDict):
        ...     x: torch.Tensor
        >>> S(x=torch.zeros(2)).set("x", torch.ones(2))["x"]
        tensor([1., 1.])
        """
        item = self._check_write(key, item, "set")
        self._tensordict.set(key, item, inplace=inplace, **kwargs)
        self._relink()
        return self

    def _set_key(self, key: Any, value: Any) -> None:
        value = self._check_write(key, value, "__setitem__")
        super()._set_key(key, value)

    def setdefault(self, key: Any, default: Any, inplace: bool = False) -> Any:
        """The value at ``key``; ``default`` is written there first when it is missing (a
        key that is not a field raises ``AttributeError``).

        >>> import torch
        >>> from tensordict import TypedTensorDict
        >>> class S(TypedTensorDict):
        ...     x: torch.Tensor
        ...     y: torch.Tensor | None = None
        >>> S(x=torch.zeros(2)).setdefault("y", torch.ones(2))
        tensor([1., 1.])
        """
        if key not in self._tensordict.keys(include_nested=True):
            default = self._check_write(key, default, "setdefault")
        result = self._tensordict.setdefault(key, default, inplace=inplace)
        self._relink()
        return result

    def set_non_tensor(self, key: Any, value: Any) -> Any:
        """Store ``value`` as non-tensor data at ``key``, a field not annotated with tensor
        types.

        >>> from tensordict import TypedTensorDict
        >>> class S(TypedTensorDict):
        ...     label: str = "a"
        >>> S().set_non_tensor("label", "b")["label"]
        'b'
        """
        self._check_write(key, None, "set_non_tensor")
        name = key[0] if type(key) is tuple and len(key) == 1 else key
        if name in type(self)._tensor_typed_names:
            raise _schema.tensor_field_error(type(self), name, value)
        self._tensordict.set_non_tensor(key, value)
        self._relink()
        return self

    def _check_removal(self, keys: Any, what: str) -> None:
        _schema.refuse_removal(type(self), keys, f"{type(self).__name__}.{what}")

    def del_(self, key: Any) -> Any:
        """Remove the entry at ``key``; a field without a default raises ``AttributeError``.

        >>> import torch
        >>> from tensordict import TypedTensorDict
        >>> class S(TypedTensorDict):
        ...     x: torch.Tensor
        ...     y: torch.Tensor | None = None
        >>> sorted(S(x=torch.zeros(2), y=torch.ones(2)).del_("y").keys())
        ['x']
        """
        self._delete(key, "del_")
        return self

    def __delitem__(self, key: Any) -> None:
        self._delete(key, "__delitem__")

    def _delete(self, key: Any, what: str) -> None:
        self._check_removal([_unravel(key)], what)
        self._tensordict.del_(key)
        self._relink()

    def pop(self, key: Any, *default: Any) -> Any:
        """Remove the entry at ``key`` and return it; a field without a default raises
        ``AttributeError``."""
        if key in self._tensordict.keys(include_nested=True):
            self._check_removal([_unravel(key)], "pop")
        result = self._tensordict.pop(key, *default)
        self._relink()
        return result

    def popitem(self) -> Any:
        """Remove the last entry and return ``(key, value)``; a field without a default
        raises ``AttributeError``."""
        keys = list(self._tensordict.keys())
        if keys:
            self._check_removal(keys[-1:], "popitem")
        result = self._tensordict.popitem()
        self._relink()
        return result

    def clear(self) -> Any:
        """Remove every entry; with a field without a default, ``AttributeError``."""
        self._check_removal(list(self._tensordict.keys()), "clear")
        self._tensordict.clear()
        self._relink()
        return self

    def rename_key_(self, old_key: Any, new_key: Any, safe: bool = False) -> Any:
        """Rename an entry: a field without a default cannot be renamed away, and the new
        name must be a field."""
        self._check_removal([_unravel(old_key)], "rename_key_")
        self._check_write(new_key, None, "rename_key_")
        self._tensordict.rename_key_(old_key, new_key, safe=safe)
        self._relink()
        return self

    def _del_field(self, name: str) -> None:
        self._check_removal([name], "__delattr__")
        super()._del_field(name)


# ---------------------------------------------------------------------- class creation
_NOT_REQUIRED = tuple(
    {q for q in (getattr(typing, "NotRequired", None), typing_extensions.NotRequired) if q}
)
#: ``NotRequired[T]`` and ``Required[T]``: the field is read, checked and stored as a ``T``.
_QUALIFIERS = _NOT_REQUIRED + tuple(
    {q for q in (getattr(typing, "Required", None), typing_extensions.Required) if q}
)
#: An annotation written as text (``from __future__ import annotations``) of a kind.
_TEXT_KIND = re.compile(r"\s*(?:[A-Za-z_]\w*\.)*(?P<kind>NotRequired|ClassVar|InitVar)\b")


def _annotation_kind(annotation: Any) -> str | None:
    """``"NotRequired"``, ``"ClassVar"`` or ``"InitVar"`` for an annotation of that kind
    (an object or its text), else ``None``.

    >>> from typing import ClassVar
    >>> from typing_extensions import NotRequired
    >>> _annotation_kind(NotRequired[int]), _annotation_kind("ClassVar[int]")
    ('NotRequired', 'ClassVar')
    >>> _annotation_kind(int) is None
    True
    """
    if isinstance(annotation, str):
        match = _TEXT_KIND.match(annotation)
        return match["kind"] if match else None
    origin = typing.get_origin(annotation)
    if origin in _NOT_REQUIRED:
        return "NotRequired"
    if annotation is ClassVar or origin is ClassVar:
        return "ClassVar"
    if annotation is dataclasses.InitVar or isinstance(annotation, dataclasses.InitVar):
        return "InitVar"
    return None


def _own_fields(cls: Any) -> Mapping[str, Any]:
    """The annotations ``cls`` itself declares that can be fields (not ``ClassVar`` nor
    ``InitVar``)."""
    own = cls.__dict__.get("__annotations__", {})
    return {n: a for n, a in own.items() if _annotation_kind(a) not in ("ClassVar", "InitVar")}


def _refuse_shadowing(cls: Any) -> None:
    """``AttributeError`` for a field of ``cls`` named like a member of every instance
    (``batch_size``, ``keys``, ``apply`` ...), before the class is processed."""
    for name in _own_fields(cls):
        if name in _process.RESERVED:
            raise AttributeError(
                f"{cls.__name__}: field {name!r} shadows a TensorDictBase attribute "
                f"({cls.__name__}.{name} would hide it). Rename the field, or allow it "
                "with the shadow option (TypedTensorDict['shadow'] or "
                "class ...(TypedTensorDict, shadow=True))."
            )


def _default_not_required(cls: Any) -> frozenset[str]:
    """Give the ``NotRequired`` fields that ``cls`` declares without a default the default
    ``None`` (left out, they are not stored); the names of such fields of ``cls`` and its
    bases, unless ``cls`` declares them again as plain fields."""
    names = {n for base in cls.__bases__ for n in getattr(base, "_unset_raises", ())}
    for name, annotation in _own_fields(cls).items():
        names.discard(name)
        if _annotation_kind(annotation) != "NotRequired":
            continue
        value = cls.__dict__.get(name, MISSING)
        if isinstance(value, dataclasses.Field):
            if value.default is not MISSING or value.default_factory is not MISSING:
                continue
            value.default = None
        elif value is MISSING:
            setattr(cls, name, None)
        else:
            continue  # a default of its own: an ordinary optional field
        names.add(name)
    return frozenset(names)


def _pin_defaults(cls: Any) -> None:
    """Write down the default of each field that ``cls`` annotates without a value where
    :mod:`dataclasses` would take an inherited class attribute for it: a member of every
    instance (a ``shadow`` field: no default) or the attribute by which a base class
    reads a field it redeclares (the default it had there; a ``NotRequired`` one: none)."""
    for name in _own_fields(cls):
        if name in cls.__dict__:
            continue
        source = next((b for b in cls.__mro__[1:] if name in b.__dict__), None)
        if source is None:
            continue
        spec = source.__dict__.get("_field_specs", {}).get(name)
        if spec is None:
            if source in TypedTensorDict.__mro__:  # a member of every instance
                setattr(cls, name, dataclasses.field())
            continue  # an attribute of the user's own mixin: dataclasses' rule
        if spec.default_factory is not MISSING:
            setattr(cls, name, dataclasses.field(default_factory=spec.default_factory))
        elif spec.default is MISSING or name in source._unset_raises:
            setattr(cls, name, dataclasses.field())
        else:
            setattr(cls, name, dataclasses.field(default=spec.default))


def _strip_qualifiers(cls: Any) -> None:
    """Build the field specs of ``cls`` again from ``T`` where a field is annotated
    ``NotRequired[T]`` or ``Required[T]``: the field stores, checks and reads as a ``T``
    field."""
    hints = {name: spec.hint for name, spec in cls._field_specs.items()}
    stripped = {
        name: typing.get_args(hint)[0] if typing.get_origin(hint) in _QUALIFIERS else hint
        for name, hint in hints.items()
    }
    if stripped != hints:
        _process._build_specs(cls, cls._flags, stripped, False)


def _checked_init(cls: Any, init: Callable[..., None]) -> Callable[..., None]:
    """``init`` (the generated constructor of ``cls``), whose keyword errors name the
    fields: a missing required field, then a name that is not a field, raise
    ``TypeError`` before anything is built."""

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) == 1 and isinstance(args[0], (Mapping, TensorDictBase)):
            # S({"x": ...}, batch_size=...) as the reference: the mapping's entries are
            # the fields (keywords given as well win)
            kwargs = {**{str(k): v for k, v in args[0].items()}, **kwargs}
            args = ()
        lock = kwargs.pop("lock", False)
        kwargs.pop("non_blocking", None)  # a transfer hint: nothing is transferred here
        try:
            init(self, *args, **kwargs)
        except TypeError:
            # positional arguments: Python's own message says it
            problem = None if args else _keyword_problem(cls, type(self).__name__, kwargs)
            if problem is None:  # raised while building (a value a field refuses ...)
                raise
            raise TypeError(problem) from None
        if lock:
            self.lock_()

    return __init__


def _keyword_problem(cls: Any, name: str, kwargs: Mapping[str, Any]) -> str | None:
    """What is wrong with ``kwargs`` for the constructor of ``cls`` (``name``: the class
    called): a required field missing, else a keyword that is not a field; ``None``
    when they fit."""
    order = list(cls._field_specs)
    missing = sorted((f for f in cls.__required_keys__ if f not in kwargs), key=order.index)
    if missing:
        return (
            f"{name}() missing required field(s): {', '.join(missing)}; {cls.__name__} "
            "needs every field that has no default and is not NotRequired."
        )
    accepted = {*cls._init_names, *_CONSTRUCTOR_KEYWORDS}
    unknown = [key for key in kwargs if key not in accepted]
    if unknown:
        return (
            f"{name}() got unexpected field(s): {', '.join(unknown)}; the fields of "
            f"{cls.__name__} are {sorted(cls._field_specs)} (and the keywords "
            f"{', '.join(_CONSTRUCTOR_KEYWORDS)})."
        )
    return None


def _unravel(key: Any) -> Any:
    """A key as a flat name (``("a",)`` -> ``"a"``); nested keys stay tuples."""
    while type(key) is tuple and len(key) == 1:
        key = key[0]
    return key


TypedTensorDict._flags = Flags(kw_only=True)
