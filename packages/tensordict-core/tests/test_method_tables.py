"""Table-driven checks of the method families: every row of the tables in
``tensordict._engine.ops``, ``tensordict._engine.ops_reduce`` and ``tensordict._engine.ops_batch`` is checked
against the same torch operation applied leaf by leaf, on a nested tensordict (nested
tensordicts with extra batch dimensions, float32/float64 or int64/int32 leaves, a non-tensor
entry), with tensordict, tensor and scalar operands, every reduction ``dim``/``keepdim``/
``reduce`` variant, and bad input (clear errors, data unchanged).

A test here iterates over the tables themselves, so a new row is checked as soon as it
exists; rows that need arguments must have an entry in the argument tables below (a test
fails otherwise).
"""

from __future__ import annotations

import math
import operator
from functools import partial

import pytest
import torch
from core_helpers import check_leafwise as core_check_leafwise
from core_helpers import leaves, tensor_leaves

from tensordict import TensorDict, TensorDictBase
from tensordict._engine.ops import (
    BINARY,
    BINARY_NO_INPLACE,
    CASTS,
    OPERATORS,
    PREDICATES,
    QUANTIZED_CASTS,
    UNARY,
)
from tensordict._engine.ops_batch import BATCH_OPS, METHODS, NEW
from tensordict._engine.ops_reduce import CUMULATIVE, REDUCTIONS

pytestmark = [
    # expected torch warnings: std/var over one element, complex32 and quantized dtypes
    pytest.mark.filterwarnings("ignore:.*degrees of freedom:UserWarning"),
    pytest.mark.filterwarnings("ignore:ComplexHalf support:UserWarning"),
    pytest.mark.filterwarnings("ignore:.*quantize_per_tensor:UserWarning"),
]

BS = (2, 3)
FLOAT, INT = "float", "int"


def make_td(kind: str = FLOAT, seed: int = 0) -> TensorDict:
    """Batch (2, 3); a nested tensordict with one extra batch dim (5); mixed dtypes."""
    g = torch.Generator().manual_seed(seed)
    first, second = (torch.float32, torch.float64) if kind == FLOAT else (torch.int64, torch.int32)

    def r(*shape: int, dtype: torch.dtype = first) -> torch.Tensor:
        if dtype.is_floating_point:
            return torch.rand(*shape, generator=g, dtype=dtype) + 0.5
        return torch.randint(1, 7, shape, generator=g, dtype=dtype)

    return TensorDict(
        {
            "a": r(2, 3),
            "b": r(2, 3, 4, dtype=second),
            "n": TensorDict({"c": r(2, 3, 5, 2), "m": {"d": r(2, 3, 5)}}, [2, 3, 5]),
            "s": "label",
        },
        BS,
    )


def holder_dims(td):
    """Key -> batch dims of the tensordict holding that leaf."""
    return {k: (td if len(k) == 1 else td[k[:-1]]).batch_dims for k in tensor_leaves(td)}


def close(actual, expected):
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    torch.testing.assert_close(actual, expected, equal_nan=True, rtol=1e-5, atol=1e-6)


#: every check here: ``fn(key, leaf)``, tolerances of float reductions, any batch size
check_leafwise = partial(core_check_leafwise, keyed=True, batch_size=None, rtol=1e-5, atol=1e-6)


def raises_for_some_leaf(td, fn):
    for value in tensor_leaves(td).values():
        try:
            fn(value)
        except (RuntimeError, TypeError, ValueError, NotImplementedError):
            return True
    return False


# --------------------------------------------------------------------------- pointwise
@pytest.mark.parametrize("kind", [FLOAT, INT])
@pytest.mark.parametrize("name", UNARY)
def test_unary_and_inplace_twin(name, kind):
    td = make_td(kind)
    op = getattr(torch, name)
    if raises_for_some_leaf(td, op):
        with pytest.raises((RuntimeError, TypeError, ValueError, NotImplementedError)):
            getattr(td, name)()
        return
    check_leafwise(getattr(td, name)(), td, lambda k, x: op(x))
    if raises_for_some_leaf(td, lambda x: getattr(x.clone(), name + "_")()):
        return
    before = td.clone()
    ids = {k: v.data_ptr() for k, v in tensor_leaves(td).items()}
    assert getattr(td, name + "_")() is td
    check_leafwise(td, before, lambda k, x: getattr(x.clone(), name + "_")())
    assert {k: v.data_ptr() for k, v in tensor_leaves(td).items()} == ids


