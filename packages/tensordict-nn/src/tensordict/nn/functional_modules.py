"""A module's parameters as a tensordict, and back.

* :func:`from_module` collects the parameters and buffers of a module into a tensordict
  that mirrors the module tree (``TensorDict.from_module`` and
  ``tensordict.from_module`` forward here).
* :func:`from_modules` stacks those of several modules of the same structure (for
  ensembles run with ``torch.vmap``).
* :func:`td_to_module` (``td.to_module(module)``) writes a tensordict's entries into a
  module and returns the entries it replaced; used as a context manager, it puts them
  back on exit, even on an exception.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase
from tensordict._nontensor import NON_TENSOR

__all__ = ["from_module", "from_modules", "td_from_module", "td_to_module"]

_Parameter = nn.Parameter
_is_wrapped = torch._C._functorch.is_functorch_wrapped_tensor


def _is_td(value: Any) -> bool:
    return isinstance(value, TensorDictBase) and not isinstance(value, NON_TENSOR)


# --------------------------------------------------------------------------- from_module


def _collect(module: nn.Module, filter_empty: bool) -> TensorDict:
    """The module's own tensors as a TensorDict mirroring its tree (no copy)."""
    from tensordict.nn.params import TensorDictParams

    if isinstance(module, TensorDictParams):
        # the same storage: writes through the result reach the TensorDictParams
        return TensorDict._new_unsafe(module._tensordict, module.batch_size, module.device)
    store: dict[str, Any] = {}
    for name, param in module._parameters.items():
        if param is not None:
            store[name] = param
    for name, buffer in module._buffers.items():
        if buffer is not None:
            store[name] = buffer
    for name, child in module._modules.items():
        if child is None:
            continue
        sub = _collect(child, filter_empty)
        if sub._tensordict or not filter_empty:
            store[name] = sub
    return TensorDict._new_unsafe(store, torch.Size([]))


def _module_td(module: nn.Module, use_state_dict: bool, filter_empty: bool) -> TensorDict:
    if use_state_dict:
        flat = module.state_dict(keep_vars=True)
        td = TensorDict({k: v for k, v in flat.items() if isinstance(v, torch.Tensor)})
        return td.unflatten_keys(".")
    return _collect(module, filter_empty)


def td_from_module(
    module: nn.Module,
    as_module: bool = False,
    lock: bool = False,
    use_state_dict: bool = False,
    filter_empty: bool = True,
) -> TensorDictBase:
    """The parameters and buffers of ``module`` as a tensordict mirroring its tree.

    The entries are the module's own tensors (no copy). ``as_module=True`` returns a
    :class:`~tensordict.nn.TensorDictParams`; ``lock`` locks the result;
    ``use_state_dict`` goes through ``module.state_dict()`` (and its hooks);
    ``filter_empty`` drops submodules without parameters or buffers.

    This is ``TensorDict.from_module`` (``lock=False`` by default);
    ``tensordict.from_module`` is :func:`from_module` (``lock=True``).

    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> params = TensorDict.from_module(model)
    >>> sorted(params.keys(True, True))
    [('0', 'bias'), ('0', 'weight'), ('2', 'bias'), ('2', 'weight')]
    >>> params["0", "weight"] is model[0].weight
    True
    """
    td: TensorDictBase = _module_td(module, use_state_dict, filter_empty)
    if as_module:
        from tensordict.nn.params import TensorDictParams

        td = TensorDictParams(td, no_convert=True)
    if lock:
        td.lock_()
    return td


def from_module(
    module: nn.Module,
    as_module: bool = False,
    lock: bool = True,
    use_state_dict: bool = False,
    filter_empty: bool = True,
) -> TensorDictBase:
    """``tensordict.from_module``: :func:`td_from_module` locked by default.

    >>> import tensordict
    >>> from torch import nn
    >>> tensordict.from_module(nn.Linear(2, 3)).is_locked
    True
    """
    return td_from_module(
        module, as_module=as_module, lock=lock, use_state_dict=use_state_dict, filter_empty=filter_empty
    )


