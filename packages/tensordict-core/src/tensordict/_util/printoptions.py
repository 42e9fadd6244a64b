"""Options of the printed form of tensordicts (read by :mod:`tensordict._formats.repr`)."""

from __future__ import annotations

from typing import Any

#: The current options; :class:`set_printoptions` changes them.
PRINT_OPTIONS: dict[str, Any] = {"sort_keys": True, "max_fields": None, "show_is_shared": True}
_DEFAULTS = dict(PRINT_OPTIONS)


class set_printoptions:  # noqa: N801 - a function-like name, as in torch.set_printoptions
    """Set how tensordicts print; as a context manager, only until the block ends.

    Options (keyword-only; omitted ones are left as they are):

    * ``sort_keys`` (default ``True``): list fields in sorted order, else in insertion order.
    * ``max_fields`` (default ``None``): show at most this many fields per (nested)
      tensordict, then a ``... (N more)`` line.
    * ``show_is_shared`` (default ``True``): print the ``is_shared`` flags (computing
      them asks every leaf about its storage).

    ``reset=True`` first restores the defaults.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"b": torch.zeros(()), "a": torch.zeros(())})
    >>> with set_printoptions(sort_keys=False, max_fields=1, show_is_shared=False):
    ...     print(td)
    TensorDict(
        fields={
            b: Tensor(shape=torch.Size([]), device=cpu, dtype=torch.float32),
            ... (1 more)},
        batch_size=torch.Size([]),
        device=None)
    >>> get_printoptions()["sort_keys"]
    True
    """

    def __init__(
        self,
        *,
        sort_keys: bool | None = None,
        max_fields: int | None = None,
        show_is_shared: bool | None = None,
        reset: bool = False,
    ) -> None:
        if max_fields is not None and (not isinstance(max_fields, int) or max_fields < 0):
            raise ValueError(f"max_fields must be a non-negative int or None, got {max_fields!r}.")
        self._previous = dict(PRINT_OPTIONS)
        if reset:
            PRINT_OPTIONS.update(_DEFAULTS)
        if sort_keys is not None:
            PRINT_OPTIONS["sort_keys"] = bool(sort_keys)
        if max_fields is not None:
            PRINT_OPTIONS["max_fields"] = max_fields
        if show_is_shared is not None:
            PRINT_OPTIONS["show_is_shared"] = bool(show_is_shared)

    def __enter__(self) -> set_printoptions:
        return self

    def __exit__(self, *exc: object) -> None:
        PRINT_OPTIONS.clear()
        PRINT_OPTIONS.update(self._previous)


def get_printoptions() -> dict[str, Any]:
    """The current print options (a copy; see :class:`set_printoptions`).

    >>> get_printoptions()
    {'sort_keys': True, 'max_fields': None, 'show_is_shared': True}
    """
    return dict(PRINT_OPTIONS)