#: operands for every binary row: name -> positional operands builder(td) per kind of operand.
def _operands(name: str, td: TensorDict, how: str) -> tuple:
    other = td.apply(lambda x: x.flip(0) if x.is_floating_point() else x % 3 + 1)
    base = {"td": other, "tensor": torch.tensor(1.5 if td["a"].is_floating_point() else 2)}
    base["scalar"] = 2 if not td["a"].is_floating_point() or name in ("pow",) else 0.75
    first = base[how]
    if len(BINARY.get(name, BINARY_NO_INPLACE.get(name)).operands) == 1:
        return (first,)
    second = {"td": other, "tensor": torch.tensor(0.25), "scalar": 0.25}[how]
    if name == "lerp" and how == "td":
        second = 0.3  # torch.lerp takes a scalar or a tensor weight; a tensordict weight too
    return (first, second)


def _compared_apart(name, result, td, ops):
    """``result`` with the non-tensor entries that a comparison with a tensordict turns
    into boolean tensors (as the reference does) put back as they were in ``td``, after
    checking them: the Python comparison of the values, over the batch shape."""
    python_ops = {"eq": operator.eq, "ne": operator.ne}
    if name not in python_ops or not isinstance(ops[0], TensorDictBase):
        return result
    compared = [k for k in leaves(td) if k not in tensor_leaves(td)]
    for key in compared:
        holder = td if len(key) == 1 else td[key[:-1]]
        want = python_ops[name](td[key], ops[0][key])
        got = result.get(key)
        assert got.dtype == torch.bool and got.shape == holder.batch_size, key
        assert bool((got == want).all()), key
        result.set(key, td.get(key))
    return result


def _leaf_operand(o, key):
    return o[key] if isinstance(o, TensorDict) else o


@pytest.mark.parametrize("kind", [FLOAT, INT])
@pytest.mark.parametrize("how", ["td", "tensor", "scalar"])
@pytest.mark.parametrize("name", [*BINARY, *BINARY_NO_INPLACE])
def test_binary_against_torch(name, how, kind):
    td = make_td(kind)
    ops = _operands(name, td, how)
    torch_name = {"mod": "remainder"}.get(name, name)
    op = getattr(torch, torch_name)

    def leaf(k, x):
        args = [_leaf_operand(o, k) for o in ops]
        if name in ("maximum", "minimum"):  # torch takes tensors only; the methods scalars too
            args = [torch.as_tensor(a) for a in args]
        return op(x, *args)

    try:
        want = {k: leaf(k, x) for k, x in tensor_leaves(td).items()}
    except (RuntimeError, TypeError):
        with pytest.raises((RuntimeError, TypeError)):
            getattr(td, name)(*ops)
        return
    check_leafwise(
        _compared_apart(name, getattr(td, name)(*ops), td, ops), td, lambda k, x: want[k]
    )
    if name not in BINARY:
        return
    clones = {k: x.clone() for k, x in tensor_leaves(td).items()}
    try:
        for k, x in clones.items():
            args = [_leaf_operand(o, k) for o in ops]
            if name in ("maximum", "minimum"):
                args = [torch.as_tensor(a) for a in args]
            if hasattr(x, name + "_"):
                getattr(x, name + "_")(*args)
            else:  # torch.maximum & co have no Tensor method: in place through out=
                op(x, *args, out=x)
    except RuntimeError:
        before = td.clone()
        with pytest.raises(RuntimeError):
            getattr(td, name + "_")(*ops)
        check_leafwise(td, before, lambda k, x: x)  # unchanged
        return
    assert getattr(td, name + "_")(*ops) is td
    check_leafwise(td, td, lambda k, x: clones[k])


@pytest.mark.parametrize("dunder", list(OPERATORS))
def test_operators(dunder):
    method, reflected = OPERATORS[dunder]
    kind = INT if method.startswith("bitwise") else FLOAT
    td = make_td(kind)
    operand = 2
    expected = {}
    for k, x in tensor_leaves(td).items():
        name = method.rstrip("_")
        torch_name = {"mod": "remainder"}.get(name, name)
        fn = getattr(torch, torch_name)
        expected[k] = fn(operand, x) if reflected else fn(x, operand)
    result = getattr(td, dunder)(operand)
    if method.endswith("_"):
        assert result is td
    check_leafwise(result, td, lambda k, x: expected[k])


@pytest.mark.parametrize("name", list(CASTS))
def test_casts(name):
    td = make_td()
    dtype = CASTS[name]
    check_leafwise(getattr(td, name)(), td, lambda k, x: x.to(dtype))


