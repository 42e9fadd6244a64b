"""``state_dict`` / ``load_state_dict``: a tensordict as nested ``OrderedDict`` s, and back.

The format is that of the reference library: one ``OrderedDict`` per (nested) tensordict,
whose entries are the tensors (detached copies unless ``keep_vars``), nested
``OrderedDict`` s and non-tensor values, followed by two metadata entries,
``"__batch_size"`` (a ``torch.Size``) and ``"__device"`` (a ``torch.device`` or ``None``).
Everything in it loads with ``torch.load(..., weights_only=True)``.

A :class:`~tensordict.LazyStackedTensorDict` gives the state dict of its dense form
(entries stacked; keys only some members hold are left out) and loads one by splitting
it along the stack dimension into its members, so the members' tensors are written.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from tensordict import _kinds
from tensordict._collection import data_of
from tensordict._errors import lock_error
from tensordict._keys import unravel_key
from tensordict._nontensor import NonTensorData, NonTensorStack, is_non_tensor
from tensordict._shape import parse_batch_size
from tensordict.base import NO_DEFAULT, TensorDictBase

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self

    from tensordict._lazy import LazyStackedTensorDict
    from tensordict._td import TensorDict

_Tensor = torch.Tensor
BATCH_SIZE_KEY = "__batch_size"
DEVICE_KEY = "__device"
_META = (BATCH_SIZE_KEY, DEVICE_KEY)


def _fmt(path: tuple[str, ...]) -> str:
    return repr(unravel_key(path)) if path else "<root>"


class StateDictOps(_kinds.SharedMixin):
    """Mixin of :class:`~tensordict.TensorDict`: ``state_dict`` and ``load_state_dict``."""

    def state_dict(
        self,
        destination: dict[str, Any] | None = None,
        prefix: str = "",
        keep_vars: bool = False,
        flatten: bool = False,
    ) -> OrderedDict[str, Any]:
        """The content as nested ``OrderedDict`` s, with ``"__batch_size"`` and ``"__device"``.

        Args:
            destination: a dict to write the entries into (it is returned).
            prefix: prepended to every top-level key.
            keep_vars: keep the tensors themselves instead of detached copies.
            flatten: one flat level with ``"a.b"`` keys (see ``load_state_dict(from_flatten=True)``).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.ones(2, 1)}}, [2])
        >>> sd = td.state_dict()
        >>> list(sd), list(sd["b"])
        (['a', 'b', '__batch_size', '__device'], ['c', '__batch_size', '__device'])
        >>> list(td.state_dict(flatten=True))
        ['a', 'b.c', '__batch_size', '__device']

        A lazy stack gives the state dict of its dense form:

        >>> from tensordict import lazy_stack
        >>> sd = lazy_stack([td, td.clone()], 1).state_dict()
        >>> sd["b"]["c"].shape, sd["__batch_size"]
        (torch.Size([2, 2, 1]), torch.Size([2, 2]))
        """
        src: Any = self.flatten_keys(".") if flatten else self
        out: OrderedDict[str, Any] = OrderedDict()
        store = src._tensordict if isinstance(src, _kinds.Dense) else None
        # a lazy stack's tensors are stacked copies already: no second copy
        fresh = store is None and _kinds.lazy_members(src) is not None
        items = (
            store.items()
            if store is not None
            else ((k, src._get_str(k, NO_DEFAULT)) for k in src.keys())
        )
        for key, value in items:
            if key in _META:
                raise KeyError(
                    f"state_dict: the entry {key!r} clashes with the metadata key of that name."
                )
            if isinstance(value, _Tensor):
                if keep_vars:
                    out[prefix + key] = value
                else:
                    out[prefix + key] = value.detach() if fresh else value.detach().clone()
            elif isinstance(value, NonTensorData):
                out[prefix + key] = value.data
            elif is_non_tensor(value):  # a stack: one value per element, as nested lists
                out[prefix + key] = value.tolist()
            elif isinstance(value, (_kinds.Dense, _kinds.Lazy)):
                out[prefix + key] = value.state_dict(keep_vars=keep_vars)
            else:
                out[prefix + key] = value.to_tensordict().state_dict(keep_vars=keep_vars)
        out[prefix + BATCH_SIZE_KEY] = src.batch_size
        out[prefix + DEVICE_KEY] = src.device
        if destination is not None:
            destination.update(out)
            return destination  # type: ignore[return-value]
        return out

    def load_state_dict(
        self,
        state_dict: Mapping[str, Any],
        strict: bool = True,
        assign: bool = False,
        from_flatten: bool = False,
    ) -> Self:
        """Load a :meth:`state_dict` into this tensordict, in place.

        Tensors are copied into the existing entries (which keep their storage) unless
        ``assign=True``, which puts the state dict's tensors in instead. Everything is
        checked before anything is written: with ``strict=True`` the key sets must match
        at every level; shapes of in-place copies must match; the new batch size must fit
        every entry. On error the tensordict is unchanged.

        Args:
            state_dict: as returned by :meth:`state_dict` (plain dicts work too).
            strict: require the same keys in the state dict and the tensordict.
            assign: replace the entries instead of copying into them.
            from_flatten: the state dict was made with ``state_dict(flatten=True)``.

        A lazy stack splits the state dict along its stack dimension and loads the parts
        into its members (the number of members cannot change).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> a = torch.zeros(2)
        >>> td = TensorDict({"a": a, "b": {"c": torch.zeros(2)}}, [2])
        >>> src = TensorDict({"a": torch.ones(2), "b": {"c": torch.full((2,), 2.0)}}, [2])
        >>> _ = td.load_state_dict(src.state_dict())
        >>> a, td["b", "c"]
        (tensor([1., 1.]), tensor([2., 2.]))
        >>> _ = td.load_state_dict(src.state_dict(flatten=True), from_flatten=True)
        """
        if not isinstance(state_dict, Mapping) or isinstance(state_dict, TensorDictBase):  # type: ignore[unreachable]
            raise TypeError(
                f"load_state_dict expects a dict (as returned by state_dict()), got "
                f"{type(state_dict).__name__}."
            )
        if from_flatten:
            state_dict = _unflatten(self, state_dict)
        plan: list[Any] = []
        _plan_load(self, state_dict, strict, assign, (), plan, None)  # type: ignore[arg-type]
        for action in plan:
            action[0](*action[1:])
        return self


def _unflatten(td: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    """A flat ``{"a.b": v}`` state dict as nested dicts, resolving keys that contain dots
    through the tensordict's own flattened keys."""
    known = {}
    for key in td.keys(True, True):
        path = key if isinstance(key, tuple) else (key,)
        known[".".join(path)] = path
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if key in _META:
            out[key] = value
            continue
        path = known.get(key) or tuple(key.split("."))
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise KeyError(f"load_state_dict: flat key {key!r} conflicts with another entry.")
        node[path[-1]] = value
    return out


