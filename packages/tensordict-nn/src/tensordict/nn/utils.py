"""Global switches of ``tensordict.nn``: skipping modules whose outputs exist, aggregating
composite log-probabilities, and keyword-tensor dispatch.

Each switch is read with a function (``skip_existing()``, ``composite_lp_aggregate()``)
and changed with a ``set_*`` class usable as a context manager or a decorator.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from tensordict import unravel_key_list
from tensordict._plugins.api import NestedKey
from tensordict.nn._mode import ScopedSetter, Setting

if TYPE_CHECKING:  # served by __getattr__ below (their module imports this one)
    from tensordict.nn._client_compat import _set_skip_existing_None as _set_skip_existing_None
    from tensordict.nn.distributions.utils import (
        add_custom_mapping as add_custom_mapping,
    )
    from tensordict.nn.distributions.utils import biased_softplus as biased_softplus
    from tensordict.nn.distributions.utils import expln as expln
    from tensordict.nn.distributions.utils import inv_softplus as inv_softplus
    from tensordict.nn.distributions.utils import mappings as mappings

_F = TypeVar("_F", bound=Callable[..., Any])

_SKIP_EXISTING = Setting(False)
_COMPOSITE_LP_AGGREGATE = Setting(None)
_DISPATCH = Setting(True)

__all__ = [
    "add_custom_mapping",
    "biased_softplus",
    "composite_lp_aggregate",
    "expln",
    "inv_softplus",
    "mappings",
    "set_composite_lp_aggregate",
    "set_skip_existing",
    "skip_existing",
]

#: Names this module serves from elsewhere on first access (their modules import this one):
#: the positive mappings (the reference's home for them) and a client's private decorator.
_SERVED = {
    "add_custom_mapping": "tensordict.nn.distributions.utils",
    "biased_softplus": "tensordict.nn.distributions.utils",
    "expln": "tensordict.nn.distributions.utils",
    "inv_softplus": "tensordict.nn.distributions.utils",
    "mappings": "tensordict.nn.distributions.utils",
    "_set_skip_existing_None": "tensordict.nn._client_compat",
}


def __getattr__(name: str) -> Any:
    module = _SERVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def skip_existing() -> bool | list[NestedKey]:
    """Whether modules skip their call when their outputs are already present.

    ``False`` by default; ``True`` or a list of keys inside ``set_skip_existing``.

    >>> from tensordict.nn import set_skip_existing, skip_existing
    >>> skip_existing()
    False
    >>> with set_skip_existing(True):
    ...     skip_existing()
    True
    """
    value: bool | list[NestedKey] = _SKIP_EXISTING.get()
    return value


def should_skip(
    module: Any,
    tensordict: Any,
    mode: bool | Sequence[NestedKey],
    in_key_attr: str = "in_keys",
    out_key_attr: str = "out_keys",
) -> bool:
    """Whether ``module`` may skip its call on ``tensordict`` under ``mode``.

    The call is skipped when every key checked (the module's out_keys for ``True``, the
    given keys for a list) is present and none of them is also an input (a module that
    updates a key it reads always runs).
    """
    if mode is False or mode is None:
        return False
    keys = getattr(module, out_key_attr, None) if mode is True else unravel_key_list(mode)
    if not keys:
        return False
    in_keys = getattr(module, in_key_attr, None) or ()
    if any(key in in_keys for key in keys):
        return False
    present = tensordict.keys(True)
    return all(key in present for key in keys)


class set_skip_existing(ScopedSetter):
    """Skip modules whose out_keys are already in the input tensordict.

    Args:
        mode: ``True`` (skip when every out_key is present), ``False`` (never skip), a
            list of keys (skip when those are present), or, as a decorator only,
            ``None``: follow the global setting at call time.
        in_key_attr, out_key_attr: the attributes of the decorated module that hold its
            input and output keys.
        thread_local: change the setting for the current thread only.

    As a context manager it sets the global mode; as a decorator of a module's
    ``forward(self, tensordict, ...)`` it makes that forward return its input unchanged
    when the mode says to skip.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule, set_skip_existing
    >>> module = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
    >>> td = TensorDict(x=torch.zeros(()), y=torch.zeros(()))
    >>> with set_skip_existing(True):
    ...     module(td)["y"].item()
    0.0
    >>> module(td)["y"].item()
    1.0
    """

    setting = _SKIP_EXISTING

    def __init__(
        self,
        mode: bool | list[NestedKey] | None = True,
        in_key_attr: str = "in_keys",
        out_key_attr: str = "out_keys",
        *,
        thread_local: bool = False,
    ) -> None:
        self.value: bool | list[Any] | None = (
            mode if mode is None or isinstance(mode, bool) else unravel_key_list(mode)
        )
        self.in_key_attr = in_key_attr
        self.out_key_attr = out_key_attr
        self.thread_local = thread_local

    def __enter__(self) -> set_skip_existing:
        if self.value is None:
            raise RuntimeError(
                "It seems you are using set_skip_existing as a context manager with None: "
                "None means 'follow the global setting' and is only valid as a decorator. "
                "Use True, False or a list of keys in a with block."
            )
        super().__enter__()
        return self

    def __call__(self, func: _F) -> _F:
        mode, in_attr, out_attr = self.value, self.in_key_attr, self.out_key_attr

        @functools.wraps(func)
        def forward(_self: Any, tensordict: Any = None, *args: Any, **kwargs: Any) -> Any:
            current = _SKIP_EXISTING.get() if mode is None else mode
            if (
                current
                and tensordict is not None
                and hasattr(tensordict, "keys")
                and should_skip(_self, tensordict, current, in_attr, out_attr)
            ):
                return tensordict
            return func(_self, tensordict, *args, **kwargs)

        return forward  # type: ignore[return-value]


def composite_lp_aggregate(nowarn: bool = False) -> bool:
    """Whether composite distributions sum their log-probabilities into one tensor.

    ``False`` by default: ``CompositeDistribution.log_prob`` returns a tensordict with
    one ``<name>_log_prob`` entry per component. ``nowarn`` is accepted for
    compatibility (no warning is ever emitted).

    >>> from tensordict.nn import composite_lp_aggregate, set_composite_lp_aggregate
    >>> composite_lp_aggregate()
    False
    >>> with set_composite_lp_aggregate(True):
    ...     composite_lp_aggregate()
    True
    """
    return bool(_COMPOSITE_LP_AGGREGATE.get())


class set_composite_lp_aggregate(ScopedSetter):
    """Set :func:`composite_lp_aggregate` (context manager or decorator).

    >>> from tensordict.nn import composite_lp_aggregate, set_composite_lp_aggregate
    >>> @set_composite_lp_aggregate(True)
    ... def f():
    ...     return composite_lp_aggregate()
    >>> f(), composite_lp_aggregate()
    (True, False)
    """

    setting = _COMPOSITE_LP_AGGREGATE

    def __init__(self, mode: bool | None = True, *, thread_local: bool = False) -> None:
        self.value = mode
        self.thread_local = thread_local


def dispatch_enabled() -> bool:
    """Whether modules turn keyword-tensor calls into tensordict calls (default ``True``)."""
    return bool(_DISPATCH.get())


class _set_dispatch_td_nn_modules(ScopedSetter):
    """Turn keyword-tensor dispatch of tensordict modules on or off."""

    setting = _DISPATCH

    def __init__(self, mode: bool, *, thread_local: bool = False) -> None:
        self.value = bool(mode)
        self.thread_local = thread_local


set_dispatch = _set_dispatch_td_nn_modules