@pytest.mark.parametrize("name", list(QUANTIZED_CASTS))
def test_quantized_casts(name):
    td = make_td()
    dtype = QUANTIZED_CASTS[name]
    out = getattr(td, name)(scale=0.5)
    for k, x in tensor_leaves(td).items():
        assert out.get(k).dtype == dtype
        want = torch.quantize_per_tensor(x.float(), 0.5, 0, dtype).dequantize()
        torch.testing.assert_close(out.get(k).dequantize(), want)


@pytest.mark.parametrize("name", PREDICATES)
def test_predicates(name):
    td = make_td()
    td["a"][0, 0] = float("nan")
    td["b"][0, 0, 0] = float("inf")
    td["n", "c"][0, 0, 0, 0] = -float("inf")
    op = getattr(torch, name)
    check_leafwise(getattr(td, name)(), td, lambda k, x: op(x))
    check_leafwise(op(td), td, lambda k, x: op(x))


def test_type_cast():
    td = make_td()
    check_leafwise(td.type(torch.int32), td, lambda k, x: x.type(torch.int32))


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
    td = make_td(kind)
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
        assert result.batch_size == _expected_batch(dim, keepdim, BS, name)
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
    td = make_td(kind)
    mats = [x.reshape(*BS, -1) for x in tensor_leaves(td).values()]
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
        close(_call(td, name, dim, keepdim, kw, reduce=True), want)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, -1, 1])
def test_max_min_values_and_indices(name, dim, keepdim):
    td = make_td()
    result = getattr(td, name)(dim, keepdim)
    # as torch and the reference: a torch.return_types.max/min of two tensordicts
    assert isinstance(result, getattr(torch.return_types, name))
    values, indices = result
    assert result.values is values and result.indices is indices and result[1] is indices
    fn = getattr(torch, name)
    check_leafwise(values, td, lambda k, x: fn(x, dim % 2, keepdim).values)
    check_leafwise(indices, td, lambda k, x: fn(x, dim % 2, keepdim).indices)
    assert values.batch_size == indices.batch_size == _expected_batch(dim, keepdim, BS, name)
    # torch.max(td, dim) dispatches here; torch.max(td, other) is the elementwise maximum
    torch_values = fn(td, dim, keepdim).values
    check_leafwise(torch_values, td, lambda k, x: fn(x, dim % 2, keepdim).values)
    other = td.apply(lambda x: x.flip(0))
    check_leafwise(fn(td, other), td, lambda k, x: fn(x, x.flip(0)))


@pytest.mark.parametrize("name", list(CUMULATIVE))
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumulative(name, dim):
    td = make_td()
    fn = CUMULATIVE[name]
    values, indices = getattr(td, name)(dim)
    check_leafwise(values, td, lambda k, x: fn(x, dim % 2).values)
    check_leafwise(indices, td, lambda k, x: fn(x, dim % 2).indices)
    assert values.batch_size == BS and values["n"].batch_size == (2, 3, 5)
    only = getattr(td, name)(dim, return_indices=False)
    check_leafwise(only, td, lambda k, x: fn(x, dim % 2).values)
    matrix = torch.cat([x.reshape(*BS, -1) for x in tensor_leaves(td).values()], -1)
    agg = getattr(td, name)(dim, reduce=True)
    close(agg.values, fn(matrix, dim % 2).values)
    close(agg.indices, fn(matrix, dim % 2).indices)
    check_leafwise(fn(td, dim).values, td, lambda k, x: fn(x, dim % 2).values)


@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_torch_functions_dispatch_to_reductions(name):
    td = make_td()
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
    td = make_td()
    check_leafwise(torch.norm(td), td, lambda k, x: torch.linalg.vector_norm(x))


# --------------------------------------------------------------------------- batch ops
def _flat_batch(x, nb=2):
    return x.reshape(-1, *x.shape[nb:])


