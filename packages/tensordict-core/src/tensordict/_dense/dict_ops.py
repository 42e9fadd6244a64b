"""Dict-style operations of the dense ``TensorDict``: update, select, rename, flatten keys…

Every operation that can fail validates everything first and writes afterwards, so bad
input leaves the tensordict unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict._keys.nested import NestedKey, unravel_key
from tensordict._keys.shape import leads_with, parse_batch_size, parse_device
from tensordict._kinds import kinds as _kinds
from tensordict._kinds.writes import write_inplace
from tensordict._leaves.collection import data_of
from tensordict._leaves.nontensor import NON_TENSOR, NonTensorData, NonTensorStack
from tensordict._util.errors import KeyThroughLeafError, lock_error, missing_key
from tensordict.base import NO_DEFAULT, TensorDictBase, _key_tuple

if TYPE_CHECKING:  # pragma: no cover
    from tensordict._dense.td import TensorDict

_Tensor = torch.Tensor
_MISSING: Any = object()


def with_entries(source: Any, kwargs: dict[str, Any]) -> Any:
    """The source of ``update(source, **kwargs)``: the keyword entries on top of it."""
    if not kwargs:
        return {} if source is None else source  # no entries: nothing to write
    if source is None:
        return kwargs
    return {**{k: source[k] for k in source.keys()}, **kwargs}


class DictOps:
    """Mixin: dict-style operations of :class:`~tensordict.TensorDict`.

    Only dense tensordicts inherit it (``isinstance(x, _kinds.Dense)`` tells them apart).
    """

    def update(
        self,
        input_dict_or_td: Any = None,
        clone: bool = False,
        inplace: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Sequence[NestedKey] | None = None,
        is_leaf: Callable | None = None,
        update_batch_size: bool = False,
        ignore_lock: bool = False,
        **kwargs: Any,
    ) -> TensorDict:
        """Write every entry of a dict or tensordict into this one; nested ones merge.

        All values are validated before anything is written, so a bad value leaves the
        tensordict unchanged.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": {"b": torch.zeros(2)}}, [2])
        >>> _ = td.update({"a": {"c": torch.ones(2)}, "d": torch.ones(2)})
        >>> list(td.keys(True, True, sort=True))
        [('a', 'b'), ('a', 'c'), 'd']
        """
        if kwargs or input_dict_or_td is None:
            input_dict_or_td = with_entries(input_dict_or_td, kwargs)
        elif input_dict_or_td is self:  # nothing to write (as in the reference library)
            return self
        if update_batch_size and isinstance(input_dict_or_td, TensorDictBase):
            return self._update_batch_size(
                input_dict_or_td, clone, inplace, non_blocking, keys_to_update, ignore_lock
            )
        wanted = None if keys_to_update is None else {_key_tuple(k) for k in keys_to_update}
        plan: list[Any] = []
        self._plan_update(input_dict_or_td, clone, wanted, (), plan, ignore_lock, not inplace)
        if not inplace:
            if not ignore_lock:  # a locked tensordict only takes in-place writes
                for target, key, _ in plan:
                    if target._is_locked:
                        raise lock_error(key, "replace")
            for target, key, value in plan:
                target._tensordict[key] = value
            return self
        for target, key, value in plan:
            if key in target._tensordict:
                write_inplace(key, target._tensordict[key], value, non_blocking)
            else:
                target._tensordict[key] = value
        return self

    def _plan_update(
        self,
        source: Any,
        clone: bool,
        wanted: set | None,
        prefix: tuple,
        plan: list,
        ignore_lock: bool,
        restack: bool = True,
    ) -> None:
        """Collect (and check) the writes of ``update(source)`` into ``plan``. With
        ``restack`` (not in place), a dense entry that a lazy stack updates becomes a lazy
        stack of its slices along the source's stack dimension, updated member by member."""
        store = self._tensordict
        bs = self._batch_size
        nb = len(bs)
        dev = self._device
        refuse_new = self._is_locked and not ignore_lock
        if isinstance(source, TensorDictBase):
            sbs = source.batch_size
            same = sbs == bs  # the usual case: no slices to compare
            if not same:
                n = min(nb, len(sbs))
                if sbs[:n] != bs[:n]:
                    where = f" at {unravel_key(prefix)!r}" if prefix else ""
                    raise RuntimeError(
                        f"update(){where}: the source has batch_size={tuple(sbs)}, which does "
                        f"not agree with the destination's batch_size={tuple(bs)}. Pass "
                        "update_batch_size=True to give the destination the source's batch "
                        "size."
                    )
        if isinstance(source, _kinds.Dense):
            items: Any = source._tensordict.items()
            # the leaves of a dense source of this batch size (and device) are valid here
            trusted = (same or sbs[:nb] == bs) and (dev is None or source._device == dev)
        else:
            items = source.items()
            trusted = False
        for key, value in items:
            if type(key) is str and wanted is None:
                if type(value) is _Tensor and not clone:  # the hot path, inlined
                    if not trusted:
                        if dev is not None and value.device != dev:
                            value = value.to(dev)
                        if not leads_with(value.shape, bs):
                            raise self._shape_error(prefix + (key,) if prefix else key, value)
                    if refuse_new and key not in store:
                        raise lock_error(unravel_key(prefix + (key,)))
                    plan.append((self, key, value))
                    continue
                target, last = self, key
            else:
                path = prefix + _key_tuple(key)
                if wanted is not None and not any(
                    w[: len(path)] == path or path[: len(w)] == w for w in wanted
                ):
                    continue
                target = self
                nested_in_other = None
                for i, part in enumerate(path[len(prefix) : -1], len(prefix)):
                    sub = target._tensordict.get(part)
                    if sub is None:
                        sub = self._new_unsafe(
                            {}, target._batch_size, target._device, target._names
                        )
                        plan.append((target, part, sub))
                        target._validate_value(part, sub)
                    elif not isinstance(data_of(sub), TensorDictBase):
                        raise KeyThroughLeafError(
                            f"update(): cannot write {unravel_key(path)!r}: the entry "
                            f"{unravel_key(path[: i + 1])!r} is a {type(sub).__name__}, not a "
                            "tensordict."
                        )
                    elif not isinstance(data_of(sub), _kinds.Dense):  # a lazy stack…
                        nested_in_other = (part, sub, path[i + 1 :])
                        break
                    target = data_of(sub)
                if nested_in_other is not None:  # it updates a copy of itself, swapped in
                    part, sub, rest = nested_in_other
                    new_sub = sub.copy()
                    new_sub.update({rest: value}, clone)
                    plan.append((target, part, new_sub))
                    continue
                last = path[-1]
            current = data_of(target._tensordict.get(last))  # a tensorclass: its data
            if (
                not isinstance(value, _Tensor)
                and isinstance(value, (dict, TensorDictBase))
                and type(value) is not NonTensorData
                and isinstance(current, _kinds.Dense)
            ):
                if restack and isinstance(value, _kinds.Lazy):
                    value = _restacked(current, value, wanted, prefix + (key,))
                else:
                    current._plan_update(
                        value, clone, wanted, prefix + (key,), plan, ignore_lock, restack
                    )
                    continue
            elif (
                isinstance(current, _kinds.Lazy)
                and isinstance(value, (dict, TensorDictBase))
                and not isinstance(value, NON_TENSOR)
                and wanted is None
            ):  # nested entries merge into a lazy stack too: it updates a copy, swapped in
                merged = current.copy()
                merged.update(value, clone)
                plan.append((target, last, merged))
                continue
            if clone and isinstance(value, (_Tensor, TensorDictBase)):
                value = value.clone()
            if target._is_locked and not ignore_lock and current is None:
                raise lock_error(unravel_key(prefix + _key_tuple(key)))
            plan.append((target, last, target._validate_value(key, value, prefix=prefix)))

    def _update_batch_size(
        self,
        source: TensorDictBase,
        clone: bool,
        inplace: bool,
        non_blocking: bool,
        keys_to_update: Sequence[NestedKey] | None,
        ignore_lock: bool,
    ) -> TensorDict:
        """``update(source, update_batch_size=True)``: every (nested) tensordict that
        ``source`` writes into takes the source's batch size (lazy stacks and tensorclasses
        included), keeping its identity. The writes are tried on a structural copy first,
        so that a failure leaves this tensordict unchanged."""
        if keys_to_update is not None:
            raise RuntimeError(
                "update(update_batch_size=True) cannot be combined with keys_to_update: the "
                "batch size of a tensordict is shared by all of its entries."
            )
        changes = _batch_size_changes(self, source, ())
        if changes and inplace:
            raise RuntimeError(
                f"update(update_batch_size=True, inplace=True): the batch size changes at "
                f"{[unravel_key(p) if p else '<root>' for p, _ in changes]}, which cannot be done "
                "in place (the entries get new shapes); pass inplace=False."
            )
        for path, node in changes:
            if node._is_locked and not ignore_lock:
                raise RuntimeError(
                    f"update(update_batch_size=True): the tensordict at "
                    f"{unravel_key(path) if path else '<root>'!r} is locked, so its batch size "
                    "cannot change; unlock it first (td.unlock_())."
                )
        _resize_update(self._shallow_copy(), source, clone, ignore_lock, ())  # dry run
        _resize_update(self, source, clone, ignore_lock, ())
        return self

    def update_(
        self,
        input_dict_or_td: Any = None,
        clone: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Sequence[NestedKey] | None = None,
        **kwargs: Any,
    ) -> TensorDict:
        """Copy every entry of ``input_dict_or_td`` in place into existing entries.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> a = torch.zeros(2)
        >>> _ = TensorDict({"a": a}, [2]).update_({"a": torch.ones(2)})
        >>> a
        tensor([1., 1.])
        """
        input_dict_or_td = with_entries(input_dict_or_td, kwargs)
        source = input_dict_or_td
        if source is self:  # every entry already holds itself
            return self
        wanted = None if keys_to_update is None else {_key_tuple(k) for k in keys_to_update}
        pairs: list[tuple[tuple, Any, Any]] = []
        plan_update_(self, source, wanted, (), pairs)
        commit_in_place(pairs, clone, non_blocking)
        return self

    def select(
        self,
        *keys: NestedKey,
        inplace: bool = False,
        strict: bool = True,
        as_tensordict: bool = False,
    ) -> TensorDict:
        """A tensordict with only ``keys`` (entries are shared, not copied).

        ``as_tensordict`` matters for tensorclasses only (a tensordict is returned).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(()), "b": {"c": torch.zeros(()), "d": torch.zeros(())}})
        >>> list(td.select("a", ("b", "c")).keys(True))
        ['a', 'b', ('b', 'c')]
        """
        if len(keys) == 1 and type(keys[0]) is list:
            keys = tuple(keys[0])
        chosen = _select_simple(self, keys, strict)
        if chosen is None:  # a key _select_simple does not walk: the general walk
            out = self._select_paths(keys, strict)
        else:
            out = self._new_unsafe(chosen, self._batch_size, self._device, self._names)
        if inplace:
            if self._is_locked:
                raise lock_error(keys, "remove keys other than")
            self._tensordict = out._tensordict
            return self
        return out

    def _select_paths(self, keys: Sequence[NestedKey], strict: bool) -> TensorDict:
        """``select`` for nested keys: copy the containers along each path, share leaves."""
        out = self._new_unsafe({}, self._batch_size, self._device, self._names)
        store, out_store = self._tensordict, out._tensordict
        for key in keys:
            if type(key) is str and key in store:
                out_store[key] = store[key]
                continue
            path = _key_tuple(key)
            last = len(path) - 1
            src, dst = self, out
            for i, part in enumerate(path):
                value = src._tensordict.get(part)
                nested = isinstance(value, TensorDictBase) and not isinstance(value, _kinds.Dense)
                if nested and i < last:  # a lazy stack selects the rest itself
                    rest = unravel_key(path[i + 1 :])
                    sub = dst._tensordict.get(part)
                    kept = (
                        []
                        if sub is None or sub is value
                        else list(sub.keys(True, True, is_leaf=_kinds.is_leaf_nontensor))
                    )
                    if sub is not value:
                        dst._tensordict[part] = value.select(*kept, rest, strict=strict)
                    break
                if value is None or (i < last and not isinstance(value, _kinds.Dense)):
                    if not strict:
                        break
                    if value is None:
                        raise missing_key(unravel_key(path[: i + 1]), self)
                    raise KeyError(
                        f"cannot select {unravel_key(path)!r}: the entry at "
                        f"{unravel_key(path[: i + 1])!r} is a {type(value).__name__}, "
                        "not a tensordict."
                    )
                if i == last:
                    dst._tensordict[part] = value
                    break
                sub = dst._tensordict.get(part)
                if sub is value:  # the whole nested tensordict is already selected
                    break
                if sub is None:
                    sub = dst._tensordict[part] = value._new_unsafe(
                        {}, value._batch_size, value._device, value._names
                    )
                src, dst = value, sub
        return out

    def exclude(self, *keys: NestedKey, inplace: bool = False) -> TensorDict:
        """A tensordict without ``keys`` (missing keys are ignored). Entries are shared,
        the non-tensor ones too, as for :meth:`select`; so are the nested tensordicts no
        excluded key reaches into (as the reference does): only the containers on the way
        to an excluded key are new.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(()), "b": {"c": torch.zeros(())}, "d": {}})
        >>> out = td.exclude(("b", "c"))
        >>> list(out.keys(True)), out["d"] is td["d"], out["b"] is td["b"]
        (['a', 'b', 'd'], True, False)
        """
        if len(keys) == 1 and type(keys[0]) is list:
            keys = tuple(keys[0])
        if inplace:
            if self._is_locked:
                raise lock_error(keys, "delete")
            out = self
        else:
            out = _level_copy(self)
        dense = _kinds.Dense
        for key in keys:
            if type(key) is str:
                out._tensordict.pop(key, None)
                continue
            path = _key_tuple(key)
            src, dst = self, out  # the input's level and the result's, walked together
            for i, part in enumerate(path[:-1]):
                child = dst._tensordict.get(part)
                if type(child) is dense or isinstance(child, dense):
                    orig = None if src is None else src._tensordict.get(part)
                    if child is orig and not inplace:  # still the input's: copy it
                        child = dst._tensordict[part] = _level_copy(child)
                    src, dst = orig, child
                    continue
                if isinstance(child, TensorDictBase):  # a lazy stack excludes the rest itself
                    rest = unravel_key(path[i + 1 :])
                    if inplace:
                        child.exclude(rest, inplace=True)
                    else:
                        dst._tensordict[part] = child.exclude(rest)
                break  # missing, or a leaf: nothing to exclude below it
            else:
                dst._tensordict.pop(path[-1], None)
        return out

    def rename_key_(self, old_key: NestedKey, new_key: NestedKey, safe: bool = False) -> TensorDict:
        """Move the entry at ``old_key`` to ``new_key``; ``safe=True`` refuses to overwrite.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> list(TensorDict({"a": torch.zeros(())}).rename_key_("a", ("b", "c")).keys(True))
        ['b', ('b', 'c')]
        """
        old, new = _key_tuple(old_key), _key_tuple(new_key)
        if self._is_locked:
            raise lock_error(unravel_key(old), "rename")
        value = self._get_tuple(old, NO_DEFAULT)
        if safe and self._get_tuple(new, None) is not None:
            raise KeyError(
                f"rename_key_(safe=True): key {unravel_key(new)!r} is already present in "
                f"{type(self).__name__}; pass safe=False to overwrite it."
            )
        if old == new:
            return self
        if new[: len(old)] == old:  # moved inside itself: take it out first
            self.del_(old)
        self._set_tuple(new, value, inplace=False, validated=True)
        if old[: len(new)] != new and new[: len(old)] != old:  # else already gone
            self.del_(old)
        return self

    def flatten_keys(
        self, separator: str = ".", inplace: bool = False, is_leaf: Callable | None = None
    ) -> TensorDict:
        """Turn nested keys into flat ``"a.b"`` keys (empty nested tensordicts are dropped).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> list(TensorDict({"a": {"b": torch.zeros(())}}).flatten_keys().keys())
        ['a.b']
        """
        out: dict = {}
        self._flatten_into(out, "", separator, is_leaf)
        if inplace:
            if self._is_locked:
                raise lock_error(list(out), "flatten keys of")
            self._tensordict = out
            return self
        return self._new_unsafe(out, self._batch_size, self._device, self._names)

    def _flatten_into(
        self, out: dict, prefix: str, separator: str, is_leaf: Callable | None
    ) -> None:
        # (a nested tensordict without leaves adds no flat key: walking it adds nothing)
        dense = _kinds.Dense
        for key, value in self._tensordict.items():
            name = prefix + key
            if is_leaf is None:
                leaf = type(value) is _Tensor or not isinstance(value, dense)
            else:
                leaf = is_leaf(type(value))
            if leaf:
                if name in out:
                    raise KeyError(
                        f"flatten_keys: Flattening keys in tensordict causes keys to collide: "
                        f"the flattened key {name!r} already exists."
                    )
                out[name] = value
            else:
                value._flatten_into(out, name + separator, separator, is_leaf)

    def unflatten_keys(self, separator: str = ".", inplace: bool = False) -> TensorDict:
        """Turn flat ``"a.b"`` keys back into nested ones.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> list(TensorDict({"a.b": torch.zeros(())}).unflatten_keys().keys(True))
        ['a', ('a', 'b')]
        """
        out = self._new_unsafe({}, self._batch_size, self._device, self._names)
        for key, value in self._tensordict.items():
            if isinstance(value, _kinds.Dense):
                value = value.unflatten_keys(separator)
            path = tuple(key.split(separator))
            _check_unflatten_collision(out, path, value, key)
            existing = out._get_tuple(path, None)
            if isinstance(existing, _kinds.Dense) and isinstance(value, _kinds.Dense):
                existing.update(value)
            else:
                out._set_tuple(path, value, inplace=False, validated=True)
        if inplace:
            if self._is_locked:
                raise lock_error(list(self._tensordict), "unflatten keys of")
            self._tensordict = out._tensordict
            return self
        return out

    def clear(self) -> TensorDict:
        """Remove every entry.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(())}).clear().is_empty()
        True
        """
        if self._is_locked:
            raise lock_error(list(self._tensordict), "delete")
        self._tensordict.clear()
        return self

    def copy(self) -> TensorDict:
        """A shallow copy: new (nested) containers, the same tensors.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(())})
        >>> td.copy()["a"] is td["a"]
        True
        """
        return self.clone(recurse=False)

    def clone(self, recurse: bool = True, **kwargs: Any) -> TensorDict:
        """A copy; with ``recurse=False`` the tensors are shared (see :meth:`copy`).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(())})
        >>> td.clone()["a"] is td["a"]
        False
        """
        if recurse:
            return self._map_tensors(torch.clone)
        return self._shallow_copy()

    def _shallow_copy(self) -> TensorDict:
        """New containers all the way down, the same tensors (see :meth:`copy`); non-tensor
        entries get containers of their own (same shape)."""
        bs = self._batch_size
        out: dict[str, Any] = {}
        for key, value in self._tensordict.items():
            if isinstance(value, _Tensor):
                out[key] = value
            elif isinstance(value, _kinds.Dense):
                out[key] = value._shallow_copy()
            elif isinstance(value, NON_TENSOR):
                out[key] = value._with(value.batch_size)
            else:
                out[key] = value.clone(recurse=False)
        names = self._names
        return self._new_unsafe(out, bs, self._device, None if names is None else list(names))

    def empty(
        self,
        recurse: bool = False,
        *,
        batch_size: Sequence[int] | None = None,
        device: Any = NO_DEFAULT,
        names: Any = NO_DEFAULT,
    ) -> TensorDict:
        """A tensordict with the same metadata and no tensors.

        ``recurse=True`` keeps the nested tensordicts (emptied the same way) and the
        non-tensor entries, as the reference: only tensors are dropped. ``batch_size``,
        ``device`` and ``names`` replace those of the tensordict when given (``names=None``
        drops the names).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.zeros(2)}, "s": "x"}, [2])
        >>> sorted(td.empty(recurse=True).keys(True))
        ['b', 's']
        """
        bs = self._batch_size if batch_size is None else parse_batch_size(batch_size)
        dev = self._device if device is NO_DEFAULT else parse_device(device)
        out = {}
        if recurse:
            for key, value in self._tensordict.items():
                if isinstance(value, _kinds.Dense):
                    out[key] = value.empty(
                        recurse=True,
                        batch_size=bs + value._batch_size[len(self._batch_size) :]
                        if batch_size is not None
                        else None,
                        device=device,
                    )
                elif isinstance(value, NON_TENSOR):
                    out[key] = _non_tensor_for(key, value, bs)
        if names is NO_DEFAULT:
            keep_names = self._names if len(bs) == len(self._batch_size) else None
        else:
            keep_names = names
        return self._new_unsafe(out, bs, dev, keep_names and list(keep_names))

    def is_empty(self) -> bool:
        """Whether there is no leaf (nested tensordicts without leaves count as empty).

        >>> from tensordict import TensorDict
        >>> TensorDict({"a": {}}).is_empty()
        True
        """
        for value in self._tensordict.values():
            if not isinstance(value, TensorDictBase) or not value.is_empty():
                return False
        return True

    # ------------------------------------------------------------------ lock