def _new_batch_size(
    td: Any, sd: Mapping[str, Any], parent: tuple[torch.Size, int] | None, path: tuple[str, ...]
) -> torch.Size:
    """The batch size ``td`` will have: the state dict's, else the current one (under a
    parent whose batch size changes, the parent's new one plus ``td``'s own extra dims)."""
    raw = sd.get(BATCH_SIZE_KEY)
    if raw is not None:
        try:
            new = parse_batch_size(raw)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"load_state_dict: bad {BATCH_SIZE_KEY!r} {raw!r} at {_fmt(path)}: {err}"
            ) from None
    elif parent is None:
        new = td.batch_size
    else:
        new = torch.Size((*parent[0], *td.batch_size[parent[1] :]))
    if parent is not None and new[: len(parent[0])] != parent[0]:
        raise RuntimeError(
            f"load_state_dict: the batch size {tuple(new)} at {_fmt(path)} does not start with "
            f"its parent's batch size {tuple(parent[0])}."
        )
    return new


def _plan_load(
    td: TensorDict | LazyStackedTensorDict,
    sd: Mapping[str, Any],
    strict: bool,
    assign: bool,
    path: tuple[str, ...],
    plan: list[Any],
    parent: tuple[torch.Size, int] | None,
) -> None:
    """Check everything and append the writes to ``plan``; ``parent`` is the parent's
    ``(new batch size, current number of batch dims)``."""
    if isinstance(td, _kinds.Lazy):
        _plan_load_lazy(td, td.tensordicts, sd, strict, assign, path, plan, parent)
        return
    store = td._tensordict
    new_bs = _new_batch_size(td, sd, parent, path)
    keys = [k for k in sd if k not in _META]
    if strict:
        extra = sorted(set(keys) - set(store))
        missing = sorted(set(store) - set(keys))
        if extra or missing:
            raise RuntimeError(
                f"load_state_dict(strict=True): the keys of the state dict and the tensordict "
                f"differ at {_fmt(path)}: only in the state dict: {extra}; only in the "
                f"tensordict: {missing}."
            )
    nb = len(new_bs)
    for key in keys:
        value = sd[key]
        sub = path + (key,)
        current = data_of(store.get(key))  # a tensorclass: its tensordict
        if isinstance(value, TensorDictBase):  # (tensordicts are Mappings too)
            raise TypeError(
                f"load_state_dict: the entry at {unravel_key(sub)!r} is a "
                f"{type(value).__name__}; pass its state_dict() instead."
            )
        if isinstance(value, Mapping):
            if current is None:
                if td._is_locked:
                    raise lock_error(unravel_key(sub))
                # created with the current batch size; resized with the others
                current = _kinds.Dense._new_unsafe({}, td.batch_size, td._device)
                plan.append((store.__setitem__, key, current))
            elif not isinstance(current, (_kinds.Dense, _kinds.Lazy)):
                raise RuntimeError(
                    f"load_state_dict: the state dict holds a dict at {unravel_key(sub)!r} but "
                    f"the tensordict holds a {type(current).__name__} there."
                )
            _plan_load(current, value, strict, assign, sub, plan, (new_bs, td.batch_dims))
            continue
        if isinstance(value, _Tensor):
            if value.shape[:nb] != new_bs:
                raise RuntimeError(
                    f"load_state_dict: the tensor at {unravel_key(sub)!r} has shape "
                    f"{tuple(value.shape)}, whose leading dimensions must equal the batch size "
                    f"{tuple(new_bs)}."
                )
            if current is not None and not assign:
                if not isinstance(current, _Tensor):
                    raise RuntimeError(
                        f"load_state_dict: cannot copy the tensor at {unravel_key(sub)!r} into "
                        f"the {type(current).__name__} stored there (use assign=True to replace it)."
                    )
                if current.shape != value.shape:
                    raise RuntimeError(
                        f"load_state_dict: shape mismatch at {unravel_key(sub)!r}: the state dict "
                        f"holds {tuple(value.shape)}, the tensordict {tuple(current.shape)}."
                    )
                plan.append((_copy_into, current, value))
                continue
            if td._device is not None and value.device != td._device:
                value = value.to(td._device)
            if current is None and td._is_locked:
                raise lock_error(unravel_key(sub))
            plan.append((store.__setitem__, key, value))
            continue
        if current is None and td._is_locked:
            raise lock_error(unravel_key(sub))
        if is_non_tensor(value):  # a leaf already (the part of a lazy stack's entry)
            if value.batch_size != new_bs:
                raise RuntimeError(
                    f"load_state_dict: the non-tensor value at {unravel_key(sub)!r} has batch "
                    f"size {tuple(value.batch_size)}, expected {tuple(new_bs)}."
                )
            leaf = value._with(new_bs, td._device)
        elif is_non_tensor(current) and not isinstance(current, NonTensorData):
            # a stack stays a stack: the state dict holds its values as nested lists
            try:
                leaf = NonTensorStack.from_list(value, device=td._device, ndim=nb)
                if leaf.batch_size != new_bs:
                    raise ValueError(f"got shape {tuple(leaf.batch_size)}")
            except (TypeError, ValueError) as err:
                raise RuntimeError(
                    f"load_state_dict: the value at {unravel_key(sub)!r} must be nested lists "
                    f"of the batch shape {tuple(new_bs)} to load into the stack there: {err}"
                ) from None
        else:
            wrapper = type(current) if isinstance(current, NonTensorData) else NonTensorData
            leaf = wrapper._make(value, new_bs, td._device)
        plan.append((store.__setitem__, key, leaf))
    # entries the state dict does not mention (strict=False) must fit the new batch size
    for key, current in store.items():
        if key in sd:
            continue
        shape = current.shape if isinstance(current, _Tensor) else current.batch_size
        if isinstance(current, _Tensor) and shape[:nb] != new_bs:
            raise RuntimeError(
                f"load_state_dict: the entry {unravel_key(path + (key,))!r} (shape "
                f"{tuple(shape)}) does not fit the loaded batch size {tuple(new_bs)}."
            )
        if is_non_tensor(current):
            plan.append((store.__setitem__, key, current._with(new_bs)))
    if new_bs != td.batch_size:
        plan.append((_set_batch_size, td, new_bs))