#: name -> list of (args, kwargs, leaf oracle(x) -> tensor, expected root batch size).
BATCH_CASES = {
    "roll": [
        ((1,), {}, lambda x: _flat_batch(x).roll(1, 0).reshape(x.shape), BS),
        ((2, 1), {}, lambda x: x.roll(2, 1), BS),
        (((1, -1), (0, -1)), {}, lambda x: x.roll((1, -1), (0, 1)), BS),
    ],
    "rot90": [
        ((), {}, lambda x: x.rot90(1, (0, 1)), (3, 2)),
        ((2, (1, 0)), {}, lambda x: x.rot90(2, (1, 0)), BS),
    ],
    "tile": [
        ((2,), {}, lambda x: x.repeat(1, 2, *[1] * (x.ndim - 2)), (2, 6)),
        (((2, 1, 3),), {}, lambda x: x.repeat(2, 1, 3, *[1] * (x.ndim - 2)), (2, 2, 9)),
    ],
    "repeat_interleave": [
        ((2,), {"dim": 1}, lambda x: x.repeat_interleave(2, 1), (2, 6)),
        ((2,), {}, lambda x: _flat_batch(x).repeat_interleave(2, 0), (12,)),
        (
            (torch.tensor([1, 0, 2]),),
            {"dim": -1},
            lambda x: x.repeat_interleave(torch.tensor([1, 0, 2]), 1),
            (2, 3),
        ),
    ],
    "atleast_1d": [((), {}, lambda x: x, BS)],
    "atleast_2d": [((), {}, lambda x: x, BS)],
    # as the reference: leading dims of size 1 (torch.atleast_3d of a 2-d tensor appends)
    "atleast_3d": [((), {}, lambda x: x.unsqueeze(0), (1, 2, 3))],
    "softmax": [
        ((0,), {}, lambda x: x.softmax(0), BS),
        ((-1,), {"dtype": torch.float64}, lambda x: x.softmax(1, dtype=torch.float64), BS),
    ],
    "gather": [
        (
            (1, torch.tensor([[2, 0], [1, 1]])),
            {},
            lambda x: x.gather(
                1,
                torch.tensor([[2, 0], [1, 1]])
                .reshape(2, 2, *[1] * (x.ndim - 2))
                .expand(2, 2, *x.shape[2:]),
            ),
            (2, 2),
        ),
    ],
}


def test_every_batch_op_has_cases_here():
    assert set(BATCH_CASES) == set(BATCH_OPS)


