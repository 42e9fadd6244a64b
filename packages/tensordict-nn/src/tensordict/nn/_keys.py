"""Validation of the in_keys/out_keys that modules are built with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensordict import unravel_key
from tensordict._plugins.api import NestedKey, is_nested_key

#: The out_key that means "drop this output".
IGNORE = "_"


def as_key_list(keys: Any, what: str) -> list[Any]:
    """``keys`` (a key, or a sequence of keys) as a list of unravelled keys.

    A ``str`` or a ``tuple`` is one (possibly nested) key; a list or any other
    non-string sequence holds several. Anything else raises :class:`ValueError`.

    >>> as_key_list("a", "in_keys"), as_key_list([("b", ("c",)), ("d",)], "in_keys")
    (['a'], [('b', 'c'), 'd'])
    """
    if isinstance(keys, (str, tuple)):
        keys = [keys]
    elif not isinstance(keys, Sequence) or isinstance(keys, (bytes, bytearray)):
        raise ValueError(
            f"{what} must be of type list, str or tuples of str, or a sequence of those; "
            f"got {keys!r} (type {type(keys).__name__})."
        )
    out = []
    for key in keys:
        if not is_nested_key(key):
            raise ValueError(
                f"{what} must be of type list, str or tuples of str; the entry {key!r} "
                f"(type {type(key).__name__}) is not a key."
            )
        out.append(unravel_key(key))
    return out


def check_key(key: Any) -> Any:
    """``key`` unravelled, or :class:`ValueError` if it is not a (nested) key.

    >>> check_key(("a", ("b",)))
    ('a', 'b')
    """
    if not is_nested_key(key):
        raise ValueError(
            f"key should be a Sequence<NestedKey>: a str or a tuple of str, got {key!r} "
            f"(type {type(key).__name__})."
        )
    return unravel_key(key)


def select_keys(selected: Sequence[Any], available: Sequence[NestedKey]) -> list[Any]:
    """Validate ``selected`` against ``available`` (both unravelled); return the list."""
    keys = [check_key(key) for key in selected]
    missing = [key for key in keys if key not in available]
    if missing:
        raise ValueError(
            f"Can't select non existent key: {', '.join(map(repr, missing))}. "
            f"The out_keys are {list(available)}."
        )
    return keys


def repeated_keys(keys: Sequence[Any]) -> list[Any]:
    """The keys that ``keys`` (unravelled, see :func:`as_key_list`) lists more than once,
    in order of first repetition; the drop key ``"_"`` may repeat.

    >>> repeated_keys(as_key_list(["a", "_", ("b",), "_", "b", "a"], "out_keys"))
    ['b', 'a']
    """
    seen: set[Any] = set()
    out: list[Any] = []
    for key in keys:
        if key == IGNORE:
            continue
        if key in seen and key not in out:
            out.append(key)
        seen.add(key)
    return out