def _non_tensor_for(key: str, value: Any, bs: torch.Size) -> Any:
    """The non-tensor entry ``value`` in its own container for a parent of batch size ``bs``
    (``empty(recurse=True)``): kept when its batch size starts with ``bs``; a one-value
    leaf also takes a ``bs`` that extends its batch size. Anything else raises
    ``RuntimeError`` (a stack holds one value per element)."""
    own = value.batch_size
    if own[: len(bs)] == bs:
        return value._with(own)
    if not isinstance(value, NonTensorStack) and bs[: len(own)] == own:
        return value._with(bs)
    raise RuntimeError(
        f"empty(recurse=True): the non-tensor entry {key!r} of batch_size={tuple(own)} cannot "
        f"be kept under the batch size {tuple(bs)}, whose dimensions do not match its own."
    )


def _batch_size_changes(td: Any, source: Any, path: tuple) -> list[tuple[tuple, Any]]:
    """The (path, dense tensordict) pairs whose batch size ``update`` from ``source``
    changes (``update_batch_size=True``)."""
    out = [] if td._batch_size == source.batch_size else [(path, td)]
    for key, value in source.items():
        mine = data_of(td._tensordict.get(key)) if isinstance(key, str) else None
        if isinstance(data_of(value), TensorDictBase) and isinstance(mine, _kinds.Dense):
            out.extend(_batch_size_changes(mine, data_of(value), path + (key,)))
    return out


