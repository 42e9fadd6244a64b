"""Methods over the batch dimensions, declared from tables and installed on ``TensorDictBase``.

* :data:`BATCH_OPS` — shape operations with their batch-size rule (``roll``, ``rot90``,
  ``tile``, ``repeat_interleave``, ``atleast_*d``, ``softmax``, ``gather``). Each row is a
  *plan* function: it normalises the arguments against the batch dimensions once and
  returns ``(leaf_fn, new_batch_size, new_names)``; the method maps ``leaf_fn`` over every
  tensor through ``_map_batch``. The plan's signature and docstring are the method's.
* :data:`NEW` — ``new_zeros``/``new_ones``/``new_empty``/``new_full``: a tensordict with
  the same structure, batch size ``size`` and each leaf ``leaf.new_*((*size, *features))``.
* masked writes and selections with a boolean tensor over the batch dimensions
  (``masked_fill(_)``, ``masked_select``, ``where``) and ``scatter``.

Dimensions always refer to batch dimensions (negative ones count from the end of the
batch size); masks, conditions and indices are aligned with the *leading* dimensions of
each leaf and broadcast over its feature dimensions (as ``expand_as_right`` does).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from tensordict._engine.ops import PREDICATES
from tensordict._engine.ops_reduce import reduce_non_tensor
from tensordict._engine.tree import carry_non_tensor, map_leaves
from tensordict._keys.shape import normalize_dim, unpack_shape
from tensordict._kinds import kinds as _kinds
from tensordict._kinds.inplace import adopt
from tensordict._kinds.inplace import check as check_inplace
from tensordict._leaves.nontensor import NON_TENSOR, NonTensorDataBase, NonTensorStack
from tensordict._plugins import siblings as _siblings
from tensordict.base import (
    NO_DEFAULT,
    TD_HANDLED_FUNCTIONS,
    TensorDictBase,
    implements_for_td,
    is_tensor_collection,
)

_Tensor = torch.Tensor
_Plan = tuple[Callable[[Any], Any], torch.Size, "list[str | None] | None"]


def _names(td: TensorDictBase) -> list[Any] | None:
    names = getattr(td, "_names", None)
    return None if names is None else list(names)


def _dim(name: str, dim: int, td: TensorDictBase, what: str = "dim") -> int:
    """A batch dimension, with an error naming the method and the batch size."""
    try:
        return normalize_dim(dim, td.batch_dims, what)
    except IndexError as err:
        raise IndexError(f"{name}(): {err} (batch_size={tuple(td.batch_size)})") from None


def _right(t: _Tensor, ndim: int) -> _Tensor:
    """``t`` with trailing size-1 dimensions up to ``ndim`` (aligned with leading dims)."""
    extra = ndim - t.ndim
    return t.reshape(*t.shape, *([1] * extra)) if extra > 0 else t


def _index_for(index: _Tensor, x: Any, nb: int) -> _Tensor:
    """A batch-shaped index expanded over the feature dimensions of ``x``."""
    return _right(index, x.ndim).expand(*index.shape, *x.shape[nb:])


def _dense(td: TensorDictBase) -> _kinds.Dense:
    """``td`` itself when dense; otherwise (lazy stacks …) a dense copy, whose leaves line up
    with the batch dimensions that masks and indices refer to."""
    return td if isinstance(td, _kinds.Dense) else td.to_tensordict()


def _check_mask(name: str, mask: Any, td: TensorDictBase, exact: bool = False) -> _Tensor:
    """A boolean tensor aligned with the leading batch dimensions (size 1 broadcasts)."""
    bs = td.batch_size
    if not isinstance(mask, _Tensor):
        raise TypeError(f"{name}(): expected a boolean tensor, got {type(mask).__name__}.")
    if mask.dtype is not torch.bool:
        raise TypeError(f"{name}(): expected a boolean tensor, got dtype {mask.dtype}.")
    shape = mask.shape
    ok = mask.ndim <= len(bs) and all(
        s == b or (s == 1 and not exact) for s, b in zip(shape, bs[: mask.ndim])
    )
    if not ok:
        raise RuntimeError(
            f"{name}(): the mask of shape {tuple(shape)} does not match batch_size={tuple(bs)}; "
            f"it must {'equal' if exact else 'match (or be 1 along)'} the leading batch "
            "dimensions."
        )
    return mask


# --------------------------------------------------------------------------- BATCH_OPS plans
def roll(
    td: TensorDictBase, shifts: int | Sequence[int], dims: Any = None, *, inplace: bool = False
) -> _Plan:
    """Roll along batch dimensions, like :func:`torch.roll` (``dims=None``: the flattened
    batch); ``inplace=True`` makes the tensordict hold the result.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> TensorDict({"a": torch.arange(3)}, [3]).roll(1)["a"]
    tensor([2, 0, 1])
    """
    bs = td.batch_size
    nb = len(bs)
    if dims is None:
        if nb <= 1:
            return (lambda x: x.roll(shifts, 0)) if nb else (lambda x: x.clone()), bs, _names(td)
        n = bs.numel()
        return (
            lambda x: x.reshape(n, *x.shape[nb:]).roll(shifts, 0).reshape(x.shape),
            bs,
            _names(td),
        )
    ds = [_dim("roll", d, td) for d in ([dims] if isinstance(dims, int) else dims)]
    return (lambda x: x.roll(shifts, ds)), bs, _names(td)


def rot90(td: TensorDictBase, k: int = 1, dims: Sequence[int] = (0, 1)) -> _Plan:
    """Rotate by 90 degrees ``k`` times in the plane of two batch dimensions (:func:`torch.rot90`).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> TensorDict({"a": torch.zeros(2, 3, 4)}, [2, 3]).rot90()["a"].shape
    torch.Size([3, 2, 4])
    """
    if td.batch_dims < 2:
        raise RuntimeError(
            f"rot90() requires at least 2 batch dimensions, got batch_size={tuple(td.batch_size)}."
        )
    if len(dims) != 2:
        raise ValueError(f"rot90(): dims must name two batch dimensions, got {dims!r}.")
    d0, d1 = _dim("rot90", dims[0], td), _dim("rot90", dims[1], td)
    if d0 == d1:
        raise ValueError(f"rot90(): dims must be two different batch dimensions, got {dims!r}.")
    bs = list(td.batch_size)
    names = _names(td)
    if k % 2:
        bs[d0], bs[d1] = bs[d1], bs[d0]
        if names is not None:
            names[d0], names[d1] = names[d1], names[d0]

    def fn(x: Any) -> Any:
        if not isinstance(x, NON_TENSOR):
            return x.rot90(k, (d0, d1))
        # non-tensor stacks have flip/transpose but no rot90 (same rule as torch.rot90)
        stack: Any = x
        r = k % 4
        if r == 1:
            return stack.flip(d1).transpose(d0, d1)
        if r == 2:
            return stack.flip((d0, d1))
        if r == 3:
            return stack.flip(d0).transpose(d0, d1)
        return stack

    return fn, torch.Size(bs), names


def tile(td: TensorDictBase, *dims: Any) -> _Plan:
    """Repeat the batch like :func:`torch.tile` (missing leading repeats count as 1).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> TensorDict({"a": torch.zeros(2, 3, 4)}, [2, 3]).tile(2)["a"].shape
    torch.Size([2, 6, 4])
    """
    reps = tuple(unpack_shape(dims))
    bs = td.batch_size
    nb = len(bs)
    if len(reps) < nb:
        reps = (1,) * (nb - len(reps)) + reps
    extra = len(reps) - nb
    new = torch.Size((*reps[:extra], *(r * s for r, s in zip(reps[extra:], bs))))
    names = _names(td)
    if names is not None:
        names = [None] * extra + names
    return (lambda x: x.repeat(*reps, *([1] * (x.ndim - nb)))), new, names


def repeat_interleave(
    td: TensorDictBase,
    repeats: int | torch.Tensor,
    dim: int | None = None,
    *,
    output_size: int | None = None,
    inplace: bool = False,
) -> _Plan:
    """Repeat each batch element, like :func:`torch.repeat_interleave` (``dim=None``: the
    flattened batch); ``inplace=True`` makes the tensordict hold the result.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> TensorDict({"a": torch.arange(2)}, [2]).repeat_interleave(2, dim=0)["a"]
    tensor([0, 0, 1, 1])
    """
    bs = td.batch_size
    nb = len(bs)
    if dim is None:
        n = bs.numel()
        src = torch.Size([n])
        d = 0
        names = None
    else:
        d = _dim("repeat_interleave", dim, td)
        src = bs
        names = _names(td)
    if output_size is not None:
        size = output_size
    elif isinstance(repeats, _Tensor) and repeats.numel() != 1:
        size = int(repeats.sum())
    else:
        size = int(repeats) * src[d]
    new = src[:d] + torch.Size([size]) + src[d + 1 :]
    if dim is None:
        n = bs.numel()
        return (
            lambda x: x.reshape(n, *x.shape[nb:]).repeat_interleave(
                repeats, 0, output_size=output_size
            ),
            new,
            names,
        )
    return (lambda x: x.repeat_interleave(repeats, d, output_size=output_size)), new, names


def _atleast(n: int) -> Callable[[TensorDictBase], _Plan | None]:
    def plan(td: TensorDictBase) -> _Plan | None:
        bs = td.batch_size
        nb = len(bs)
        if nb >= n:
            return None
        # as the reference: leading dims of size 1 (torch.atleast_3d gives (1, a, 1) for
        # a tensor of shape (a,); a tensordict's batch gets (1, 1, a))
        names = _names(td) or [None] * nb
        new_names: list[str | None] = [None] * (n - nb) + list(names)
        size = torch.Size([1] * (n - nb) + list(bs))
        return (lambda x: x.reshape(*size, *x.shape[nb:])), size, new_names

    plan.__name__ = f"atleast_{n}d"
    plan.__doc__ = (
        f"View with at least {n} batch dimension(s), like :func:`torch.atleast_{n}d` "
        "(returns the tensordict itself when it already has them).\n\n"
        "    >>> import torch\n"
        "    >>> from tensordict import TensorDict\n"
        f"    >>> TensorDict({{'a': torch.zeros(3, 4)}}, [3]).atleast_{n}d().batch_size\n"
        f"    {torch.Size([1] * (n - 1) + [3])}\n"
    )
    return plan


def softmax(td: TensorDictBase, dim: int, dtype: torch.dtype | None = None) -> _Plan:
    """Softmax of each leaf along batch dimension ``dim`` (:func:`torch.softmax`).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> TensorDict({"a": torch.zeros(2, 3)}, [2]).softmax(0)["a"]
    tensor([[0.5000, 0.5000, 0.5000],
            [0.5000, 0.5000, 0.5000]])
    """
    d = _dim("softmax", dim, td)
    return (
        (
            lambda x: (
                carry_non_tensor(x, x.batch_size)
                if isinstance(x, NON_TENSOR)
                else x.softmax(d, dtype=dtype)
            )
        ),
        td.batch_size,
        _names(td),
    )


def gather(
    td: TensorDictBase,
    dim: int,
    index: torch.Tensor,
    out: TensorDictBase | None = None,
    *,
    inplace: bool = False,
) -> _Plan:
    """Gather along batch dimension ``dim`` with an index of ``batch_dims`` dimensions, like
    :func:`torch.gather`; the result's batch size is ``index.shape`` (feature dimensions are
    carried over). ``out`` receives the result in place; ``inplace=True`` makes the
    tensordict itself hold it.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.arange(6).reshape(2, 3)}, [2, 3])
    >>> td.gather(1, torch.tensor([[2], [0]]))["a"]
    tensor([[2],
            [3]])
    """
    bs = td.batch_size
    nb = len(bs)
    d = _dim("gather", dim, td)
    if inplace and out is not None:
        raise ValueError("gather(): out= and inplace=True are mutually exclusive.")
    if inplace and isinstance(index, _Tensor) and index.ndim != nb:
        raise NotImplementedError(
            f"gather(inplace=True) needs index.ndim == batch_dims ({nb}), got an index of "
            f"shape {tuple(index.shape)}."
        )
    if not isinstance(index, _Tensor) or index.ndim != nb:
        shape = tuple(index.shape) if isinstance(index, _Tensor) else type(index).__name__
        raise RuntimeError(
            f"gather(): the index ({shape}) must have as many dimensions as the batch "
            f"(batch_size={tuple(bs)})."
        )
    if any(s > b for i, (s, b) in enumerate(zip(index.shape, bs)) if i != d):
        raise RuntimeError(
            f"gather(): the index of shape {tuple(index.shape)} is larger than "
            f"batch_size={tuple(bs)} outside dimension {d}."
        )

    def fn(x: Any) -> Any:
        if not isinstance(x, NON_TENSOR):
            return x.gather(d, _index_for(index, x, nb))
        # a non-tensor stack: the same selection as an advanced index
        grid = [
            torch.arange(s).reshape(*[-1 if j == i else 1 for j in range(nb)])
            for i, s in enumerate(index.shape)
        ]
        grid[d] = index
        stack: Any = x
        return stack[tuple(grid)]

    return fn, index.shape, _names(td)


#: name -> plan function (also the method's signature and docstring).
BATCH_OPS: dict[str, Callable[..., _Plan | None]] = {
    "roll": roll,
    "rot90": rot90,
    "tile": tile,
    "repeat_interleave": repeat_interleave,
    "atleast_1d": _atleast(1),
    "atleast_2d": _atleast(2),
    "atleast_3d": _atleast(3),
    "softmax": softmax,
    "gather": gather,
}


def _make_batch_op(name: str, plan: Callable[..., _Plan | None]) -> Callable[..., Any]:
    def method(self: TensorDictBase, *args: Any, **kwargs: Any) -> Any:
        inplace = kwargs.get("inplace", False)
        if inplace:
            check_inplace(self, name)
        p = plan(self, *args, **kwargs)
        if p is None:
            return self
        result = self._map_batch(*p)
        out = kwargs.get("out")
        if out is not None:
            return out.update_(result)
        if inplace:
            return adopt(self, result, name)
        return result

    sig = inspect.signature(plan)
    params = list(sig.parameters.values())
    method.__dict__["__signature__"] = sig.replace(
        parameters=[params[0].replace(name="self", annotation=inspect.Parameter.empty)]
        + params[1:],
        return_annotation="Self",
    )
    method.__name__ = method.__qualname__ = name
    method.__doc__ = plan.__doc__
    return method


# --------------------------------------------------------------------------- new_* constructors
#: name -> the ``Tensor.new_*`` method each leaf uses; ``new_full`` also takes a fill value.
NEW: tuple[str, ...] = ("new_zeros", "new_ones", "new_empty", "new_full")


def _set_device(td: Any, device: Any) -> None:
    if isinstance(td, _kinds.Dense):
        td._device = device
        for v in td._tensordict.values():
            _set_device(v, device)


def _emptied(td: Any) -> Any:
    """``td`` with every lazy stack replaced by a dense one without entries (same batch
    size): ``new_*(..., empty_lazy=True)`` never reads their content."""
    if isinstance(td, _kinds.Lazy):
        return _kinds.Dense(batch_size=td.batch_size, device=td.device)
    if not isinstance(td, _kinds.Dense):
        return td
    store = {k: _emptied(v) for k, v in td._tensordict.items()}
    return td._new_unsafe(store, td._batch_size, td._device, td._names)


def _empty_lazy(source: Any, result: Any) -> Any:
    """``result`` where every lazy stack of ``source`` is a lazy stack of the new batch size
    without tensors: what ``new_*(..., empty_lazy=True)`` returns. As in the reference,
    each member is a copy of the first member's structure (its nested tensordicts and its
    non-tensor entries, see ``empty(recurse=True)``) for the member's new batch size."""
    if isinstance(source, _kinds.Lazy):
        bs = result.batch_size
        if not bs:
            return result
        sd = min(source.stack_dim, len(bs) - 1)
        member = bs[:sd] + bs[sd + 1 :]
        if source.tensordicts:
            template = (
                source.tensordicts[0]
                .empty(recurse=True)
                .new_empty(member, device=result.device, empty_lazy=True)
            )
            members = [template.copy() for _ in range(bs[sd])]
        else:
            members = [_kinds.Dense(batch_size=member, device=result.device) for _ in range(bs[sd])]
        return _kinds.Lazy(*members, stack_dim=sd)
    if isinstance(source, _kinds.Dense) and isinstance(result, _kinds.Dense):
        store = result._tensordict
        for key, value in source._tensordict.items():
            if isinstance(value, TensorDictBase) and key in store:
                store[key] = _empty_lazy(value, store[key])
    return result


