"""``state_dict`` / ``load_state_dict``: a tensordict as ``OrderedDict`` s, and back.

The layout is the reference library's (that of ``torch.nn.Module``): by default one flat
``OrderedDict`` of tensors with ``"."``-joined keys (detached, sharing storage unless
``keep_vars``), plus a ``_metadata`` attribute mapping each level's dotted path (``""``
for the top) to its ``{"batch_size": ..., "device": ...}``; non-tensor values are kept
there too (``"_type"`` and ``"_non_tensor": {"data": ...}``). ``flatten=False`` nests one
``OrderedDict`` per level instead, each with its own ``_metadata`` (``""``) and its
non-tensor values as entries. ``load_state_dict`` reads both, and the older nested layout
whose levels hold ``"__batch_size"``/``"__device"`` entries. Everything in it loads with
``torch.load(..., weights_only=True)``.

A :class:`~tensordict.LazyStackedTensorDict` gives the state dict of its dense form
(entries stacked; keys only some members hold are left out) and loads one by splitting
it along the stack dimension into its members, so the members' tensors are written.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import torch

from tensordict._keys.nested import unravel_key
from tensordict._keys.shape import parse_batch_size
from tensordict._kinds import kinds as _kinds
from tensordict._leaves.collection import data_of
from tensordict._leaves.nontensor import NonTensorData, NonTensorStack, is_non_tensor
from tensordict._util.errors import lock_error
from tensordict.base import NO_DEFAULT, TensorDictBase

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self


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
        flatten: bool = True,
    ) -> OrderedDict[str, Any]:
        """The tensors as a flat ``OrderedDict`` with ``"a.b"`` keys and a ``_metadata``
        attribute (batch size and device of every level, non-tensor values), as
        ``torch.nn.Module.state_dict`` lays it out (see :mod:`tensordict._shared.state_dict`).

        Args:
            destination: a dict to write the entries into (it is returned).
            prefix: prepended to every key (``"m."`` gives ``"m.a"``).
            keep_vars: keep the tensors themselves instead of detached ones.
            flatten: ``False`` nests one ``OrderedDict`` per level instead.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.ones(2, 1)}, "s": "x"}, [2])
        >>> sd = td.state_dict()
        >>> list(sd), sd._metadata["b"]["batch_size"], sd._metadata["s"]["_non_tensor"]
        (['a', 'b.c'], torch.Size([2]), {'data': 'x'})
        >>> nested = td.state_dict(flatten=False)
        >>> list(nested), list(nested["b"]), nested["s"]
        (['a', 'b', 's'], ['c'], 'x')

        A lazy stack gives the state dict of its dense form:

        >>> from tensordict import lazy_stack
        >>> sd = lazy_stack([td, td.clone()], 1).state_dict()
        >>> sd["b.c"].shape, sd._metadata[""]["batch_size"]
        (torch.Size([2, 2, 1]), torch.Size([2, 2]))
        """
        out: Any = OrderedDict() if destination is None else destination
        metadata = getattr(out, "_metadata", None)
        if metadata is None:
            metadata = OrderedDict()
        if flatten:
            _flat_state(self, prefix, keep_vars, out, metadata)
        else:
            _nested_state(self, prefix, keep_vars, out, metadata)
        with suppress(AttributeError):  # a plain dict destination cannot carry it
            out._metadata = metadata
        return out  # type: ignore[no-any-return]

    def load_state_dict(
        self,
        state_dict: Mapping[str, Any],
        strict: bool = True,
        assign: bool = False,
        from_flatten: bool | None = None,
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
            from_flatten: whether the state dict is flat (``"a.b"`` keys, the default of
                :meth:`state_dict`) or nested; ``None`` tells from its content.

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
        >>> _ = td.load_state_dict(src.state_dict(flatten=False), from_flatten=False)
        """
        if not isinstance(state_dict, Mapping) or isinstance(state_dict, TensorDictBase):  # type: ignore[unreachable]
            raise TypeError(
                f"load_state_dict expects a dict (as returned by state_dict()), got "
                f"{type(state_dict).__name__}."
            )
        state_dict = _as_nested(self, state_dict, from_flatten)
        plan: list[Any] = []
        _plan_load(self, state_dict, strict, assign, (), plan, None)  # type: ignore[arg-type]
        for action in plan:
            action[0](*action[1:])
        return self


def _entries(td: Any) -> Any:
    store = td._tensordict if isinstance(td, _kinds.Dense) else None
    if store is not None:
        return store.items()
    return ((k, td._get_str(k, NO_DEFAULT)) for k in td.keys())


def _level(td: Any) -> dict[str, Any]:
    return {"batch_size": td.batch_size, "device": td.device}


def _non_tensor_value(value: Any) -> Any:
    """What a state dict holds for a non-tensor entry: its value, or a stack's values as
    nested lists."""
    return value.data if isinstance(value, NonTensorData) else value.tolist()


def _tensor_state(value: _Tensor, keep_vars: bool, fresh: bool) -> _Tensor:
    return value if keep_vars or fresh else value.detach()


def _check_key(key: str) -> None:
    if key in _META:
        raise KeyError(f"state_dict: the entry {key!r} clashes with the metadata key of that name.")


