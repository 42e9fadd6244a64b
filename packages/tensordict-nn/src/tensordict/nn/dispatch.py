"""``dispatch``: call a tensordict-reading method with plain tensors.

A method ``forward(self, tensordict, ...)`` decorated with :class:`dispatch` still takes a
tensordict; called with tensors instead (positionally in the order of the module's
in_keys, or as keywords named after the keys), it builds the tensordict itself and
returns the tensors found at the module's out_keys.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tensordict import TensorDict, is_tensor_collection, unravel_key_list
from tensordict._plugins.api import NestedKey
from tensordict.nn.utils import _DISPATCH, _SKIP_EXISTING, should_skip

_F = TypeVar("_F", bound=Callable[..., Any])

__all__ = ["dispatch"]


def _keys_of(module: Any, spec: str | Sequence[NestedKey]) -> list[Any]:
    if isinstance(spec, str):
        try:
            keys = getattr(module, spec)
        except AttributeError:
            raise AttributeError(
                f"dispatch reads the keys from attribute {spec!r} of {type(module).__name__}, "
                f"which has no such attribute."
            ) from None
    else:
        keys = spec
    return unravel_key_list(keys)


def _arg_name(key: Any, separator: str) -> str:
    return key if isinstance(key, str) else separator.join(key)


def dispatch_call(
    func: Callable[..., Any],
    module: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    separator: str = "_",
    source: str | Sequence[NestedKey] = "in_keys",
    dest: str | Sequence[NestedKey] = "out_keys",
    auto_batch_size: bool = True,
) -> Any:
    """Run ``func(module, tensordict, *extra, **extra_kw)`` from tensor arguments.

    Positional ``args`` fill the source keys in order (the ones beyond go to ``func``);
    a keyword named after a source key (nested keys joined by ``separator``) fills that
    key; other keywords go to ``func``. Returns the value at the single destination key,
    or a tuple of them.
    """
    in_keys = _keys_of(module, source)
    n = min(len(args), len(in_keys))
    entries: dict[Any, Any] = dict(zip(in_keys[:n], args[:n]))
    extra_args = args[n:]
    if kwargs:
        kwargs = dict(kwargs)
        for key in in_keys:
            name = _arg_name(key, separator)
            if name in kwargs:
                if key in entries:
                    raise RuntimeError(
                        f"Duplicated argument {name!r}: the input for key {key!r} was given "
                        f"both positionally and as a keyword."
                    )
                entries[key] = kwargs.pop(name)
    td = TensorDict(entries, batch_size=[])
    if auto_batch_size and entries:
        td.auto_batch_size_()
    out = func(module, td, *extra_args, **kwargs)
    out_keys = _keys_of(module, dest)
    if len(out_keys) == 1:
        return out.get(out_keys[0])
    return tuple(out.get(key) for key in out_keys)


def dispatch_signature(func: Callable[..., Any]) -> inspect.Signature:
    """The signature a dispatching ``forward`` shows (``inspect.signature``, which
    ``torch.export`` binds the call against): its first argument (the tensordict) is
    optional and keywords are accepted, since tensors may come by keyword instead.

    >>> def forward(self, tensordict, tensordict_out=None):
    ...     pass
    >>> dispatch_signature(forward)
    <Signature (self, tensordict=None, tensordict_out=None, **kwargs)>
    >>> def forward(self, tensordict, other):
    ...     pass
    >>> dispatch_signature(forward)
    <Signature (self, tensordict=None, other=None, **kwargs)>
    """
    sig = inspect.signature(func)
    params = list(sig.parameters.values())
    out = []
    for i, p in enumerate(params):
        positional = p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        # the tensordict, and the positional arguments after it (``forward(self, td,
        # other)``: a default may not precede a required positional argument)
        if i >= 1 and positional and p.default is p.empty:
            p = p.replace(default=None)
        out.append(p)
    if not any(p.kind is p.VAR_KEYWORD for p in out):
        out.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))
    return sig.replace(parameters=out)


class dispatch:
    """Let a ``forward(self, tensordict, ...)`` method also be called with tensors.

    Args:
        separator: joins the parts of a nested key into a keyword name (``("a", "b")``
            is the keyword ``a_b`` by default).
        source: the attribute of the module that lists the input keys, or the keys.
        dest: the attribute that lists the output keys, or the keys.
        auto_batch_size: give the tensordict built from the tensors the largest common
            batch size (otherwise it has an empty batch size).

    >>> import torch
    >>> from torch import nn
    >>> from tensordict.nn import dispatch
    >>> class Add(nn.Module):
    ...     in_keys = ["x", ("nested", "y")]
    ...     out_keys = ["sum"]
    ...     @dispatch
    ...     def forward(self, td):
    ...         td["sum"] = td["x"] + td["nested", "y"]
    ...         return td
    >>> Add()(torch.ones(2), nested_y=torch.ones(2))
    tensor([2., 2.])
    """

    def __new__(
        cls,
        separator: str | Callable[..., Any] = "_",
        source: str | Sequence[NestedKey] = "in_keys",
        dest: str | Sequence[NestedKey] = "out_keys",
        auto_batch_size: bool = True,
    ) -> Any:
        # ``@dispatch`` without parentheses: the decorated function arrives as ``separator``.
        if callable(separator) and not isinstance(separator, str):
            self = super().__new__(cls)
            self.__init__()  # type: ignore[misc]
            return self(separator)
        return super().__new__(cls)

    def __init__(
        self,
        separator: str = "_",
        source: str | Sequence[NestedKey] = "in_keys",
        dest: str | Sequence[NestedKey] = "out_keys",
        auto_batch_size: bool = True,
    ) -> None:
        self.separator = separator
        self.source = source
        self.dest = dest
        self.auto_batch_size = auto_batch_size

    def __call__(self, func: _F) -> _F:
        options = {
            "separator": self.separator,
            "source": self.source,
            "dest": self.dest,
            "auto_batch_size": self.auto_batch_size,
        }

        @functools.wraps(func)
        def wrapper(_self: Any, *args: Any, **kwargs: Any) -> Any:
            if args:
                first = args[0]
                if type(first) is TensorDict or is_tensor_collection(first):
                    return func(_self, *args, **kwargs)
            elif "tensordict" in kwargs or not kwargs:
                return func(_self, *args, **kwargs)
            if not _DISPATCH.get():
                return func(_self, *args, **kwargs)
            return dispatch_call(func, _self, args, kwargs, **options)  # type: ignore[arg-type]

        wrapper.__signature__ = dispatch_signature(func)  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]


def tensordict_entry(auto_batch_size: bool = False) -> Callable[[_F], _F]:
    """The entry of a tensordict module's ``forward``: :class:`dispatch` and
    ``set_skip_existing(None)`` in one wrapper (one Python frame on the hot path).

    A tensordict first argument goes straight to the method, unless the global
    skip-existing mode says the module's outputs are already there; tensors are
    dispatched as with ``@dispatch``.
    """
    options = {
        "separator": "_",
        "source": "in_keys",
        "dest": "out_keys",
        "auto_batch_size": auto_batch_size,
    }

    def decorator(func: _F) -> _F:
        @functools.wraps(func)
        def forward(_self: Any, *args: Any, **kwargs: Any) -> Any:
            first = args[0] if args else kwargs.get("tensordict")
            if first is not None and (type(first) is TensorDict or is_tensor_collection(first)):
                mode = _SKIP_EXISTING.get()
                if mode and should_skip(_self, first, mode):
                    return first
                return func(_self, *args, **kwargs)
            if (not args and not kwargs) or not _DISPATCH.get():
                return func(_self, *args, **kwargs)
            return dispatch_call(func, _self, args, kwargs, **options)  # type: ignore[arg-type]

        forward.__signature__ = dispatch_signature(func)  # type: ignore[attr-defined]
        return forward  # type: ignore[return-value]

    return decorator
