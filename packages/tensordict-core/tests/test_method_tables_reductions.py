"""The reductions of ``tensordict._engine.ops_reduce`` (every ``dim``/``keepdim``/``reduce``
variant, ``max``/``min`` values and indices, cumulative ops, the ``torch.*`` functions that
dispatch to them), each against the same torch operation applied leaf by leaf on
``core_helpers.make_table_td`` and on every kind of ``any_td``. The tests iterate over the
table, so a new row is checked as soon as it exists; a row needs its keyword variants here.
"""

from __future__ import annotations

import pytest
import torch
from core_helpers import (
    FLOAT,
    INT,
    TABLE_BS,
    TABLE_WARNINGS,
    assert_leaf_close,
    holder_dims,
    leaves,
    make_table_td,
    tensor_leaves,
)
from core_helpers import table_check_any as check_any
from core_helpers import table_check_leafwise as check_leafwise

from tensordict import TensorDict
from tensordict._engine.ops_reduce import CUMULATIVE, REDUCTIONS

pytestmark = TABLE_WARNINGS


# --------------------------------------------------------------------------- reductions
#: keyword variants checked for each reduction (every row of REDUCTIONS needs one).
REDUCTION_KWARGS = {
    "sum": [{}, {"dtype": torch.float64}],
    "nansum": [{}],
    "mean": [{}, {"dtype": torch.float64}],
    "nanmean": [{}],
    "prod": [{}],
    "std": [{}, {"correction": 0}],
    "var": [{}, {"correction": 2}],
    "amax": [{}],
    "amin": [{}],
    "max": [{"return_indices": False}],
    "min": [{"return_indices": False}],
    "logsumexp": [{}],
    "norm": [{}, {"p": 1.0}],
    "quantile": [{"q": 0.3}, {"q": 0.7, "interpolation": "nearest"}],
}


def oracle(name: str, x: torch.Tensor, dims, keepdim: bool, kw: dict) -> torch.Tensor:
    """``name`` by hand with torch: over ``dims`` (a tuple of dims) or all dims (``None``)."""
    kw = {k: v for k, v in kw.items() if k != "return_indices"}
    if dims is None:
        if keepdim:
            return oracle(name, x, tuple(range(x.ndim)), True, kw)
        return oracle(name, x.reshape(-1), (0,), False, kw)
    if name == "prod":  # torch.prod takes one dim at a time
        for d in sorted(dims, reverse=True):
            x = torch.prod(x, d, keepdim=True, **kw)
        return x if keepdim else x.squeeze(dims)
    if name == "quantile":  # torch.quantile takes one dim: flatten the reduced ones last
        q = kw.pop("q")
        rest = [d for d in range(x.ndim) if d not in dims]
        flat = x.permute(*rest, *dims).reshape(*[x.shape[d] for d in rest], -1)
        r = torch.quantile(flat, q, -1, **kw)
        if keepdim:
            for d in sorted(dims):
                r = r.unsqueeze(d)
        return r
    if name in ("max", "min"):
        return getattr(torch, "a" + name)(x, dims, keepdim)
    if name == "norm":
        return torch.linalg.vector_norm(x, kw.get("p", 2.0), dims, keepdim)
    if name in ("std", "var"):
        return getattr(torch, name)(x, dims, keepdim=keepdim, **kw)
    return getattr(torch, name)(x, dims, keepdim, **kw)


def _call(td, name, dim, keepdim, kw, reduce=None):
    kw = dict(kw)
    args = (kw.pop("q"),) if "q" in kw else ()
    if dim == "omitted":
        return getattr(td, name)(*args, keepdim=keepdim, reduce=reduce, **kw)
    return getattr(td, name)(*args, dim=dim, keepdim=keepdim, reduce=reduce, **kw)


def test_every_reduction_has_kwargs_here():
    assert set(REDUCTION_KWARGS) == set(REDUCTIONS)


DIMS = ["omitted", None, 0, -1, (0, 1), (-1, 0), "feature"]


def _expected_batch(dim, keepdim, bs, name):
    if dim in ("omitted", None):
        if name == "logsumexp":  # reduces the batch dims only
            return torch.Size([1] * len(bs)) if keepdim else torch.Size()
        return torch.Size([1] * len(bs)) if keepdim else torch.Size()
    if dim == "feature":
        return torch.Size(bs)
    dims = {d % 2 for d in ((dim,) if isinstance(dim, int) else dim)}
    if keepdim:
        return torch.Size(1 if i in dims else s for i, s in enumerate(bs))
    return torch.Size(s for i, s in enumerate(bs) if i not in dims)


