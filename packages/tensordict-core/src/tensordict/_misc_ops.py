"""Small methods of the dense ``TensorDict`` that fit no family, and a few functions.

Methods: entry inspection (``get_item_shape``, ``entry_class``, ``sorted_keys``,
``depth``), memory accounting (``data_ptr``, ``param_count``, ``bytes``), key-set
surgery (``separates``, ``split_keys``, ``create_nested``, ``replace``), indexed
in-place writes (``get_at``, ``set_at_``, ``update_at_``, ``copy_``, ``copy_at_``),
``record_stream`` and ``to_padded_tensor``. Functions: :func:`merge_tensordicts`,
:func:`dense_stack_tds` and :func:`is_tensorclass`.

Every method that writes checks everything first, so bad input leaves the tensordict
unchanged.

The methods also serve :class:`~tensordict.LazyStackedTensorDict`: they reach entries
through the primitives (``_get_tuple``, ``_set_tuple``, ``keys``, ``del_``), and where a
lazy stack must act on its members instead of on stacked copies (memory accounting,
moving entries, indexed writes) a cheap ``_tensordict`` check picks the dense path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict._consolidate import _lazy_members
from tensordict._errors import lock_error, missing_key
from tensordict._keys import NestedKey, unravel_key
from tensordict._nontensor import NonTensorData, is_non_tensor, write_non_tensor
from tensordict.base import NO_DEFAULT, TensorDictBase, _key_tuple, is_tensor_collection

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self

    from tensordict._td import TensorDict

_Tensor = torch.Tensor


def is_nested(value: Any) -> bool:
    """Whether ``value`` is a nested tensordict (not a tensor, not a non-tensor leaf)."""
    return is_tensor_collection(value) and not is_non_tensor(value)


def unwrap(value: Any) -> Any:
    """The Python value(s) of a non-tensor leaf (a list for a stack); others as they are."""
    if isinstance(value, NonTensorData):
        return value.data
    if is_non_tensor(value):
        return value.tolist()
    return value


def _leaf_items(td: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """``(key tuple, stored value)`` for every leaf, depth first (non-tensors wrapped).

    A lazy stack contributes its members' leaves (exclusive keys included), so the
    tensors are the stored ones, not stacked copies."""
    out: list[tuple[tuple[str, ...], Any]] = []
    store = getattr(td, "_tensordict", None)
    if store is None:
        members = _lazy_members(td)
        if members is not None:
            for member in members:
                out.extend(_leaf_items(member, prefix))
            return out
    items = store.items() if store is not None else td.items()
    for key, value in items:
        path = prefix + (key,)
        if is_nested(value):
            out.extend(_leaf_items(value, path))
        else:
            out.append((path, value))
    return out


def _lazy_parent(td: Any, path: tuple[str, ...]) -> Any:
    """The lazy stack holding the entry at ``path`` (a nested key) inside ``td``, if any."""
    if len(path) < 2:
        return None
    parent = td._get_tuple(path[:-1], None)
    return parent if _lazy_members(parent) is not None else None


def _has_entry(td: Any, path: tuple[str, ...]) -> bool:
    """Whether ``td`` holds an entry at ``path`` (in a lazy stack: every member does);
    nothing is stacked to find out."""
    return path in td.keys(include_nested=True)


def _move_entry(src: Any, dst: Any, path: tuple[str, ...], dst_path: tuple[str, ...]) -> None:
    """Write the entry of ``src`` at ``path`` into ``dst`` at ``dst_path``, unvalidated.

    Between lazy stacks of the same layout the members' own entries are moved (a lazy
    stack would otherwise hand over a stacked copy)."""
    members, targets = _lazy_members(src), _lazy_members(dst)
    if (
        members is not None
        and targets is not None
        and len(members) == len(targets)
        and src.stack_dim == dst.stack_dim
    ):
        for member, target in zip(members, targets):
            _move_entry(member, target, path, dst_path)
        return
    dst._set_tuple(dst_path, src._get_tuple(path, NO_DEFAULT), inplace=False, validated=False)


def _no_entries(td: Any) -> bool:
    """Whether ``td`` (every member of a lazy stack) holds no entry at all."""
    store = getattr(td, "_tensordict", None)
    if store is not None:
        return not store
    members = _lazy_members(td)
    if members is not None:
        return all(_no_entries(m) for m in members)
    return not any(True for _ in td.keys())


class MiscOps:
    """Mixin of :class:`~tensordict.TensorDict`: the methods of this module."""

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
        value = self._get_tuple(path, NO_DEFAULT)  # type: ignore[attr-defined]
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
        return type(self._get_tuple(path, NO_DEFAULT))  # type: ignore[attr-defined]

    @property
    def sorted_keys(self) -> list[str]:
        """The top-level keys in sorted order.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"b": torch.zeros(()), "a": torch.zeros(())}).sorted_keys
        ['a', 'b']
        """
        return sorted(self.keys())  # type: ignore[attr-defined]

    @property
    def depth(self) -> int:
        """How many levels of nested tensordicts there are (``0`` for a flat tensordict).

        >>> from tensordict import TensorDict
        >>> TensorDict({"a": {"b": {"c": 0}}, "d": 1}).depth
        2
        """
        return _depth(self)

    # ------------------------------------------------------------------ memory
    def data_ptr(self, *, storage: bool = False) -> TensorDict:
        """A tensordict of the same structure (batch size ``[]``) holding each tensor
        leaf's ``data_ptr()`` (``untyped_storage().data_ptr()`` with ``storage=True``).

        Non-tensor entries are left out. A lazy stack (at the root or nested) holds no
        tensor of its own: it gives one entry per member, ``"0"``, ``"1"``, ...

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> x = torch.zeros(4)
        >>> td = TensorDict({"a": x[:2], "b": {"c": x[2:]}}, [2])
        >>> ptrs = td.data_ptr(storage=True)
        >>> bool(ptrs["a"] == ptrs["b", "c"]), bool(td.data_ptr()["a"] == ptrs["a"])
        (True, True)
        >>> sorted(lazy_stack([td, td.clone()]).data_ptr().keys(True, True))
        [('0', 'a'), ('0', 'b', 'c'), ('1', 'a'), ('1', 'b', 'c')]
        """
        from tensordict._td import TensorDict

        def walk(td: Any) -> TensorDict:
            out: dict[str, Any] = {}
            store = getattr(td, "_tensordict", None)
            members = _lazy_members(td) if store is None else None
            if members is not None:
                out = {str(i): walk(m) for i, m in enumerate(members)}
                return TensorDict._new_unsafe(out, torch.Size([]))
            for key, value in store.items() if store is not None else td.items():
                if isinstance(value, _Tensor):
                    ptr = value.untyped_storage().data_ptr() if storage else value.data_ptr()
                    out[key] = torch.tensor(ptr, dtype=torch.int64)
                elif is_nested(value):
                    out[key] = walk(value)
            return TensorDict._new_unsafe(out, torch.Size([]))

        return walk(self)

    def param_count(self, *, count_duplicates: bool = True) -> int:
        """The number of elements in all tensor leaves.

        With ``count_duplicates=False`` a tensor stored under several keys is counted
        once (the same tensor object; different views of one storage count separately).
        A lazy stack counts its members' tensors (keys only some members hold included).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> x = torch.zeros(2, 3)
        >>> td = TensorDict({"a": x, "b": {"c": torch.zeros(2)}, "d": x}, [2])
        >>> td.param_count(), td.param_count(count_duplicates=False)
        (14, 8)
        """
        return sum(t.numel() for t in self._tensor_leaves(count_duplicates))

    def bytes(self, *, count_duplicates: bool = False) -> int:
        """The number of bytes of all tensor leaves (``numel() * element_size()``).

        With ``count_duplicates=False`` (the default) a tensor stored under several keys
        is counted once. A lazy stack counts its members' tensors (as :meth:`param_count`).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> x = torch.zeros(2, 3)
        >>> td = TensorDict({"a": x, "b": torch.zeros(2, dtype=torch.int8), "c": x}, [2])
        >>> td.bytes(), td.bytes(count_duplicates=True)
        (26, 50)
        """
        return sum(t.numel() * t.element_size() for t in self._tensor_leaves(count_duplicates))

    def _tensor_leaves(self, count_duplicates: bool) -> list[_Tensor]:
        leaves = [v for _, v in _leaf_items(self) if isinstance(v, _Tensor)]
        if count_duplicates:
            return leaves
        seen: set[int] = set()
        unique = []
        for t in leaves:
            if id(t) not in seen:
                seen.add(id(t))
                unique.append(t)
        return unique

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
        out = self.empty()  # type: ignore[attr-defined]
        found: list[tuple[str, ...]] = []
        for key in keys:
            path = _key_tuple(key)
            if not _has_entry(self, path):
                if default is not NO_DEFAULT:
                    if default is not None:
                        out.set(path, default)
                    continue
                if strict:
                    raise KeyError(
                        f"separates: key {unravel_key(path)!r} is not in the tensordict (pass "
                        f"strict=False or a default); nothing was moved. Keys: "
                        f"{sorted(map(str, self.keys(True)))}."  # type: ignore[attr-defined]
                    )
                continue
            _move_entry(self, out, path, path)
            found.append(path)
        if found and self._is_locked:  # type: ignore[attr-defined]
            raise lock_error(unravel_key(found[0]), "remove")
        for path in found:
            self._pop_path(path, filter_empty)
        return out  # type: ignore[no-any-return]

    def _pop_path(self, path: tuple[str, ...], filter_empty: bool) -> None:
        self.del_(path)  # type: ignore[attr-defined]
        if filter_empty:
            for depth in range(len(path) - 1, 0, -1):
                if not _no_entries(self._get_tuple(path[:depth], NO_DEFAULT)):  # type: ignore[attr-defined]
                    break
                self.del_(path[:depth])  # type: ignore[attr-defined]

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
            out = self.empty(recurse=reproduce_struct)  # type: ignore[attr-defined]
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
                    if self._get_tuple(path, NO_DEFAULT).data is None:  # type: ignore[attr-defined]
                        taken.append(path)
                        continue
                _move_entry(self, out, path, _key_tuple(out_key))
                taken.append(path)
            outs.append(out)
        if inplace and self._is_locked and taken:  # type: ignore[attr-defined]
            raise lock_error(unravel_key(taken[0]), "remove")
        rest = self.exclude(*taken, inplace=inplace)  # type: ignore[attr-defined]
        return (*outs, rest)

    def create_nested(self, key: NestedKey) -> Self:
        """Write an empty tensordict at ``key`` with its parent's batch size, device and
        names (overwriting any entry there).

        >>> from tensordict import TensorDict
        >>> td = TensorDict(batch_size=[3], names=["t"]).create_nested(("a", "b"))
        >>> td["a", "b"].batch_size, td["a", "b"].names
        (torch.Size([3]), ['t'])
        """
        from tensordict._td import TensorDict

        path = _key_tuple(key)
        parent = self
        if len(path) > 1:
            found = self._get_tuple(path[:-1], None)  # type: ignore[attr-defined]
            if found is not None:
                if not is_nested(found):
                    raise KeyError(
                        f"create_nested: the entry at {unravel_key(path[:-1])!r} is a "
                        f"{type(found).__name__}, not a tensordict."
                    )
                parent = found
        new = TensorDict._new_unsafe(
            {},
            parent.batch_size,  # type: ignore[attr-defined]
            parent.device,  # type: ignore[attr-defined]
            list(parent.names) if any(n is not None for n in parent.names) else None,  # type: ignore[attr-defined]
        )
        if parent is not self:
            parent.set(path[-1], new)  # type: ignore[attr-defined]
        else:
            self.set(path, new)  # type: ignore[attr-defined]
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
        out = self.copy()  # type: ignore[attr-defined]
        out.update(source)
        return out  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ indexed writes
    def get_at(self, key: NestedKey, index: Any, default: Any = NO_DEFAULT) -> Any:
        """``td.get(key)[index]``: the entry at ``key``, indexed (batch dims first).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.arange(6).reshape(2, 3)}, [2])
        >>> td.get_at("a", (1, 0)), td.get_at("missing", 0, None)
        (tensor(3), None)
        """
        value = self._get_tuple(_key_tuple(key), None)  # type: ignore[attr-defined]
        if value is None:
            if default is NO_DEFAULT:
                raise missing_key(unravel_key(_key_tuple(key)), self)  # type: ignore[arg-type]
            return default
        if isinstance(value, NonTensorData):
            return value.data
        return unwrap(value[index])

    def set_at_(
        self, key: NestedKey, value: Any, index: Any, *, non_blocking: bool = False
    ) -> Self:
        """Write ``value`` in place into the existing entry at ``key``, at ``index``.

        Non-tensor entries take the value at the indexed elements (becoming a
        :class:`~tensordict.NonTensorStack` when the values then differ). On a lazy
        stack the write goes to the members.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2, 3), "s": "x"}, [2])
        >>> td.set_at_("a", torch.ones(3), 1)["a"]
        tensor([[0., 0., 0.],
                [1., 1., 1.]])
        >>> td.set_at_("s", "y", 0)["s"]
        ['y', 'x']
        """
        plan: list[Callable[[], None]] = []
        _plan_leaf(self, _key_tuple(key), value, index, plan, non_blocking, "set_at_")
        for write in plan:
            write()
        return self

    def update_at_(
        self,
        input_dict_or_td: Mapping[Any, Any] | TensorDictBase,
        index: Any,
        clone: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Sequence[NestedKey] | None = None,
    ) -> Self:
        """Write every leaf of ``input_dict_or_td`` in place at ``index`` of the entry
        with the same key. All keys must exist; all values are checked before writing.

        Non-tensor leaves are written as in :meth:`set_at_`; on a lazy stack the writes
        go to the members.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(3), "b": {"c": torch.zeros(3, 2)}}, [3])
        >>> _ = td.update_at_({"a": torch.tensor(1.0), "b": {"c": torch.ones(2)}}, 1)
        >>> td["a"], td["b", "c"][:, 0]
        (tensor([0., 1., 0.]), tensor([0., 1., 0.]))
        """
        wanted = None if keys_to_update is None else {_key_tuple(k) for k in keys_to_update}
        plan: list[Callable[[], None]] = []
        for path, value in _source_leaves(input_dict_or_td):
            if wanted is not None and path not in wanted:
                continue
            if clone and isinstance(value, _Tensor):
                value = value.clone()
            _plan_leaf(self, path, value, index, plan, non_blocking, "update_at_")
        for write in plan:
            write()
        return self

    def _plan_at(
        self,
        key: str,
        path: tuple[str, ...],
        value: Any,
        index: Any,
        plan: list[Callable[[], None]],
        non_blocking: bool,
    ) -> None:
        """Check writing ``value`` at ``index`` of the entry ``key`` (``path`` from the
        root, for messages) and append the write to ``plan``."""
        store: dict[str, Any] = self._tensordict  # type: ignore[attr-defined]
        target = store.get(key)
        if target is None:
            raise KeyError(
                f"cannot write in place at {unravel_key(path)!r}: the key is not in the "
                f"tensordict (keys there: {sorted(store)})."
            )
        if is_non_tensor(target):
            batch_size = self.batch_size  # type: ignore[attr-defined]
            _check_non_tensor_at(path, target, value, index, batch_size)

            def write_leaf() -> None:
                store[key] = write_non_tensor(store[key], index, value, batch_size)

            plan.append(write_leaf)
            return
        _check_at(path, target, value, index)
        plan.append(lambda: _write_at(target, value, index, non_blocking))

    def copy_(self, tensor: Mapping[Any, Any] | TensorDictBase, non_blocking: bool = False) -> Self:
        """Copy ``tensor`` (a tensordict or dict) into the matching entries, in place.

        Same as :meth:`update_`; every key of ``tensor`` must exist here.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2)}, [2])
        >>> td.copy_(TensorDict({"a": torch.ones(2)}, [2]))["a"]
        tensor([1., 1.])
        """
        return self.update_(tensor, non_blocking=non_blocking)  # type: ignore[attr-defined,no-any-return]

    def copy_at_(
        self, tensordict: Mapping[Any, Any] | TensorDictBase, idx: Any, non_blocking: bool = False
    ) -> Self:
        """Copy ``tensordict`` in place at index ``idx`` (same as :meth:`update_at_`).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(3)}, [3])
        >>> td.copy_at_(TensorDict({"a": torch.ones(2)}, [2]), slice(1, None))["a"]
        tensor([0., 1., 1.])
        """
        return self.update_at_(tensordict, idx, non_blocking=non_blocking)

    # ------------------------------------------------------------------ devices
    def record_stream(self, stream: torch.cuda.Stream) -> Self:
        """Mark every tensor leaf as used by the CUDA ``stream`` (see
        :meth:`torch.Tensor.record_stream`). Every leaf must be on a CUDA device.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2)}, [2])
        >>> try:
        ...     td.record_stream(None)
        ... except RuntimeError as err:
        ...     print(str(err)[:43])
        record_stream needs CUDA tensors, but 'a' i
        """
        leaves = [(p, v) for p, v in _leaf_items(self) if isinstance(v, _Tensor)]
        for path, leaf in leaves:
            if not leaf.is_cuda:
                raise RuntimeError(
                    f"record_stream needs CUDA tensors, but {unravel_key(path)!r} is on "
                    f"{leaf.device}; streams only exist for CUDA devices."
                )
        for _, leaf in leaves:
            leaf.record_stream(stream)
        return self

    def to_padded_tensor(self, padding: float = 0.0, mask_key: NestedKey | None = None) -> Self:
        """Replace every nested (jagged) tensor leaf by its padded version.

        With ``mask_key``, a boolean mask of the valid positions (shape: the padded
        shape up to the ragged dimension) is written there; every nested leaf must then
        have the same ragged lengths.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> nt = torch.nested.nested_tensor([torch.ones(1, 2), torch.ones(3, 2)], layout=torch.jagged)
        >>> out = TensorDict({"x": nt}, [2]).to_padded_tensor(mask_key="mask")
        >>> out["x"].shape, out["mask"].tolist()
        (torch.Size([2, 3, 2]), [[True, False, False], [True, True, True]])
        """
        mask = None
        mask_from = None
        nested = [(p, v) for p, v in _leaf_items(self) if isinstance(v, _Tensor) and v.is_nested]
        if mask_key is not None:
            for path, value in nested:
                m = _valid_mask(value)
                if mask is None:
                    mask, mask_from = m, path
                elif m.shape != mask.shape or not torch.equal(m, mask):
                    raise ValueError(
                        f"to_padded_tensor(mask_key=...): the nested entries {unravel_key(mask_from)!r} "  # type: ignore[arg-type]
                        f"and {unravel_key(path)!r} have different ragged lengths; one mask cannot "
                        "describe both."
                    )
        ids = {id(v) for _, v in nested}
        out = self._map_tensors(  # type: ignore[attr-defined]
            lambda t: torch.nested.to_padded_tensor(t, padding) if id(t) in ids else t
        )
        if mask is not None:
            out.set(mask_key, mask)
        return out  # type: ignore[no-any-return]

    def pad(self, pad_size: Sequence[int], value: float = 0.0) -> TensorDict:
        """Pad the batch dimensions (see :func:`tensordict.pad`).

        The result is a dense :class:`~tensordict.TensorDict`, also for a lazy stack
        (padded like its dense form, :meth:`to_tensordict`).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> TensorDict({"a": torch.ones(2)}, [2]).pad([1, 0])["a"]
        tensor([0., 1., 1.])
        >>> lazy = lazy_stack([TensorDict({"a": torch.ones(2)}, [2])] * 2)
        >>> lazy.pad([0, 1, 1, 0])["a"]
        tensor([[0., 1., 1.],
                [0., 1., 1.],
                [0., 0., 0.]])
        """
        from tensordict._pad import pad

        src = self if hasattr(self, "_tensordict") else self.to_tensordict()  # type: ignore[attr-defined]
        return pad(src, pad_size, value)  # type: ignore[arg-type]


def _depth(td: Any) -> int:
    store = getattr(td, "_tensordict", None)
    if store is None:  # a lazy stack: from its keys, without stacking any entry
        nested = set(td.keys(True)) - set(td.keys(True, True))
        return max((len(k) if type(k) is tuple else 1 for k in nested), default=0)
    deepest = 0
    for value in store.values():
        if is_nested(value):
            deepest = max(deepest, 1 + _depth(value))
    return deepest


def _valid_mask(nt: _Tensor) -> _Tensor:
    """For a jagged tensor: ``True`` where the padded tensor holds data (up to the
    ragged dimension)."""
    ragged = next(i for i, s in enumerate(nt.shape) if not isinstance(s, int))
    ones = torch.ones_like(nt, dtype=torch.uint8)
    full = torch.nested.to_padded_tensor(ones, 0).bool()
    while full.ndim > ragged + 1:
        full = full.any(-1)
    return full  # type: ignore[no-any-return]


def _source_leaves(source: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """``(key tuple, value)`` for every leaf of a dict or tensordict (non-tensor values
    unwrapped). A lazy stack gives its stacked entries."""
    out = []
    if isinstance(source, TensorDictBase):
        store = getattr(source, "_tensordict", None)
        items: Any = (
            store.items()
            if store is not None
            else ((k, source._get_tuple((k,), NO_DEFAULT)) for k in source.keys())
        )
        for key, value in items:
            path = prefix + (key,)
            if is_nested(value):
                out.extend(_source_leaves(value, path))
            else:
                out.append((path, value.data if isinstance(value, NonTensorData) else value))
        return out
    for key, value in source.items():
        path = prefix + _key_tuple(key)
        if isinstance(value, (Mapping, TensorDictBase)):
            out.extend(_source_leaves(value, path))
        else:
            out.append((path, value))
    return out


def _plan_leaf(
    td: Any,
    path: tuple[str, ...],
    value: Any,
    index: Any,
    plan: list[Callable[[], None]],
    non_blocking: bool,
    op: str,
) -> None:
    """Check an indexed in-place write of the leaf of ``td`` at ``path`` and append it to
    ``plan``; the tensordict holding the leaf plans it (see :func:`_plan_in`)."""
    parent = td if len(path) == 1 else td._get_tuple(path[:-1], None)
    if not isinstance(parent, TensorDictBase):
        raise KeyError(
            f"{op} writes in place, but key {unravel_key(path)!r} is not in the tensordict "
            f"(keys: {sorted(map(str, td.keys(True, True)))})."
        )
    try:
        _plan_in(parent, path[-1], path, value, index, plan, non_blocking)
    except KeyError as err:
        raise KeyError(f"{op}: {err.args[0] if err.args else err}") from None


def _plan_in(
    parent: Any,
    key: str,
    path: tuple[str, ...],
    value: Any,
    index: Any,
    plan: list[Callable[[], None]],
    non_blocking: bool,
) -> None:
    """Plan the write into the entry ``key`` of ``parent``: a dense tensordict or a lazy
    stack plans it itself (``_plan_at``); other types give the entry to write into."""
    planner = getattr(parent, "_plan_at", None)
    if planner is not None:
        planner(key, path, value, index, plan, non_blocking)
        return
    target = parent._get_str(key, NO_DEFAULT)
    _check_at(path, target, value, index)
    plan.append(lambda: _write_at(target, value, index, non_blocking))


def _check_non_tensor_at(
    path: tuple[str, ...], target: Any, value: Any, index: Any, batch_size: torch.Size
) -> None:
    """Refuse (before anything is written) a write of ``value`` at ``index`` of the
    non-tensor leaf ``target``: it is tried on a copy."""
    try:
        write_non_tensor(target.clone(), index, value, batch_size)
    except (IndexError, RuntimeError, TypeError, ValueError) as err:
        raise IndexError(
            f"cannot write {value!r} at index {index!r} of the non-tensor entry "
            f"{unravel_key(path)!r} (batch size {tuple(target.batch_size)}): {err}"
        ) from None


def _check_at(path: tuple[str, ...], target: Any, value: Any, index: Any) -> None:
    if is_non_tensor(target):
        raise TypeError(
            f"cannot write at an index of the non-tensor entry {unravel_key(path)!r} in place."
        )
    if isinstance(target, TensorDictBase):
        return  # the tensordict's own indexed write checks (and writes) atomically
    try:
        selected = target[index].shape
    except (IndexError, RuntimeError, TypeError) as err:
        raise IndexError(
            f"cannot index entry {unravel_key(path)!r} (shape {tuple(target.shape)}) by "
            f"{index!r}: {err}"
        ) from None
    shape = value.shape if isinstance(value, _Tensor) else torch.as_tensor(value).shape
    try:
        ok = torch.broadcast_shapes(shape, selected) == selected  # type: ignore[no-untyped-call]
    except RuntimeError:
        ok = False
    if not ok:
        raise RuntimeError(
            f"cannot write a value of shape {tuple(shape)} into entry {unravel_key(path)!r} at "
            f"index {index!r}, which selects shape {tuple(selected)}."
        )


def _write_at(target: Any, value: Any, index: Any, non_blocking: bool) -> None:
    if isinstance(value, _Tensor) and isinstance(target, _Tensor) and value.device != target.device:
        value = value.to(target.device, non_blocking=non_blocking)
    target[index] = value


# ---------------------------------------------------------------------- functions
def merge_tensordicts(
    *tensordicts: TensorDictBase,
    callback_exist: Callable[..., Any] | Mapping[NestedKey, Any] | None = None,
) -> TensorDict:
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
    return _merge(list(tensordicts), callback_exist, ())


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


def _merge(tds: list[Any], callback: Any, prefix: tuple[str, ...]) -> TensorDict:
    from tensordict._td import TensorDict

    batch_size = _common_batch_size(tds)
    device = tds[0].device if all(td.device == tds[0].device for td in tds) else None
    keys: dict[str, None] = {}
    for td in tds:
        keys.update(dict.fromkeys(td.keys()))
    out = TensorDict._new_unsafe({}, batch_size, device)
    for key in keys:
        path = prefix + (key,)
        values = [v for v in (td._get_str(key, None) for td in tds) if v is not None]
        cb = callback.get(key) if isinstance(callback, Mapping) else callback
        nested = [is_nested(v) for v in values]
        if all(nested):
            merged: Any = _merge(values, cb, path) if len(values) > 1 else values[0].copy()
        elif any(nested):
            raise TypeError(
                f"merge_tensordicts: the entry {unravel_key(path)!r} is a tensordict in some "
                "inputs and not in others."
            )
        elif len(values) == len(tds) and callable(cb):
            raw = [unwrap(v) for v in values]
            merged = cb(*raw)
        else:
            merged = values[0]
        if is_nested(merged):
            if merged.batch_size[: len(batch_size)] != batch_size:
                merged = merged.clone(False)
                merged.batch_size = batch_size
        out._set_str(key, merged, inplace=False, validated=False)
    return out


def dense_stack_tds(
    td_list: Sequence[TensorDictBase] | TensorDictBase, dim: int | None = None
) -> TensorDict:
    """Stack tensordicts of identical structure into one dense tensordict.

    Unlike ``torch.stack`` (which may return a lazy stack), the result is dense at the
    top level; nested lazy stacks stay lazy. ``td_list`` may be a lazy stack (its
    members and stack dimension are used) or a sequence of tensordicts with ``dim``.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> tds = [TensorDict({"a": torch.full((2,), float(i))}, [2]) for i in range(3)]
    >>> out = dense_stack_tds(tds, dim=1)
    >>> out.batch_size, out["a"][0]
    (torch.Size([2, 3]), tensor([0., 1., 2.]))
    """
    members = getattr(td_list, "tensordicts", None)
    if members is not None and isinstance(td_list, TensorDictBase):
        if dim is None:
            dim = td_list.stack_dim  # type: ignore[attr-defined]
        td_list = list(members)
    elif dim is None:
        raise ValueError("dense_stack_tds: pass dim= when stacking a list of tensordicts.")
    tds: list[Any] = list(td_list)
    if not tds:
        raise ValueError("dense_stack_tds needs at least one tensordict.")
    first = tds[0]
    shape = list(first.batch_size)
    ndim = len(shape) + 1
    if not -ndim <= dim < ndim:
        raise IndexError(
            f"dense_stack_tds: dim {dim} is out of range for stacking tensordicts of batch size "
            f"{tuple(first.batch_size)} (expected -{ndim} <= dim < {ndim})."
        )
    dim = dim % ndim
    for i, td in enumerate(tds[1:], 1):
        if td.batch_size != first.batch_size:
            raise RuntimeError(
                f"dense_stack_tds: tensordict {i} has batch size {tuple(td.batch_size)}, "
                f"tensordict 0 has {tuple(first.batch_size)}."
            )
    shape.insert(dim, len(tds))
    out = first.unsqueeze(dim).expand(shape).clone()
    for i, td in enumerate(tds):
        out[(slice(None),) * dim + (i,)] = td
    return out  # type: ignore[no-any-return]


def is_tensorclass(obj: Any) -> bool:
    """Whether ``obj`` is a tensorclass (a class made by ``@tensorclass``) or an instance.

    Reads the ``_is_tensorclass`` marker, so it works without importing the
    ``tensorclass`` distribution.

    >>> from tensordict import TensorDict
    >>> is_tensorclass(TensorDict()), is_tensorclass(type("T", (), {"_is_tensorclass": True}))
    (False, True)
    """
    cls = obj if isinstance(obj, type) else type(obj)
    return getattr(cls, "_is_tensorclass", False) is True