def _plan_load_lazy(
    td: Any,
    members: list[Any],
    sd: Mapping[str, Any],
    strict: bool,
    assign: bool,
    path: tuple[str, ...],
    plan: list[Any],
    parent: tuple[torch.Size, int] | None,
) -> None:
    """:func:`_plan_load` for a lazy stack: nested entries recurse as lazy stacks of the
    members' nested tensordicts; leaves are split along the stack dimension and loaded
    into the members (whose own key sets are not checked: keys only some members hold
    are not part of the state dict)."""
    new_bs = _new_batch_size(td, sd, parent, path)
    sdim, n = td.stack_dim, len(members)
    if len(new_bs) <= sdim or new_bs[sdim] != n:
        raise RuntimeError(
            f"load_state_dict: the batch size {tuple(new_bs)} at {_fmt(path)} does not keep "
            f"the stack dimension {sdim} of size {n}: a lazy stack cannot change its number "
            "of stacked tensordicts."
        )
    member_bs = new_bs[:sdim] + new_bs[sdim + 1 :]
    keys = [k for k in sd if k not in _META]
    if strict:
        common = list(td.keys())
        extra = sorted(set(keys) - set(common))
        missing = sorted(set(common) - set(keys))
        if extra or missing:
            raise RuntimeError(
                f"load_state_dict(strict=True): the keys of the state dict and the lazy stack "
                f"differ at {_fmt(path)}: only in the state dict: {extra}; only in the "
                f"tensordict: {missing}."
            )
    leaves: list[dict[str, Any]] = [{BATCH_SIZE_KEY: member_bs} for _ in members]
    for key in keys:
        value = sd[key]
        sub = path + (key,)
        currents = [m._get_str(key, None) for m in members]
        if isinstance(value, TensorDictBase):
            raise TypeError(
                f"load_state_dict: the entry at {unravel_key(sub)!r} is a "
                f"{type(value).__name__}; pass its state_dict() instead."
            )
        if isinstance(value, Mapping):
            nested = []
            for i, (m, cur) in enumerate(zip(members, currents)):
                if cur is None:
                    if m.is_locked:
                        raise lock_error(unravel_key(sub))
                    cur = _new_nested(m)
                    plan.append((_set_entry, m, key, cur))
                elif not isinstance(cur, TensorDictBase):
                    raise RuntimeError(
                        f"load_state_dict: the state dict holds a dict at {unravel_key(sub)!r} "
                        f"but stacked tensordict {i} holds a {type(cur).__name__} there."
                    )
                nested.append(cur)
            sub_td = td._new(nested, sdim)
            _plan_load(sub_td, value, strict, assign, sub, plan, (new_bs, td.batch_dims))
            continue
        if isinstance(value, _Tensor):
            if value.shape[: len(new_bs)] != new_bs:
                raise RuntimeError(
                    f"load_state_dict: the tensor at {unravel_key(sub)!r} has shape "
                    f"{tuple(value.shape)}, whose leading dimensions must equal the batch size "
                    f"{tuple(new_bs)}."
                )
            parts: Any = value.unbind(sdim)
        elif type(value) is list and all(is_non_tensor(c) for c in currents):
            # one value per element when the stacked entry is a NonTensorStack
            stacked = td._get_str(key, NO_DEFAULT)
            if type(stacked) is NonTensorStack:
                try:
                    leaf = NonTensorStack.from_list(value, ndim=len(new_bs))
                    if leaf.batch_size != new_bs:
                        raise ValueError(f"got shape {tuple(leaf.batch_size)}")
                except (TypeError, ValueError) as err:
                    raise RuntimeError(
                        f"load_state_dict: the value at {unravel_key(sub)!r} must be nested "
                        f"lists of the batch shape {tuple(new_bs)} to load into the stack "
                        f"there: {err}"
                    ) from None
                parts = [_one_value(part) for part in leaf.unbind(sdim)]
            else:
                parts = [value] * n
        else:
            parts = [value] * n
        for leaf_sd, part in zip(leaves, parts):
            leaf_sd[key] = part
    for m, leaf_sd in zip(members, leaves):
        _plan_load(m, leaf_sd, False, assign, path, plan, None)
    if new_bs != td.batch_size:
        plan.append((_set_batch_size, td, new_bs))


_NO_VALUE: Any = object()


def _one_value(leaf: Any) -> Any:
    """A ``NonTensorData`` for a stack whose elements all hold the same value."""
    if type(leaf) is not NonTensorStack:
        return leaf
    common = leaf._common_value(_NO_VALUE)
    if common is _NO_VALUE:
        return leaf
    return NonTensorData._make(common, leaf.batch_size, leaf.device)


def _new_nested(td: Any) -> Any:
    """An empty tensordict to nest in ``td`` (a lazy stack of them for a lazy stack)."""
    members = _kinds.lazy_members(td)
    if members is not None and members:
        return td._new([_new_nested(m) for m in members], td.stack_dim)
    return _kinds.Dense._new_unsafe({}, td.batch_size, td.device)


def _set_entry(td: Any, key: str, value: Any) -> None:
    td._set_str(key, value, inplace=False, validated=True)


def _copy_into(current: _Tensor, value: _Tensor) -> None:
    with torch.no_grad():
        current.copy_(value)


def _set_batch_size(td: TensorDict, batch_size: torch.Size) -> None:
    td.batch_size = batch_size
