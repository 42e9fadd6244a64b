"""Indexed reads and in-place writes of single entries: ``get_at``, ``set_at_``,
``update_at_``, ``copy_`` and ``copy_at_``.

A write is planned first (every entry checked, the writes collected as closures) and
run afterwards, so bad input leaves the tensordict unchanged. The tensordict holding an
entry plans its write (``_plan_at``): a dense one writes into its stored tensor or
non-tensor leaf; a lazy stack splits the index among its members (see
:meth:`LazyStackedTensorDict._plan_at <tensordict.LazyStackedTensorDict>`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from tensordict._keys.nested import NestedKey, unravel_key
from tensordict._kinds import kinds as _kinds
from tensordict._kinds.kinds import is_nested
from tensordict._leaves.nontensor import (
    NonTensorData,
    is_non_tensor,
    unwrap_non_tensor,
    write_non_tensor,
)
from tensordict._util.errors import missing_key
from tensordict.base import NO_DEFAULT, TensorDictBase, _key_tuple

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self

_Tensor = torch.Tensor


class IndexedOps(_kinds.SharedMixin):
    """Mixin of :class:`~tensordict.TensorDict` and :class:`~tensordict.LazyStackedTensorDict`:
    the methods of this module."""

    def get_at(self, key: NestedKey, index: Any, default: Any = NO_DEFAULT) -> Any:
        """``td.get(key)[index]``: the entry at ``key``, indexed (batch dims first).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.arange(6).reshape(2, 3)}, [2])
        >>> td.get_at("a", (1, 0)), td.get_at("missing", 0, None)
        (tensor(3), None)
        """
        value = self._get_tuple(_key_tuple(key), None)
        if value is None:
            if default is NO_DEFAULT:
                raise missing_key(unravel_key(_key_tuple(key)), self)
            return default
        if isinstance(value, NonTensorData):
            return value.data
        return unwrap_non_tensor(value[index])

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
        LinkedList(['y', 'x'])
        """
        plan: list[Callable[[], None]] = []
        _plan_leaf(self, _key_tuple(key), value, index, plan, non_blocking, "set_at_")
        for write in plan:
            write()
        return self

    def update_at_(
        self,
        input_dict_or_td: Mapping[Any, Any] | TensorDictBase,
        idx: Any,
        clone: bool = False,
        *,
        non_blocking: bool = False,
        keys_to_update: Sequence[NestedKey] | None = None,
    ) -> Self:
        """Write every leaf of ``input_dict_or_td`` in place at ``idx`` of the entry
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
        _plan_update_at(self, input_dict_or_td, idx, plan, clone, non_blocking, wanted)
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
        dense: Any = self  # (typed as Any: a shared method, defined for every kind)
        if not isinstance(dense, _kinds.Dense):  # a lazy stack plans its own writes
            _plan_through_entry(self, key, path, value, index, plan)
            return
        store = dense._tensordict
        target = store.get(key)
        if target is None:
            raise KeyError(
                f"cannot write in place at {unravel_key(path)!r}: the key is not in the "
                f"tensordict (keys there: {sorted(store)})."
            )
        if is_non_tensor(target):
            batch_size = self.batch_size
            _check_non_tensor_at(path, target, value, index, batch_size)

            def write_leaf() -> None:
                store[key] = write_non_tensor(store[key], index, value, batch_size)

            plan.append(write_leaf)
            return
        _check_at(path, target, value, index)
        plan.append(lambda: _write_at(target, value, index, non_blocking))

    def copy_(
        self, tensordict: Mapping[Any, Any] | TensorDictBase, non_blocking: bool = False
    ) -> Self:
        """Copy ``tensordict`` (a tensordict or dict) into the matching entries, in place.

        Same as :meth:`update_`; every key of ``tensordict`` must exist here.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2)}, [2])
        >>> td.copy_(TensorDict({"a": torch.ones(2)}, [2]))["a"]
        tensor([1., 1.])
        """
        return self.update_(tensordict, non_blocking=non_blocking)

    def copy_at_(
        self,
        tensordict: Mapping[Any, Any] | TensorDictBase,
        idx: Any,
        non_blocking: bool = False,
        *,
        fast: bool | None = True,
    ) -> Self:
        """Copy ``tensordict`` in place at index ``idx`` (as :meth:`update_at_`).

        ``fast=True`` (the default, as the reference: its fast path copies tensors only)
        refuses, before writing anything, a copy that writes into a single-valued
        non-tensor entry: an indexed write turns it into a
        :class:`~tensordict.NonTensorStack`. ``fast=False`` makes that transition.
        ``fast=None`` is deprecated (a ``FutureWarning``) and behaves as ``False``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(3), "s": "x"}, [3])
        >>> td.copy_at_(TensorDict({"a": torch.ones(2)}, [2]), slice(1, None))["a"]
        tensor([0., 1., 1.])
        >>> td.copy_at_(TensorDict({"a": torch.ones(1), "s": "y"}, [1]), slice(0, 1), fast=False)["s"]
        LinkedList(['y', 'x', 'x'])
        """
        if fast is None:
            warnings.warn(
                "copy_at_(fast=None) is deprecated: pass fast=False to allow single-valued "
                "non-tensor entries to become stacks, or fast=True (the default) to refuse.",
                FutureWarning,
                stacklevel=2,
            )
            fast = False
        if fast:
            for path, _ in _source_leaves(tensordict):
                dest = self._get_tuple(path, None)
                if type(dest) is NonTensorData:
                    raise RuntimeError(
                        f"copy_at_(fast=True): writing at an index into the single-valued "
                        f"non-tensor entry {unravel_key(path)!r} (value {dest.data!r}) turns it "
                        "into a NonTensorStack; pass fast=False to allow it. Nothing was "
                        "written."
                    )
        return self.update_at_(tensordict, idx, non_blocking=non_blocking)


def _plan_through_entry(
    td: Any, key: str, path: tuple[str, ...], value: Any, index: Any, plan: list[Callable[[], None]]
) -> None:
    """``_plan_at`` for a kind that stores its entries elsewhere (a file, a server): read
    the entry, write the value at ``index`` into a copy, write the copy back in place
    (``set_``). The backends that can write a row range directly override ``_plan_at``."""
    current: Any = td._get_str(key, None)
    if current is None:
        raise KeyError(
            f"cannot write in place at {unravel_key(path)!r}: the key is not in the "
            f"{type(td).__name__} (keys there: {sorted(map(str, td.keys()))})."
        )
    updated: Any
    if is_non_tensor(current):
        batch_size = td.batch_size
        _check_non_tensor_at(path, current, value, index, batch_size)
        updated = write_non_tensor(current, index, value, batch_size)
    else:
        if not isinstance(current, _Tensor):
            raise TypeError(
                f"cannot write in place at {unravel_key(path)!r} of a {type(td).__name__}: "
                f"the entry is a {type(current).__name__}."
            )
        _check_at(path, current, value, index)
        updated = current.clone()
        _write_at(updated, value, index, False)
    plan.append(lambda: td.set_(key, updated))


def _plan_update_at(
    dest: Any,
    source: Any,
    idx: Any,
    plan: list[Callable[[], None]],
    clone: bool,
    non_blocking: bool,
    wanted: set[tuple[str, ...]] | None,
) -> None:
    """Plan ``dest.update_at_(source, idx)``. A lazy stack written from a lazy stack whose
    members line up with the ones ``idx`` selects is written member by member, so members
    of different shapes (which cannot be stacked) are written as they are."""
    members, sources = _kinds.lazy_members(dest), _kinds.lazy_members(source)
    if members is not None and sources is not None:
        try:
            dec = dest._decompose(idx)
        except IndexError:
            dec = None
        if (
            dec is not None
            and isinstance(dec[0], list)
            and len(dec[0]) == len(sources)
            and source.stack_dim == dec[2]
        ):
            selector, member_index, _ = dec
            # a bare object() is _decompose's "the members are taken whole"
            m_index = Ellipsis if type(member_index) is object else member_index
            for j, part in zip(selector, sources, strict=True):
                _plan_update_at(members[j], part, m_index, plan, clone, non_blocking, wanted)
            return
    for path, value in _source_leaves(source):
        if wanted is not None and path not in wanted:
            continue
        if clone and isinstance(value, _Tensor):
            value = value.clone()
        _plan_leaf(dest, path, value, idx, plan, non_blocking, "update_at_")


def _source_leaves(source: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """``(key tuple, value)`` for every leaf of a dict or tensordict (non-tensor values
    unwrapped). A lazy stack gives its stacked entries."""
    out = []
    if isinstance(source, TensorDictBase):
        store = source._tensordict if isinstance(source, _kinds.Dense) else None
        items: Any = (
            store.items()
            if store is not None
            else ((k, source._get_tuple(_key_tuple(k), NO_DEFAULT)) for k in source.keys())
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
    if isinstance(target, _Tensor) and isinstance(value, np.ndarray):
        value = torch.from_numpy(value)  # tensors take arrays only through torch
    if isinstance(value, _Tensor) and isinstance(target, _Tensor) and value.device != target.device:
        value = value.to(target.device, non_blocking=non_blocking)
    target[index] = value
