"""Small adapters around tensordict modules and functions.

* :class:`TensorDictModuleWrapper` wraps a tensordict module, forwarding its keys and
  attributes (a base for modules that add behaviour around another one).
* :class:`WrapModule` makes a module of a function ``tensordict -> tensordict``.
* :class:`as_tensordict_module` turns a tensor function into a tensordict function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from tensordict import TensorDictBase
from tensordict._plugins.api import NestedKey
from tensordict.nn._keys import as_key_list
from tensordict.nn.common import TensorDictModuleBase, forward_attribute

_F = TypeVar("_F", bound=Callable[..., Any])


class DelegatedKeys(TensorDictModuleBase):
    """A module whose keys and key selection are those of an inner tensordict module
    (``_key_owner()``)."""

    def _key_owner(self) -> Any:
        raise NotImplementedError

    @property
    def in_keys(self) -> list[Any]:
        keys: list[Any] = self._key_owner().in_keys
        return keys

    @in_keys.setter
    def in_keys(self, value: Any) -> None:
        self._key_owner().in_keys = value

    @property
    def out_keys(self) -> list[Any]:
        keys: list[Any] = self._key_owner().out_keys
        return keys

    @out_keys.setter
    def out_keys(self, value: Any) -> None:
        self._key_owner().out_keys = value

    @property
    def out_keys_source(self) -> list[Any]:
        keys: list[Any] = self._key_owner().out_keys_source
        return keys

    def select_out_keys(self, *out_keys: NestedKey) -> DelegatedKeys:
        self._key_owner().select_out_keys(*out_keys)
        return self

    def reset_out_keys(self) -> DelegatedKeys:
        self._key_owner().reset_out_keys()
        return self


class TensorDictModuleWrapper(DelegatedKeys):
    """Wrap a tensordict module; keys, key selection and attributes go to the wrapped one.

    >>> import torch
    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule, TensorDictModuleWrapper
    >>> inner = TensorDictModule(nn.Linear(2, 3), in_keys=["x"], out_keys=["y"])
    >>> wrapper = TensorDictModuleWrapper(inner)
    >>> wrapper.in_keys, wrapper.weight.shape
    (['x'], torch.Size([3, 2]))
    >>> wrapper(TensorDict(x=torch.zeros(2)))["y"].shape
    torch.Size([3])
    """

    def __init__(self, td_module: TensorDictModuleBase) -> None:
        super().__init__()
        self.td_module = td_module

    def _key_owner(self) -> Any:
        return self._modules["td_module"]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped module."""
        return self.td_module(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return forward_attribute(self, name, "td_module")


class WrapModule(TensorDictModuleBase):
    """A module made of a function that takes a tensordict and returns one.

    Args:
        func: the function.
        inplace: update the input tensordict with the function's result and return the
            input (default ``False``: return the result).
        in_keys, out_keys: the keys the function reads and writes (informative, used by
            sequences to compute their keys).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import WrapModule
    >>> m = WrapModule(lambda td: td.set("y", td["x"] + 1), in_keys=["x"], out_keys=["y"])
    >>> m(TensorDict(x=torch.zeros(1)))["y"]
    tensor([1.])
    """

    def __init__(
        self,
        func: Callable[[TensorDictBase], TensorDictBase],
        *,
        inplace: bool = False,
        in_keys: list[NestedKey] | None = None,
        out_keys: list[NestedKey] | None = None,
    ) -> None:
        super().__init__()
        if not callable(func):
            raise ValueError(f"WrapModule needs a callable; got {func!r}.")
        self.func = func
        self.inplace = inplace
        self.in_keys = [] if in_keys is None else in_keys
        self.out_keys = [] if out_keys is None else out_keys

    def forward(self, data: TensorDictBase) -> TensorDictBase:
        """Apply the function (and update ``data`` with its result when ``inplace``)."""
        result = self.func(data)
        if self.inplace and result is not data:
            data.update(result)
            return data
        return result


class as_tensordict_module:
    """Decorator: a function of tensors becomes a function of a tensordict.

    The decorated function is called with the values at ``in_keys`` (after any leading
    positional arguments such as ``self``, the tensordict being the last positional
    argument), and its outputs are written at ``out_keys`` of that tensordict, which is
    returned.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import as_tensordict_module
    >>> @as_tensordict_module(in_keys=["x"], out_keys=["y"])
    ... def add_one(x):
    ...     return x + 1
    >>> add_one(TensorDict(x=torch.zeros(2)))["y"]
    tensor([1., 1.])
    """

    def __init__(
        self, *, in_keys: list[NestedKey] | NestedKey, out_keys: list[NestedKey] | NestedKey
    ) -> None:
        self.in_keys = as_key_list(in_keys, "in_keys")
        self.out_keys = as_key_list(out_keys, "out_keys")

    def __call__(self, func: _F) -> _F:
        in_keys, out_keys = self.in_keys, self.out_keys

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not args or not isinstance(args[-1], TensorDictBase):
                raise TypeError(
                    f"{func.__name__} reads {in_keys} from a tensordict, which must be its "
                    f"last positional argument; got {[type(a).__name__ for a in args]}."
                )
            *leading, td = args
            out = func(*leading, *(td.get(key) for key in in_keys), **kwargs)
            if not isinstance(out, tuple):
                out = (out,)
            if len(out) != len(out_keys):
                raise RuntimeError(
                    f"{func.__name__} returned {len(out)} outputs for out_keys={out_keys}."
                )
            for key, value in zip(out_keys, out):
                td.set(key, value)
            return td

        return wrapper  # type: ignore[return-value]