def _new_non_tensor(value: Any, old_bs: torch.Size, new_bs: torch.Size) -> Any:
    """The entry of a ``new_*`` result for a non-tensor entry: a one-value leaf keeps its
    value; a stack becomes a stack of the new shape (holding its first value: the content
    of a ``new_*`` result is not meant to be read before it is written)."""
    shape = new_bs + value.batch_size[len(old_bs) :]
    if isinstance(value, NonTensorDataBase):
        return value._with(shape)
    first = value.reshape(-1)[0].data if value.numel() else None
    return NonTensorStack._from_parts([first], torch.zeros(shape, dtype=torch.long), value.device)


def _make_new(name: str) -> Callable[..., Any]:
    full = name == "new_full"

    def method(self: TensorDictBase, *size: Any, **kwargs: Any) -> Any:
        fill: tuple[Any, ...] = ()
        if full:
            if "fill_value" in kwargs:
                fill = (kwargs.pop("fill_value"),)
            elif len(size) == 2:
                size, fill = size[:1], size[1:]
            else:
                raise TypeError("new_full() takes a size and a fill_value.")
        if "size" in kwargs:
            size = (kwargs.pop("size"),)
        empty_lazy = kwargs.pop("empty_lazy", False)
        shape = torch.Size(unpack_shape(size))
        device = kwargs.pop("device", NO_DEFAULT)
        dtype = kwargs.pop("dtype", None)
        rest = {k: v for k, v in kwargs.items() if v is not None}
        unknown = set(rest) - {"requires_grad", "layout", "pin_memory"}
        if unknown:
            raise TypeError(f"{name}() got unexpected keyword arguments {sorted(unknown)}.")
        nb = self.batch_dims

        def fn(x: Any) -> Any:
            if not isinstance(x, _Tensor):
                return getattr(x, name)(
                    (*shape, *x.shape[nb:]), *fill, dtype=dtype, device=device, **rest
                )
            return getattr(x, name)(
                (*shape, *x.shape[nb:]),
                *fill,
                dtype=dtype or x.dtype,
                device=x.device if device is NO_DEFAULT else device,
                **rest,
            )

        result = map_leaves(
            _emptied(self) if empty_lazy else self,
            name,
            lambda x, _: fn(x),
            lambda s: torch.Size((*shape, *s[nb:])),
            lambda n: None,
            fn,
            _new_non_tensor,
        )[0]
        if device is not NO_DEFAULT:
            _set_device(result, None if device is None else torch.device(device))
        if empty_lazy:
            return _empty_lazy(self, result)
        return result

    P = inspect.Parameter
    params = [P("self", P.POSITIONAL_OR_KEYWORD)]
    if full:
        params += [
            P("size", P.POSITIONAL_OR_KEYWORD, annotation="Sequence[int]"),
            P("fill_value", P.POSITIONAL_OR_KEYWORD, annotation="Any"),
        ]
    else:
        params.append(P("size", P.VAR_POSITIONAL, annotation="Any"))
    params += [
        P("dtype", P.KEYWORD_ONLY, default=None, annotation="torch.dtype | None"),
        P("device", P.KEYWORD_ONLY, default=NO_DEFAULT, annotation="Any"),
        P("requires_grad", P.KEYWORD_ONLY, default=False, annotation="bool"),
        P("layout", P.KEYWORD_ONLY, default=torch.strided, annotation="torch.layout"),
        P("pin_memory", P.KEYWORD_ONLY, default=None, annotation="bool | None"),
        P("empty_lazy", P.KEYWORD_ONLY, default=False, annotation="bool"),
    ]
    method.__dict__["__signature__"] = inspect.Signature(params, return_annotation="Self")
    method.__name__ = method.__qualname__ = name
    args = "(2,), 7.0" if full else "2"
    method.__doc__ = (
        f"A tensordict of batch size ``size`` whose leaves are ``leaf.{name}((*size, "
        "*leaf_features))``: same keys, dtypes and device unless ``dtype``/``device`` are "
        "given.\n\n"
        "    >>> import torch\n"
        "    >>> from tensordict import TensorDict\n"
        "    >>> td = TensorDict({'a': torch.ones(3, 4, dtype=torch.int64)}, [3])\n"
        f"    >>> out = td.{name}({args})\n"
        "    >>> out.batch_size, out['a'].shape, out['a'].dtype\n"
        "    (torch.Size([2]), torch.Size([2, 4]), torch.int64)\n"
    )
    return method