def _resize_update(td: Any, source: Any, clone: bool, ignore_lock: bool, path: tuple) -> None:
    """Write ``source`` into the dense ``td``, which takes its batch size; nested dense
    tensordicts (a tensorclass's too) are resized the same way, lazy stacks update
    themselves with ``update_batch_size=True``, anything else is replaced."""
    bs = source.batch_size
    if td._batch_size != bs:
        if td._names is not None and len(td._names) != len(bs):
            td._names = None
        td._batch_size = bs
    for key, value in source.items():
        sub = path + (key,)
        mine = data_of(td._tensordict.get(key))
        theirs = data_of(value)
        if isinstance(theirs, TensorDictBase) and not isinstance(theirs, NON_TENSOR):
            if isinstance(mine, _kinds.Dense):
                _resize_update(mine, theirs, clone, ignore_lock, sub)
                continue
            if isinstance(mine, _kinds.Lazy):
                mine.update(theirs, clone, update_batch_size=True, ignore_lock=ignore_lock)
                continue
        if clone and isinstance(value, (_Tensor, TensorDictBase)):
            value = value.clone()
        if td._is_locked and not ignore_lock:
            raise lock_error(unravel_key(sub), "replace" if mine is not None else "add")
        td._tensordict[key] = td._validate_value(key, value, prefix=path)
    _check_leaf_shapes(td, path)