@pytest.mark.parametrize("kind", [FLOAT, INT])
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction_leafwise(name, dim, kind):
    td = make_table_td(kind)
    nbs = holder_dims(td)
    for keepdim, kw in [(k, kw) for k in (False, True) for kw in REDUCTION_KWARGS[name]]:

        def expected(k, x, kw=kw, keepdim=keepdim):
            if dim in ("omitted", None):
                dims = tuple(range(2)) if name == "logsumexp" else None
            elif dim == "feature":
                dims = tuple(range(nbs[k], x.ndim))
                if not dims:  # a leaf without features: reduced over its single element
                    return oracle(name, x.unsqueeze(-1), (x.ndim,), False, kw)
            else:
                dims = tuple(sorted({d % 2 for d in ((dim,) if isinstance(dim, int) else dim)}))
            return oracle(name, x, dims, keepdim, kw)

        try:
            want = {k: expected(k, x) for k, x in tensor_leaves(td).items()}
        except (RuntimeError, TypeError) as err:
            with pytest.raises(type(err)) as info:
                _call(td, name, dim, keepdim, kw)
            assert "failed for entry" in str(info.value)
            continue
        result = _call(td, name, dim, keepdim, kw)
        assert isinstance(result, TensorDict)
        check_leafwise(result, td, lambda k, x, want=want: want[k])
        assert result.batch_size == _expected_batch(dim, keepdim, TABLE_BS, name)
        if dim == "feature":
            assert result["n"].batch_size == td["n"].batch_size
        elif dim not in ("omitted", None) or name == "logsumexp":
            assert result["n"].batch_size == result.batch_size + torch.Size([5])


@pytest.mark.parametrize("kind", [FLOAT, INT])
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction_reduce_true(name, dim, kind):
    """``reduce=True``: one tensor. Over batch dims, the leaves concatenated along the first
    one (they need one shape: otherwise it raises); over features or everything, every
    leaf seen as (*batch, features)."""
    td = make_table_td(kind)
    mats = [x.reshape(*TABLE_BS, -1) for x in tensor_leaves(td).values()]
    matrix = torch.cat(mats, -1)
    for keepdim, kw in [(k, kw) for k in (False, True) for kw in REDUCTION_KWARGS[name]]:
        try:
            if dim in ("omitted", None):
                flat = torch.cat([m.reshape(-1) for m in mats])
                want = oracle(name, flat, None, False, kw)
                if keepdim:
                    want = want.reshape(1, 1)
            elif dim == "feature":
                want = oracle(name, matrix, (2,), True, kw).squeeze(-1)
            else:
                # batch dims: the leaves concatenated along the first one, features kept
                dims = tuple(sorted({d % 2 for d in ((dim,) if isinstance(dim, int) else dim)}))
                stacked = torch.cat(list(tensor_leaves(td).values()), dims[0])
                want = oracle(name, stacked, dims, keepdim, kw)
        except (RuntimeError, TypeError) as err:
            with pytest.raises(type(err)):
                _call(td, name, dim, keepdim, kw, reduce=True)
            continue
        assert_leaf_close(_call(td, name, dim, keepdim, kw, reduce=True), want)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, -1, 1])
def test_max_min_values_and_indices(name, dim, keepdim):
    td = make_table_td()
    result = getattr(td, name)(dim, keepdim)
    # as torch and the reference: a torch.return_types.max/min of two tensordicts
    assert isinstance(result, getattr(torch.return_types, name))
    values, indices = result
    assert result.values is values and result.indices is indices and result[1] is indices
    fn = getattr(torch, name)
    check_leafwise(values, td, lambda k, x: fn(x, dim % 2, keepdim).values)
    check_leafwise(indices, td, lambda k, x: fn(x, dim % 2, keepdim).indices)
    assert values.batch_size == indices.batch_size == _expected_batch(dim, keepdim, TABLE_BS, name)
    # torch.max(td, dim) dispatches here; torch.max(td, other) is the elementwise maximum
    torch_values = fn(td, dim, keepdim).values
    check_leafwise(torch_values, td, lambda k, x: fn(x, dim % 2, keepdim).values)
    other = td.apply(lambda x: x.flip(0))
    check_leafwise(fn(td, other), td, lambda k, x: fn(x, x.flip(0)))