@pytest.mark.parametrize(
    "name, case",
    [(n, c) for n, cases in BATCH_CASES.items() for c in cases],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_batch_op_leafwise(name, case):
    args, kwargs, leaf_fn, batch = case
    td = make_td()
    result = getattr(td, name)(*args, **kwargs)
    assert result.batch_size == torch.Size(batch)
    assert result["n"].batch_size == torch.Size(batch) + torch.Size([5])
    assert result["n", "m"].batch_size == result["n"].batch_size
    check_leafwise(result, td, lambda k, x: leaf_fn(x))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_atleast_nd_on_small_batches(n):
    for bs in [(), (4,), (4, 2)]:
        td = TensorDict({"a": torch.zeros(*bs, 3), "n": {"b": torch.zeros(torch.Size(bs))}}, bs)
        out = getattr(td, f"atleast_{n}d")()
        # as the reference: size-1 dims are prepended (torch puts a 1-d tensor's in the
        # middle for atleast_3d: (4,) -> (1, 4, 1); a tensordict's batch gets (1, 1, 4))
        want = torch.Size([1] * max(n - len(bs), 0) + list(bs))
        assert out.batch_size == want
        assert out["a"].shape == want + (3,)
        assert out["n", "b"].shape == want
        assert getattr(torch, f"atleast_{n}d")(td).batch_size == want


# --------------------------------------------------------------------------- new_* constructors
@pytest.mark.parametrize("name", NEW)
def test_new_constructors(name):
    td = make_td()
    args = ((4, 1), 7.5) if name == "new_full" else (4, 1)
    out = getattr(td, name)(*args)
    assert out.batch_size == (4, 1)
    assert out["n"].batch_size == (4, 1, 5)
    assert out["s"] == "label"
    for k, x in tensor_leaves(td).items():
        y = out.get(k)
        assert y.shape == (4, 1, *x.shape[2:]) and y.dtype == x.dtype
        if name != "new_empty":
            fill = args[1:] if name == "new_full" else ()
            want = getattr(x, name)((4, 1, *x.shape[2:]), *fill)
            assert torch.equal(y, want)
    typed = getattr(td, name)(*args, dtype=torch.float16, device="cpu")
    assert typed.device == torch.device("cpu") and typed["n"].device == torch.device("cpu")
    assert all(v.dtype == torch.float16 for v in tensor_leaves(typed).values())


def test_new_tensor():
    td = make_td()
    out = td.new_tensor([[1, 2]])
    assert out.batch_size == (1, 2) and out["n"].batch_size == (1, 2)
    for k, x in tensor_leaves(td).items():
        assert torch.equal(out.get(k), torch.tensor([[1, 2]], dtype=x.dtype))
    from_td = td.new_tensor(td.float(), dtype=torch.float64)
    check_leafwise(from_td, td, lambda k, x: x.float().double())


def test_like_functions():
    td = make_td()
    for fn in (torch.zeros_like, torch.ones_like, torch.empty_like, torch.rand_like):
        out = fn(td)
        for k, x in tensor_leaves(td).items():
            assert out.get(k).shape == x.shape and out.get(k).dtype == x.dtype
    check_leafwise(torch.full_like(td, 3), td, lambda k, x: torch.full_like(x, 3))
    check_leafwise(torch.zeros_like(td), td, lambda k, x: torch.zeros_like(x))


# --------------------------------------------------------------------------- masks, where, scatter
MASK = torch.tensor([[True, False, True], [False, False, True]])


def _right(t, x):
    return t.reshape(*t.shape, *[1] * (x.ndim - t.ndim))


def test_every_method_has_a_test_here():
    assert set(METHODS) == {
        "new_tensor",
        "masked_fill",
        "masked_fill_",
        "masked_select",
        "where",
        "scatter",
    }


@pytest.mark.parametrize("mask", [MASK, MASK[:, :1], MASK[:, 0]], ids=["full", "broadcast", "lead"])
def test_masked_fill_and_inplace(mask):
    td = make_td()
    check_leafwise(td.masked_fill(mask, -1.0), td, lambda k, x: x.masked_fill(_right(mask, x), -1))
    check_leafwise(
        torch.masked_fill(td, mask, -1.0), td, lambda k, x: x.masked_fill(_right(mask, x), -1)
    )
    before = td.clone()
    assert td.masked_fill_(mask, 0) is td
    check_leafwise(td, before, lambda k, x: x.masked_fill(_right(mask, x), 0))


@pytest.mark.parametrize("mask", [MASK, MASK[:, 0], MASK.unsqueeze(-1)], ids=["full", "lead", "x1"])
def test_masked_select(mask):
    td = make_td()
    out = td.masked_select(mask)
    m = mask.squeeze(-1) if mask.ndim > 2 else mask
    assert out.batch_size == (int(m.sum()), *BS[m.ndim :])
    check_leafwise(out, td, lambda k, x: x[m])
    check_leafwise(torch.masked_select(td, mask), td, lambda k, x: x[m])


def test_where_operands():
    td = make_td()
    other = td.apply(lambda x: -x)
    check_leafwise(td.where(MASK, other), td, lambda k, x: torch.where(_right(MASK, x), x, -x))
    check_leafwise(td.where(MASK, 0.5), td, lambda k, x: torch.where(_right(MASK, x), x, 0.5))
    t = torch.tensor(2.0)
    check_leafwise(td.where(MASK, t), td, lambda k, x: torch.where(_right(MASK, x), x, t))
    check_leafwise(
        torch.where(MASK, td, other), td, lambda k, x: torch.where(_right(MASK, x), x, -x)
    )
    check_leafwise(
        torch.where(MASK, 1.0, other), td, lambda k, x: torch.where(_right(MASK, x), 1.0, -x)
    )
    out = td.clone()
    assert td.where(MASK, other, out=out) is out
    check_leafwise(out, td, lambda k, x: torch.where(_right(MASK, x), x, -x))
    cond = td.apply(lambda x: x > 1.0)
    check_leafwise(td.where(cond, other), td, lambda k, x: torch.where(x > 1.0, x, -x))


def test_where_pad():
    td = make_td()
    other = td.exclude("a").set("extra", torch.ones(2, 3))
    with pytest.raises(KeyError, match="'a'"):
        td.where(MASK, other)
    out = td.where(MASK, other, pad=0.0)
    assert torch.equal(out["a"], torch.where(MASK, td["a"], 0.0))
    assert torch.equal(out["extra"], torch.where(MASK, 0.0, torch.ones(2, 3)))


def test_scatter():
    td = make_td()
    index = torch.tensor([[1, 0, 1]])
    src = td.apply(lambda x: x * 10)

    def expected(k, x, s):
        idx = _right(index, x).expand(*index.shape, *x.shape[2:])
        return x.scatter(0, idx, s)

    check_leafwise(td.scatter(0, index, src), td, lambda k, x: expected(k, x, src.get(k)))
    check_leafwise(td.scatter(0, index, 7.0), td, lambda k, x: expected(k, x, 7.0))
    check_leafwise(torch.scatter(td, 0, index, src), td, lambda k, x: expected(k, x, src.get(k)))


def test_gather_dispatch_and_out():
    td = make_td()
    index = torch.tensor([[1, 0, 1]])
    ref = td.gather(0, index)
    check_leafwise(torch.gather(td, 0, index), ref, lambda k, x: x)
    out = ref.clone().zero_()
    assert td.gather(0, index, out=out) is out
    check_leafwise(out, ref, lambda k, x: x)


def test_functional_softmax():
    td = make_td()
    check_leafwise(torch.nn.functional.softmax(td, dim=1), td, lambda k, x: torch.softmax(x, 1))


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call",
    [
        *(lambda td, n=n: getattr(td, n)(*(0.5,) * (n == "quantile"), dim=2) for n in REDUCTIONS),
        *(
            lambda td, n=n: getattr(td, n)(*(0.5,) * (n == "quantile"), dim=(0, -3))
            for n in REDUCTIONS
        ),
        *(lambda td, n=n: getattr(td, n)(-3) for n in CUMULATIVE),
        lambda td: td.roll(1, 2),
        lambda td: td.rot90(1, (0, 2)),
        lambda td: td.repeat_interleave(2, dim=3),
        lambda td: td.softmax(-3),
        lambda td: td.gather(2, torch.zeros(2, 3, dtype=torch.long)),
        lambda td: td.scatter(2, torch.zeros(2, 3, dtype=torch.long), 1.0),
    ],
)
def test_bad_dim_names_the_batch_size(call):
    td = make_td()
    with pytest.raises(IndexError, match=r"batch_size=\(2, 3\)"):
        call(td)


