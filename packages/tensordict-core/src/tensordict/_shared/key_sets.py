"""The key set of a tensordict: what is where, and moving keys between tensordicts.

Methods (:class:`KeySetOps`): entry inspection (``get_item_shape``, ``entry_class``,
``sorted_keys``, ``depth``) and key-set surgery (``separates``, ``split_keys``,
``create_nested``, ``replace``). Function: :func:`merge_tensordicts`.

The methods serve dense tensordicts and lazy stacks alike: they reach entries through
the primitives (``_get_tuple``, ``_set_tuple``, ``keys``, ``del_``); a lazy stack answers
``get_item_shape``/``entry_class`` itself (without stacking) and moves its members'
entries rather than stacked copies. Every method that writes checks everything first,
so bad input leaves the tensordict unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict._keys.nested import NestedKey, unravel_key
from tensordict._kinds import kinds as _kinds
from tensordict._kinds.kinds import is_nested
from tensordict._leaves.nontensor import NonTensorData, is_non_tensor, unwrap_non_tensor
from tensordict._util.errors import lock_error
from tensordict.base import NO_DEFAULT, TensorDictBase, _key_tuple

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self


_Tensor = torch.Tensor


def _lazy_parent(td: Any, path: tuple[str, ...]) -> Any:
    """The lazy stack holding the entry at ``path`` (a nested key) inside ``td``, if any."""
    if len(path) < 2:
        return None
    parent = td._get_tuple(path[:-1], None)
    return parent if _kinds.lazy_members(parent) is not None else None


def _has_entry(td: Any, path: tuple[str, ...]) -> bool:
    """Whether ``td`` holds an entry at ``path`` (in a lazy stack: every member does);
    nothing is stacked to find out."""
    return path in td.keys(include_nested=True)


def _move_entry(src: Any, dst: Any, path: tuple[str, ...], dst_path: tuple[str, ...]) -> None:
    """Write the entry of ``src`` at ``path`` into ``dst`` at ``dst_path``, unvalidated.

    Between lazy stacks of the same layout the members' own entries are moved (a lazy
    stack would otherwise hand over a stacked copy)."""
    members, targets = _kinds.lazy_members(src), _kinds.lazy_members(dst)
    if (
        members is not None
        and targets is not None
        and len(members) == len(targets)
        and src.stack_dim == dst.stack_dim
    ):
        for member, target in zip(members, targets):
            _move_entry(member, target, path, dst_path)
        return
    value = src._get_tuple(path, NO_DEFAULT)
    if is_non_tensor(value) and isinstance(dst, _kinds.Dense):
        # the input's own container, as for its tensors (the structural operations' rule)
        dst._set_tuple(dst_path, value, inplace=False, validated=True)
        return
    dst._set_tuple(dst_path, value, inplace=False, validated=False)


def _no_entries(td: Any) -> bool:
    """Whether ``td`` (every member of a lazy stack) holds no entry at all."""
    store = td._tensordict if isinstance(td, _kinds.Dense) else None
    if store is not None:
        return not store
    members = _kinds.lazy_members(td)
    if members is not None:
        return all(_no_entries(m) for m in members)
    return not any(True for _ in td.keys())


class KeySetOps(_kinds.SharedMixin):
    """Mixin of :class:`~tensordict.TensorDict` and :class:`~tensordict.LazyStackedTensorDict`:
    the methods of this module."""

    # ------------------------------------------------------------------ inspection
    def get_item_shape(self, key: NestedKey) -> torch.Size:
        """The shape of the entry at ``key`` (the batch size for nested tensordicts and
        non-tensor values), without unwrapping it.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2, 3), "b": {"c": torch.zeros(2, 4)}}, [2])
        >>> td.get_item_shape("a"), td.get_item_shape("b")
        (torch.Size([2, 3]), torch.Size([2]))
        """
        path = _key_tuple(key)
        lazy = _lazy_parent(self, path)
        if lazy is not None:  # a lazy stack answers without stacking (-1 where sizes differ)
            return lazy.get_item_shape(path[-1])  # type: ignore[no-any-return]
        value = self._get_tuple(path, NO_DEFAULT)
        if isinstance(value, _Tensor):
            return value.shape
        return value.batch_size  # type: ignore[no-any-return]

    def entry_class(self, key: NestedKey) -> type:
        """The class of the stored entry at ``key`` (``NonTensorData`` for non-tensor values).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(()), "b": {}, "c": "text"})
        >>> [td.entry_class(k).__name__ for k in ("a", "b", "c")]
        ['Tensor', 'TensorDict', 'NonTensorData']
        """
        path = _key_tuple(key)
        lazy = _lazy_parent(self, path)
        if lazy is not None:
            return lazy.entry_class(path[-1])  # type: ignore[no-any-return]
        return type(self._get_tuple(path, NO_DEFAULT))

    @property
    def sorted_keys(self) -> list[str]:
        """The top-level keys in sorted order.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"b": torch.zeros(()), "a": torch.zeros(())}).sorted_keys
        ['a', 'b']
        """
        return sorted(self.keys())  # type: ignore[arg-type]

    @property
    def depth(self) -> int:
        """How many levels of nested tensordicts hold the deepest leaf (``0`` for a flat
        tensordict; nested tensordicts without leaves do not count).

        >>> from tensordict import TensorDict
        >>> TensorDict({"a": {"b": {"c": 0}}, "d": 1}).depth
        2
        """
        return max(_depth(self), 0)

    # ------------------------------------------------------------------ key sets
    def separates(
        self,
        *keys: NestedKey,
        default: Any = NO_DEFAULT,
        strict: bool = True,
        filter_empty: bool = True,
    ) -> Self:
        """Move ``keys`` out of this tensordict into a new one (with the same batch size).

        A missing key raises ``KeyError`` (nothing is moved) unless ``default`` is given
        (the new tensordict gets ``default`` there, unless it is ``None``) or
        ``strict=False`` (it is skipped). With ``filter_empty`` nested tensordicts left
        empty by the move are removed. A lazy stack gives a lazy stack, the members'
        entries moving into its members.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": {"b": torch.zeros(()), "c": torch.zeros(())}, "d": torch.zeros(())})
        >>> out = td.separates(("a", "b"), "d")
        >>> list(out.keys(True, True)), list(td.keys(True, True))
        ([('a', 'b'), 'd'], [('a', 'c')])
        """
        if len(keys) == 1 and isinstance(keys[0], list):  # type: ignore[unreachable]
            keys = tuple(keys[0])  # type: ignore[unreachable]
        out = self.empty()
        found: list[tuple[str, ...]] = []
        for key in keys:
            path = _key_tuple(key)
            if not _has_entry(self, path):
                if default is not NO_DEFAULT:
                    out.set(path, default)
                    continue
                if strict:
                    raise KeyError(
                        f"separates: key {unravel_key(path)!r} is not in the tensordict (pass "
                        f"strict=False or a default); nothing was moved. Keys: "
                        f"{sorted(map(str, self.keys(True)))}."
                    )
                continue
            _move_entry(self, out, path, path)
            found.append(path)
        if found and self._is_locked:
            raise lock_error(unravel_key(found[0]), "remove")
        for path in found:
            self._pop_path(path, filter_empty)
        return out

    def _pop_path(self, path: tuple[str, ...], filter_empty: bool) -> None:
        self.del_(path)
        if filter_empty:
            for depth in range(len(path) - 1, 0, -1):
                if not _no_entries(self._get_tuple(path[:depth], NO_DEFAULT)):
                    break
                self.del_(path[:depth])

    def split_keys(
        self,
        *key_sets: Sequence[NestedKey] | Mapping[NestedKey, NestedKey],
        inplace: bool = False,
        default: Any = NO_DEFAULT,
        strict: bool = True,
        reproduce_struct: bool = False,
    ) -> tuple[Self, ...]:
        """Split into one tensordict per key set, plus one with the remaining keys.

        A key set is a list of keys or a ``{key: new_key}`` mapping (renaming on the
        way). ``default``/``strict`` treat missing keys as in :meth:`separates`; with
        ``inplace=True`` the keys are removed from this tensordict, which is returned
        last. ``reproduce_struct`` gives every result the nested structure of the input.
        A lazy stack splits into lazy stacks sharing its members' entries.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({k: torch.zeros(()) for k in "abcd"})
        >>> a, bc, rest = td.split_keys(["a"], {"b": "B", "c": "c"})
        >>> list(a.keys()), list(bc.keys()), list(rest.keys())
        (['a'], ['B', 'c'], ['d'])
        """
        outs = []
        taken: list[tuple[str, ...]] = []
        for key_set in key_sets:
            pairs = (
                list(key_set.items())
                if isinstance(key_set, Mapping)
                else [(k, k) for k in ([key_set] if isinstance(key_set, str) else key_set)]
            )
            out = self.empty(recurse=reproduce_struct)
            if reproduce_struct:  # the structure only: no non-tensor entry either
                out.exclude(*out.keys(True, True, is_leaf=_kinds.is_leaf_nontensor), inplace=True)
            for in_key, out_key in pairs:
                path = _key_tuple(in_key)
                if not _has_entry(self, path):
                    if default is not NO_DEFAULT:
                        if default is not None:
                            out.set(out_key, default)
                        continue
                    if strict:
                        raise KeyError(
                            f"split_keys: key {unravel_key(path)!r} is not in the tensordict "
                            "(pass strict=False or a default); nothing was split."
                        )
                    continue
                if issubclass(self.entry_class(path), NonTensorData):
                    if self._get_tuple(path, NO_DEFAULT).data is None:
                        taken.append(path)
                        continue
                _move_entry(self, out, path, _key_tuple(out_key))
                taken.append(path)
            outs.append(out)
        if inplace and self._is_locked and taken:
            raise lock_error(unravel_key(taken[0]), "remove")
        rest = self.exclude(*taken, inplace=inplace)
        for path in taken:  # nested tensordicts emptied by the split go too
            for depth in range(len(path) - 1, 0, -1):
                parent = rest._get_tuple(path[:depth], None)
                if parent is None or not _no_entries(parent):
                    break
                rest.exclude(path[:depth], inplace=True)
        return (*outs, rest)

    def create_nested(self, key: NestedKey) -> Self:
        """Write an empty tensordict at ``key`` with its parent's batch size, device and
        names (overwriting any entry there).

        >>> from tensordict import TensorDict
        >>> td = TensorDict(batch_size=[3], names=["t"]).create_nested(("a", "b"))
        >>> td["a", "b"].batch_size, td["a", "b"].names
        (torch.Size([3]), ['t'])
        """
        path = _key_tuple(key)
        parent = self
        if len(path) > 1:
            found = self._get_tuple(path[:-1], None)
            if found is not None:
                if not is_nested(found):
                    raise KeyError(
                        f"create_nested: the entry at {unravel_key(path[:-1])!r} is a "
                        f"{type(found).__name__}, not a tensordict."
                    )
                parent = found
        new = _kinds.Dense._new_unsafe(
            {},
            parent.batch_size,
            parent.device,
            list(parent.names) if any(n is not None for n in parent.names) else None,
        )
        if parent is not self:
            parent.set(path[-1], new)
        else:
            self.set(path, new)
        return self

    def replace(self, *args: Any, **kwargs: Any) -> Self:
        """A shallow copy with some entries replaced (``self`` if nothing is given).

        Takes at most one dict or tensordict, and/or top-level entries as keywords.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2), "b": torch.zeros(2)}, [2])
        >>> out = td.replace(a=torch.ones(2))
        >>> out["a"], td["a"], out["b"] is td["b"]
        (tensor([1., 1.]), tensor([0., 0.]), True)
        """
        if not args and not kwargs:
            return self
        if len(args) > 1:
            raise TypeError(f"replace() takes at most one positional argument, got {len(args)}.")
        if args and not isinstance(args[0], (Mapping, TensorDictBase)):
            raise TypeError(
                f"replace() takes a dict or a tensordict, got {type(args[0]).__name__}."
            )
        source: dict[Any, Any] = {}
        if args:
            source.update(args[0].items() if isinstance(args[0], TensorDictBase) else args[0])
        source.update(kwargs)
        out = self.copy()
        out.update(source)
        return out


def _depth(td: Any) -> int:
    """The number of nested levels above the deepest leaf (``-1`` without any leaf):
    empty nested tensordicts do not count."""
    store = td._tensordict if isinstance(td, _kinds.Dense) else None
    if store is None:  # a lazy stack: from its leaf keys, without stacking any entry
        leaves = td.keys(True, True, is_leaf=_kinds.is_leaf_nontensor)
        return max((len(k) - 1 if type(k) is tuple else 0 for k in leaves), default=-1)
    deepest = -1
    for value in store.values():
        if not is_nested(value):
            deepest = max(deepest, 0)
        elif (sub := _depth(value)) >= 0:
            deepest = max(deepest, 1 + sub)
    return deepest


# ---------------------------------------------------------------------- functions
def merge_tensordicts(
    *tensordicts: TensorDictBase,
    callback_exist: Callable[..., Any] | Mapping[NestedKey, Any] | None = None,
) -> _kinds.Dense:
    """Merge tensordicts key by key into a new one.

    Nested tensordicts are merged recursively. A key present in only some of the inputs
    takes the first value found. A key present in *every* input is combined with
    ``callback_exist(*values)`` when given (a callable, or a dict of callables by key,
    nested dicts for nested keys); without a callback the first value wins. The result
    has the longest batch size shared by all inputs.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td0 = TensorDict({"a": {"b0": 0}, "common": 0})
    >>> td1 = TensorDict({"a": {"b1": 1}, "common": 1})
    >>> td2 = TensorDict({"common": 2})
    >>> td = merge_tensordicts(td0, td1, td2, callback_exist=lambda *v: torch.stack(v))
    >>> list(td.keys(True, True)), td["common"]
    ([('a', 'b0'), ('a', 'b1'), 'common'], tensor([0, 1, 2]))
    """
    if len(tensordicts) < 2:
        raise RuntimeError(
            f"merge_tensordicts needs at least 2 tensordicts, got {len(tensordicts)}."
        )
    for i, td in enumerate(tensordicts):
        if not isinstance(td, TensorDictBase):
            raise TypeError(
                f"merge_tensordicts: argument {i} is a {type(td).__name__}, not a tensordict."
            )
    return _merge(list(tensordicts), callback_exist, (), len(tensordicts))


def _common_batch_size(tds: Sequence[Any]) -> torch.Size:
    common = list(tds[0].batch_size)
    for td in tds[1:]:
        n = 0
        for a, b in zip(common, td.batch_size):
            if a != b:
                break
            n += 1
        common = common[:n]
    return torch.Size(common)


def _merge(tds: list[Any], callback: Any, prefix: tuple[str, ...], total: int) -> _kinds.Dense:
    """Merge ``tds`` (those of the ``total`` inputs that hold ``prefix``)."""
    batch_size = _common_batch_size(tds)
    device = tds[0].device if all(td.device == tds[0].device for td in tds) else None
    keys: dict[str, None] = {}
    for td in tds:
        keys.update(dict.fromkeys(td.keys()))
    out = _kinds.Dense._new_unsafe({}, batch_size, device)
    for key in keys:
        path = prefix + (key,)
        values = [v for v in (td._get_str(key, None) for td in tds) if v is not None]
        cb = callback.get(key) if isinstance(callback, Mapping) else callback
        nested = [is_nested(v) for v in values]
        if all(nested):
            merged: Any = _merge(values, cb, path, total) if len(values) > 1 else values[0].copy()
        elif any(nested):
            raise TypeError(
                f"merge_tensordicts: the entry {unravel_key(path)!r} is a tensordict in some "
                "inputs and not in others."
            )
        elif len(values) == total and callable(cb):
            raw = [unwrap_non_tensor(v) for v in values]
            merged = cb(*raw)
        else:
            merged = values[0]
        if is_nested(merged):
            if merged.batch_size[: len(batch_size)] != batch_size:
                merged = merged.clone(False)
                merged.batch_size = batch_size
        out._set_str(key, merged, inplace=False, validated=False)
    return out