@pytest.mark.parametrize("name", list(CUMULATIVE))
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumulative(name, dim):
    td = make_table_td()
    fn = CUMULATIVE[name]
    values, indices = getattr(td, name)(dim)
    check_leafwise(values, td, lambda k, x: fn(x, dim % 2).values)
    check_leafwise(indices, td, lambda k, x: fn(x, dim % 2).indices)
    assert values.batch_size == TABLE_BS and values["n"].batch_size == (2, 3, 5)
    only = getattr(td, name)(dim, return_indices=False)
    check_leafwise(only, td, lambda k, x: fn(x, dim % 2).values)
    matrix = torch.cat([x.reshape(*TABLE_BS, -1) for x in tensor_leaves(td).values()], -1)
    agg = getattr(td, name)(dim, reduce=True)
    assert_leaf_close(agg.values, fn(matrix, dim % 2).values)
    assert_leaf_close(agg.indices, fn(matrix, dim % 2).indices)
    check_leafwise(fn(td, dim).values, td, lambda k, x: fn(x, dim % 2).values)


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_torch_functions_dispatch_to_reductions(name):
    td = make_table_td()
    kw = dict(REDUCTION_KWARGS[name][0])
    kw.pop("return_indices", None)  # not a torch.max keyword
    args = (kw.pop("q"),) if "q" in kw else ()
    dim_kw = {"dim": 0}
    result = getattr(torch, name)(td, *args, **dim_kw, **kw)
    if isinstance(result, tuple):
        result = result[0]
    expected = getattr(td, name)(*args, **dim_kw, **kw)
    if isinstance(expected, tuple):
        expected = expected[0]
    check_leafwise(result, expected, lambda k, x: x)


def test_torch_norm():
    td = make_table_td()
    check_leafwise(torch.norm(td), td, lambda k, x: torch.linalg.vector_norm(x))


# --------------------------------------------------------------------------- every kind


_REDUCE_DIM1 = {
    "quantile": lambda x: torch.quantile(x, 0.5, 1),
    "norm": lambda x: torch.linalg.vector_norm(x, 2, 1),
    "max": lambda x: torch.amax(x, 1),
    "min": lambda x: torch.amin(x, 1),
}


def test_reduction_rows_over_every_kind(any_td):
    """Over batch dim 1 and over everything; the per-element labels are kept where they
    agree along dim 1 (left out otherwise); the one-value tag is kept."""
    labels = dict(any_td.items())["label"].tolist()
    agree = all(len(set(row)) == 1 for row in labels)
    for name, spec in REDUCTIONS.items():
        args = (0.5,) if spec.positional else ()
        kw = {"return_indices": False} if spec.indices else {}
        leaf = _REDUCE_DIM1.get(name, lambda x, n=name: getattr(torch, n)(x, 1))
        out = getattr(any_td, name)(*args, dim=1, **kw)
        check_any(out, any_td, leaf, [2], non_tensors=False)
        assert out.get("tag").data == "t"
        assert leaves(out).get(("label",)) == ([row[0] for row in labels] if agree else None)
        if spec.none_is_batch:
            continue
        everything = getattr(any_td, name)(*args)
        assert everything.batch_size == torch.Size([])
        for key, x in tensor_leaves(any_td).items():
            want = torch.quantile(x.flatten(), 0.5) if name == "quantile" else None
            if want is None:
                fn = {"norm": torch.linalg.vector_norm, "max": torch.amax, "min": torch.amin}
                want = fn.get(name, getattr(torch, name))(x)
            assert_leaf_close(everything[key], want)


@pytest.mark.parametrize("dim", [0, 1, (0, 1), -1])
@pytest.mark.parametrize("name", ["sum", "mean", "std", "amax"])
def test_reduce_true_over_batch_dims_keeps_features(name, dim):
    """Leaves of one shape: concatenated along the first reduced dim, reduced over ``dim``."""
    a = torch.arange(24.0).reshape(2, 3, 4)
    b = torch.arange(24.0).reshape(2, 3, 4) ** 2
    td = TensorDict({"a": a, "n": TensorDict({"b": b}, [2, 3, 4])}, [2, 3])
    dims = tuple(d % 2 for d in ((dim,) if isinstance(dim, int) else dim))
    both = torch.cat([a, b], dims[0])
    want = getattr(torch, name)(both, dims)
    assert_leaf_close(getattr(td, name)(dim=dim, reduce=True), want)