def new_tensor(
    self: TensorDictBase,
    data: Any,
    *,
    dtype: torch.dtype | None = None,
    device: Any = NO_DEFAULT,
    requires_grad: bool = False,
    pin_memory: bool | None = None,
) -> TensorDictBase:
    """A tensordict with the structure of this one whose leaves are copies of ``data``.

    ``data`` is a tensordict (its entries matched by key; the result has its batch size) or
    anything :func:`torch.as_tensor` accepts (every leaf is a copy of it and the batch size
    is its shape). Each copy keeps the dtype and device of the leaf it replaces unless
    ``dtype``/``device`` are given.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.zeros(2, dtype=torch.int64), "b": torch.zeros(2)}, [2])
    >>> out = td.new_tensor([1, 2, 3])
    >>> out["a"], out["b"], out.batch_size
    (tensor([1, 2, 3]), tensor([1., 2., 3.]), torch.Size([3]))
    """

    def copy(x: _Tensor, y: Any) -> _Tensor:
        # Tensor.new_tensor: a detached copy (which warns, as torch does, when ``y`` is a
        # tensor: clone().detach() is the idiom there)
        out: _Tensor = x.new_tensor(
            y, dtype=dtype or x.dtype, device=x.device if device is NO_DEFAULT else device
        )
        if pin_memory:
            out = out.pin_memory()
        return out.requires_grad_(requires_grad) if requires_grad else out

    if is_tensor_collection(data):
        result = self.apply(copy, data, batch_size=data.batch_size)
    else:
        raw = data
        data = torch.as_tensor(data)
        shape = data.shape
        result = map_leaves(
            self,
            "new_tensor",
            lambda x, nb: copy(x, raw),
            lambda s: shape,
            lambda n: None,
            lambda v: v.new_tensor(data, dtype=dtype, device=device),
            reduce_non_tensor,
        )[0]
    if device is not NO_DEFAULT:
        _set_device(result, None if device is None else torch.device(device))
    return result


