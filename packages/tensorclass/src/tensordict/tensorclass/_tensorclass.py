"""``TensorClass``, the ``@tensorclass`` decorator and ``from_dataclass``."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, overload

import torch
from typing_extensions import dataclass_transform

from tensordict.tensorclass import _process, _state
from tensordict.tensorclass._fields import FLAG_NAMES, Flags
from tensordict.tensorclass._repr import tensorclass_repr
from tensordict.tensorclass._typing import (
    BatchSizeField,
    DeviceField,
    NamesField,
    SelfReturning,
    TensorClassMeta,
)
from tensordict.tensorclass._wrapper import _Wrapper

if TYPE_CHECKING:  # pragma: no cover
    pass

_T = TypeVar("_T", bound=type)


class TensorClass(SelfReturning, _Wrapper, metaclass=TensorClassMeta):  # type: ignore[misc]
    """Base class of dataclasses of tensors: subclass it and annotate the fields.

    Instances behave like a :class:`~tensordict.TensorDict` (every method, operator and
    ``torch.*`` function, returning the same class), and a field reads like a dataclass
    attribute. Non-tensor values are stored as :class:`~tensordict.NonTensorData` and
    read back as the Python value.

    The constructor takes the fields (by position or name) and the keywords
    ``batch_size``, ``device`` and ``names``. Class options go in the class statement,
    ``class Foo(TensorClass, autocast=True)``, or in brackets,
    ``class Foo(TensorClass["autocast", "frozen"])``; they are the keywords of
    :func:`tensorclass`.

    >>> import torch
    >>> from tensordict import TensorClass
    >>> class Batch(TensorClass):
    ...     obs: torch.Tensor
    ...     reward: torch.Tensor
    ...     label: str = "train"
    >>> b = Batch(obs=torch.zeros(4, 3), reward=torch.zeros(4, 1), batch_size=[4])
    >>> b[:2].obs.shape, torch.stack([b, b]).batch_size, b.label
    (torch.Size([2, 3]), torch.Size([2, 4]), 'train')
    >>> type(b.to(torch.float64)).__name__
    'Batch'
    """

    __slots__ = ()
    _is_tensorclass: ClassVar[bool] = False
    _autocast: ClassVar[bool] = False
    _nocast: ClassVar[bool] = False
    _frozen: ClassVar[bool] = False
    _shadow: ClassVar[bool] = False
    _tensor_only: ClassVar[bool] = False
    #: Set on the classes ``TensorClass[...]`` makes: they carry options, not fields.
    _options_only: ClassVar[bool] = False

    if TYPE_CHECKING:  # keyword-only fields of the base, for the synthesised __init__
        batch_size: BatchSizeField = dataclasses.field(default=None, kw_only=True)  # type: ignore[assignment,override]
        device: DeviceField = dataclasses.field(default=None, kw_only=True)  # type: ignore[assignment]
        names: NamesField = dataclasses.field(default=None, kw_only=True)  # type: ignore[assignment,override]
    else:

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise NotImplementedError(
                f"{type(self).__name__} is a base class without fields: subclass it with "
                "annotated fields (or decorate a class with @tensorclass) and instantiate that."
            )

    def __init_subclass__(cls, **options: Any) -> None:
        unknown = set(options) - set(FLAG_NAMES)
        if unknown:
            raise TypeError(
                f"{cls.__name__}: unknown tensorclass option(s) {sorted(unknown)}; the options "
                f"are {list(FLAG_NAMES)}."
            )
        super().__init_subclass__()
        parent = next(b for b in cls.__mro__[1:] if issubclass(b, _Wrapper))
        base = parent._flags
        flags = dataclasses.replace(base, **options)
        if cls.__dict__.get("_options_only"):
            cls._flags = flags
            for name in FLAG_NAMES:
                setattr(cls, f"_{name}", getattr(flags, name))
            return
        if flags.frozen and not base.frozen and getattr(parent, "_is_tensorclass", False):
            raise TypeError(
                f"{cls.__name__}: a frozen tensorclass cannot subclass the non-frozen "
                f"tensorclass {parent.__name__}."
            )
        _process.process(cls, flags, unwrap=True)
        cls._is_tensorclass = True

    def __class_getitem__(cls, options: Any) -> type:
        names = tuple(n for n in FLAG_NAMES if n != "cast_filter")
        return _process.options_class(cls, options, names)

    def __repr__(self) -> str:
        return tensorclass_repr(self)

    __str__ = __repr__

    def _get_key(self, key: Any) -> Any:
        raise ValueError(
            f"Invalid indexing arguments: {key!r}. A tensorclass is indexed along its batch "
            f"dimensions; to read a field, use the attribute or get({key!r})."
        )

    def _set_key(self, key: Any, value: Any) -> None:
        raise ValueError(
            f"Invalid indexing arguments: {key!r}. A tensorclass is indexed along its batch "
            f"dimensions; to write a field, use the attribute or set({key!r}, value)."
        )

    def get(self, key: Any, *args: Any, **kwargs: Any) -> Any:
        """The value at ``key``, as the attribute of that name reads: a field (``None``
        when it is not set), another attribute (``batch_size``, ``shape`` ...), or a nested
        key inside a field. Non-tensor values come back as the Python value. A name that
        is none of these gives ``default`` (``None`` unless given).

        >>> import torch
        >>> from tensordict import TensorClass
        >>> class Pair(TensorClass):
        ...     a: torch.Tensor
        ...     label: str
        >>> pair = Pair(a=torch.zeros(2), label="x", batch_size=[2])
        >>> pair.get("label"), pair.get("batch_size"), pair.get("missing", 0)
        ('x', torch.Size([2]), 0)
        """
        if type(key) is tuple and len(key) == 1:
            key = key[0]
        if type(key) is str and (not kwargs or kwargs.keys() == {"default"}):
            # a field reads as its attribute (non-tensor data unwrapped); a name that is not
            # stored: an unset field, another attribute
            if key in type(self)._field_specs or key not in self._tensordict.keys():
                try:
                    return getattr(self, key)
                except AttributeError:
                    return args[0] if args else kwargs.get("default")
        elif type(key) is tuple and key and type(key[0]) is str:
            sub = self.get(key[0])
            if isinstance(sub, TensorClass):  # its own rules for the rest of the key
                return sub.get(key[1:], *args, **kwargs)
        if not args and "default" not in kwargs:
            args = (None,)
        return self._tensordict.get(key, *args, **kwargs)

    def set(self, key: Any, item: Any, inplace: bool = False, **kwargs: Any) -> Any:
        """Write ``item`` at ``key``: a field (cast by the class rules) or a key inside a
        field. Another name raises ``AttributeError``.

        >>> import torch
        >>> from tensordict import TensorClass
        >>> class Pair(TensorClass):
        ...     a: torch.Tensor
        >>> pair = Pair(a=torch.zeros(2), batch_size=[2]).set("a", torch.ones(2))
        >>> pair.a
        tensor([1., 1.])
        """
        name = key if type(key) is str else (key[0] if type(key) is tuple and key else None)
        if type(name) is tuple:  # ((..),) nested tuples
            name = name[0] if name else None
        cls = type(self)
        specs = cls._field_specs
        if name not in specs:
            raise AttributeError(
                f"Cannot set the attribute {name!r}: {cls.__name__} has no such field. "
                f"Its fields are {sorted(specs)}."
            )
        if not inplace and cls._frozen and self._tensordict.is_locked:
            raise RuntimeError(
                f"Cannot set {key!r}: {cls.__name__} is frozen (its tensordict is locked). "
                "Write existing entries in place with set_()."
            )
        if type(key) is str or (type(key) is tuple and len(key) == 1 and type(key[0]) is str):
            if not inplace and not kwargs:
                self._set_field(name, item)
                return self
            spec = specs[name]
            if spec.cast is not None:
                item = spec.cast(item, self._tensordict)
            if spec.tensor_typed:
                item = self._tensor_value(name, item)
        self._tensordict.set(key, item, inplace=inplace, **kwargs)
        self._relink()
        return self

    def state_dict(
        self,
        destination: dict[str, Any] | None = None,
        prefix: str = "",
        keep_vars: bool = False,
        flatten: bool = True,
    ) -> OrderedDict[str, Any]:
        """The tensors in a flat ``OrderedDict`` (``"."``-joined keys) with a ``_metadata``
        attribute holding each level's batch size, device, class name and non-tensor
        values, as ``torch.nn.Module.state_dict`` lays it out (``flatten=False``: nested).

        >>> import torch
        >>> from tensordict import TensorClass
        >>> class Pair(TensorClass):
        ...     a: torch.Tensor
        ...     name: str
        >>> sd = Pair(a=torch.zeros(2), name="p", batch_size=[2]).state_dict()
        >>> list(sd), sd._metadata[""]["_non_tensor"]
        (['a'], {'name': 'p'})
        """
        return _state.state_dict(self, destination, prefix, keep_vars, flatten)

    def load_state_dict(
        self,
        state_dict: Mapping[str, Any],
        strict: bool = True,
        assign: bool = False,
        from_flatten: bool | None = None,
    ) -> Any:
        """Load a state dict made by :meth:`state_dict` (either layout, or the legacy
        ``{"_tensordict": ..., "_non_tensordict": ...}`` one) into this instance: tensors
        are copied into the existing entries. An unexpected key raises ``KeyError`` and a
        value that does not fit raises ``RuntimeError``, before anything is written.

        >>> import torch
        >>> from tensordict import TensorClass
        >>> class Pair(TensorClass):
        ...     a: torch.Tensor
        >>> p = Pair(a=torch.zeros(2), batch_size=[2])
        >>> p.load_state_dict(Pair(a=torch.ones(2), batch_size=[2]).state_dict()).a
        tensor([1., 1.])
        """
        return _state.load_state_dict(self, state_dict, strict, assign, from_flatten)

    def select(
        self, *keys: Any, inplace: bool = False, strict: bool = True, as_tensordict: bool = False
    ) -> Any:
        """The same class with only the fields in ``keys`` (the others read ``None``), or
        with ``as_tensordict=True`` a :class:`~tensordict.TensorDict` of those entries.

        >>> import torch
        >>> from tensordict import TensorClass
        >>> class Pair(TensorClass):
        ...     a: torch.Tensor
        ...     b: torch.Tensor
        >>> pair = Pair(a=torch.zeros(2), b=torch.ones(2), batch_size=[2])
        >>> pair.select("a").b is None, type(pair.select("a", as_tensordict=True)).__name__
        (True, 'TensorDict')
        """
        out = self._tensordict.select(*keys, inplace=inplace, strict=strict)
        if inplace:
            self._relink()
            return self
        return out if as_tensordict else type(self)._rewrap(out)

    def exclude(self, *keys: Any, inplace: bool = False, as_tensordict: bool = False) -> Any:
        """The same class without the fields in ``keys`` (they read ``None``), or with
        ``as_tensordict=True`` a :class:`~tensordict.TensorDict`.

        >>> import torch
        >>> from tensordict import TensorClass
        >>> class Pair(TensorClass):
        ...     a: torch.Tensor
        ...     b: torch.Tensor
        >>> Pair(a=torch.zeros(2), b=torch.ones(2), batch_size=[2]).exclude("a").a is None
        True
        """
        out = self._tensordict.exclude(*keys, inplace=inplace)
        if inplace:
            self._relink()
            return self
        return out if as_tensordict else type(self)._rewrap(out)


@overload
def tensorclass(cls: _T, /) -> _T: ...
@overload
def tensorclass(
    cls: None = None,
    /,
    *,
    autocast: bool = False,
    frozen: bool = False,
    nocast: bool = False,
    shadow: bool = False,
    tensor_only: bool = False,
    skip_post_init_on_rebuild: bool = False,
    cast_filter: Callable[..., bool] | None = None,
    kw_only: bool = False,
) -> Callable[[_T], _T]: ...
@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def tensorclass(
    cls: Any = None,
    /,
    *,
    autocast: bool = False,
    frozen: bool = False,
    nocast: bool = False,
    shadow: bool = False,
    tensor_only: bool = False,
    skip_post_init_on_rebuild: bool = False,
    cast_filter: Callable[..., bool] | None = None,
    kw_only: bool = False,
) -> Any:
    """Make a class with annotated fields a tensorclass (see :class:`TensorClass`).

    The result is a subclass of both the decorated class and :class:`TensorClass`, with
    the same name, so instances are instances of the class as written. Subclassing
    :class:`TensorClass` directly gives the same class and lets type checkers see every
    method.

    Keyword Args:
        autocast: convert a value written to a field to the field's annotated type.
        frozen: assigning a field raises ``dataclasses.FrozenInstanceError``; instances
            are locked and hashable.
        nocast: keep numbers and arrays as they are (non-tensor data), not cast to tensors.
        shadow: allow field names that hide a member of the instances (``batch_size``,
            ``sum`` ...).
        tensor_only: every annotation must be a tensor or tensor-collection type (or
            optional); values are cast to tensors.
        skip_post_init_on_rebuild: run ``__post_init__`` only on data that comes in (the
            constructor, ``from_tensordict``, loads), not on the results of operations.
        cast_filter: the default ``cast_filter`` of ``to()`` and the dtype shorthands.
        kw_only: the fields are keyword-only arguments of ``__init__``.

    ``autocast``, ``nocast`` and ``tensor_only`` are exclusive.

    >>> import torch
    >>> from tensordict import tensorclass
    >>> @tensorclass
    ... class Batch:
    ...     obs: torch.Tensor
    ...     label: str = "train"
    >>> b = Batch(obs=torch.zeros(4, 3), batch_size=[4])
    >>> b[0].obs.shape, b.label, isinstance(b, Batch)
    (torch.Size([3]), 'train', True)
    >>> @tensorclass(nocast=True)
    ... class Count:
    ...     n: int
    >>> Count(n=3).n
    3
    """
    options = {
        "autocast": autocast,
        "frozen": frozen,
        "nocast": nocast,
        "shadow": shadow,
        "tensor_only": tensor_only,
        "skip_post_init_on_rebuild": skip_post_init_on_rebuild,
        "cast_filter": cast_filter,
        "kw_only": kw_only,
    }

    def decorate(klass: type) -> type:
        return _make_tensorclass(klass, options)

    return decorate if cls is None else decorate(cls)


def _make_tensorclass(klass: type, options: dict[str, Any]) -> type:
    if not isinstance(klass, type):
        raise TypeError(f"@tensorclass decorates a class, got {type(klass).__name__}.")
    Flags(**options).check(klass.__name__)
    if issubclass(klass, TensorClass):  # already one: apply the options in place
        flags = dataclasses.replace(klass._flags, **options)
        _process.process(klass, flags, unwrap=True)
        klass._is_tensorclass = True
        return klass
    # The user's class keeps its annotations as dataclass fields; the tensorclass is a
    # subclass of it and of TensorClass (a class deriving from object alone cannot
    # gain a base in place).
    dataclasses.dataclass(klass, init=False, repr=False, eq=False, kw_only=options["kw_only"])
    namespace = {
        "__module__": klass.__module__,
        "__qualname__": klass.__qualname__,
        "__doc__": klass.__doc__,
    }
    if "__init__" in vars(klass):
        namespace["__init__"] = vars(klass)["__init__"]
    options = {k: v for k, v in options.items() if v}
    metaclass: Any = type(klass)
    made: type = metaclass(klass.__name__, (klass, TensorClass), namespace, **options)
    return made


def is_tensorclass(obj: Any) -> bool:
    """Whether ``obj`` is a tensorclass or an instance of one.

    >>> import torch
    >>> from tensordict import TensorClass, TensorDict
    >>> class Pair(TensorClass):
    ...     a: torch.Tensor
    >>> is_tensorclass(Pair), is_tensorclass(Pair(a=torch.zeros(()))), is_tensorclass(TensorDict())
    (True, True, False)
    """
    cls = obj if isinstance(obj, type) else type(obj)
    return getattr(cls, "_is_tensorclass", False) is True


def from_dataclass(
    obj: Any,
    *,
    dest_cls: type | None = None,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    batch_size: torch.Size | None = None,
    frozen: bool = False,
    autocast: bool = False,
    nocast: bool = False,
    inplace: bool = False,
    shadow: bool = False,
    tensor_only: bool = False,
    device: torch.device | None = None,
) -> Any:
    """A tensorclass from a dataclass type, or a tensorclass instance from a dataclass
    instance.

    For a type, the result is a new tensorclass ``<name>_tc`` with the same fields
    (``inplace=True`` keeps the name). For an instance, an instance of ``dest_cls`` or of
    a new tensorclass, with the instance's field values.

    >>> import dataclasses, torch
    >>> from tensordict import from_dataclass
    >>> @dataclasses.dataclass
    ... class Obs:
    ...     pixels: torch.Tensor
    ...     label: str
    >>> ObsTC = from_dataclass(Obs)
    >>> ObsTC.__name__, ObsTC(pixels=torch.zeros(2, 3), label="cat", batch_size=[2]).label
    ('Obs_tc', 'cat')
    >>> tc = from_dataclass(Obs(torch.zeros(4, 3), "cat"), auto_batch_size=True)
    >>> tc.batch_size, type(tc).__name__
    (torch.Size([4, 3]), 'Obs_tc')
    """
    options = {
        "frozen": frozen,
        "autocast": autocast,
        "nocast": nocast,
        "shadow": shadow,
        "tensor_only": tensor_only,
    }
    if isinstance(obj, type):
        if is_tensorclass(obj):
            return obj
        if not dataclasses.is_dataclass(obj):
            raise TypeError(f"from_dataclass expects a dataclass or an instance, got {obj!r}.")
        return _class_from_dataclass(obj, options, inplace)
    if not dataclasses.is_dataclass(obj):
        raise TypeError(
            f"from_dataclass expects a dataclass or a dataclass instance, got {type(obj).__name__}."
        )
    if is_tensorclass(obj):
        return obj
    cls = dest_cls if dest_cls is not None else _class_from_dataclass(type(obj), options, False)
    values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    out = cls(**values, batch_size=batch_size, device=device)
    if auto_batch_size:
        out.auto_batch_size_(batch_dims)
    return out


def _class_from_dataclass(cls: type, options: dict[str, Any], keep_name: bool) -> type:
    name = cls.__name__ if keep_name else f"{cls.__name__}_tc"
    annotations = {f.name: f.type for f in dataclasses.fields(cls)}
    namespace: dict[str, Any] = {
        "__annotations__": annotations,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__ if keep_name else f"{cls.__qualname__}_tc",
    }
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            namespace[f.name] = dataclasses.field(
                default=f.default, default_factory=f.default_factory
            )
    return type(name, (TensorClass,), namespace, **{k: v for k, v in options.items() if v})