def test_bad_reduction_arguments():
    td = make_td()
    with pytest.raises(ValueError, match="'feature'"):
        td.sum(dim="features")
    with pytest.raises(ValueError, match="twice"):
        td.sum(dim=(0, -2))
    with pytest.raises(TypeError, match="amax"):
        td.max(dim=(0, 1))
    with pytest.raises(TypeError, match="unexpected keyword"):
        td.sum(correction=1)
    with pytest.raises(ValueError, match="scalar"):
        td.quantile(torch.tensor([0.1, 0.9]), 0)
    with pytest.raises(RuntimeError, match="'a'") as info:
        make_td(INT).mean(0)
    assert "torch.int64" in str(info.value)


def test_inplace_bad_operand_names_key_and_leaves_data_unchanged():
    td = make_td()
    before = td.clone()
    other = td.clone()
    other["n", "c"] = torch.ones(2, 3, 5, 3)  # wrong feature size for ('n', 'c')
    for name in BINARY:
        args = (other,) if len(BINARY[name].operands) == 1 else (other, other)
        with pytest.raises(RuntimeError, match=r"\('n', 'c'\)"):
            getattr(td, name + "_")(*args)
        check_leafwise(td, before, lambda k, x: x)
    with pytest.raises(RuntimeError, match=r"\('n', 'c'\)"):
        td.add(other)


def test_masks_of_wrong_shape_leave_data_unchanged():
    td = make_td()
    before = td.clone()
    for bad in (torch.ones(3, dtype=torch.bool), torch.ones(2, 3, 4, dtype=torch.bool)):
        with pytest.raises(RuntimeError, match=r"batch_size=\(2, 3\)"):
            td.masked_fill_(bad, 0)
        with pytest.raises(RuntimeError, match=r"batch_size=\(2, 3\)"):
            td.masked_select(bad)
        with pytest.raises(RuntimeError, match=r"batch_size=\(2, 3\)"):
            td.where(bad, 0.0)
    with pytest.raises(TypeError, match="boolean"):
        td.masked_fill_(torch.ones(2, 3), 0)
    check_leafwise(td, before, lambda k, x: x)


def test_where_shape_mismatch_names_the_key():
    td = make_td()
    other = td.clone()
    other["b"] = torch.zeros(2, 3, 7, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="'b'"):
        td.where(MASK, other)


def test_reduce_true_needs_a_tensor():
    with pytest.raises(ValueError, match="no tensor leaf"):
        TensorDict({"s": "only text"}, [2]).sum(reduce=True)


def test_reduction_of_empty_batch_and_no_leaves():
    td = TensorDict({"a": torch.zeros(0, 3)}, [0])
    assert td.sum(0)["a"].shape == (3,)
    assert td.sum(reduce=True) == 0
    assert math.isnan(td.mean(reduce=True))
    assert TensorDict(batch_size=[2]).sum(0).batch_size == ()


def test_operator_module_is_consistent():
    td = make_td()
    check_leafwise(operator.sub(5, td), td, lambda k, x: 5 - x)