# --------------------------------------------------------------------------- masks, where, scatter
def masked_fill(self: TensorDictBase, mask: torch.Tensor, value: Any) -> TensorDictBase:
    """Fill with ``value`` where the boolean ``mask`` (over the leading batch dimensions) is
    true, in a new tensordict.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.zeros(3, 2)}, [3])
    >>> td.masked_fill(torch.tensor([True, False, True]), 1.0)["a"]
    tensor([[1., 1.],
            [0., 0.],
            [1., 1.]])
    """
    mask = _check_mask("masked_fill", mask, self)
    self = _dense(self)
    leaves = self._flat_tensors([])
    return self._rebuild(iter([x.masked_fill(_right(mask, x.ndim), value) for x in leaves]))


def masked_fill_(self: TensorDictBase, mask: torch.Tensor, value: Any) -> TensorDictBase:
    """In-place :meth:`masked_fill` (the mask is checked before anything is written).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.zeros(2)}, [2])
    >>> td.masked_fill_(torch.tensor([False, True]), 5)["a"]
    tensor([0., 5.])
    """
    mask = _check_mask("masked_fill_", mask, self)
    if not isinstance(self, _kinds.Dense):
        return self.update_(masked_fill(self, mask, value))
    for x in self._flat_tensors([]):
        x.masked_fill_(_right(mask, x.ndim), value)
    return self