def _check_leaf_shapes(td: Any, path: tuple) -> None:
    """Raise if an entry of the dense ``td`` no longer starts with its batch size."""
    bs = td._batch_size
    nb = len(bs)
    for key, value in td._tensordict.items():
        if isinstance(value, NonTensorData):  # one value for the batch: takes any size
            td._tensordict[key] = value._with(bs)
            continue
        shape = value.shape if isinstance(value, _Tensor) else getattr(value, "batch_size", None)
        if shape is not None and tuple(shape[:nb]) != tuple(bs):
            raise RuntimeError(
                f"update(update_batch_size=True): the entry {unravel_key(path + (key,))!r} of "
                f"shape {tuple(shape)} is not replaced by the source and does not fit the new "
                f"batch_size={tuple(bs)}."
            )


def _holds_no_python_values(td: Any) -> bool:
    """Whether ``td`` lives in shared memory or memory-mapped files (its tensors are
    buffers other processes read; a Python value written there would not be seen)."""
    tensors = [v for v in td._tensordict.values() if isinstance(v, torch.Tensor)]
    return bool(tensors) and all(t.is_shared() for t in tensors)


def plan_update_(
    td: Any, source: Any, wanted: set | None, prefix: tuple, pairs: list[tuple[tuple, Any, Any]]
) -> None:
    """Collect and check the in-place writes of ``td.update_(source)`` into ``pairs``:
    ``(path, stored entry, value)`` per leaf, nothing written yet.

    It walks the destination's own structure: a lazy stack (at the root or nested) hands
    each member its part of ``source``, so every write lands in a stored entry, never in a
    stacked copy, and leaves whose shapes differ across members are never read stacked.
    """
    td, source = data_of(td), data_of(source)
    if isinstance(td, _kinds.Lazy):
        if not isinstance(source, TensorDictBase):
            source = _kinds.Dense(source, batch_size=td.batch_size)
        for member, part in zip(td.tensordicts, td._unbind_like(source, "update_"), strict=True):
            plan_update_(member, part, wanted, prefix, pairs)
        return
    if not isinstance(td, _kinds.Dense):  # another kind (a sibling's): it writes itself
        pairs.append((prefix, td, source))
        return
    if isinstance(source, _kinds.Dense):
        entries: Any = source._tensordict.items()
    elif isinstance(source, _kinds.Lazy):  # its stored entries, read one key at a time
        entries = [(key, source._get_str(key, NO_DEFAULT)) for key in source.keys()]
    else:
        entries = source.items()
    store = td._tensordict
    for key, value in entries:
        sub = _key_tuple(key)
        path = prefix + sub
        if wanted is not None and not any(
            w[: len(path)] == path or path[: len(w)] == w for w in wanted
        ):
            continue
        if len(sub) > 1:  # a nested key of a dict source: go down to its holder
            holder = td._get_tuple(sub[:-1], None)
            if holder is None:
                raise _missing_in_place(path, td)
            if not isinstance(data_of(holder), TensorDictBase):
                raise KeyThroughLeafError(
                    f"update_(): cannot write {unravel_key(path)!r}: the entry "
                    f"{unravel_key(path[:-1])!r} is a {type(holder).__name__}, not a tensordict."
                )
            plan_update_(holder, {sub[-1]: value}, wanted, path[:-1], pairs)
            continue
        current = store.get(sub[0], _MISSING)
        if current is _MISSING:
            if isinstance(value, NON_TENSOR) and _holds_no_python_values(td):
                # a tensordict in shared memory or memory-mapped files keeps no Python
                # values: the reference skips them, and TorchRL's parallel workers rely on it
                continue
            raise _missing_in_place(path, td)
        nested = isinstance(data_of(value), (dict, TensorDictBase))
        if isinstance(data_of(current), TensorDictBase):
            if not nested:
                raise TypeError(
                    f"update_(): entry {unravel_key(path)!r} is a tensordict, but the value "
                    f"written into it is a {type(value).__name__}; pass a tensordict or a dict."
                )
            plan_update_(current, value, wanted, path, pairs)
            continue
        if wanted is not None and not any(path[: len(w)] == w for w in wanted):
            continue
        if nested:
            raise TypeError(
                f"update_(): entry {unravel_key(path)!r} is a {type(current).__name__}, which "
                f"a {type(value).__name__} cannot be written into in place."
            )
        if isinstance(current, _Tensor):
            if not isinstance(value, _Tensor):
                try:
                    value = torch.as_tensor(value)
                except (TypeError, RuntimeError, ValueError):
                    raise TypeError(
                        f"update_(): entry {unravel_key(path)!r} is a tensor, but the value "
                        f"written into it is a {type(value).__name__}, not a number or tensor."
                    ) from None
            _check_in_place_write(path, current, value)
        pairs.append((path, current, value))