def _stack_leaves(leaves: list[Any], expand_identical: bool) -> Any:
    first = leaves[0]
    n = len(leaves)
    if expand_identical and all(leaf is first for leaf in leaves):
        data = first.detach().expand(n, *first.shape)
    else:
        with torch.no_grad():
            data = torch.stack([leaf.detach() for leaf in leaves])
    if isinstance(first, _Parameter):
        return _Parameter(data, requires_grad=first.requires_grad)
    return data


def _stack_stores(tds: list[TensorDict], expand_identical: bool, path: tuple) -> dict:
    stores = [td._tensordict for td in tds]
    keys = list(stores[0])
    for i, store in enumerate(stores[1:], 1):
        if set(store) != set(keys):
            where = ".".join(path) or "the root"
            raise ValueError(
                f"from_modules needs modules of the same structure: module 0 has "
                f"{sorted(keys)} at {where}, module {i} has {sorted(store)}."
            )
    out: dict[str, Any] = {}
    for key in keys:
        values = [store[key] for store in stores]
        if isinstance(values[0], TensorDict):
            out[key] = _stack_stores(values, expand_identical, (*path, key))
        else:
            shapes = {tuple(v.shape) for v in values}
            if len(shapes) > 1:
                raise ValueError(
                    f"from_modules: the entries at {'.'.join((*path, key))!r} have different "
                    f"shapes {sorted(shapes)}; use lazy_stack=True to stack them lazily."
                )
            out[key] = _stack_leaves(values, expand_identical)
    return out


def from_modules(
    *modules: nn.Module,
    as_module: bool = False,
    lock: bool = True,
    use_state_dict: bool = False,
    lazy_stack: bool = False,
    expand_identical: bool = False,
) -> TensorDictBase:
    """The parameters and buffers of modules of one structure, stacked along a new dim 0.

    Stacked parameters are new leaf ``nn.Parameter`` (same ``requires_grad``); stacked
    buffers are plain tensors. ``lazy_stack=True`` keeps each module's own tensors in a
    :class:`~tensordict.LazyStackedTensorDict`; ``expand_identical=True`` expands a
    tensor that every module shares instead of copying it. ``as_module=True`` returns a
    :class:`~tensordict.nn.TensorDictParams`.

    >>> import torch
    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> models = [nn.Linear(3, 2) for _ in range(4)]
    >>> params = TensorDict.from_modules(*models)
    >>> params.batch_size, params["weight"].shape
    (torch.Size([4]), torch.Size([4, 2, 3]))
    >>> def call(p, x):
    ...     with p.to_module(models[0]):
    ...         return models[0](x)
    >>> torch.vmap(call, (0, None))(params, torch.ones(3)).shape
    torch.Size([4, 2])
    """
    if not modules:
        raise ValueError("from_modules needs at least one module.")
    if lazy_stack:
        tds = [td_from_module(m, use_state_dict=use_state_dict) for m in modules]
        td: TensorDictBase = LazyStackedTensorDict.lazy_stack(tds, 0)
    else:
        tds = [_module_td(m, use_state_dict, True) for m in modules]
        td = TensorDict(_stack_stores(tds, expand_identical, ()), batch_size=[len(modules)])
    if as_module:
        from tensordict.nn.params import TensorDictParams

        td = TensorDictParams(td, no_convert=True)
    if lock:
        td.lock_()
    return td


# --------------------------------------------------------------------------- to_module


def _module_has(module: nn.Module, name: str) -> bool:
    return (
        name in module._parameters
        or name in module._buffers
        or isinstance(module.__dict__.get(name), torch.Tensor)
    )


def _entries(target: Any) -> list[str]:
    if isinstance(target, nn.Module) and not isinstance(target, TensorDictBase):
        names = list(target._parameters) + list(target._buffers) + list(target._modules)
        return sorted(set(names))
    return sorted(target.keys())


