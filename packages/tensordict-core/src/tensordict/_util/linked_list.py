"""``LinkedList``: the values of a non-tensor stack, read as a list that writes back.

``td[key]`` on a :class:`~tensordict.NonTensorStack` entry returns a :class:`LinkedList`:
a ``list`` of its values whose item assignments are written to the stack too. Operations
that change the length of the list cannot be mirrored by a stack of fixed batch size: they
change the list only and unlink it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any, SupportsIndex


def _unlinked() -> None:
    return None


class LinkedList(list[Any]):
    """A list of the values of a non-tensor entry that writes item assignments back.

    ``td[key]`` returns one when the entry is a :class:`~tensordict.NonTensorStack`.
    ``values[i] = v`` (or a slice) writes to the stack first, then to the list: if the
    write raises, both are unchanged. ``append``, ``extend``, ``insert``, ``pop``,
    ``remove``, ``clear``, ``del``, ``+=`` and ``*=`` change the list only, and unlink it
    (later assignments no longer write back). It compares equal to a list with the same
    items; :meth:`tolist` returns a plain, unlinked copy. ``LinkedList(iterable)`` without
    ``td`` is not linked to anything.

    Args:
        *args: what :class:`list` takes (an iterable).
        td: the stack to write to (kept through a weak reference), or ``None``.

    >>> from tensordict import TensorDict
    >>> td = TensorDict(batch_size=[3])
    >>> td["names"] = ["a", "b", "c"]
    >>> values = td["names"]
    >>> values[0] = "z"
    >>> td.get("names").tolist(), values
    (['z', 'b', 'c'], LinkedList(['z', 'b', 'c']))
    >>> values.append("d")
    >>> values[1] = "y"  # unlinked: the tensordict keeps its value
    >>> td["names"]
    LinkedList(['z', 'b', 'c'])
    """

    _td: Callable[[], Any]

    def __init__(self, *args: Iterable[Any], td: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._td = _unlinked if td is None else weakref.ref(td)

    def _unlink(self) -> None:
        self._td = _unlinked

    def __setitem__(self, index: Any, value: Any) -> None:
        target = self._td()
        if target is not None:
            if isinstance(index, slice):
                positions = range(*index.indices(len(self)))
                items = list(value)
                if len(items) != len(positions):
                    raise ValueError(
                        f"cannot assign {len(items)} values to the {len(positions)} positions "
                        f"of slice {index} of a LinkedList linked to a tensordict entry: its "
                        "length is the batch size and cannot change."
                    )
                for pos, item in zip(positions, items, strict=True):
                    target[pos] = item
            else:
                target[index] = value
        super().__setitem__(index, value)

    def tolist(self) -> list[Any]:
        """A plain ``list`` copy, not linked to the tensordict.

        >>> LinkedList(["a"]).tolist()
        ['a']
        """
        return list(self)

    def append(self, value: Any) -> None:
        self._unlink()
        super().append(value)

    def extend(self, values: Iterable[Any]) -> None:
        self._unlink()
        super().extend(values)

    def insert(self, index: SupportsIndex, value: Any) -> None:
        self._unlink()
        super().insert(index, value)

    def pop(self, index: SupportsIndex = -1) -> Any:
        self._unlink()
        return super().pop(index)

    def remove(self, value: Any) -> None:
        self._unlink()
        super().remove(value)

    def clear(self) -> None:
        self._unlink()
        super().clear()

    def __delitem__(self, index: Any) -> None:
        self._unlink()
        super().__delitem__(index)

    def __iadd__(self, values: Iterable[Any]) -> LinkedList:  # type: ignore[misc]
        self._unlink()
        super().__iadd__(values)
        return self

    def __imul__(self, n: SupportsIndex) -> LinkedList:
        self._unlink()
        super().__imul__(n)
        return self

    def __repr__(self) -> str:
        return f"LinkedList({list.__repr__(self)})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return list.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return list.__ne__(self, other)

    __hash__ = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (LinkedList, (list(self),))
