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
from tensordict.tensorclass import _forward, _process
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
    name, raises ``TypeError``) plus ``batch_size``, ``device`` and ``names``.
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

        ``check=True`` raises ``TypeError`` when ``td`` misses a field without a default.

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
        return cls._wrap_checked(td)

    _from_tensordict = from_tensordict  # type: ignore[assignment]


TypedTensorDict._flags = Flags(kw_only=True)
