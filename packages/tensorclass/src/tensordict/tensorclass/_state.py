"""State dicts of tensorclasses, in the layout ``torch.nn.Module`` uses.

``state_dict()`` is a flat ``OrderedDict`` of tensors with ``"."``-joined keys (``y.x`` for
the field ``x`` of the nested field ``y``) and a ``_metadata`` attribute: for each level
(``""`` for the top), its batch size, device, class name (``_type``) and non-tensor field
values (``_non_tensor``). ``flatten=False`` nests one ``OrderedDict`` per level instead.
``load_state_dict`` takes either layout, and the legacy one (``{"_tensordict": ...,
"_non_tensordict": ...}``), and copies values into the existing entries; nothing is written
unless every key is expected and every value fits.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch

from tensordict import TensorDictBase
from tensordict._plugins.api import NON_TENSOR_TYPES, unwrap_non_tensor

_Tensor = torch.Tensor


def _is_wrapper(value: Any) -> bool:
    return getattr(type(value), "_field_specs", None) is not None and hasattr(value, "_tensordict")


def _level_meta(obj: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"batch_size": obj.batch_size, "device": obj.device}
    if _is_wrapper(obj):
        meta["_type"] = type(obj).__name__
        meta["_non_tensor"] = {}
    return meta


def state_dict(
    obj: Any,
    destination: dict[str, Any] | None = None,
    prefix: str = "",
    keep_vars: bool = False,
    flatten: bool = True,
) -> OrderedDict[str, Any]:
    """The state dict of a tensorclass (see the module docstring)."""
    out: OrderedDict[str, Any] = OrderedDict() if destination is None else destination  # type: ignore[assignment]
    metadata: OrderedDict[str, Any] = getattr(out, "_metadata", None) or OrderedDict()
    _walk(obj, prefix, keep_vars, flatten, out, metadata)
    out._metadata = metadata  # type: ignore[attr-defined]
    return out


def _walk(
    obj: Any,
    path: str,
    keep_vars: bool,
    flatten: bool,
    out: dict[str, Any],
    metadata: dict[str, Any],
) -> None:
    """Write ``obj``'s tensors into ``out`` (flat: under ``path.name``; nested: one
    ``OrderedDict`` per level) and its level metadata into ``metadata[path]``."""
    meta = _level_meta(obj)
    data = obj._tensordict if _is_wrapper(obj) else obj
    names = list(type(obj)._field_specs) if _is_wrapper(obj) else list(data.keys())
    for name in names:
        value = data._get_str(name, None)
        key = f"{path}.{name}" if path and flatten else name
        if isinstance(value, _Tensor):
            out[key] = value if keep_vars else value.detach()
        elif isinstance(value, TensorDictBase) and type(value) not in NON_TENSOR_TYPES:
            if flatten:
                _walk(value, key, keep_vars, True, out, metadata)
            else:
                sub: OrderedDict[str, Any] = OrderedDict()
                sub_meta: OrderedDict[str, Any] = OrderedDict()
                _walk(value, "", keep_vars, False, sub, sub_meta)
                sub._metadata = sub_meta  # type: ignore[attr-defined]
                out[name] = sub
        elif "_non_tensor" in meta and (value is not None or (path and flatten)):
            meta["_non_tensor"][name] = unwrap_non_tensor(value)
    metadata[path] = meta


def load_state_dict(
    obj: Any,
    state_dict: Mapping[str, Any],
    strict: bool = True,
    assign: bool = False,
    from_flatten: bool | None = None,
) -> Any:
    """Load a state dict of either layout (or the legacy one) into ``obj``; see the module
    docstring. Every write is planned and checked before the first one."""
    if "_tensordict" in state_dict and isinstance(state_dict["_tensordict"], dict):
        obj._tensordict.load_state_dict(state_dict["_tensordict"], strict=strict, assign=assign)
        for name, value in (state_dict.get("_non_tensordict") or {}).items():
            setattr(obj, name, value)
        return obj
    metadata = getattr(state_dict, "_metadata", None) or {}
    plan: list[tuple[Any, str, Any]] = []
    flat = (
        from_flatten
        if from_flatten is not None
        else not any(isinstance(v, dict) for v in state_dict.values())
    )
    if flat:
        nested: dict[str, Any] = {}
        for key, value in state_dict.items():
            parts = key.split(".")
            node = nested
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = value
        _plan(obj, nested, metadata, "", strict, plan)
    else:
        _plan(obj, state_dict, metadata, "", strict, plan)
    for target, name, value in plan:
        current = target._get_str(name, None)
        if isinstance(value, _Tensor) and isinstance(current, _Tensor) and not assign:
            current.copy_(value)
        elif _is_wrapper(target):
            setattr(target, name, value)
        else:
            target.set(name, value)
    return obj


def _plan(
    obj: Any,
    sd: Mapping[str, Any],
    metadata: dict[str, Any],
    path: str,
    strict: bool,
    plan: list[tuple[Any, str, Any]],
) -> None:
    own_meta = getattr(sd, "_metadata", None)
    meta = (own_meta or {}).get("", None) or metadata.get(path, {})
    non_tensor = dict(meta.get("_non_tensor") or {})
    data = obj._tensordict if _is_wrapper(obj) else obj
    fields = set(type(obj)._field_specs) if _is_wrapper(obj) else None
    known = fields if fields is not None else set(data.keys())
    for name in [*sd, *non_tensor]:
        if name not in known and (strict or fields is not None):
            where = f"{path}.{name}" if path else name
            raise KeyError(f"Key {where!r} wasn't expected in the state-dict.")
    for name, value in sd.items():
        current = data._get_str(name, None)
        key = f"{path}.{name}" if path else name
        if isinstance(value, dict):
            if not isinstance(current, TensorDictBase):
                raise RuntimeError(
                    f"load_state_dict: the state dict holds a dict at {key!r} but the "
                    f"{type(obj).__name__} holds a {type(current).__name__} there."
                )
            _plan(current, value, metadata, key, strict, plan)
        elif isinstance(value, _Tensor):
            if isinstance(current, _Tensor) and current.shape != value.shape:
                raise RuntimeError(
                    f"load_state_dict: the value at {key!r} has shape {tuple(value.shape)} "
                    f"but the entry has shape {tuple(current.shape)}."
                )
            plan.append((obj, name, value))
        elif value is not None:
            plan.append((obj, name, value))
    for name, value in non_tensor.items():
        if value is not None:
            plan.append((obj, name, value))
