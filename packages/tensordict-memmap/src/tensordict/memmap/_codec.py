"""Non-tensor values on disk: JSON when it holds them, pickle otherwise, unpickled only on request.

A value is written as JSON only when reading the JSON back gives exactly the same value
(strings, numbers, booleans, ``None``, lists and string-keyed dicts of those). Anything
else — a tuple, a dict with integer keys, an arbitrary object — is pickled beside the
JSON, as the reference library does (its ``memmap``/``save`` take no pickle flag, so code
written for it keeps working); ``allow_pickle=False`` at save time refuses instead.
Loading never unpickles unless the caller passes ``allow_pickle=True``: writing a pickle
runs no code, reading one can.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

_SCALARS = (str, int, float, bool, type(None))


def check_allow_pickle(allow_pickle: Any) -> bool:
    """``allow_pickle`` as a bool (``None`` means ``False``); anything else is a TypeError.

    >>> check_allow_pickle(None), check_allow_pickle(True)
    (False, True)
    """
    if allow_pickle is None:
        return False
    if type(allow_pickle) is not bool:
        raise TypeError(
            f"allow_pickle must be a bool or None, got {allow_pickle!r} "
            f"({type(allow_pickle).__name__})."
        )
    return allow_pickle


def save_allow_pickle(allow_pickle: Any) -> bool:
    """Whether a save may pickle non-JSON values: ``None`` (the default) and ``True`` do,
    ``False`` refuses them; anything else is a TypeError.

    >>> save_allow_pickle(None), save_allow_pickle(False)
    (True, False)
    """
    return True if allow_pickle is None else check_allow_pickle(allow_pickle)


def is_json_exact(value: Any) -> bool:
    """Whether JSON gives ``value`` back unchanged (types included).

    >>> is_json_exact({"a": [1, 2.5, None, "x"]}), is_json_exact((1, 2)), is_json_exact({1: 2})
    (True, False, False)
    """
    return not_json(value) is None


def not_json(value: Any) -> str | None:
    """What in ``value`` JSON would not give back unchanged (None: nothing).

    >>> not_json([1, {"a": 1 + 2j}]), not_json({"k": 1, 2: 3}), not_json("fine")
    ('a value of type complex', 'a dict key of type int (2)', None)
    """
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind in _SCALARS:
            continue
        if kind is list:
            stack.extend(item)
        elif kind is dict:
            for key in item:
                if type(key) is not str:
                    return f"a dict key of type {type(key).__name__} ({key!r})"
            stack.extend(item.values())
        else:
            return f"a value of type {kind.__name__}"
    return None


def pickle_or_refuse(value: Any, allow_pickle: bool, where: str, shown: Any = None) -> bytes:
    """``pickle.dumps(value)`` if allowed, else a TypeError naming ``where`` (the key) and
    what in ``shown`` (default: ``value``) JSON cannot hold."""
    if not allow_pickle:
        what = not_json(value if shown is None else shown) or f"a {type(value).__name__}"
        raise TypeError(
            f"{where}: {what} cannot be stored as JSON, and allow_pickle=False forbids "
            "storing it with pickle. Leave allow_pickle unset (or True) to pickle it "
            "(loading it will need allow_pickle=True), or convert it to a JSON type (str, "
            "int, float, bool, None, list, dict with str keys)."
        )
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def unpickle_or_refuse(path: Path | str, allow_pickle: bool, read: Any = None) -> Any:
    """The value pickled in ``path``, only if ``allow_pickle``; RuntimeError otherwise.

    ``path`` is a file, or (a ``str``) a source's description of one, shown as it is.
    ``read`` (optional) returns the file's bytes (archives read members themselves).
    """
    shown = repr(str(path)) if isinstance(path, Path) else path
    if not allow_pickle:
        raise RuntimeError(
            f"{shown} holds pickled data, which can run code when loaded. Pass "
            "allow_pickle=True to load it if you trust its origin."
        )
    data = read() if read is not None else Path(path).read_bytes()
    try:
        return pickle.loads(data)
    except Exception as err:
        raise RuntimeError(f"cannot unpickle {shown}: {err}") from err