def _restacked(current: Any, value: Any, wanted: set | None, path: tuple) -> Any:
    """The dense ``current`` as a lazy stack of its slices along ``value``'s stack
    dimension, updated (not in place) by the lazy stack ``value``: members whose entries
    differ in shape each keep their own."""
    if current._is_locked:
        raise lock_error(unravel_key(path), "replace the tensordict at")
    keys = None
    if wanted is not None:
        keys = [w[len(path) :] for w in wanted if w[: len(path)] == path and len(w) > len(path)]
        if any(path[: len(w)] == w for w in wanted):
            keys = None  # the whole entry is wanted
    sd = value.stack_dim
    out = _kinds.Lazy(*current.unbind(sd), stack_dim=sd)
    return out.update(value, keys_to_update=keys)  # the caller clones the result if asked


def commit_in_place(pairs: list[tuple[tuple, Any, Any]], clone: bool, non_blocking: bool) -> None:
    """Make the writes that :func:`plan_update_` collected."""
    for path, target, value in pairs:
        if clone and isinstance(value, _Tensor):
            value = value.clone()
        write_inplace(unravel_key(path), target, value, non_blocking)


def _missing_in_place(path: tuple, td: Any) -> KeyError:
    return KeyError(
        f"update_() writes in place, but key {unravel_key(path)!r} was not found in the "
        f"tensordict (keys there: {sorted(map(str, td.keys()))})."
    )


