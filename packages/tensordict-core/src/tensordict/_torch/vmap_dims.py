"""``torch.vmap``'s ``in_dims``/``out_dims`` for a tensordict name one of its batch dims.

``torch.vmap`` gives the int it got for an argument to every tensor leaf below it, and a
negative int counts from each leaf's own last dim. For a tensordict the int names a *batch*
dimension instead, as in the reference library: ``in_dims=-1`` over a tensordict of batch
size ``[B, N]`` maps ``N`` in every leaf, whatever the leaf's feature dims, and
``out_dims=-1`` puts the mapped dim last among the result's batch dims.

:func:`install` wraps five names of ``torch._functorch.vmap`` that ``vmap`` looks up at
call time:

* ``_broadcast_to_and_flatten`` (the per-leaf dims): below a tensordict, the int is
  checked against its batch dims and made positive; below a lazy stack, it becomes the
  members' own dim;
* ``_process_batched_inputs``, ``_unwrap_batched``, ``_concat_chunked_outputs``: say
  whether the dims are ``in_dims`` (batch dims as they are), ``out_dims`` of the
  function's output (one more batch dim than the output has inside) or ``out_dims`` of
  the chunks put back together; a lazy stack mapped along its stack dim is made dense
  first (its members do not have that dim);
* ``_create_batched_inputs``: says that the tensordicts rebuilt now enter a vmap level
  (compiled code rebuilds them from their leaves' shapes, which it can read, not from
  their vmap levels, which it cannot).

>>> import torch
>>> from tensordict import TensorDict
>>> td = TensorDict(a=torch.zeros(3, 4, 5), batch_size=[3, 4])
>>> torch.vmap(lambda x: x, in_dims=(-1,))(td)["a"].shape
torch.Size([4, 3, 5])
>>> torch.vmap(lambda x: x, out_dims=-1)(td).batch_size
torch.Size([4, 3])
"""

from __future__ import annotations

from typing import Any

import torch._functorch.vmap as _vmap

from tensordict._kinds import kinds as _kinds
from tensordict._torch.pytree_td import LevelSpec, level_spec
from tensordict._torch.traced import VMAP_MODE

#: what torch.vmap is doing, with the count of lazy stacks flattened when it began: "in"
#: (broadcasting in_dims), "out" (out_dims of the function's output, which has the mapped
#: dim still to come, and rebuilding that output), "full" (out_dims of joined chunks),
#: "enter" (rebuilding the inputs at the new level)
_MODE = VMAP_MODE
_ORIGINAL: dict[str, Any] = {}
#: lazy stacks flattened so far (``tensordict._torch.pytree`` counts them): a tree without
#: one and without negative dims needs no translation (the common, fast case)
LAZY_FLATTENED = [0]


class StackDimMapped(ValueError):
    """A lazy stack mapped along its stack dim (its members do not have that dim)."""


def _translate(flat: list[Any], spec: Any, mode: str) -> list[Any]:
    """``flat`` (one dim per leaf of ``spec``) with the dims below tensordicts made batch
    dims."""
    out = list(flat)
    _walk(spec, out, 0, mode, None)
    return out


def _walk(spec: Any, out: list[Any], pos: int, mode: str, dim: int | None) -> int:
    """Rewrite the dims of the leaves of ``spec`` (``out[pos:]``); ``dim``: the batch dim
    (>= 0) an enclosing tensordict maps, ``None`` outside any. Returns the next position."""
    if spec.is_leaf():
        if dim is not None and out[pos] is not None:
            out[pos] = dim
        return pos + 1
    size: int = spec.num_leaves
    context = spec.context if _is_lazy(spec) else level_spec(spec.context)
    if dim is None and isinstance(context, LevelSpec):
        dim = _batch_dim(out[pos : pos + size], context.batch_size, mode)
        if dim is None:  # a structured prefix, or nothing mapped: as torch does
            return pos + size
    elif dim is None and _is_lazy(spec):
        dim = _batch_dim(out[pos : pos + size], context[2], mode)
        if dim is None:
            return pos + size
    if dim is not None and _is_lazy(spec):
        dim = _member_dim(dim, context[0], context[2], mode)
    elif dim is not None and spec.num_nodes == size + 1:  # leaves only
        end = pos + size
        out[pos:end] = [None if d is None else dim for d in out[pos:end]]
        return end
    for child in spec.children():
        pos = _walk(child, out, pos, mode, dim)
    return pos


def _is_lazy(spec: Any) -> bool:
    return isinstance(spec.type, type) and issubclass(spec.type, _kinds.Lazy)


def _batch_dim(dims: list[Any], batch_size: Any, mode: str) -> int | None:
    """The one int given for a whole tensordict, made positive when it counts from the
    end of the batch dims (checked against them); ``None`` when its leaves got no int or
    several, or an int past the batch dims (left to torch, leaf by leaf)."""
    values = set(dims)
    if len(values) != 1:
        return None
    (dim,) = values
    if not isinstance(dim, int):
        return None
    n = len(batch_size) + (mode == "out")
    if dim >= n:  # beyond the batch dims: each leaf's own dim, as torch does (the
        return None  # torch.func transforms map their basis dims this way)
    if dim < -n:
        what = "in_dim" if mode == "in" else "out_dim"
        size = list(batch_size)
        raise ValueError(
            f"vmap: {what}={dim} is not a batch dimension of a tensordict of batch size "
            f"{size}{' (inside the function)' if mode == 'out' else ''}: a negative "
            f"{what} counts from the last batch dim, so it must be >= {-n} (a dim past the "
            "batch dims is each leaf's own dim, counted from its first)."
        )
    return dim % n