def masked_select(
    self: TensorDictBase, mask: torch.Tensor, *, inplace: bool = False
) -> TensorDictBase:
    """The batch elements where ``mask`` is true, like ``td[mask]``: ``mask`` spans the
    leading batch dimensions, which become one dimension of size ``mask.sum()``. With
    ``inplace=True`` the tensordict itself holds the selection.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.arange(6).reshape(3, 2)}, [3, 2])
    >>> td.masked_select(torch.tensor([True, False, True]))["a"]
    tensor([[0, 1],
            [4, 5]])
    """
    nb = self.batch_dims
    while isinstance(mask, _Tensor) and mask.ndim > nb and mask.shape[-1] == 1:
        mask = mask.squeeze(-1)
    mask = _check_mask("masked_select", mask, self, exact=True)
    selected: TensorDictBase = self[mask]
    if inplace:
        check_inplace(self, "masked_select")
        adopted: TensorDictBase = adopt(self, selected, "masked_select")
        return adopted
    return selected


def _condition_for(name: str, cond: Any, td: TensorDictBase) -> Any:
    if is_tensor_collection(cond):
        return cond
    return _check_mask(name, cond, td)


def _where_leaf(c: _Tensor, x: Any, o: Any) -> _Tensor:
    ref = x if isinstance(x, _Tensor) else o
    return torch.where(_right(c, ref.ndim), x, o)


