"""``set_lazy_legacy``/``lazy_legacy``: whether ``torch.stack`` returns a lazy stack.

The flag lives in this dependency-free module so that :func:`tensordict.stack` can read it
without importing the lazy-stack machinery. Its initial value comes from the
``LAZY_LEGACY_OP`` environment variable (``"True"``/``"1"``), which :class:`set_lazy_legacy`
keeps in sync so that worker processes started later see the same mode.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])


def _from_env() -> bool:
    return os.environ.get("LAZY_LEGACY_OP", "False").strip().lower() in ("1", "true", "yes")


#: The current mode (read by :func:`tensordict.stack` on every call).
LAZY_LEGACY: bool = _from_env()


def lazy_legacy(allow_none: bool = False) -> bool:
    """Whether ``torch.stack`` of tensordicts returns a lazy stack (default ``False``).

    >>> from tensordict import lazy_legacy
    >>> lazy_legacy()
    False
    """
    return LAZY_LEGACY


def _set(mode: bool) -> None:
    global LAZY_LEGACY
    LAZY_LEGACY = mode
    os.environ["LAZY_LEGACY_OP"] = str(mode)


class set_lazy_legacy:  # noqa: N801 - the reference's public name
    """Choose what ``torch.stack`` of tensordicts returns: a ``LazyStackedTensorDict``
    (``mode=True``, the legacy behaviour) or a dense ``TensorDict`` (``False``, default).

    Use it as a context manager or a decorator (the previous mode is restored on exit),
    or call :meth:`set` to change the mode for good.

    >>> import torch
    >>> from tensordict import TensorDict, lazy_legacy
    >>> tds = [TensorDict({"a": torch.zeros(2)}, [2]) for _ in range(3)]
    >>> with set_lazy_legacy(True):
    ...     print(type(torch.stack(tds)).__name__, lazy_legacy())
    LazyStackedTensorDict True
    >>> type(torch.stack(tds)).__name__
    'TensorDict'
    >>> @set_lazy_legacy(True)
    ... def stack_lazily(tds):
    ...     return torch.stack(tds)
    >>> type(stack_lazily(tds)).__name__
    'LazyStackedTensorDict'
    """

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self._previous: list[bool] = []

    def clone(self) -> set_lazy_legacy:
        """A fresh manager with the same mode (each use as a decorator gets its own)."""
        return type(self)(self.mode)

    def set(self) -> None:
        """Switch to this mode now, without restoring the previous one."""
        _set(self.mode)

    def __enter__(self) -> None:
        self._previous.append(LAZY_LEGACY)
        _set(self.mode)

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        _set(self._previous.pop())

    def __call__(self, func: _F) -> _F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.clone():
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]
