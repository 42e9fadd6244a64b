"""Global on/off modes: context managers, decorators and getters, kept in the environment.

A mode is one boolean read on the hot paths that it governs, with:

* an initial value read from an environment variable at import (unset: "never set");
* a setter class, ``set_x(mode)``, used as a context manager or a decorator (the previous
  value is restored on exit) or through ``set_x(mode).set()`` (changes it for good). The
  value is written back to the environment variable so that worker processes started
  later see the same mode;
* a getter, ``x(allow_none=False)``, giving the default while the mode was never set (or
  ``None`` with ``allow_none=True``).

The modes defined here:

* :class:`set_list_to_stack` / :func:`list_to_stack` — what a list of non-numbers written
  to a tensordict becomes (a :class:`~tensordict.NonTensorStack`, default, or one value);
* :class:`set_capture_non_tensor_stack` / :func:`capture_non_tensor_stack` — whether
  stacking identical non-tensor values gives one value instead of a stack.

:mod:`tensordict._util.legacy` builds ``set_lazy_legacy`` on the same :class:`Mode` base.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])

_TRUE = ("1", "true", "yes", "y", "t", "on")
_FALSE = ("0", "false", "no", "n", "f", "off")


def env_flag(name: str) -> bool | None:
    """The boolean in the environment variable ``name`` (``None`` when unset; a value
    that is not a boolean warns and counts as unset).

    >>> import os
    >>> os.environ["TD_DOC_FLAG"] = "False"
    >>> env_flag("TD_DOC_FLAG"), env_flag("TD_DOC_UNSET")
    (False, None)
    """
    raw = os.environ.get(name)
    if raw is None:
        return None
    text = raw.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    warnings.warn(
        f"environment variable {name}={raw!r} is not a boolean (use 1/0 or True/False); "
        "it is ignored.",
        RuntimeWarning,
        stacklevel=2,
    )
    return None


class Mode:
    """Base of the mode setters: a context manager and decorator that sets one flag.

    A subclass names its environment variable (:attr:`ENV`) and keeps its state in a
    one-element list (:attr:`STATE`, ``[None]`` while never set), read by its getter.
    :meth:`deprecated` tells whether setting ``mode`` warns (``DeprecationWarning`` at
    construction).

    >>> import os
    >>> class set_doc_flag(Mode):
    ...     ENV = "TD_DOC_MODE"
    ...     STATE = [None]
    >>> with set_doc_flag(True):
    ...     print(set_doc_flag.STATE[0], os.environ["TD_DOC_MODE"])
    True True
    >>> set_doc_flag.STATE[0], "TD_DOC_MODE" in os.environ
    (None, False)
    """

    ENV: ClassVar[str]
    STATE: ClassVar[list[bool | None]]

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self._previous: list[bool | None] = []
        message = self.deprecated(self.mode)
        if message:
            warnings.warn(message, DeprecationWarning, stacklevel=2)

    @classmethod
    def deprecated(cls, mode: bool) -> str | None:
        """The deprecation message for setting ``mode`` (``None``: not deprecated)."""
        return None

    @classmethod
    def _write(cls, mode: bool | None) -> None:
        cls.STATE[0] = mode
        if mode is None:
            os.environ.pop(cls.ENV, None)
        else:
            os.environ[cls.ENV] = str(mode)

    def clone(self) -> Mode:
        """A fresh setter with the same mode (each use as a decorator gets its own)."""
        out = type(self).__new__(type(self))
        out.mode = self.mode
        out._previous = []
        return out

    def set(self) -> None:
        """Switch to this mode now, without restoring the previous one."""
        self._write(self.mode)

    def __enter__(self) -> None:
        self._previous.append(self.STATE[0])
        self._write(self.mode)

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        self._write(self._previous.pop())

    def __call__(self, func: _F) -> _F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.clone():
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


#: ``list_to_stack`` state (``None``: never set, the default ``True`` applies).
LIST_TO_STACK: list[bool | None] = [env_flag("LIST_TO_STACK")]
#: ``capture_non_tensor_stack`` state (``None``: never set, the default ``False`` applies).
CAPTURE_NON_TENSOR_STACK: list[bool | None] = [env_flag("CAPTURE_NONTENSOR_STACK")]


class set_list_to_stack(Mode):  # noqa: N801 - the reference's public name
    """Choose what a list of non-numbers written to a tensordict becomes.

    With ``mode=True`` (the default) ``td[key] = ["a", "b"]`` stores a
    :class:`~tensordict.NonTensorStack`, one value per element along the first dimensions
    (nested lists give more dimensions); ``td[key]`` then reads back a
    :class:`~tensordict.utils.LinkedList`. With ``mode=False`` the list is stored as one
    :class:`~tensordict.NonTensorData` value; that mode is deprecated (use
    :meth:`~tensordict.TensorDictBase.set_non_tensor`) and warns. Lists of numbers or
    tensors become tensors in both modes. The ``LIST_TO_STACK`` environment variable sets
    the mode at import.

    Use it as a context manager or a decorator, or call ``set_list_to_stack(mode).set()``.

    >>> from tensordict import TensorDict, set_list_to_stack
    >>> td = TensorDict(batch_size=[2])
    >>> with set_list_to_stack(True):
    ...     td["x"] = ["a", "b"]
    >>> type(td.get("x")).__name__, td["x"]
    ('NonTensorStack', LinkedList(['a', 'b']))
    """

    ENV = "LIST_TO_STACK"
    STATE = LIST_TO_STACK

    @classmethod
    def deprecated(cls, mode: bool) -> str | None:
        if mode:
            return None
        return (
            "set_list_to_stack(False) is deprecated: store a list as one value with "
            "td.set_non_tensor(key, value) instead."
        )


def list_to_stack(allow_none: bool = False) -> bool | None:
    """Whether a list of non-numbers written to a tensordict becomes a
    :class:`~tensordict.NonTensorStack` (see :class:`set_list_to_stack`).

    ``allow_none=True`` returns ``None`` while the mode was never set (the default is
    ``True``).

    >>> from tensordict import list_to_stack
    >>> list_to_stack()
    True
    """
    mode = LIST_TO_STACK[0]
    if mode is None and not allow_none:
        return True
    return mode


class set_capture_non_tensor_stack(Mode):  # noqa: N801 - the reference's public name
    """Choose whether stacking identical non-tensor values gives one value.

    By default (``mode=False``) :func:`torch.stack` of :class:`~tensordict.NonTensorData`
    (or of tensordicts holding them) gives a :class:`~tensordict.NonTensorStack`, even
    when every value is the same; its ``.data`` then reads the common value. With
    ``mode=True`` identical values give one ``NonTensorData``; that mode is deprecated and
    warns. The ``CAPTURE_NONTENSOR_STACK`` environment variable sets the mode at import.

    Use it as a context manager or a decorator, or call
    ``set_capture_non_tensor_stack(mode).set()``.

    >>> import torch
    >>> from tensordict import NonTensorData, set_capture_non_tensor_stack
    >>> with set_capture_non_tensor_stack(False):
    ...     stack = torch.stack([NonTensorData("a"), NonTensorData("a")])
    >>> type(stack).__name__, stack.data
    ('NonTensorStack', 'a')
    """

    ENV = "CAPTURE_NONTENSOR_STACK"
    STATE = CAPTURE_NON_TENSOR_STACK

    @classmethod
    def deprecated(cls, mode: bool) -> str | None:
        if not mode:
            return None
        return (
            "set_capture_non_tensor_stack(True) is deprecated: read the common value of a "
            "stack of identical values with NonTensorStack.data instead."
        )


def capture_non_tensor_stack(allow_none: bool = False) -> bool | None:
    """Whether stacking identical non-tensor values gives one value
    (see :class:`set_capture_non_tensor_stack`).

    ``allow_none=True`` returns ``None`` while the mode was never set (the default is
    ``False``).

    >>> from tensordict import capture_non_tensor_stack
    >>> capture_non_tensor_stack()
    False
    """
    mode = CAPTURE_NON_TENSOR_STACK[0]
    if mode is None and not allow_none:
        return False
    return mode
