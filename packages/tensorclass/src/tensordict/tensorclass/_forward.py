"""Every ``TensorDict`` method on a wrapper class, generated from ``TensorDict`` itself.

A tensorclass instance keeps its data in a :class:`~tensordict.TensorDict`
(``self._tensordict``). :func:`install` walks the attributes that ``TensorDict`` defines
(its table-generated families included, so nothing is listed by hand) and puts on the
wrapper class a short forwarder for each:

* an instance method calls the same method of the wrapped tensordict, with wrapper
  arguments unwrapped, and wraps the result back (:func:`rewrap`): the wrapped tensordict
  itself gives the instance itself (in-place methods), a new dense ``TensorDict`` or lazy
  stack gives a new instance of the same class, and a tuple or list of them gives the
  same container of instances;
* a class method (``from_dict``, ``stack``, ``fromkeys`` ...) calls ``TensorDict``'s and
  wraps the result in the class it was called on;
* a property reads (and writes) the wrapped tensordict's.

Methods that return a stored value rather than a new container (``get``, ``pop``,
``values`` ...) or a conversion (``to_tensordict``, ``state_dict`` ...) are listed in
:data:`NO_WRAP`: their result is returned as it is.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from tensordict import LazyStackedTensorDict, TensorDict

_TD = TensorDict
_LAZY = LazyStackedTensorDict

#: Methods whose result is an entry of the tensordict or a conversion to another type:
#: never wrapped, even when it is a tensordict (``tc.get("nested_td")``).
NO_WRAP: frozenset[str] = frozenset(
    {
        "_get_str",
        "_get_tuple",
        "_validate_value",
        "get",
        "get_at",
        "get_item_shape",
        "get_non_tensor",
        "items",
        "non_tensor_items",
        "pop",
        "popitem",
        "setdefault",
        "state_dict",
        "to_dict",
        "to_namedtuple",
        "to_pytree",
        "to_struct_array",
        "to_tensordict",
        "tolist",
        "values",
    }
)

#: Names the wrapper classes define themselves (not forwarded).
OWN: frozenset[str] = frozenset(
    {
        "__class__",
        "__class_getitem__",
        "__copy__",
        "__deepcopy__",
        "__delattr__",
        "__dict__",
        "__dir__",
        "__doc__",
        "__getattribute__",
        "__getitem__",
        "__getstate__",
        "__hash__",
        "__init__",
        "__init_subclass__",
        "__iter__",
        "__module__",
        "__new__",
        "__reduce__",
        "__reduce_ex__",
        "__repr__",
        "__setattr__",
        "__setitem__",
        "__setstate__",
        "__slots__",
        "__str__",
        "__subclasshook__",
        "__torch_function__",
        "__weakref__",
        "_is_locked",
        "_last_op",
        "_new_unsafe",
        "_rewrap",
        "_tensordict",
        "to_tensordict",
    }
)


def unwrap(value: Any) -> Any:
    """The tensordict inside a wrapper instance (other values as they are)."""
    return value._tensordict if getattr(type(value), "_wraps_tensordict", False) else value


def rewrap(self: Any, result: Any) -> Any:
    """``result`` of a forwarded call on ``self._tensordict``, as ``self``'s class sees it."""
    inner = self._tensordict
    if result is inner:
        self._relink()
        return self
    t = type(result)
    if t is _TD or t is _LAZY:
        return type(self)._rewrap(result)
    if (t is tuple or t is list) and result:
        first = type(result[0])
        if first is _TD or first is _LAZY:
            wrap = type(self)._rewrap
            return t(wrap(r) if type(r) is _TD or type(r) is _LAZY else r for r in result)
    return result


def _wrap_for(cls: Any, result: Any) -> Any:
    t = type(result)
    if t is _TD or t is _LAZY:
        return cls._rewrap(result)
    if (t is tuple or t is list) and result and type(result[0]) in (_TD, _LAZY):
        return t(cls._rewrap(r) if type(r) in (_TD, _LAZY) else r for r in result)
    return result


def _unwrap_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(_unwrap_arg(a) for a in args)


def _unwrap_arg(a: Any) -> Any:
    if getattr(type(a), "_wraps_tensordict", False):
        return a._tensordict
    if (type(a) is list or type(a) is tuple) and any(
        getattr(type(x), "_wraps_tensordict", False) for x in a
    ):  # a sequence of instances (stack, cat ...); other lists may be outputs: kept
        return type(a)(unwrap(x) for x in a)
    return a


def _method(name: str, wrap: bool) -> Callable[..., Any]:
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        if args:
            args = _unwrap_args(args)
        if kwargs:
            kwargs = {k: unwrap(v) for k, v in kwargs.items()}
        result = getattr(self._tensordict, name)(*args, **kwargs)
        if not wrap:
            if result is self._tensordict:
                self._relink()
                return self
            return result
        return rewrap(self, result)

    return forward


def _classmethod(name: str) -> classmethod[Any, Any, Any]:
    def forward(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if args:
            args = _unwrap_args(args)
        return _wrap_for(cls, getattr(_TD, name)(*args, **kwargs))

    return classmethod(forward)


def _property(name: str, prop: property) -> property:
    def fget(self: Any) -> Any:
        value = getattr(self._tensordict, name)
        if type(value) is _TD and name in ("data", "grad"):
            return type(self)._rewrap(value)
        return value

    fset = None
    if prop.fset is not None:

        def fset(self: Any, value: Any) -> None:
            setattr(self._tensordict, name, value)
            self._relink()

    return property(fget, fset, doc=prop.__doc__)


def _defined_by(cls: Any, name: str) -> Any:
    """The attribute ``name`` as stored in the class dictionary that provides it."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    raise AttributeError(name)  # pragma: no cover


def forwarded_names(source: type = TensorDict) -> Iterable[str]:
    """The attributes of ``source`` that wrappers forward: every method, class method and
    property that ``source`` (or a base other than ``object``) defines, but :data:`OWN`."""
    for name in dir(source):
        if name in OWN:
            continue
        attr = _defined_by(source, name)
        if getattr(object, name, None) is attr:
            continue
        if isinstance(attr, (property, classmethod, staticmethod)) or inspect.isfunction(attr):
            yield name


def install(cls: Any, source: type = TensorDict) -> None:
    """Put a forwarder on ``cls`` for every attribute of :func:`forwarded_names`, unless
    ``cls`` defines it already."""
    for name in forwarded_names(source):
        if name in cls.__dict__:
            continue
        attr = _defined_by(source, name)
        if isinstance(attr, property):
            setattr(cls, name, _property(name, attr))
        elif isinstance(attr, classmethod):
            setattr(cls, name, _classmethod(name))
        elif isinstance(attr, staticmethod):
            setattr(cls, name, attr)
        else:
            method = _method(name, name not in NO_WRAP)
            method.__name__ = name
            method.__qualname__ = f"{cls.__name__}.{name}"
            method.__doc__ = getattr(attr, "__doc__", None)
            setattr(cls, name, method)
