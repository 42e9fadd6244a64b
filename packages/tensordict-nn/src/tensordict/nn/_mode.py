"""Process-wide settings that a ``with`` block or a decorator changes for a while.

:class:`Setting` holds one value, global or per thread; :class:`ScopedSetter` is the
base of the public context managers (``set_interaction_type``,
``set_skip_existing`` …) that set it on entry and restore it on exit, and that also
work as function decorators.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])
_UNSET: Any = object()


class Setting:
    """A value with a process-wide default that a thread may override.

    >>> s = Setting(False)
    >>> s.get()
    False
    >>> token = s.push(True, thread_local=False)
    >>> s.get()
    True
    >>> s.pop(token)
    >>> s.get()
    False
    """

    __slots__ = ("value", "_local", "_threaded")

    def __init__(self, default: Any) -> None:
        self.value = default
        self._local = threading.local()
        self._threaded = False  # set once a thread-local value was ever pushed

    def get(self) -> Any:
        """The thread's own value when it set one, else the process-wide one."""
        if not self._threaded:
            return self.value
        local = getattr(self._local, "value", _UNSET)
        return self.value if local is _UNSET else local

    def push(self, value: Any, *, thread_local: bool) -> tuple[bool, Any]:
        """Set ``value``; return the token that :meth:`pop` takes to restore."""
        if thread_local:
            self._threaded = True
            token = (True, getattr(self._local, "value", _UNSET))
            self._local.value = value
        else:
            token = (False, self.value)
            self.value = value
        return token

    def pop(self, token: tuple[bool, Any]) -> None:
        """Restore what was there before the matching :meth:`push`."""
        thread_local, previous = token
        if not thread_local:
            self.value = previous
        elif previous is _UNSET:
            del self._local.value
        else:
            self._local.value = previous


class ScopedSetter:
    """Base of the ``set_*`` context managers that double as decorators.

    Subclasses define :attr:`setting` (a :class:`Setting`) and set ``self.value`` and
    ``self.thread_local`` in ``__init__``. Each ``with`` block or decorated call pushes
    the value and pops it afterwards, so nesting and recursion restore correctly.
    """

    setting: Setting
    value: Any
    thread_local: bool = False

    def __enter__(self) -> ScopedSetter:
        tokens = self.__dict__.setdefault("_tokens", [])
        tokens.append(self.setting.push(self.value, thread_local=self.thread_local))
        return self

    def __exit__(self, *exc: Any) -> None:
        self.setting.pop(self.__dict__["_tokens"].pop())

    def set(self) -> None:
        """Set the value until :meth:`unset`, as entering a ``with`` block does (for a
        setting chosen once, e.g. at the start of a script or a test session)."""
        self.__enter__()

    def unset(self) -> None:
        """Restore the value that :meth:`set` replaced."""
        self.__exit__(None, None, None)

    def clone(self) -> ScopedSetter:
        """A new setter of the same value (it has its own ``set``/``unset`` history)."""
        new = type(self).__new__(type(self))
        new.__dict__.update({k: v for k, v in self.__dict__.items() if k != "_tokens"})
        return new

    def __call__(self, func: _F) -> _F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            token = self.setting.push(self.value, thread_local=self.thread_local)
            try:
                return func(*args, **kwargs)
            finally:
                self.setting.pop(token)

        return wrapper  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"