def _member_dim(dim: int, stack_dim: int, batch_size: Any, mode: str) -> int:
    """The dim of a lazy stack's members that its batch dim ``dim`` is."""
    if mode == "out":  # the mapped dim goes to ``dim`` of the result
        return dim if dim <= stack_dim else dim - 1
    if dim == stack_dim:
        raise StackDimMapped(
            f"vmap over a LazyStackedTensorDict along its stack dim ({stack_dim}, batch "
            f"size {list(batch_size)}) is not supported here: its members do not have that "
            f"dim. Map another dim, or make it dense first (contiguous())."
        )
    return dim if dim < stack_dim else dim - 1


def _dense_where_stacked(in_dims: Any, args: Any) -> Any:
    """``args`` with the lazy stacks mapped along their stack dim made dense."""
    if not isinstance(args, tuple):
        return args
    if isinstance(in_dims, int):
        dims: tuple[Any, ...] = (in_dims,) * len(args)
    elif isinstance(in_dims, tuple) and len(in_dims) == len(args):
        dims = in_dims
    else:
        return args  # torch explains the mismatch
    out = []
    for arg, dim in zip(args, dims, strict=True):
        if isinstance(arg, _kinds.Base) and isinstance(dim, int):
            n = arg.batch_dims
            if -n <= dim < n:
                arg = _dense_along(arg, dim % n)
        out.append(arg)
    return tuple(out)


def _dense_along(td: Any, dim: int) -> Any:
    """``td`` with its lazy stacks (itself, or nested in a ``TensorDict``) whose stack dim
    is ``dim`` made dense; ``td`` itself when it holds none (else a new container)."""
    if isinstance(td, _kinds.Lazy):
        return td.contiguous() if td.stack_dim == dim else td
    if not isinstance(td, _kinds.Dense):
        return td
    store = td._tensordict
    changed = {}
    for key, value in store.items():
        if isinstance(value, (_kinds.Lazy, _kinds.Dense)):
            new = _dense_along(value, dim)
            if new is not value:
                changed[key] = new
    if not changed:
        return td
    source = {key: changed.get(key, value) for key, value in store.items()}
    out = type(td)._new_unsafe(source, td.batch_size, td.device, td._names)
    return out.lock_() if td.is_locked else out


def _broadcast_to_and_flatten(tree: Any, treespec: Any, *args: Any, **kwargs: Any) -> Any:
    flat = _ORIGINAL["_broadcast_to_and_flatten"](tree, treespec, *args, **kwargs)
    if flat is None or not _MODE:
        return flat
    mode, lazy_count = _MODE[-1]
    if mode != "full" and lazy_count == LAZY_FLATTENED[0]:  # no lazy stack below
        for dim in flat:
            if type(dim) is int and dim < 0:
                break
        else:  # nor a negative dim: a dense tensordict's batch dims are its leaves'
            return flat
    return _translate(flat, treespec, mode)


def _process_batched_inputs(in_dims: Any, args: Any, func: Any) -> Any:
    _MODE.append(("in", LAZY_FLATTENED[0]))
    try:
        return _ORIGINAL["_process_batched_inputs"](in_dims, args, func)
    except StackDimMapped:
        dense = _dense_where_stacked(in_dims, args)
        if dense is args:
            raise
        _MODE[-1] = ("in", LAZY_FLATTENED[0])
        return _ORIGINAL["_process_batched_inputs"](in_dims, dense, func)
    finally:
        _MODE.pop()


def _in_mode(name: str, mode: str) -> Any:
    """``torch._functorch.vmap``'s ``name``, run with ``mode`` on :data:`_MODE`."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _MODE.append((mode, LAZY_FLATTENED[0]))
        try:
            return _ORIGINAL[name](*args, **kwargs)
        finally:
            _MODE.pop()

    wrapper.__name__ = name
    return wrapper


_unwrap_in_mode = _in_mode("_unwrap_batched", "out")


def _unwrap_batched(outputs: Any, out_dims: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(out_dims, tuple) and len(out_dims) == 1 and isinstance(outputs, _kinds.Base):
        out_dims = out_dims[0]  # one tensordict returned: (d,) is d, as for one tensor
    return _unwrap_in_mode(outputs, out_dims, *args, **kwargs)


_WRAPPERS = {
    "_broadcast_to_and_flatten": _broadcast_to_and_flatten,
    "_process_batched_inputs": _process_batched_inputs,
    "_unwrap_batched": _unwrap_batched,
    "_create_batched_inputs": _in_mode("_create_batched_inputs", "enter"),
    "_concat_chunked_outputs": _in_mode("_concat_chunked_outputs", "full"),
}


def install() -> None:
    """Wrap ``torch.vmap``'s dims handling (once; a torch without one of the names keeps
    its own behaviour: a tensordict is then mapped along each leaf's dim)."""
    if _ORIGINAL or not all(hasattr(_vmap, name) for name in _WRAPPERS):
        return
    for name, wrapper in _WRAPPERS.items():
        _ORIGINAL[name] = getattr(_vmap, name)
        setattr(_vmap, name, wrapper)