def _check_in_place_write(path: tuple, current: _Tensor, value: _Tensor) -> None:
    """Raise, naming the key, if ``value`` cannot be copied into the stored ``current``."""
    try:
        ok = torch.broadcast_shapes(value.shape, current.shape) == current.shape
    except RuntimeError:
        ok = False
    if not ok:
        raise RuntimeError(
            f"update_(): value for {unravel_key(path)!r} has shape {tuple(value.shape)}, "
            f"which cannot be written into the entry of shape {tuple(current.shape)}."
        )
    if value.is_complex() and not current.is_complex():
        raise RuntimeError(
            f"update_(): value for {unravel_key(path)!r} is complex ({value.dtype}) but the "
            f"entry is {current.dtype}: writing it in place would drop the imaginary part. "
            "Write value.real explicitly, or replace the entry with update()."
        )
    if current.requires_grad and current.is_leaf and torch.is_grad_enabled():
        raise RuntimeError(
            f"update_(): entry {unravel_key(path)!r} is a leaf tensor that requires grad, "
            "which cannot be written in place; write under torch.no_grad() or replace it "
            "with update()."
        )


def _leaf_paths(value: Any) -> set[tuple[str, ...]]:
    """The key paths of the leaves of ``value`` (``{()}`` for a leaf itself)."""
    if not isinstance(value, _kinds.Dense):
        return {()}
    every = value.keys(True, True, is_leaf=_kinds.is_leaf_nontensor)
    return {k if isinstance(k, tuple) else (k,) for k in every}


