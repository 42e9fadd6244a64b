"""The nesting depth limit: a tensordict holds tensordicts at most ``MAX_NESTING_DEPTH``
levels deep.

Many operations walk nested tensordicts recursively, and Python's recursion limit stops
them somewhere past 190 levels with a ``RecursionError`` in the middle of the walk.
Nesting is therefore refused when it is built: storing a tensordict that would sit (or
hold tensordicts) deeper than the limit raises :class:`NestingDepthError` (a
``RecursionError``, so also a ``RuntimeError``) naming the key, and nothing is stored.

Each dense tensordict remembers the depth it was stored at (``_depth``); storing one
checks that depth plus the height of what it holds. A subtree stored first and moved
deeper afterwards keeps the depths it had, so the check is done again when something is
stored below it.

>>> import torch
>>> from tensordict import TensorDict
>>> from tensordict._kinds.nesting import MAX_NESTING_DEPTH
>>> td = TensorDict()
>>> cur = td
>>> for _ in range(MAX_NESTING_DEPTH):
...     cur["a"] = TensorDict()
...     cur = cur["a"]
>>> try:
...     cur["a"] = TensorDict()
... except RecursionError as err:
...     print(type(err).__name__)
NestingDepthError
"""

from __future__ import annotations

from typing import Any

from tensordict._kinds import kinds as _kinds
from tensordict._leaves.collection import data_of

#: The deepest level a nested tensordict may sit at (the root is level 0).
MAX_NESTING_DEPTH = 128


class NestingDepthError(RecursionError):
    """A tensordict nested deeper than :data:`MAX_NESTING_DEPTH` levels."""


def _dense_nodes(level: list[Any]) -> list[Any]:
    """The dense tensordicts of ``level``, lazy stacks replaced by their members (which
    sit at the stack's own level)."""
    out, todo = [], list(level)
    while todo:
        node = todo.pop()
        if isinstance(node, _kinds.Lazy):
            todo.extend(node.tensordicts)
        elif isinstance(node, _kinds.Dense):
            out.append(node)
    return out


def _height(td: Any, limit: int) -> int:
    """The number of nested levels below ``td`` (0 without nested tensordicts); stops
    counting past ``limit``."""
    height, level = 0, [td]
    while height <= limit:
        nxt = []
        for node in _dense_nodes(level):
            for value in node._tensordict.values():
                sub = data_of(value)
                if isinstance(sub, (_kinds.Dense, _kinds.Lazy)):
                    nxt.append(sub)
        if not nxt:
            break
        height, level = height + 1, nxt
    return height


def check_nesting(parent: Any, key: Any, value: Any) -> None:
    """Raise before storing ``value`` (a tensordict) in ``parent`` if it would nest
    deeper than the limit; record the depth it is stored at."""
    inner = data_of(value)
    depth = parent._depth + 1
    room = MAX_NESTING_DEPTH - depth
    if room < 0 or _height(inner, room) > room:
        raise NestingDepthError(
            f"cannot store the tensordict at {key!r}: it would nest tensordicts more than "
            f"MAX_NESTING_DEPTH={MAX_NESTING_DEPTH} levels deep (the operations that walk "
            "nested tensordicts could not reach the bottom)."
        )
    if isinstance(inner, _kinds.Dense) and inner._depth < depth:
        inner._depth = depth


def check_key_length(parent: Any, key: tuple[Any, ...]) -> None:
    """Raise before a nested key creates tensordicts deeper than the limit."""
    if parent._depth + len(key) - 1 > MAX_NESTING_DEPTH:
        raise NestingDepthError(
            f"cannot write at the {len(key)}-part key {key[:3]!r}...: it would nest "
            f"tensordicts more than MAX_NESTING_DEPTH={MAX_NESTING_DEPTH} levels deep."
        )
