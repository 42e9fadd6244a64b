"""Names the reference keeps private in ``tensordict.nn`` that clients import anyway.

TorchRL decorates its modules' ``forward`` with ``tensordict.nn.utils._set_skip_existing_None``,
samples through ``tensordict.nn.probabilistic._use_generator`` and runs a loop version of
``vmap`` inside ``tensordict.nn.functional_modules._exclude_td_from_pytree``. They live
here with the reference's meaning, re-exported from those modules, and are listed on the
docs' compatibility page.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch
from torch.utils import _pytree

from tensordict import TensorDictBase
from tensordict.nn._interaction import using_generator
from tensordict.nn.utils import set_skip_existing

_F = TypeVar("_F", bound=Callable[..., Any])

__all__ = ["_exclude_td_from_pytree", "_set_skip_existing_None", "_use_generator"]


class _set_skip_existing_None(set_skip_existing):
    """``@set_skip_existing(None)`` without arguments: the decorated ``forward`` follows
    the global :func:`~tensordict.nn.skip_existing` setting at call time.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModuleBase, set_skip_existing
    >>> class AddOne(TensorDictModuleBase):
    ...     in_keys, out_keys = ["x"], ["y"]
    ...     @_set_skip_existing_None()
    ...     def forward(self, tensordict):
    ...         return tensordict.set("y", tensordict["x"] + 1)
    >>> td = TensorDict(x=torch.zeros(()), y=torch.zeros(()))
    >>> with set_skip_existing(True):
    ...     AddOne()(td)["y"].item()
    0.0
    >>> AddOne()(td)["y"].item()
    1.0
    """

    def __init__(self, in_key_attr: str = "in_keys", out_key_attr: str = "out_keys") -> None:
        super().__init__(None, in_key_attr, out_key_attr)

    def __call__(self, func: _F) -> _F:
        names = list(_signature_names(func))
        if len(names) > 1 and names[1] != "tensordict":
            raise RuntimeError(
                f"_set_skip_existing_None decorates forward(self, tensordict, ...); the "
                f"second parameter of {func.__qualname__} is named {names[1]!r}."
            )
        return super().__call__(func)


def _signature_names(func: Callable[..., Any]) -> Iterator[str]:
    import inspect

    return iter(inspect.signature(func).parameters)


@contextlib.contextmanager
def _use_generator(generator: torch.Generator | None) -> Iterator[None]:
    """Draw the global random numbers of the block from ``generator``, whose state then
    advances as if it had drawn them; the global state is restored afterwards. Nothing
    changes for ``None`` or while compiling.

    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> with _use_generator(g):
    ...     a = torch.rand(2)
    >>> torch.equal(a, torch.rand(2, generator=torch.Generator().manual_seed(0)))
    True
    """
    if generator is None or torch.compiler.is_compiling():
        yield
        return
    with using_generator(generator):
        yield


class _exclude_td_from_pytree:
    """Within the block, tensordicts are pytree leaves (``tree_map`` hands them to the
    function whole instead of walking their tensors).

    >>> import torch
    >>> from torch.utils._pytree import tree_leaves
    >>> from tensordict import TensorDict
    >>> td = TensorDict(a=torch.zeros(1), b=torch.zeros(1))
    >>> len(tree_leaves([td]))
    2
    >>> with _exclude_td_from_pytree():
    ...     len(tree_leaves([td]))
    1
    """

    def __init__(self) -> None:
        self.nodes: dict[type, Any] = {}

    def __enter__(self) -> _exclude_td_from_pytree:
        for cls in list(_pytree.SUPPORTED_NODES):
            if isinstance(cls, type) and issubclass(cls, TensorDictBase):
                self.nodes[cls] = _pytree.SUPPORTED_NODES.pop(cls)
        return self

    def __exit__(self, *exc: Any) -> None:
        _pytree.SUPPORTED_NODES.update(self.nodes)
        self.nodes.clear()