def _check_unflatten_collision(out: Any, path: tuple[str, ...], value: Any, key: str) -> None:
    """Raise ``KeyError`` (as the reference) when writing ``value`` at ``path`` of ``out``
    would override an entry already unflattened there: a leaf on the way, or leaves of
    the two at the same place or one inside the other."""
    for i in range(1, len(path)):
        above = out._get_tuple(path[:i], None)
        if above is None:
            break
        if not isinstance(above, _kinds.Dense):
            raise KeyError(
                f"unflatten_keys: Unflattening key(s) in tensordict will override an existing "
                f"for unflattened key {key!r}: {unravel_key(path[:i])!r} is already a leaf."
            )
    existing = out._get_tuple(path, None)
    if existing is None:
        return
    mine, theirs = _leaf_paths(value), _leaf_paths(existing)
    for a in mine:
        for b in theirs:
            n = min(len(a), len(b))
            if a[:n] == b[:n]:
                raise KeyError(
                    f"unflatten_keys: Unflattening key(s) in tensordict will override an "
                    f"existing for unflattened key {key!r} (at {unravel_key(path + a)!r})."
                )


def _level_copy(td: Any) -> Any:
    """A new container for ``td``'s entries (the entries themselves shared)."""
    names = td._names
    return td._new_unsafe(
        dict(td._tensordict), td._batch_size, td._device, None if names is None else list(names)
    )