def _where_td(
    td: TensorDictBase, cond: Any, other: TensorDictBase, pad: Any, prefix: tuple[Any, ...]
) -> TensorDictBase:
    """Key-matched ``where`` with a tensordict ``other`` (``pad`` fills missing entries)."""
    store = _dense(td)._tensordict
    ostore = other._tensordict if isinstance(other, _kinds.Dense) else None
    if ostore is None:
        ostore = {k: other._get_str(k, NO_DEFAULT) for k in other.keys() if isinstance(k, str)}
    out = {}
    for key in list(store) + [k for k in ostore if k not in store]:
        x = store.get(key)
        o = ostore.get(key)
        c = cond._get_str(key, NO_DEFAULT) if is_tensor_collection(cond) else cond
        if x is None or o is None:
            if pad is None:
                raise KeyError(
                    f"where(): key {prefix + (key,)!r} is only in "
                    f"{'self' if o is None else 'other'}: not found and no pad value provided; "
                    "pass pad= to fill the missing side."
                )
            one = x if x is not None else o
            assert one is not None
            if isinstance(one, NON_TENSOR):
                out[key] = carry_non_tensor(one, td.batch_size)
            elif isinstance(one, _Tensor):
                out[key] = _where_leaf(c, x, pad) if o is None else _where_leaf(c, pad, o)
            else:
                # a nested tensordict on one side only: pad its every leaf
                empty = one.apply(lambda v: torch.full_like(v, pad))
                out[key] = _where_td(
                    one if o is None else empty,
                    c,
                    empty if o is None else one,
                    None,
                    prefix + (key,),
                )
        elif isinstance(x, _Tensor):
            try:
                out[key] = _where_leaf(c, x, o)
            except RuntimeError as err:
                raise RuntimeError(
                    f"where(): entry {prefix + (key,)!r} of shape {tuple(x.shape)} with "
                    f"other of shape {tuple(o.shape)}: {err}"
                ) from None
        elif isinstance(x, NON_TENSOR):
            out[key] = carry_non_tensor(x, td.batch_size)
        else:
            out[key] = _where_td(x, c, o, pad, prefix + (key,))
    return _kinds.Dense._new_unsafe(out, td.batch_size, td.device, _names(td))