def _flat_state(td: Any, prefix: str, keep_vars: bool, out: Any, metadata: dict[str, Any]) -> None:
    """Write ``td``'s tensors under ``prefix + key`` and its levels into ``metadata``."""
    metadata[prefix[:-1] if prefix.endswith(".") else prefix] = _level(td)
    fresh = _kinds.lazy_members(td) is not None  # stacked copies already
    for key, value in _entries(td):
        _check_key(key)
        name = prefix + key
        if isinstance(value, _Tensor):
            out[name] = _tensor_state(value, keep_vars, fresh)
        elif is_non_tensor(value):
            metadata[name] = {
                **_level(value),
                "_type": type(value).__name__,
                "_non_tensor": {"data": _non_tensor_value(value)},
            }
        else:
            _flat_state(data_of(value), name + ".", keep_vars, out, metadata)


def _nested_state(
    td: Any, prefix: str, keep_vars: bool, out: Any, metadata: dict[str, Any]
) -> None:
    """Write ``td``'s entries into ``out`` (one ``OrderedDict`` per nested level)."""
    metadata[""] = _level(td)
    fresh = _kinds.lazy_members(td) is not None
    for key, value in _entries(td):
        _check_key(key)
        if isinstance(value, _Tensor):
            out[prefix + key] = _tensor_state(value, keep_vars, fresh)
        elif is_non_tensor(value):
            out[prefix + key] = _non_tensor_value(value)
        else:
            sub: Any = OrderedDict()
            sub_meta: OrderedDict[str, Any] = OrderedDict()
            _nested_state(data_of(value), "", keep_vars, sub, sub_meta)
            sub._metadata = sub_meta
            out[prefix + key] = sub


def _is_dict(value: Any) -> bool:
    return isinstance(value, Mapping) and not isinstance(value, TensorDictBase)


def _as_nested(td: Any, sd: Mapping[str, Any], from_flatten: bool | None) -> Mapping[str, Any]:
    """``sd`` (flat with ``_metadata``, nested with ``_metadata`` per level, or nested with
    ``"__batch_size"`` entries) as nested dicts with ``"__batch_size"``/``"__device"``."""
    if from_flatten is None:
        from_flatten = not any(_is_dict(v) for v in sd.values())
    if not from_flatten:
        return _with_level_meta(sd)
    out = _unflatten(td, sd)
    meta = getattr(sd, "_metadata", None)
    if not isinstance(meta, Mapping):
        return out
    known = {".".join(k if isinstance(k, tuple) else (k,)): k for k in td.keys(True)}
    for name, level in meta.items():
        if not isinstance(level, Mapping):
            continue
        key = known.get(name, tuple(name.split(".")) if name else ())
        path = key if isinstance(key, tuple) else (key,)
        if "_non_tensor" in level:  # a non-tensor entry
            if path:
                node = _node(out, path[:-1], name)
                node[path[-1]] = level["_non_tensor"].get("data")
            continue
        current = td._get_tuple(path, None) if path else td
        if path and current is not None and not isinstance(current, TensorDictBase):
            continue  # the level of an entry that is not a tensordict here
        node = _node(out, path, name)
        node.setdefault(BATCH_SIZE_KEY, level.get("batch_size"))
        node.setdefault(DEVICE_KEY, level.get("device"))
    return out


def _node(out: dict[str, Any], path: tuple[str, ...], name: str) -> dict[str, Any]:
    node = out
    for part in path:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise KeyError(f"load_state_dict: the metadata of {name!r} conflicts with an entry.")
    return node


def _with_level_meta(sd: Mapping[str, Any]) -> Mapping[str, Any]:
    """A nested state dict whose levels carry their batch size in ``_metadata[""]``, with
    that written as ``"__batch_size"``/``"__device"`` entries (a copy; ``sd`` is kept)."""
    level = (
        getattr(sd, "_metadata", {}).get("")
        if isinstance(getattr(sd, "_metadata", None), Mapping)
        else None
    )
    if level is None and not any(_is_dict(v) for v in sd.values()):
        return sd
    out = {k: _with_level_meta(v) if _is_dict(v) else v for k, v in sd.items()}
    if isinstance(level, Mapping):
        out.setdefault(BATCH_SIZE_KEY, level.get("batch_size"))
        out.setdefault(DEVICE_KEY, level.get("device"))
    return out


def _no_leaves(value: Any) -> bool:
    """Whether ``value`` is a nested level (a dict or a tensordict) without any leaf."""
    if _is_dict(value):
        return all(k in _META or _no_leaves(v) for k, v in value.items())
    return isinstance(value, TensorDictBase) and not is_non_tensor(value) and value.is_empty()


def _unflatten(td: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    """A flat ``{"a.b": v}`` state dict as nested dicts, resolving keys that contain dots
    through the tensordict's own flattened keys."""
    known = {}
    for key in td.keys(True, True, is_leaf=_kinds.is_leaf_nontensor):
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
    td: _kinds.Dense | _kinds.Lazy,
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
    if strict:  # nested levels without leaves do not count (a flat state dict has none)
        extra = sorted(k for k in set(keys) - set(store) if not _no_leaves(sd[k]))
        missing = sorted(k for k in set(store) - set(keys) if not _no_leaves(store[k]))
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


def _set_batch_size(td: _kinds.Dense, batch_size: torch.Size) -> None:
    td.batch_size = batch_size
