"""Reductions (``sum``, ``mean``, ``std``, ``max`` …), declared from tables and installed on
``TensorDictBase``.

Every reduction shares one meaning of its arguments (the reference library's):

* ``dim`` omitted (or ``None``): each leaf is reduced over *all* its dimensions; the
  result is a tensordict of scalars with ``batch_size=[]`` (``keepdim=True`` keeps every
  dimension, with size 1). Exception, as in the reference: ``logsumexp(dim=None)`` reduces
  over all the *batch* dimensions and keeps the feature dimensions.
* ``dim`` an int or a tuple of ints: *batch* dimensions (negative values count from the end
  of the batch size). Each leaf, at any depth, is reduced over those dimensions; the new
  batch size drops them (``keepdim=True`` keeps them with size 1).
* ``dim="feature"``: each leaf is reduced over its feature dimensions, the ones after the
  batch dimensions of the tensordict that holds it; batch sizes do not change. A leaf
  without feature dimensions is reduced over its single element (``sum`` returns it,
  ``std`` gives ``nan``).
* ``reduce=True``: one tensor aggregating every leaf. With ``dim`` batch dimensions, the
  leaves (which must then have the same shape) are concatenated along the first of them
  and reduced over them: the result keeps the other batch dimensions and the feature
  dimensions. Otherwise (``dim=None`` or ``"feature"``) each leaf is reshaped to
  ``(*batch_size, n_features)`` (the batch size of the tensordict the method is called
  on), the pieces are concatenated along that last dimension (dtypes promoted as by
  :func:`torch.cat`), and the reduction runs over that dimension (and, for ``dim=None``,
  over all batch dimensions too).

Non-tensor entries are carried over: one value (``NonTensorData``) as it is; a stack of
values (``NonTensorStack``) keeps the values that are the same all along the reduced
dimensions, and is left out of the result when they differ (Python values have no
reduction). See :func:`reduce_non_tensor`.

``max``/``min`` with one batch ``dim`` return the values and the indices, like
:func:`torch.max`: a ``torch.return_types.max`` (``min`` …) of two tensordicts
(``.values`` / ``.indices``, or tuple unpacking), see :func:`values_indices`.
``return_indices=False`` returns the values alone, and so do ``dim=None``, ``dim="feature"`` and ``reduce=True``. ``cummax``/``cummin``
(:data:`CUMULATIVE`) follow the same rule along one batch dimension.
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from tensordict._engine.tree import map_leaves
from tensordict._kinds import kinds as _kinds
from tensordict._leaves.nontensor import NonTensorData
from tensordict._leaves.nontensor_data import _same_value
from tensordict.base import NO_DEFAULT, TensorDictBase, implements_for_td

_Tensor = torch.Tensor


def values_indices(name: str, values: Any, indices: Any) -> Any:
    """The ``(values, indices)`` pair returned by ``max``/``min``/``cummax``/``cummin``: a
    ``torch.return_types.<name>`` of two tensordicts, as torch and the reference return.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.tensor([[1.0, 5.0], [4.0, 2.0]])}, [2, 2])
    >>> values, indices = td.max(dim=0)
    >>> values["a"], td.max(dim=0).indices["a"], type(td.max(dim=0)).__name__
    (tensor([4., 5.]), tensor([1, 0]), 'max')
    """
    return getattr(torch.return_types, name)((values, indices))


#: keyword parameters of a reduction: (name, default, annotation for the signature)
_Kw = tuple[tuple[str, Any, str], ...]
_DTYPE: _Kw = (("dtype", None, "torch.dtype | None"),)
_CORRECTION: _Kw = (("correction", 1, "int | float"),)


@dataclass(frozen=True)
class Reduction:
    """One row of :data:`REDUCTIONS`.

    ``fn(x, dim, keepdim, **kw)`` is the torch call for one leaf; ``dim`` is an int, or a
    tuple of ints when ``multi`` is true (otherwise several dimensions are flattened into
    one first). ``full(x, **kw)`` reduces a leaf over all its dimensions (``None``: flatten
    and use ``fn``). With ``indices``, ``fn`` returns ``(values, indices)`` for one int
    dimension and ``values_fn`` (multi-dimensional) gives the values alone.
    """

    fn: Callable[..., Any]
    full: Callable[..., Any] | None = None
    multi: bool = True
    kwargs: _Kw = ()
    positional: tuple[tuple[str, str], ...] = ()  # leading positional params (name, annotation)
    indices: bool = False
    values_fn: Callable[..., Any] | None = None
    none_is_batch: bool = False
    summary: str = ""
    example_args: str = ""
    torch_fn: Callable[..., Any] | None = None  # ``torch_fn(x, dims, keepdim)``, no options
    out: bool = False  # takes ``out=``: a tensordict the result is written into, in place


def _std(fn: Callable[..., Any]) -> Reduction:
    return Reduction(
        lambda x, d, k, correction=1: fn(x, d, correction=correction, keepdim=k),
        full=lambda x, correction=1: fn(x, correction=correction),
        kwargs=_CORRECTION,
        summary=f"The {fn.__name__} (with Bessel's ``correction``)",
    )


def _with_dtype(fn: Callable[..., Any], summary: str, multi: bool = True) -> Reduction:
    return Reduction(
        lambda x, d, k, **kw: fn(x, d, k, **kw),
        full=lambda x, **kw: fn(x, **kw),
        multi=multi,
        kwargs=_DTYPE,
        summary=summary,
        torch_fn=fn,
    )


def _extremum(fn: Callable[..., Any], values_fn: Callable[..., Any], summary: str) -> Reduction:
    return Reduction(
        lambda x, d, k: fn(x, d, k),
        full=fn,
        multi=False,
        kwargs=(("return_indices", True, "bool"),),
        indices=True,
        values_fn=lambda x, d, k: values_fn(x, d, k),
        summary=summary,
    )


#: name -> how each leaf is reduced. Every entry becomes a method with the signature
#: ``(*positional, dim=NO_DEFAULT, keepdim=False, *, <kwargs>, reduce=None)``.
REDUCTIONS: dict[str, Reduction] = {
    "sum": _with_dtype(torch.sum, "The sum"),
    "nansum": _with_dtype(torch.nansum, "The sum, treating NaN as zero,"),
    "mean": _with_dtype(torch.mean, "The mean"),
    "nanmean": _with_dtype(torch.nanmean, "The mean, ignoring NaN,"),
    "prod": _with_dtype(torch.prod, "The product", multi=False),
    "std": _std(torch.std),
    "var": _std(torch.var),
    "amax": Reduction(
        lambda x, d, k: torch.amax(x, d, k),
        full=torch.amax,
        summary="The maximum",
        torch_fn=torch.amax,
    ),
    "amin": Reduction(
        lambda x, d, k: torch.amin(x, d, k),
        full=torch.amin,
        summary="The minimum",
        torch_fn=torch.amin,
    ),
    "max": _extremum(torch.max, torch.amax, "The maximum (and its index along one batch dim)"),
    "min": _extremum(torch.min, torch.amin, "The minimum (and its index along one batch dim)"),
    "logsumexp": Reduction(
        lambda x, d, k: torch.logsumexp(x, d, k),
        none_is_batch=True,
        summary="The log of the summed exponentials",
        out=True,
    ),
    "norm": Reduction(
        lambda x, d, k, p=2.0, dtype=None: torch.linalg.vector_norm(x, p, d, k, dtype=dtype),
        full=lambda x, p=2.0, dtype=None: torch.linalg.vector_norm(x, p, dtype=dtype),
        kwargs=(("p", 2.0, "float"), ("dtype", None, "torch.dtype | None")),
        summary="The vector ``p``-norm",
        out=True,
    ),
    "quantile": Reduction(
        lambda x, d, k, q=0.5, interpolation="linear": torch.quantile(
            x, q, d, k, interpolation=interpolation
        ),
        full=lambda x, q=0.5, interpolation="linear": torch.quantile(
            x, q, interpolation=interpolation
        ),
        multi=False,
        positional=(("q", "float | torch.Tensor"),),
        kwargs=(("interpolation", "linear", "str"),),
        summary="The ``q``-quantile",
        example_args="0.5, ",
    ),
}

#: cumulative reductions along one batch dimension: name -> torch function.
CUMULATIVE: dict[str, Callable[..., Any]] = {"cummax": torch.cummax, "cummin": torch.cummin}


# --------------------------------------------------------------------------- dimensions
def batch_dims_of(name: str, dim: Any, batch_size: torch.Size) -> tuple[int, ...]:
    """Normalise ``dim`` (an int or a sequence of ints) against the batch dimensions.

    >>> batch_dims_of("sum", (-1, 0), torch.Size([2, 3, 4]))
    (0, 2)
    """
    nb = len(batch_size)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool):
            raise TypeError(
                f"{name}(): dim must be an int, a tuple of ints, None or 'feature', got {dim!r}."
            )
        if not -nb <= d < nb:
            raise IndexError(
                f"{name}(): dim={dim!r} is out of range for batch_size={tuple(batch_size)}: "
                f"dims refer to the {nb} batch dimension(s) (expected values in "
                f"[{-nb}, {nb - 1}]); use dim='feature' to reduce the feature dimensions."
            )
        out.append(d + nb if d < 0 else d)
    if len(set(out)) != len(out):
        raise ValueError(f"{name}(): dim={dim!r} names a batch dimension twice.")
    return tuple(sorted(out))


def _values_over(
    spec: Reduction, x: _Tensor, dims: tuple[int, ...], keepdim: bool, kw: dict[Any, Any]
) -> Any:
    """Reduce ``x`` over ``dims`` (non-negative, sorted; empty: over one element)."""
    if not dims:
        fn = spec.values_fn or spec.fn
        return fn(x.unsqueeze(-1), x.ndim, False, **kw)
    if spec.values_fn is not None:
        return spec.values_fn(x, dims, keepdim)
    if spec.multi:
        return spec.fn(x, dims, keepdim, **kw)
    if len(dims) == 1:
        return spec.fn(x, dims[0], keepdim, **kw)
    k = len(dims)
    last = tuple(range(x.ndim - k, x.ndim))
    r = spec.fn(x.movedim(dims, last).flatten(x.ndim - k), x.ndim - k, False, **kw)
    if keepdim:
        for d in dims:
            r = r.unsqueeze(d)
    return r


def _full(spec: Reduction, x: _Tensor, keepdim: bool, kw: dict[Any, Any]) -> Any:
    if keepdim and x.ndim:
        return _values_over(spec, x, tuple(range(x.ndim)), True, kw)
    if spec.full is not None:
        r = spec.full(x, **kw)
        return r[0] if isinstance(r, tuple) else r
    return _values_over(spec, x.reshape(-1), (0,), False, kw)


# --------------------------------------------------------------------------- tree walk
def reduce_non_tensor(
    value: Any,
    old_bs: torch.Size,
    new_bs: torch.Size,
    dims: tuple[int, ...] | None = None,
    keepdim: bool = False,
) -> Any:
    """A non-tensor entry of a tensordict whose batch size goes from ``old_bs`` to ``new_bs``.

    The entry of the result is a new container (the rule of every walker, see
    :func:`tensordict._engine.tree.carry_non_tensor`). One value (``NonTensorData``) simply takes
    the new batch size. A ``NonTensorStack`` keeps its values when the batch size is
    unchanged; reduced over batch dimensions ``dims`` it
    keeps the values that are the same all along them; given a new shape (``dims=None``) it
    becomes one value when all its values are the same. Otherwise there is no reduction of
    arbitrary Python values and the entry is left out of the result (``None``).
    """
    if isinstance(value, NonTensorData) or old_bs == new_bs:
        return value._with(new_bs)  # a new container (see tensordict._engine.tree.carry_non_tensor)
    if dims is None:
        items = value.tolist()
        for _ in range(value.batch_dims - 1):
            items = [v for sub in items for v in sub]
        first = items[0] if items else None
        if items and all(_same_value(first, v) for v in items[1:]):
            return NonTensorData(first, batch_size=new_bs, device=value.device)
        return None
    nb = len(old_bs)
    at = [0 if i in dims else slice(None) for i in range(nb)]
    kept = value[tuple(at)]
    want = kept.tolist()
    for combo in itertools.product(*(range(old_bs[d]) for d in dims)):
        for d, i in zip(dims, combo):
            at[d] = i
        if not _same_value(value[tuple(at)].tolist(), want):
            return None
    if isinstance(kept, NonTensorData):
        return kept._with(new_bs)
    if keepdim:
        for d in dims:
            kept = kept.unsqueeze(d)
    return kept


def _tensor_leaves(td: TensorDictBase) -> list[_Tensor]:
    """Every tensor leaf, with the full batch shape of ``td`` in front."""
    if _all_dense(td):
        return td._flat_tensors([])
    # lazy stacks give their members' leaves to _flat_tensors: read stacked values instead
    return [v for v in td.values(True, True) if isinstance(v, _Tensor)]


def _all_dense(td: Any) -> bool:
    if not isinstance(td, _kinds.Dense):
        return False
    return all(_all_dense(v) for v in td._tensordict.values() if isinstance(v, TensorDictBase))


def _feature_matrix(td: TensorDictBase, name: str) -> _Tensor:
    """Every leaf as ``(*batch_size, n_features)``, concatenated along the last dimension."""
    bs = td.batch_size
    nb = len(bs)
    leaves = _tensor_leaves(td)
    if not leaves:
        raise ValueError(f"{name}(reduce=True): the tensordict has no tensor leaf to reduce.")
    mats = [x.reshape(*bs, math.prod(x.shape[nb:])) for x in leaves]
    return torch.cat(mats, nb) if len(mats) > 1 else mats[0]


def _drop(seq: Any, dims: tuple[int, ...], keepdim: bool, fill: Any) -> list[Any]:
    if keepdim:
        return [fill if i in dims else s for i, s in enumerate(seq)]
    return [s for i, s in enumerate(seq) if i not in dims]


# --------------------------------------------------------------------------- the methods
def _reduce(
    td: TensorDictBase,
    name: str,
    spec: Reduction,
    dim: Any,
    keepdim: bool,
    reduce: Any,
    kw: dict[Any, Any],
) -> Any:
    return_indices = kw.pop("return_indices", False) if spec.indices else False
    if kw.get("dtype", 0) is None:  # torch is faster without an explicit dtype=None
        del kw["dtype"]
    if spec.positional and isinstance(kw.get("q"), _Tensor) and kw["q"].ndim:
        raise ValueError(
            f"{name}(): q must be a scalar, got a tensor of shape {tuple(kw['q'].shape)}; "
            "call quantile once per q."
        )
    bs = td.batch_size
    if dim is NO_DEFAULT or dim is None or (isinstance(dim, (tuple, list)) and not dim):
        mode, dims = ("batch", tuple(range(len(bs)))) if spec.none_is_batch else ("all", ())
    elif isinstance(dim, str):
        if dim != "feature":
            raise ValueError(
                f"{name}(): dim must be an int, a tuple of ints, None or 'feature', got {dim!r}."
            )
        mode, dims = "feature", ()
    else:
        mode, dims = "batch", batch_dims_of(name, dim, bs)
    if reduce:
        if mode == "batch" and not (dim is NO_DEFAULT or dim is None):
            return _aggregate_batch(td, name, spec, dims, keepdim, kw)
        return _aggregate(td, name, spec, mode, dims, keepdim, kw)
    if mode == "all":
        full = spec.full
        return map_leaves(
            td,
            name,
            (lambda x, nb: full(x, **kw))
            if full is not None and not keepdim
            else (lambda x, nb: _full(spec, x, keepdim, kw)),
            lambda s: torch.Size([1] * len(s)) if keepdim else torch.Size(),
            lambda n: n if keepdim else None,
            lambda v: getattr(v, name)(None, keepdim, **kw),
            reduce_non_tensor,
        )[0]
    if mode == "feature":
        return map_leaves(
            td,
            name,
            lambda x, nb: _values_over(spec, x, tuple(range(nb, x.ndim)), keepdim, kw),
            lambda s: s,
            lambda n: n,
            lambda v: getattr(v, name)("feature", keepdim, **kw),
            reduce_non_tensor,
        )[0]
    with_indices = spec.indices and return_indices
    if with_indices and len(dims) != 1:
        raise TypeError(
            f"{name}(): with indices, dim must be one batch dimension, got {dim!r}; use "
            f"return_indices=False or a{name}() to reduce several dimensions."
        )
    shape_fn = lambda s: torch.Size(_drop(s, dims, keepdim, 1))  # noqa: E731
    names_fn = lambda n: n if n is None else _drop(n, dims, keepdim, None)  # noqa: E731
    non_tensor = lambda v, old, new: reduce_non_tensor(v, old, new, dims, keepdim)  # noqa: E731
    if with_indices:
        d = dims[0]
        values, indices = map_leaves(
            td,
            name,
            lambda x, nb: tuple(spec.fn(x, d, keepdim)),
            shape_fn,
            names_fn,
            lambda v: getattr(v, name)(d, keepdim, return_indices=True),
            non_tensor,
            2,
        )
        return values_indices(name, values, indices)
    nested_kw = dict(kw, return_indices=False) if spec.indices else kw
    fn = spec.fn
    torch_fn = spec.torch_fn
    if spec.multi and torch_fn is not None and not kw:  # straight to torch (the hot path)
        leaf = lambda x, nb: torch_fn(x, dims, keepdim)  # noqa: E731
    elif spec.multi and spec.values_fn is None:
        leaf = lambda x, nb: fn(x, dims, keepdim, **kw)  # noqa: E731
    else:
        leaf = lambda x, nb: _values_over(spec, x, dims, keepdim, kw)  # noqa: E731
    return map_leaves(
        td,
        name,
        leaf,
        shape_fn,
        names_fn,
        lambda v: getattr(v, name)(dims, keepdim, **nested_kw),
        non_tensor,
    )[0]


def _aggregate(
    td: TensorDictBase,
    name: str,
    spec: Reduction,
    mode: str,
    dims: tuple[int, ...],
    keepdim: bool,
    kw: dict[Any, Any],
) -> _Tensor:
    m = _feature_matrix(td, name)
    bs = td.batch_size
    nb = len(bs)
    if mode == "all":
        if not keepdim:
            whole: _Tensor = _full(spec, m, False, kw)
            return whole
        dims = tuple(range(nb))
    r: _Tensor = _values_over(spec, m, (*dims, nb), True, kw)
    return r.reshape(_drop(bs, dims, keepdim, 1))


def _aggregate_batch(
    td: TensorDictBase,
    name: str,
    spec: Reduction,
    dims: tuple[int, ...],
    keepdim: bool,
    kw: dict[Any, Any],
) -> _Tensor:
    """``reduce=True`` over batch dims, the reference's rule: the leaves are concatenated
    along the first reduced batch dimension (so they need one shape elsewhere) and reduced
    over ``dims``; the feature dimensions are kept."""
    leaves = _tensor_leaves(td)
    if not leaves:
        raise ValueError(f"{name}(reduce=True): the tensordict has no tensor leaf to reduce.")
    try:
        m = torch.cat(leaves, dims[0]) if len(leaves) > 1 else leaves[0]
    except RuntimeError as err:
        raise RuntimeError(
            f"{name}(reduce=True, dim={dims}): the leaves are concatenated along batch "
            f"dimension {dims[0]}, so they need the same shape elsewhere; got "
            f"{[tuple(x.shape) for x in leaves]} ({err})."
        ) from None
    result: _Tensor = _values_over(spec, m, dims, keepdim, kw)
    return result


def _signature(name: str, spec: Reduction) -> inspect.Signature:
    P = inspect.Parameter
    params = [P("self", P.POSITIONAL_OR_KEYWORD)]
    params += [P(n, P.POSITIONAL_OR_KEYWORD, annotation=a) for n, a in spec.positional]
    dim_default = None if spec.none_is_batch else NO_DEFAULT
    params.append(
        P(
            "dim",
            P.POSITIONAL_OR_KEYWORD,
            default=dim_default,
            annotation="int | tuple[int, ...] | str | None",
        )
    )
    keepdim = NO_DEFAULT if name in KEEPDIM_NO_DEFAULT else False
    params.append(P("keepdim", P.POSITIONAL_OR_KEYWORD, default=keepdim, annotation="bool"))
    params += [P(n, P.KEYWORD_ONLY, default=d, annotation=a) for n, d, a in spec.kwargs]
    params.append(P("reduce", P.KEYWORD_ONLY, default=None, annotation="bool | None"))
    if spec.out:
        params.append(P("out", P.KEYWORD_ONLY, default=None, annotation="TensorDictBase | None"))
    if name in KEY_TRANSFORM:
        params.append(
            P("key_transform", P.KEYWORD_ONLY, default=None, annotation="Callable | None")
        )
    return inspect.Signature(params)


#: reductions whose ``keepdim`` defaults to ``NO_DEFAULT`` (meaning ``False``), and those
#: taking ``key_transform`` (applied to the name of every entry of the result), as in the
#: reference.
KEEPDIM_NO_DEFAULT = frozenset(
    {"sum", "nansum", "mean", "nanmean", "prod", "std", "var", "quantile"}
)
KEY_TRANSFORM = frozenset({"sum", "mean", "std", "var", "quantile", "norm"})


def _rename_levels(td: Any, fn: Callable[[str], str]) -> Any:
    """``td`` with ``fn`` applied to the name of every entry, at every level."""
    members = _kinds.lazy_members(td)
    if members is not None:
        return _kinds.Lazy(*[_rename_levels(m, fn) for m in members], stack_dim=td.stack_dim)
    if not isinstance(td, _kinds.Dense):
        return td
    store = {
        fn(k): _rename_levels(v, fn) if isinstance(v, _kinds.Base) else v
        for k, v in td._tensordict.items()
    }
    return td._new_unsafe(store, td._batch_size, td._device, td._names)


def _doc(name: str, spec: Reduction) -> str:
    a = spec.example_args
    values = ".values" if spec.indices else ""
    none = (
        "all batch dimensions (feature dimensions kept)"
        if spec.none_is_batch
        else "every dimension of each leaf (a tensordict of scalars)"
    )
    extra = ""
    if spec.indices:
        extra = (
            f"\n\nWith one batch ``dim`` the result is a ``torch.return_types.{name}`` of "
            "two tensordicts (values and indices) unless ``return_indices=False``."
        )
    return (
        f"{spec.summary} of each leaf, like :func:`torch.{name}`.\n\n"
        f"``dim`` omitted: over {none}; an int or tuple: over those batch dimensions; "
        "``'feature'``: over each leaf's feature dimensions. ``reduce=True`` aggregates "
        "every leaf into one tensor (see :mod:`tensordict._engine.ops_reduce`)." + extra + "\n\n"
        "    >>> import torch\n"
        "    >>> from tensordict import TensorDict\n"
        "    >>> x = torch.arange(1.0, 7.0).reshape(2, 3)\n"
        "    >>> td = TensorDict({'a': x, 'n': {'b': x.exp()}}, [2])\n"
        f"    >>> torch.allclose(td.{name}({a}dim=0){values}['a'], torch.{name}(x, {a}dim=0)"
        f"{values})\n"
        "    True\n"
        f"    >>> td.{name}({a}dim='feature').batch_size, td.{name}({a}).batch_size\n"
        "    (torch.Size([2]), torch.Size([]))\n"
        f"    >>> td.{name}({a}reduce=True).shape\n"
        "    torch.Size([])\n"
    )


def _make_reduction(name: str, spec: Reduction) -> Callable[..., Any]:
    pos = tuple(n for n, _ in spec.positional) + ("dim", "keepdim")
    defaults = {
        "dim": None if spec.none_is_batch else NO_DEFAULT,
        "keepdim": False,
        **{n: d for n, d, _ in spec.kwargs},
        **({"key_transform": None} if name in KEY_TRANSFORM else {}),
        **({"out": None} if spec.out else {}),
    }
    allowed = set(pos) | set(defaults)
    options = {n: d for n, d, _ in spec.kwargs}
    plain = not spec.positional  # ``dim`` and ``keepdim`` are the positional parameters

    def method(self: TensorDictBase, *args: Any, reduce: Any = None, **kwargs: Any) -> Any:
        if plain and not kwargs and len(args) <= 2:  # the common call: no keyword options
            dim = args[0] if args else defaults["dim"]
            keepdim = args[1] if len(args) == 2 else False
            return _reduce(self, name, spec, dim, keepdim, reduce, dict(options))
        if len(args) > len(pos):
            raise TypeError(f"{name}() takes at most {len(pos)} positional arguments.")
        kw = dict(defaults)
        for n, a in zip(pos, args):
            if n in kwargs:
                raise TypeError(f"{name}() got multiple values for argument {n!r}.")
            kw[n] = a
        for n in kwargs:
            if n not in allowed:
                raise TypeError(f"{name}() got an unexpected keyword argument {n!r}.")
        kw.update(kwargs)
        for n, _ in spec.positional:
            if n not in kw:
                raise TypeError(f"{name}() missing required argument {n!r}.")
        dim = kw.pop("dim")
        keepdim = kw.pop("keepdim")
        if keepdim is NO_DEFAULT:
            keepdim = False
        key_transform = kw.pop("key_transform", None)
        out = kw.pop("out", None)
        result = _reduce(self, name, spec, dim, keepdim, reduce, kw)
        if key_transform is not None and isinstance(result, TensorDictBase):
            result = _rename_levels(result, key_transform)
        if out is not None:
            return _write_out(name, result, out)
        return result

    method.__name__ = method.__qualname__ = name
    method.__dict__["__signature__"] = _signature(name, spec)
    method.__doc__ = _doc(name, spec)
    return method


def _write_out(name: str, result: Any, out: Any) -> Any:
    """Write ``result`` into ``out`` (its tensors in place, missing entries added) and
    return ``out``, as ``out=`` of a torch reduction does."""
    if isinstance(result, _Tensor):
        if not isinstance(out, _Tensor):
            raise TypeError(f"{name}(reduce=True, out=...): out must be a tensor.")
        return out.copy_(result)
    if not isinstance(out, TensorDictBase):
        raise TypeError(f"{name}(out=...): out must be a tensordict, got {type(out).__name__}.")
    if out.batch_size != result.batch_size:
        raise RuntimeError(
            f"{name}(out=...): out has batch_size={tuple(out.batch_size)} but the result has "
            f"batch_size={tuple(result.batch_size)}."
        )
    return out.update(result, inplace=True)


def _make_cumulative(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def method(
        self: TensorDictBase, dim: Any, *, reduce: bool | None = None, return_indices: bool = True
    ) -> Any:
        bs = self.batch_size
        if isinstance(dim, str) or dim is None:
            raise TypeError(f"{name}(): dim must be one batch dimension (an int), got {dim!r}.")
        (d,) = batch_dims_of(name, dim, bs)
        if reduce:
            values, indices = fn(_feature_matrix(self, name), d)
            return values_indices(name, values, indices) if return_indices else values
        values, indices = map_leaves(
            self,
            name,
            lambda x, nb: tuple(fn(x, d)),
            lambda s: s,
            lambda n: n,
            lambda v: tuple(getattr(v, name)(d, return_indices=True)),
            reduce_non_tensor,
            2,
        )
        return values_indices(name, values, indices) if return_indices else values

    method.__name__ = method.__qualname__ = name
    method.__doc__ = (
        f"Cumulative :func:`torch.{name}` of each leaf along batch dimension ``dim``.\n\n"
        f"Returns a ``torch.return_types.{name}`` of two tensordicts (values and indices) "
        "with the batch size unchanged "
        "(the values alone with ``return_indices=False``). ``reduce=True`` runs it on the "
        "leaves concatenated as ``(*batch_size, n_features)`` and returns tensors.\n\n"
        "    >>> import torch\n"
        "    >>> from tensordict import TensorDict\n"
        "    >>> td = TensorDict({'a': torch.tensor([1.0, 3.0, 2.0])}, [3])\n"
        f"    >>> torch.equal(td.{name}(0).values['a'], torch.{name}(td['a'], 0).values)\n"
        "    True\n"
    )
    return method


def _torch_forwarder(name: str) -> Callable[..., Any]:
    def impl(input: TensorDictBase, *args: Any, **kwargs: Any) -> Any:
        if name in ("max", "min") and args and not isinstance(args[0], (int, tuple, list, str)):
            return getattr(input, "maximum" if name == "max" else "minimum")(*args, **kwargs)
        return getattr(input, name)(*args, **kwargs)

    impl.__name__ = name
    return impl


def _torch_norm(
    input: TensorDictBase,
    p: Any = "fro",
    dim: Any = None,
    keepdim: bool = False,
    out: Any = None,
    dtype: Any = None,
) -> Any:
    if out is not None:
        raise TypeError("torch.norm(tensordict, out=...) is not supported.")
    return input.norm(dim, keepdim, p=2.0 if p == "fro" else p, dtype=dtype)


def install(cls: type) -> None:
    """Add every reduction of :data:`REDUCTIONS` and :data:`CUMULATIVE` to ``cls``."""
    for name, spec in REDUCTIONS.items():
        setattr(cls, name, _make_reduction(name, spec))
        if name != "norm":
            implements_for_td(getattr(torch, name))(_torch_forwarder(name))
    for name, fn in CUMULATIVE.items():
        setattr(cls, name, _make_cumulative(name, fn))
        implements_for_td(fn)(_torch_forwarder(name))
    implements_for_td(torch.norm)(_torch_norm)
