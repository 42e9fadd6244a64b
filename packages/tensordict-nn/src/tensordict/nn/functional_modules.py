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
from torch.nn.parameter import is_lazy

from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase
from tensordict._plugins.api import NON_TENSOR
from tensordict.nn._client_compat import _exclude_td_from_pytree as _exclude_td_from_pytree
from tensordict.nn._slot_check import check_copy
from tensordict.nn._swap import Swapper, entries_of, tree_to_td, undo

__all__ = ["from_module", "from_modules", "td_from_module", "td_to_module"]

_Parameter = nn.Parameter


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
    return _finish(_module_td(module, use_state_dict, filter_empty), as_module, lock)


def _finish(td: TensorDictBase, as_module: bool, lock: bool) -> TensorDictBase:
    """``td`` as a TensorDictParams (``as_module``), locked (``lock``)."""
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
        module,
        as_module=as_module,
        lock=lock,
        use_state_dict=use_state_dict,
        filter_empty=filter_empty,
    )


def _stack_leaves(leaves: list[Any], expand_identical: bool) -> Any:
    first = leaves[0]
    n = len(leaves)
    if expand_identical and all(leaf is first for leaf in leaves):
        # a view of the one shared tensor, as the reference: not a new parameter, and
        # gradients flow back to the modules' own parameter
        return first.expand(n, *first.shape)
    else:
        with torch.no_grad():
            data = torch.stack([leaf.detach() for leaf in leaves])
    if isinstance(first, _Parameter):
        return _Parameter(data, requires_grad=first.requires_grad)
    return data


def _stack_stores(tds: list[Any], expand_identical: bool, path: tuple[str, ...]) -> dict[str, Any]:
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
    tensor that every module shares instead of copying it (an expanded view of it, not a
    new parameter: gradients reach the shared parameter). ``as_module=True`` returns a
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
    if lazy_stack and as_module:  # as the reference
        raise RuntimeError(
            "from_modules(lazy_stack=True, as_module=True): a lazy stack of parameters cannot "
            "be held within a TensorDictParams; pass one of the two."
        )
    if lazy_stack:
        tds = [td_from_module(m, use_state_dict=use_state_dict) for m in modules]
        td: TensorDictBase = LazyStackedTensorDict.lazy_stack(tds, 0)
    else:
        tds = [_module_td(m, use_state_dict, True) for m in modules]
        td = TensorDict(_stack_stores(tds, expand_identical, ()), batch_size=[len(modules)])
    return _finish(td, as_module, lock)


# --------------------------------------------------------------------------- to_module


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
    memo: dict[Any, Any] | None = None,
) -> TensorDictBase | None:
    """Write the entries of ``td`` into ``module`` (``td.to_module(module)``).

    Every key of ``td`` must name a parameter or buffer (or, for a nested tensordict, a
    submodule) of ``module``; otherwise :class:`KeyError` names it and the module is
    left unchanged. Each value must have the shape of the tensor it replaces (extra
    leading dimensions are accepted: stacked parameters, and the per-sample shapes seen
    inside ``torch.vmap``); an in-place write needs the same shape and a dtype the slot
    holds without changing the values. Otherwise :class:`RuntimeError` names the entry
    and both shapes, and the module is left unchanged.

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
    ...     model(torch.ones(2)).tolist()
    [0.0, 0.0]
    >>> bool((model.weight == 0).all())
    False
    """
    inplace = bool(inplace)
    if use_state_dict:
        return _to_module_state_dict(td, module, inplace, return_swap, swap_dest)
    swapper = Swapper(
        preserve=preserve_module_state, inplace=inplace, non_blocking=non_blocking, memo=memo
    )
    replaced: dict[str, Any] = {}
    swapper.write(entries_of(td), module, replaced)
    if not return_swap and swap_dest is None:
        return None
    if swap_dest is not None:
        for path, old in _flat(replaced, ()):
            swap_dest.set(path, old)
        swap = swap_dest
    else:
        swap = tree_to_td(replaced)
    swap._last_op = ("to_module", undo, swapper.undo)
    return swap


def _flat(store: dict[str, Any], path: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
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
    flat = {k: v for k, v in td.flatten_keys(".").items() if isinstance(k, str)}
    current = module.state_dict(keep_vars=True)
    missing = sorted(set(flat) - set(current))
    if missing:
        raise KeyError(
            f"to_module(use_state_dict=True): {type(module).__name__}'s state_dict has no "
            f"entries {missing}; it has {sorted(current)}. The module was left unchanged."
        )
    # load_state_dict refuses a value of another shape only after loading the others:
    # check every entry first, so that a refused call changes nothing
    for name, value in flat.items():
        slot = current[name]
        if isinstance(value, torch.Tensor) and isinstance(slot, torch.Tensor):
            if inplace:
                check_copy(value, slot, (), name, module)
            elif not is_lazy(slot) and value.shape != slot.shape:
                if not (slot.ndim == 0 and value.shape == (1,)):  # as load_state_dict
                    raise RuntimeError(
                        f"to_module(use_state_dict=True): the value for {name!r} has shape "
                        f"{tuple(value.shape)}, but {type(module).__name__}'s state_dict "
                        f"entry has shape {tuple(slot.shape)}. The module was left unchanged."
                    )
    old = TensorDict(
        {k: (current[k].detach().clone() if inplace else current[k]) for k in flat}
    ).unflatten_keys(".")
    module.load_state_dict(flat, strict=False, assign=not inplace)
    if not return_swap and swap_dest is None:
        return None
    if swap_dest is not None:
        swap_dest.update(old)
        old = swap_dest  # type: ignore[assignment]
    old._last_op = ("to_module", _load_back, old, module, inplace)
    return old


def _load_back(swap: TensorDictBase, module: nn.Module, inplace: bool) -> None:
    _to_module_state_dict(swap, module, inplace, return_swap=False, swap_dest=None)