def _plan(td: TensorDictBase, target: Any, path: tuple, plan: list) -> None:
    """Check that every entry of ``td`` has a place in ``target``; list the writes."""
    is_module = isinstance(target, nn.Module) and not isinstance(target, TensorDictBase)
    for key in td.keys():
        value = td._get_str(key, None)
        if isinstance(value, NON_TENSOR):
            continue
        where = (*path, key)
        if _is_td(value):
            child = target._modules.get(key) if is_module else target._get_str(key, None)
            if child is None or not (isinstance(child, nn.Module) or _is_td(child)):
                raise KeyError(
                    f"to_module: {'.'.join(where)!r} names no submodule of "
                    f"{type(target).__name__}; its entries are {_entries(target)}. "
                    "The module was left unchanged."
                )
            _plan(value, child, where, plan)
            continue
        if is_module:
            found = _module_has(target, key)
        else:
            found = isinstance(target._get_str(key, None), torch.Tensor)
        if not found:
            raise KeyError(
                f"to_module: {type(target).__name__} has no parameter or buffer "
                f"{'.'.join(where)!r}; its entries are {_entries(target)}. "
                "The module was left unchanged."
            )
        plan.append((target, key, value, where))


def _as_param(value: torch.Tensor, old: Any) -> torch.Tensor:
    """A plain, detached value for a parameter slot becomes a parameter like ``old``."""
    if isinstance(value, _Parameter) or value.requires_grad or torch.compiler.is_compiling():
        return value
    if _is_wrapped(value):  # inside torch.vmap / torch.func transforms
        return value
    requires_grad = old.requires_grad if isinstance(old, torch.Tensor) else False
    return _Parameter(value, requires_grad=requires_grad)


def _swap_module_entry(module: nn.Module, name: str, value: Any, preserve: bool) -> Any:
    params, buffers, attrs = module._parameters, module._buffers, module.__dict__
    if name in buffers:
        old = buffers[name]
        if preserve and isinstance(value, _Parameter):
            value = value.detach()
        buffers[name] = value
        return old
    if name in params:
        old = params[name]
        if preserve:
            params[name] = _as_param(value, old)
        elif isinstance(value, _Parameter):
            params[name] = value
        else:
            del params[name]
            attrs[name] = value
        return old
    old = attrs[name]  # a plain tensor attribute left by preserve_module_state=False
    if isinstance(value, _Parameter):
        del attrs[name]
        params[name] = value
    else:
        attrs[name] = value
    return old


def _swap_td_entry(td: TensorDictBase, key: str, value: Any, preserve: bool) -> Any:
    store = td._tensordict  # type: ignore[attr-defined]
    old = store[key]
    if preserve and isinstance(old, _Parameter):
        value = _as_param(value, old)
    store[key] = value
    return old


def _copy_into(current: torch.Tensor, value: torch.Tensor, non_blocking: bool) -> torch.Tensor:
    previous = current.detach().clone()
    with torch.no_grad():
        current.copy_(value, non_blocking=non_blocking)
    return previous


def _set_path(store: dict, path: tuple, value: Any) -> None:
    for part in path[:-1]:
        store = store.setdefault(part, {})
    store[path[-1]] = value


def _restore(swap: TensorDictBase, module: nn.Module, options: dict) -> None:
    td_to_module(swap, module, return_swap=False, **options)


