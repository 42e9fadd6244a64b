"""Live views of a tensordict's keys, and the walkers that collect keys, values and
items depth first (the default leaf rule on dense storage is the hot path)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol, cast

import torch

from tensordict._keys.nested import unravel_key_to_tuple
from tensordict._kinds import kinds as _kinds
from tensordict._kinds.kinds import is_leaf_default

_Tensor = torch.Tensor


class _DenseStorage(Protocol):
    """What the keys view walks: a tensordict exposing its ``str -> value`` storage.

    Dense tensordicts keep their entries in a private ``_tensordict`` dict, which
    :class:`~tensordict.TensorDictBase` does not declare (other tensordict types store
    entries differently), so the view is typed against this protocol instead.
    """

    @property
    def _tensordict(self) -> Mapping[str, Any]: ...


class TensorDictKeysView:
    """A live view of the keys of a tensordict.

    ``include_nested`` walks into nested tensordicts (yielding tuple keys);
    ``leaves_only`` keeps the tensors only: it drops keys whose value is a tensor
    collection or a non-tensor entry, as the reference; ``is_leaf`` (a callable on the
    value's type, e.g. :func:`~tensordict.is_leaf_nontensor` to keep non-tensor entries)
    decides what counts as a leaf; ``sort`` orders keys.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.zeros(()), "b": {"c": torch.zeros(())}})
    >>> list(td.keys(include_nested=True))
    ['a', 'b', ('b', 'c')]
    >>> ("b", "c") in td.keys(include_nested=True), ("b", ("c",)) in td.keys(True)
    (True, True)
    """

    __slots__ = ("_td", "include_nested", "leaves_only", "is_leaf", "sort", "_listed")

    def __init__(
        self,
        td: _DenseStorage,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        sort: bool = False,
    ) -> None:
        self._td = td
        self.include_nested = include_nested
        self.leaves_only = leaves_only
        self.is_leaf = is_leaf
        self.sort = sort

    def __iter__(self) -> Iterator[str | tuple[str, ...]]:
        if not (self.include_nested or self.leaves_only or self.sort):
            return iter(self._td._tensordict)
        keys: list[Any] = []
        if self.is_leaf is None:
            _collect_keys(self._td._tensordict, (), self.include_nested, self.leaves_only, keys)
        else:
            collect(self._td, (), self.include_nested, self.leaves_only, self.is_leaf, KEYS, keys)
        if self.sort:
            keys.sort(key=_sort_key)
        it = iter(keys)
        # ``list(view)`` asks for the length right after ``iter(view)``: remember it so
        # that __len__ need not walk the tree a second time (see __len__)
        self._listed: tuple[Iterator[Any], int] | None = (it, len(keys))
        return it

    def __len__(self) -> int:
        if not (self.include_nested or self.leaves_only):
            return len(self._td._tensordict)
        listed: tuple[Iterator[Any], int] | None = getattr(self, "_listed", None)
        if listed is not None:
            self._listed = None
            it, n = listed
            if operator.length_hint(it) == n:  # asked by list() before consuming iter()
                return n
        return count(self._td, self.include_nested, self.leaves_only, self.is_leaf)

    def __contains__(self, key: object) -> bool:
        if type(key) is str:
            if key in self._td._tensordict:
                return self._leaf_ok(self._td._tensordict[key])
            return False
        path = unravel_key_to_tuple(key)  # type: ignore[arg-type]  # checked: () if not a key
        if not path:  # as the reference: a membership test with a non-key is an error
            raise TypeError(
                f"{key!r} in td.keys(): tensordict keys are always strings; membership "
                "checks take a string or a non-empty tuple of strings (a nested key)."
            )
        if len(path) > 1 and not self.include_nested:
            return False
        td: _DenseStorage = self._td
        for i, part in enumerate(path[:-1]):
            sub = td._tensordict.get(part)
            if sub is not None and not isinstance(sub, _kinds.Dense) and hasattr(sub, "keys"):
                rest = path[i + 1 :]  # another tensordict type (a lazy stack) answers
                view = sub.keys(True, self.leaves_only, self.is_leaf)
                return bool((rest[0] if len(rest) == 1 else rest) in view)
            if sub is None or not isinstance(sub, _kinds.Dense):
                return False
            td = sub
        if path[-1] not in td._tensordict:
            return False
        return self._leaf_ok(td._tensordict[path[-1]])

    def _leaf_ok(self, value: object) -> bool:
        if not self.leaves_only:
            return True
        return (self.is_leaf or is_leaf_default)(type(value))

    def __repr__(self) -> str:
        return f"_TensorDictKeysView({list(self)},\n    include_nested={self.include_nested}, leaves_only={self.leaves_only})"

    def __eq__(self, other: object) -> bool:
        try:
            # A non-iterable ``other`` raises TypeError here, caught below.
            return set(self) == set(cast(Iterable[Any], other))
        except TypeError:
            return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class FlatKeysView(TensorDictKeysView):
    """``td.keys()`` without options: the keys of the top level, straight from storage
    (the hot path of ``keys()``; the same behaviour as the general view)."""

    __slots__ = ()
    include_nested = False
    leaves_only = False
    is_leaf = None
    sort = False

    def __init__(self, td: _DenseStorage) -> None:  # noqa: D107
        self._td = td

    def __iter__(self) -> Iterator[str | tuple[str, ...]]:
        return iter(self._td._tensordict)

    def __len__(self) -> int:
        return len(self._td._tensordict)


def _sort_key(key: str | tuple[str, ...]) -> str:
    return key if type(key) is str else ".".join(key)


#: what :func:`collect` appends for each entry
KEYS, VALUES, ITEMS = 0, 1, 2


class Later:
    """The values (or items) of a tensordict of another kind nested in a dense one (a lazy
    stack), read only when iteration reaches them: reading a lazy stack's entry stacks it,
    which can fail (members of other shapes), and a caller may stop before (``any(...)``).
    """

    __slots__ = ("td", "head", "leaves_only", "is_leaf", "items")

    def __init__(
        self, td: Any, head: tuple[str, ...], leaves_only: bool, is_leaf: Any, items: bool
    ) -> None:
        self.td, self.head, self.leaves_only = td, head, leaves_only
        self.is_leaf, self.items = is_leaf, items

    def __iter__(self) -> Iterator[Any]:
        if not self.items:
            yield from self.td.values(True, self.leaves_only, self.is_leaf)
            return
        head = self.head
        for sub, v in self.td.items(True, self.leaves_only, self.is_leaf):
            yield (head + (sub if type(sub) is tuple else (sub,)), v)


def expand_later(out: list[Any]) -> Iterator[Any]:
    """Iterate over ``out`` as collected, reading its :class:`Later` parts in their turn.

    >>> list(expand_later([1, 2]))
    [1, 2]
    """
    for item in out:
        if type(item) is Later:
            yield from item
        else:
            yield item


def collect(
    td: Any,
    prefix: tuple[str, ...],
    include_nested: bool,
    leaves_only: bool,
    is_leaf: Callable[[type], bool] | None,
    what: int,
    out: list[Any],
) -> bool:
    """Append the keys (``what=KEYS``), values or ``(key, value)`` pairs of the dense
    tensordict ``td`` to ``out``, depth first, as ``keys(include_nested, leaves_only,
    is_leaf)`` lists them: root keys as strings, nested ones as tuples (after ``prefix``).
    Another kind of tensordict nested inside (a lazy stack) lists its own entries; its
    values are appended as a :class:`Later` part (read by :func:`expand_later`), and the
    result says whether there is one.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> out = []
    >>> collect(TensorDict(a=0, b={"c": 1}), (), True, True, None, KEYS, out)
    >>> out
    ['a', ('b', 'c')]
    """
    if is_leaf is None:  # the default leaf rule: the hot paths
        if what == KEYS:
            _collect_keys(td._tensordict, prefix, include_nested, leaves_only, out)
            return False
        if what == VALUES:
            return _collect_values(td._tensordict, include_nested, leaves_only, out)
        return _collect_items(td._tensordict, prefix, include_nested, leaves_only, out)
    later = False
    base = _kinds.Base
    dense = _kinds.Dense
    for key, value in td._tensordict.items():
        leaf = not isinstance(value, base) if is_leaf is None else is_leaf(type(value))
        if leaf or not leaves_only:
            full: Any = prefix + (key,) if prefix else key
            out.append(full if what == KEYS else value if what == VALUES else (full, value))
        if leaf or not include_nested:
            continue
        if isinstance(value, dense):
            later = collect(value, prefix + (key,), True, leaves_only, is_leaf, what, out) or later
        elif not hasattr(value, "keys"):  # a non-tensor value that is not a leaf here
            continue
        elif what == KEYS:  # another kind of tensordict: its own entries
            head = prefix + (key,)
            for sub in value.keys(True, leaves_only, is_leaf):
                out.append(head + (sub if type(sub) is tuple else (sub,)))
        else:  # values are read when iterated (see Later)
            out.append(Later(value, prefix + (key,), leaves_only, is_leaf, what == ITEMS))
            later = True
    return later


def count(
    td: Any, include_nested: bool, leaves_only: bool, is_leaf: Callable[[type], bool] | None
) -> int:
    """How many keys :func:`collect` would list (without building them)."""
    base, non_tensor = _kinds.Base, _kinds.NON_TENSOR
    n = 0
    for value in td._tensordict.values():
        if is_leaf is None and isinstance(value, non_tensor):
            n += not leaves_only  # neither a leaf nor walked into
            continue
        leaf = not isinstance(value, base) if is_leaf is None else is_leaf(type(value))
        if leaf or not leaves_only:
            n += 1
        if not leaf and include_nested:
            if isinstance(value, _kinds.Dense):
                n += count(value, True, leaves_only, is_leaf)
            else:
                n += len(value.keys(True, leaves_only, is_leaf))
    return n


def _collect_keys(
    store: Mapping[str, Any],
    prefix: tuple[str, ...],
    include_nested: bool,
    leaves_only: bool,
    out: list[Any],
) -> None:
    """:func:`collect` of the keys with the default leaf rule (the hot path of
    ``keys(True, True)``)."""
    base, tensor, non_tensor = _kinds.Base, _Tensor, _kinds.NON_TENSOR
    for key, value in store.items():
        if type(value) is tensor:  # the common case: one identity test
            out.append(prefix + (key,) if prefix else key)
            continue
        if not isinstance(value, base):
            if not leaves_only or not isinstance(value, non_tensor):
                out.append(prefix + (key,) if prefix else key)
            continue
        if not leaves_only:
            out.append(prefix + (key,) if prefix else key)
        if include_nested:
            if isinstance(value, _kinds.Dense):
                _collect_keys(value._tensordict, prefix + (key,), True, leaves_only, out)
            else:
                head = prefix + (key,)
                for sub in value.keys(True, leaves_only):
                    out.append(head + (sub if type(sub) is tuple else (sub,)))


def _collect_values(
    store: Mapping[str, Any], include_nested: bool, leaves_only: bool, out: list[Any]
) -> bool:
    """:func:`collect` of the values with the default leaf rule."""
    base, tensor, non_tensor = _kinds.Base, _Tensor, _kinds.NON_TENSOR
    later = False
    for value in store.values():
        if type(value) is tensor:  # the common case: one identity test
            out.append(value)
            continue
        if not isinstance(value, base):
            if not leaves_only or not isinstance(value, non_tensor):
                out.append(value)
            continue
        if not leaves_only:
            out.append(value)
        if include_nested:
            if isinstance(value, _kinds.Dense):
                later = _collect_values(value._tensordict, True, leaves_only, out) or later
            else:
                out.append(Later(value, (), leaves_only, None, False))
                later = True
    return later


def _collect_items(
    store: Mapping[str, Any],
    prefix: tuple[str, ...],
    include_nested: bool,
    leaves_only: bool,
    out: list[Any],
) -> bool:
    """:func:`collect` of the ``(key, value)`` pairs with the default leaf rule."""
    base, tensor, non_tensor = _kinds.Base, _Tensor, _kinds.NON_TENSOR
    later = False
    for key, value in store.items():
        if type(value) is tensor:  # the common case: one identity test
            out.append((prefix + (key,) if prefix else key, value))
            continue
        if not isinstance(value, base):
            if not leaves_only or not isinstance(value, non_tensor):
                out.append((prefix + (key,) if prefix else key, value))
            continue
        if not leaves_only:
            out.append((prefix + (key,) if prefix else key, value))
        if include_nested:
            head = prefix + (key,)
            if isinstance(value, _kinds.Dense):
                later = _collect_items(value._tensordict, head, True, leaves_only, out) or later
            else:
                out.append(Later(value, head, leaves_only, None, True))
                later = True
    return later