def _select_simple(td: Any, keys: Sequence[NestedKey], strict: bool) -> dict | None:
    """The entries of ``td.select(*keys)`` in one pass, when every key is a string or a
    tuple of strings whose levels are plain dense tensordicts (the containers on the way
    are copied, the entries shared); None as soon as a key needs the general walk
    (:meth:`DictOps._select_paths`: lazy stacks, nested key tuples, a level that is not
    a tensordict)."""
    store = td._tensordict
    dense = _kinds.Dense
    chosen: dict = {}
    for key in keys:
        if type(key) is str:
            value = store.get(key, _MISSING)
            if value is not _MISSING:
                chosen[key] = value
            elif strict:
                raise missing_key(key, td)
            continue
        if type(key) is not tuple or not key:
            return None
        src, dst = store, chosen
        last = len(key) - 1
        for i, part in enumerate(key):
            if type(part) is not str:
                return None
            value = src.get(part, _MISSING)
            if i == last:
                if value is not _MISSING:
                    dst[part] = value
                elif strict:
                    raise missing_key(key, td)
                break
            if type(value) is not dense:
                return None
            sub = dst.get(part)
            if sub is value:  # the whole nested tensordict is already selected
                break
            if sub is None:
                sub = dst[part] = value._new_unsafe(
                    {}, value._batch_size, value._device, value._names
                )
            src, dst = value._tensordict, sub._tensordict
    return chosen