# --------------------------------------------------------------------------- autograd
def test_backward_grad_zero_grad():
    w = torch.ones(2, 3, requires_grad=True)
    td = TensorDict({"a": w * 2, "n": {"b": (w * w).unsqueeze(-1)}, "i": torch.ones(2, 3)}, BS)
    # as the reference: a gradient tensordict for non-scalar leaves ...
    td.backward(td.apply(torch.ones_like), retain_graph=True)
    torch.testing.assert_close(w.grad, torch.full((2, 3), 4.0))
    w.grad = None
    td.backward(td.apply(lambda x: torch.full_like(x, 2.0)), retain_graph=True, inputs=[w])
    torch.testing.assert_close(w.grad, torch.full((2, 3), 8.0))
    with pytest.raises(RuntimeError, match=r"'a' has shape \(2, 3\)"):
        td.backward()
    with pytest.raises(KeyError, match="'a'"):
        td.backward(td.exclude("a"))
    # ... and none for leaves of one element
    w.grad = None
    TensorDict({"a": (w * 2).sum(), "b": (w * w).sum()}).backward()
    torch.testing.assert_close(w.grad, torch.full((2, 3), 4.0))
    params = TensorDict({"w": w, "n": {"v": torch.zeros(2, 3), "u": w}}, BS)
    grads = params.grad
    assert set(grads.keys(True, True)) == {"w", ("n", "u")}
    torch.testing.assert_close(grads["w"], w.grad)
    assert params.zero_grad(set_to_none=False) is params
    assert torch.equal(w.grad, torch.zeros(2, 3))
    params.zero_grad()
    assert w.grad is None
    with pytest.raises(RuntimeError, match="requires grad"):
        make_td().backward()


def test_as_tensor():
    td = make_td()
    check_leafwise(td.as_tensor(), td, lambda k, x: x)


# --------------------------------------------------------------------------- torch.compile
def test_table_methods_compile_without_graph_breaks():
    def f(td, mask):
        return (
            td.sum(0),
            td.std(dim="feature"),
            td.max(1).indices,
            td.mean(reduce=True),
            td.where(mask, 0.0),
            td.roll(1, 0).softmax(1),
            td.gather(1, torch.zeros(2, 1, dtype=torch.long)),
        )

    td = make_td()
    compiled = torch.compile(f, fullgraph=True, backend="eager")
    for got, want in zip(compiled(td, MASK), f(td, MASK)):
        if isinstance(want, torch.Tensor):
            close(got, want)
        else:
            assert got.batch_size == want.batch_size
            for k, v in tensor_leaves(want).items():
                close(got.get(k), v)


# --------------------------------------------------------------------------- non-tensor stacks, lazy stacks
def _stacked_with_text():
    a = TensorDict({"x": torch.ones(3), "s": "a", "m": "same"}, [3])
    b = TensorDict({"x": torch.zeros(3), "s": "b", "m": "same"}, [3])
    return torch.stack([a, b])  # "s" is a NonTensorStack, "m" one value


def test_reductions_carry_non_tensor_entries():
    td = _stacked_with_text()
    assert td.sum(1).get_non_tensor("s") == ["a", "b"]  # the same all along dim 1: kept
    assert td.sum(1, keepdim=True).get_non_tensor("s") == [["a"], ["b"]]
    assert td.max(1).values.get_non_tensor("s") == ["a", "b"]
    for out in (td.sum(0), td.sum(), td.mean((0, 1))):  # values differ: left out
        assert "s" not in out.keys() and out.get_non_tensor("m") == "same"
    assert td.sum(dim="feature").get_non_tensor("s") == td.get_non_tensor("s")
    assert td.cummax(0).values.get_non_tensor("s") == td.get_non_tensor("s")


@pytest.mark.parametrize(
    "call, expected",
    [
        (lambda td: td.rot90(), lambda s: [list(r) for r in zip(*s)][::-1]),
        (lambda td: td.roll(1, 1), lambda s: [r[-1:] + r[:-1] for r in s]),
        (lambda td: td.gather(1, torch.tensor([[2], [0]])), lambda s: [[s[0][2]], [s[1][0]]]),
        (lambda td: td.softmax(0), lambda s: s),
        (lambda td: td.where(torch.tensor([True, False]), 0.0), lambda s: s),
        (lambda td: td.masked_fill(torch.tensor([True, False]), 0.0), lambda s: s),
    ],
)
def test_batch_ops_move_non_tensor_stacks(call, expected):
    values = [["a", "b", "c"], ["d", "e", "f"]]
    td = torch.stack(
        [
            torch.stack([TensorDict({"x": torch.tensor(1.0), "s": v}, []) for v in row])
            for row in values
        ]
    )
    assert td.batch_size == (2, 3)
    assert call(td).get_non_tensor("s") == expected(values)


