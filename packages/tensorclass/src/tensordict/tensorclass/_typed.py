"""``TypedTensorDict``: a tensordict whose fields are class annotations.

It is built by the same field machinery as :class:`~tensordict.TensorClass`
(:mod:`._process`, :mod:`._fields`, :mod:`._wrapper`); what differs is the dict-like
surface: ``state["key"]`` reads an entry, non-tensor entries read as their
:class:`~tensordict.NonTensorData`, the fields are keyword-only, and the only options are
``shadow`` and ``frozen`` (the constructor locks the instance).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING, Any, ClassVar

from tensordict import TensorDictBase
from tensordict.tensorclass import _forward, _process, _schema
from tensordict.tensorclass._fields import MISSING, Flags
from tensordict.tensorclass._typing import (
    BatchSizeField,
    DeviceField,
    NamesField,
    SelfReturning,
    TypedTensorDictMeta,
)
from tensordict.tensorclass._wrapper import _Wrapper

if TYPE_CHECKING:  # pragma: no cover
    pass

_OPTIONS = ("shadow", "frozen")
_IGNORED = ("autocast", "nocast", "tensor_only")


class TypedTensorDict(SelfReturning, _Wrapper, metaclass=TypedTensorDictMeta):  # type: ignore[misc]
    """A :class:`~tensordict.TensorDictBase` whose fields are declared as annotations.

    .. warning:: Experimental: the API can change in a minor release.

    Fields read as attributes (``state.eta``) and as keys (``state["eta"]``); the
    constructor takes them by keyword (a missing field without default, or an unknown
    name, raises ``TypeError``) plus ``batch_size``, ``device`` and ``names``. The
    annotations are the contract: writing a key that is not a field raises
    (``AttributeError`` for ``set``/``td[key] = ...``, ``ValueError`` for ``update`` and
    ``from_dict``/``from_tensordict``), as does removing a field without a default
    (``AttributeError``), and a field annotated with tensor types refuses a value that
    does not become a tensor (``TypeError``). Refused calls change nothing.
    Subclasses add fields. Every tensordict operation returns the same class.
    :meth:`from_tensordict` gives typed access to an existing tensordict without copying.

    Options, in the class statement (``class S(TypedTensorDict, frozen=True)``) or in
    brackets (``TypedTensorDict["frozen"]``): ``shadow`` (field names may hide members
    such as ``batch_size``) and ``frozen`` (the constructor locks the instance).

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
    """

    __slots__ = ()
    _kind: ClassVar[str] = "typed tensordict"
    _strict_fields: ClassVar[bool] = True
    _unwrap_values: ClassVar[bool] = False
    _options_only: ClassVar[bool] = False

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
        unknown = set(options) - {*_OPTIONS, *_IGNORED}
        if unknown:
            raise TypeError(
                f"{cls.__name__}: unknown TypedTensorDict option(s) {sorted(unknown)}; the "
                f"options are {list(_OPTIONS)}."
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
        _process.process(cls, flags, unwrap=False)

    def __class_getitem__(cls, options: Any) -> type:
        return _process.options_class(cls, options, _OPTIONS)

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


def _unravel(key: Any) -> Any:
    """A key as a flat name (``("a",)`` -> ``"a"``); nested keys stay tuples."""
    while type(key) is tuple and len(key) == 1:
        key = key[0]
    return key


TypedTensorDict._flags = Flags(kw_only=True)