def where(
    self: TensorDictBase,
    condition: torch.Tensor,
    other: Any,
    *,
    out: TensorDictBase | None = None,
    pad: Any = None,
    update_batch_size: bool = False,
) -> TensorDictBase:
    """Entries of ``self`` where ``condition`` is true, of ``other`` elsewhere (:func:`torch.where`).

    ``condition`` is a boolean tensor over the leading batch dimensions (or a tensordict of
    them, matched by key); ``other`` is a tensordict (matched by key), a tensor or a
    scalar. With ``pad``, keys present on one side only are filled with ``pad`` on the
    other; without it they raise ``KeyError``. ``out`` receives the result (in place
    where it has the entry, added where it lacks it; with ``update_batch_size=True``
    through :meth:`update`, taking the result's batch size).
    ``torch.where(condition, td, other)`` calls this method.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.ones(2, 2)}, [2])
    >>> td.where(torch.tensor([True, False]), 0.0)["a"]
    tensor([[1., 1.],
            [0., 0.]])
    >>> torch.where(torch.tensor([True, False]), td, td * 3)["a"]
    tensor([[1., 1.],
            [3., 3.]])
    """
    cond = _condition_for("where", condition, self)
    self = _dense(self)
    if is_tensor_collection(other):
        result = _where_td(self, cond, other, pad, ())
    else:
        leaves = self._flat_tensors([])
        conds = self._aligned_tensors(cond, None) if is_tensor_collection(cond) else None
        results = [
            _where_leaf(conds[i] if conds is not None else cond, x, other)
            for i, x in enumerate(leaves)
        ]
        result = self._rebuild(iter(results))
    if out is not None:
        if update_batch_size:
            return out.update(result, update_batch_size=True)
        return out.update(result, inplace=True)  # entries it lacks are added
    return result