def td_to_module(
    td: TensorDictBase,
    module: nn.Module,
    *,
    inplace: bool | None = None,
    return_swap: bool = True,
    swap_dest: TensorDictBase | None = None,
    use_state_dict: bool = False,
    non_blocking: bool = False,
    preserve_module_state: bool = True,
    memo: dict | None = None,
) -> TensorDictBase | None:
    """Write the entries of ``td`` into ``module`` (``td.to_module(module)``).

    Every key of ``td`` must name a parameter or buffer (or, for a nested tensordict, a
    submodule) of ``module``; otherwise :class:`KeyError` names it and the module is
    left unchanged.

    Args:
        inplace: copy the values into the module's tensors instead of replacing them.
        return_swap: return the entries that were replaced (a tensordict); used as a
            context manager (``with td.to_module(module): ...``) it writes them back on
            exit, even on an exception.
        swap_dest: a tensordict to write the replaced entries into (and return).
        use_state_dict: go through ``module.load_state_dict`` (and its hooks).
        non_blocking: for the in-place copies.
        preserve_module_state: a value for a parameter slot that neither requires grad
            nor is an ``nn.Parameter`` is wrapped into one (with the old parameter's
            ``requires_grad``), so ``parameters()`` and ``state_dict()`` keep their
            entries; a parameter given for a buffer slot is stored as a plain tensor.
            With ``False``, plain tensors replace parameters as plain attributes.
            Values that require grad or are transformed by ``torch.func`` are always
            written as they are, so gradients flow back to them.
        memo: entries already written (``{(id(owner), name): replaced}``), so that a
            module reached twice in the tree is written once.

    >>> import torch
    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> model = nn.Linear(2, 2)
    >>> zeros = TensorDict.from_module(model).detach().clone().zero_()
    >>> with zeros.to_module(model):
    ...     model(torch.ones(2))
    tensor([0., 0.])
    >>> bool((model.weight == 0).all())
    False
    """
    inplace = bool(inplace)
    if use_state_dict:
        return _to_module_state_dict(td, module, inplace, return_swap, swap_dest)
    plan: list = []
    _plan(td, module, (), plan)
    memo = {} if memo is None else memo
    replaced: dict[str, Any] = {}
    for target, key, value, path in plan:
        slot = (id(target), key)
        if slot in memo:
            old = memo[slot]
        else:
            if inplace:
                if isinstance(target, nn.Module) and not isinstance(target, TensorDictBase):
                    current = getattr(target, key)
                else:
                    current = target._get_str(key, None)
                old = _copy_into(current, value, non_blocking)
            elif isinstance(target, nn.Module) and not isinstance(target, TensorDictBase):
                old = _swap_module_entry(target, key, value, preserve_module_state)
            else:
                old = _swap_td_entry(target, key, value, preserve_module_state)
            memo[slot] = old
        if return_swap or swap_dest is not None:
            _set_path(replaced, path, old)
    if not return_swap and swap_dest is None:
        return None
    if swap_dest is not None:
        for path, old in _flat(replaced, ()):
            swap_dest.set(path, old)
        swap = swap_dest
    else:
        swap = TensorDict(replaced, batch_size=[])
    options = {"inplace": inplace, "preserve_module_state": preserve_module_state}
    swap._last_op = ("to_module", _restore, swap, module, options)
    return swap


def _flat(store: dict, path: tuple) -> list[tuple[tuple, Any]]:
    out = []
    for key, value in store.items():
        if isinstance(value, dict):
            out.extend(_flat(value, (*path, key)))
        else:
            out.append(((*path, key), value))
    return out


def _to_module_state_dict(
    td: TensorDictBase,
    module: nn.Module,
    inplace: bool,
    return_swap: bool,
    swap_dest: TensorDictBase | None,
) -> TensorDictBase | None:
    flat = {k: v for k, v in td.flatten_keys(".").items()}
    current = module.state_dict(keep_vars=True)
    missing = sorted(set(flat) - set(current))
    if missing:
        raise KeyError(
            f"to_module(use_state_dict=True): {type(module).__name__}'s state_dict has no "
            f"entries {missing}; it has {sorted(current)}. The module was left unchanged."
        )
    old = TensorDict(
        {k: (current[k].detach().clone() if inplace else current[k]) for k in flat}
    ).unflatten_keys(".")
    module.load_state_dict(flat, strict=False, assign=not inplace)
    if not return_swap and swap_dest is None:
        return None
    if swap_dest is not None:
        swap_dest.update(old)
        old = swap_dest
    options = {"inplace": inplace, "use_state_dict": True}
    old._last_op = ("to_module", _restore, old, module, options)
    return old
