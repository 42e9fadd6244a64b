"""Nested keys: a ``str`` or an arbitrarily nested tuple of strings.

``("a", ("b", ("c",)))`` names the same entry as ``("a", "b", "c")``; unravelling turns
any nested form into the flat one (a one-element tuple becomes its string).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from tensordict._util.errors import InvalidKeyError

if TYPE_CHECKING:
    NestedKey = str | tuple["NestedKey", ...]
else:

    class _NestedKeyMeta(type):
        def __instancecheck__(cls, obj: object) -> bool:
            return is_nested_key(obj)

    class NestedKey(metaclass=_NestedKeyMeta):
        """A key of a tensordict: a ``str`` or a non-empty, possibly nested, tuple of
        strings. An annotation, and a class that ``isinstance`` checks against.

        >>> isinstance(("a", ("b",)), NestedKey), isinstance(["a"], NestedKey)
        (True, False)
        """

        def __new__(cls) -> NestedKey:
            raise TypeError("NestedKey is an annotation; it has no instances.")


def _flatten_into(key: Any, out: list[str]) -> None:
    for part in key:
        if type(part) is str:
            out.append(part)
        elif isinstance(part, tuple):
            _flatten_into(part, out)
        elif isinstance(part, str):
            out.append(str(part))
        else:
            raise InvalidKeyError(
                f"Nested keys are made of strings and tuples of strings; got {part!r} "
                f"(type {type(part).__name__}) inside key {key!r}."
            )


def unravel_key(key: NestedKey) -> str | tuple[str, ...]:
    """Flatten a nested key: strings stay strings, tuples become flat tuples of strings.

    >>> unravel_key(("a", ("b", ("c",))))
    ('a', 'b', 'c')
    >>> unravel_key(("a",))
    'a'
    >>> unravel_key("a")
    'a'
    """
    if type(key) is str:
        return key
    if isinstance(key, str):
        return str(key)
    if not isinstance(key, tuple):
        raise InvalidKeyError(
            f"Nested keys are strings or tuples of strings; got {key!r} "
            f"(type {type(key).__name__})."
        )
    out: list[str] = []
    _flatten_into(key, out)
    if not out:
        raise InvalidKeyError("An empty tuple is not a valid key.")
    if len(out) == 1:
        return out[0]
    return tuple(out)


def has_empty_part(key: object) -> bool:
    """Whether ``key`` is, or holds at any depth, an empty tuple (not a valid key).

    >>> has_empty_part(()), has_empty_part(("a", ())), has_empty_part(("a", ("b",)))
    (True, True, False)
    """
    if type(key) is not tuple:
        return False
    if not key:
        return True
    for part in key:  # (a loop, not any(): get() checks every tuple key)
        if type(part) is not str and has_empty_part(part):
            return True
    return False


def unravel_key_list(keys: Iterable[NestedKey]) -> list[str | tuple[str, ...]]:
    """Unravel every key of a list (see :func:`unravel_key`).

    >>> unravel_key_list(["a", ("b", ("c",)), ("d",)])
    ['a', ('b', 'c'), 'd']
    """
    return [unravel_key(key) for key in keys]


def is_nested_key(key: object) -> bool:
    """Whether ``key`` is a valid (possibly nested) key.

    >>> is_nested_key(("a", ("b",))), is_nested_key(("a", 1))
    (True, False)
    """
    if isinstance(key, str):
        return True
    if isinstance(key, tuple) and key:
        return all(is_nested_key(part) for part in key)
    return False


def key_as_tuple(key: NestedKey) -> tuple[str, ...]:
    """``unravel_key`` that always returns a tuple.

    >>> key_as_tuple("a"), key_as_tuple(("a", ("b",)))
    (('a',), ('a', 'b'))
    """
    if type(key) is str:
        return (key,)
    flat = unravel_key(key)
    return flat if isinstance(flat, tuple) else (flat,)


def unravel_key_to_tuple(key: NestedKey) -> tuple[str, ...]:
    """A nested key as a flat tuple of strings; ``()`` when ``key`` is not a valid key.

    Unlike :func:`unravel_key` a string gives a one-element tuple, and nothing raises.

    >>> unravel_key_to_tuple("a"), unravel_key_to_tuple(("a", ("b", ("c",))))
    (('a',), ('a', 'b', 'c'))
    >>> unravel_key_to_tuple(("a", 1)), unravel_key_to_tuple(1)
    ((), ())
    """
    if type(key) is str:
        return (key,)
    if not is_nested_key(key):
        return ()
    out: list[str] = []
    _flatten_into(key, out)
    return tuple(out)