def scatter(
    self: TensorDictBase,
    dim: Any = None,
    index: Any = None,
    src: Any = None,
    tensordicts: list[Any] | None = None,
    *,
    value: Any = None,
    reduce: str | None = None,
    group: Any = None,
    device: Any = None,
) -> TensorDictBase:
    """Out-of-place :meth:`torch.Tensor.scatter` along batch dimension ``dim``; or, as the
    reference's ``scatter(src, tensordicts, *, group, device)``, the distributed scatter.

    ``index`` has as many dimensions as the batch and is broadcast over the feature
    dimensions; ``src`` is a tensordict (matched by key), a batch-shaped tensor (broadcast
    over features the same way) or a scalar (also accepted as ``value=``).

    Called without an ``index`` tensor (``td.scatter(src=0, tensordicts=tds)`` on the
    source rank, ``td.scatter(src=0)`` on the others) or with ``group``/``device``, it is
    :func:`tensordict.distributed.td_scatter`: rank ``src`` gives each rank of the process
    group its own tensordict (needs the tensordict-distributed package).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.zeros(3, 2)}, [3])
    >>> td.scatter(0, torch.tensor([2, 0]), 1.0)["a"]
    tensor([[1., 1.],
            [0., 0.],
            [1., 1.]])
    """
    distributed = tensordicts is not None or group is not None or device is not None
    if distributed or index is None or isinstance(index, (list, tuple)):
        # the reference's distributed scatter: scatter(src, tensordicts, *, group, device)
        rank = src if dim is None else dim
        if not isinstance(rank, int):
            raise TypeError(
                "scatter(): give the batch `dim` and an `index` tensor (torch's scatter), or "
                f"the source rank `src` (the distributed scatter); got dim={dim!r}, src={src!r}."
            )
        tds = index if tensordicts is None else tensordicts
        return cast(
            TensorDictBase,
            _siblings.forward(
                "distributed",
                "td_scatter",
                "TensorDict.scatter(src, tensordicts)",
                self,
                rank,
                tds,
                group=group,
                device=device,
            ),
        )
    if dim is None:
        raise TypeError("scatter(): missing the batch dimension `dim` and the `index` tensor.")
    if src is None:
        src = value
    bs = self.batch_size
    nb = len(bs)
    d = _dim("scatter", dim, self)
    if not isinstance(index, _Tensor) or index.ndim != nb:
        shape = tuple(index.shape) if isinstance(index, _Tensor) else type(index).__name__
        raise RuntimeError(
            f"scatter(): the index ({shape}) must have as many dimensions as the batch "
            f"(batch_size={tuple(bs)})."
        )
    kw = {} if reduce is None else {"reduce": reduce}
    self = _dense(self)
    leaves = self._flat_tensors([])
    srcs = self._aligned_tensors(src, None) if is_tensor_collection(src) else None
    results = []
    for i, x in enumerate(leaves):
        idx = _index_for(index, x, nb)
        s = srcs[i] if srcs is not None else src
        if isinstance(s, _Tensor) and s.ndim < x.ndim:
            s = _index_for(s, x, nb)
        results.append(x.scatter(d, idx, s, **kw))
    return self._rebuild(iter(results))


#: the methods of this module written as plain functions.
METHODS: dict[str, Callable[..., Any]] = {
    f.__name__: f for f in (new_tensor, masked_fill, masked_fill_, masked_select, where, scatter)
}


# --------------------------------------------------------------------------- install
def _forward(name: str) -> Callable[..., Any]:
    def impl(input: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(input, name)(*args, **kwargs)

    impl.__name__ = name
    return impl


def _torch_where(condition: Any, input: Any, other: Any, *, out: Any = None) -> Any:
    if isinstance(input, TensorDictBase):
        return input.where(condition, other, out=out)
    if isinstance(other, TensorDictBase):
        return other.where(~condition, input, out=out)
    raise TypeError("torch.where(): expected a tensordict as input or other.")


def _torch_gather(
    input: TensorDictBase,
    dim: int,
    index: torch.Tensor,
    *,
    sparse_grad: bool = False,
    out: Any = None,
) -> Any:
    if sparse_grad:
        raise NotImplementedError("gather(): sparse_grad=True is not supported for tensordicts.")
    return input.gather(dim, index, out=out)


def _torch_softmax(input: TensorDictBase, dim: int, _stacklevel: int = 3, dtype: Any = None) -> Any:
    return input.softmax(dim, dtype=dtype)


def install(cls: type) -> None:
    """Add the methods of this module to ``cls`` and route the matching ``torch`` functions."""
    for name, plan in BATCH_OPS.items():
        setattr(cls, name, _make_batch_op(name, plan))
    for name in NEW:
        setattr(cls, name, _make_new(name))
    for func in METHODS.values():
        setattr(cls, func.__name__, func)
    # torch.roll, torch.tile, torch.softmax …: plain forwarders, unless a generic one of
    # tensordict._combine.functional is registered already.
    for name in (*BATCH_OPS, *PREDICATES):
        if name != "gather":
            TD_HANDLED_FUNCTIONS.setdefault(getattr(torch, name), _forward(name))
    for name in ("masked_fill", "masked_select", "scatter"):
        implements_for_td(getattr(torch, name))(_forward(name))
    implements_for_td(torch.where)(_torch_where)
    implements_for_td(torch.gather)(_torch_gather)
    implements_for_td(torch.nn.functional.softmax)(_torch_softmax)
