"""``set_lazy_legacy``/``lazy_legacy``: whether ``torch.stack`` returns a lazy stack.

The flag lives in this dependency-free module so that :func:`tensordict.stack` can read it
without importing the lazy-stack machinery. Its initial value comes from the
``LAZY_LEGACY_OP`` environment variable (``"True"``/``"1"``), which :class:`set_lazy_legacy`
keeps in sync so that worker processes started later see the same mode.
"""

from __future__ import annotations

from tensordict._util.modes import Mode, env_flag

_STATE: list[bool | None] = [env_flag("LAZY_LEGACY_OP")]

#: The current mode (read by :func:`tensordict.stack` on every call).
LAZY_LEGACY: bool = bool(_STATE[0])


def lazy_legacy(allow_none: bool = False) -> bool | None:
    """Whether ``torch.stack`` of tensordicts returns a lazy stack (default ``False``).

    ``allow_none=True`` returns ``None`` while the mode was never set.

    >>> from tensordict import lazy_legacy
    >>> lazy_legacy()
    False
    """
    if _STATE[0] is None and allow_none:
        return None
    return LAZY_LEGACY


class set_lazy_legacy(Mode):  # noqa: N801 - the reference's public name
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

    ENV = "LAZY_LEGACY_OP"
    STATE = _STATE

    @classmethod
    def _write(cls, mode: bool | None) -> None:
        global LAZY_LEGACY
        super()._write(mode)
        LAZY_LEGACY = bool(mode)