def test_new_constructors_with_non_tensor_stacks():
    td = _stacked_with_text()
    out = td.new_zeros(4)
    # a stack of the new shape, of one value (not meant to be read before it is written)
    assert out.batch_size == (4,) and out.get("s").batch_size == (4,)
    assert out.get("m").data == "same"


def test_lazy_stacks():
    from tensordict import lazy_stack

    members = [make_td(seed=i) for i in range(2)]
    lazy = lazy_stack(members, 0)
    dense = torch.stack(members, 0)
    for call in (
        lambda t: t.sum(0),
        lambda t: t.mean(dim="feature"),
        lambda t: t.max(1).indices,
        lambda t: t.roll(1, 1),
        lambda t: t.where(torch.ones(2, 2, 3, dtype=torch.bool), 0.0),
        lambda t: t.masked_fill(torch.tensor([True, False]), 0.0),
    ):
        check_leafwise(call(lazy), call(dense), lambda k, x: x)
    close(lazy.std(reduce=True), dense.std(reduce=True))
    nested = TensorDict({"l": lazy}, [2, 2])
    want = TensorDict({"l": dense}, [2, 2]).sum("feature", reduce=True)
    close(nested.sum(dim="feature", reduce=True), want)
    lazy.masked_fill_(torch.tensor([True, False]), -1.0)
    assert (members[0]["a"] == -1).all() and (members[1]["a"] != -1).all()


# --------------------------------------------------------------------------- every kind
#: the checks over ``any_td`` (dense, nested, lazy stacks, indexed; float leaves)
check_any = partial(core_check_leafwise, rtol=1e-5, atol=1e-6)
_FLOAT_BINARY = [n for n in [*BINARY, *BINARY_NO_INPLACE] if not n.startswith("bitwise")]


def n_operands(name):
    return len(BINARY.get(name, BINARY_NO_INPLACE.get(name)).operands)


def _binary_operands(name, td):
    """(operands for the method, operands for torch given a leaf's key) of a binary row."""
    n = n_operands(name)
    if name == "lerp":
        return (td, 0.3), lambda k: (tensor_leaves(td)[k], 0.3)
    if n == 2:
        return (td, td), lambda k: (tensor_leaves(td)[k], tensor_leaves(td)[k])
    return (td,), lambda k: (tensor_leaves(td)[k],)


def test_unary_rows_over_every_kind(any_td):
    for name in UNARY:
        op = getattr(torch, name)
        check_any(getattr(any_td, name)(), any_td, op)
        copy = any_td.clone()
        assert getattr(copy, name + "_")() is copy
        check_any(copy, any_td, op)


def test_binary_rows_over_every_kind(any_td):
    for name in _FLOAT_BINARY:
        op = getattr(torch, {"mod": "remainder"}.get(name, name))
        ops, leaf_ops = _binary_operands(name, any_td)

        def leaf(k, x, op=op, leaf_ops=leaf_ops):
            return op(x, *leaf_ops(k))

        check_any(
            _compared_apart(name, getattr(any_td, name)(*ops), any_td, ops),
            any_td,
            leaf,
            keyed=True,
        )
        if n_operands(name) == 1 and not name.startswith(("maximum", "minimum", "logical")):
            check_any(getattr(any_td, name)(2), any_td, lambda x, op=op: op(x, 2))  # a scalar
        if name in BINARY:
            copy = any_td.clone()
            assert getattr(copy, name + "_")(*ops) is copy
            check_any(copy, any_td, leaf, keyed=True)


def test_cast_and_predicate_rows_over_every_kind(any_td):
    for name, dtype in CASTS.items():
        check_any(getattr(any_td, name)(), any_td, lambda x, d=dtype: x.to(d))
    for name in PREDICATES:
        check_any(getattr(any_td, name)(), any_td, getattr(torch, name))


#: the torch call reducing a leaf over batch dim 1 (values only), for every reduction row
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
            close(everything[key], want)


@pytest.mark.parametrize("name", list(BATCH_CASES))
def test_batch_op_rows_over_every_kind(any_td, name):
    for args, kwargs, leaf_fn, batch in BATCH_CASES[name]:
        out = getattr(any_td, name)(*args, **kwargs)
        check_any(out, any_td, leaf_fn, batch, non_tensors=False)
        assert tensor_leaves(out) and out.get("tag").data == "t"


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
    close(getattr(td, name)(dim=dim, reduce=True), want)
