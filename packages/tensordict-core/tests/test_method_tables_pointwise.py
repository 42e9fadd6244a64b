"""The pointwise rows of ``tensordict._engine.ops`` (unary ops and their in-place twins,
binary ops with tensordict, tensor and scalar operands, operators, casts, predicates), each
against the same torch operation applied leaf by leaf on ``core_helpers.make_table_td`` and
on every kind of ``any_td``. The tests iterate over the tables, so a new row is checked as
soon as it exists; a row that needs arguments must have an entry here.
"""

from __future__ import annotations

import operator

import pytest
import torch
from core_helpers import (
    FLOAT,
    INT,
    TABLE_WARNINGS,
    leaves,
    make_table_td,
    raises_for_some_leaf,
    tensor_leaves,
)
from core_helpers import table_check_any as check_any
from core_helpers import table_check_leafwise as check_leafwise

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

pytestmark = TABLE_WARNINGS


# --------------------------------------------------------------------------- pointwise
@pytest.mark.parametrize("kind", [FLOAT, INT])
@pytest.mark.parametrize("name", UNARY)
def test_unary_and_inplace_twin(name, kind):
    td = make_table_td(kind)
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
    td = make_table_td(kind)
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
    td = make_table_td(kind)
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
    td = make_table_td()
    dtype = CASTS[name]
    check_leafwise(getattr(td, name)(), td, lambda k, x: x.to(dtype))


@pytest.mark.parametrize("name", list(QUANTIZED_CASTS))
def test_quantized_casts(name):
    td = make_table_td()
    dtype = QUANTIZED_CASTS[name]
    out = getattr(td, name)(scale=0.5)
    for k, x in tensor_leaves(td).items():
        assert out.get(k).dtype == dtype
        want = torch.quantize_per_tensor(x.float(), 0.5, 0, dtype).dequantize()
        torch.testing.assert_close(out.get(k).dequantize(), want)


@pytest.mark.parametrize("name", PREDICATES)
def test_predicates(name):
    td = make_table_td()
    td["a"][0, 0] = float("nan")
    td["b"][0, 0, 0] = float("inf")
    td["n", "c"][0, 0, 0, 0] = -float("inf")
    op = getattr(torch, name)
    check_leafwise(getattr(td, name)(), td, lambda k, x: op(x))
    check_leafwise(op(td), td, lambda k, x: op(x))


def test_type_cast():
    td = make_table_td()
    check_leafwise(td.type(torch.int32), td, lambda k, x: x.type(torch.int32))


# --------------------------------------------------------------------------- every kind
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
