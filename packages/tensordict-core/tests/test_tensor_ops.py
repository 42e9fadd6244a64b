"""Tensor-like behaviour: casts and copies, in-place fills, autograd flags, arithmetic and
comparison operators (with tensordict / tensor / scalar operands), all/any, shared memory,
and the shape/device properties."""

from __future__ import annotations

import operator

import pytest
import torch
from core_helpers import tensor_leaves

from tensordict import TensorDict

cuda = pytest.mark.cuda
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def make_td():
    """Float leaves with feature dims (for scalar / tensordict operands)."""
    return TensorDict(
        {
            "a": torch.arange(1.0, 7.0).reshape(2, 3),
            "n": {
                "b": torch.arange(1.0, 25.0).reshape(2, 3, 4),
                "m": {"c": torch.full((2, 3, 1), 2.0)},
            },
        },
        [2, 3],
    )


def make_flat_td():
    """Every leaf has exactly the batch shape (for batch-shaped tensor operands)."""
    return TensorDict(
        {
            "a": torch.arange(1.0, 7.0).reshape(2, 3),
            "n": {"b": torch.arange(6.0, 0.0, -1).reshape(2, 3)},
        },
        [2, 3],
    )


# ---------------------------------------------------------------- properties
def test_shape_properties():
    td = make_td()
    assert td.batch_size == torch.Size([2, 3])
    assert td.shape == torch.Size([2, 3])
    assert td.batch_dims == 2
    assert td.ndim == 2
    assert td.ndimension() == 2
    assert td.dim() == 2
    assert td.numel() == 6
    assert td.size() == torch.Size([2, 3])
    assert td.size(1) == 3 and td.size(-2) == 2
    assert len(td) == 2
    assert TensorDict().numel() == 1
    assert TensorDict(batch_size=[0, 4]).numel() == 0


def test_device_property():
    assert make_td().device is None
    td = TensorDict({"a": torch.zeros(2)}, [2], device="cpu")
    assert td.device == torch.device("cpu")
    assert td.is_cpu and not td.is_cuda
    with pytest.raises(RuntimeError):
        td.device = "cpu"


def test_clear_device_():
    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, [2], device="cpu")
    assert td.clear_device_() is td
    assert td.device is None and td["n"].device is None


def test_dtype_property():
    assert make_td().dtype == torch.float32
    mixed = TensorDict({"a": torch.zeros(2), "b": torch.zeros(2, dtype=torch.int64)}, [2])
    assert mixed.dtype is None


# ---------------------------------------------------------------- to / cpu / casts
def test_to_dtype():
    td = make_td()
    out = td.to(torch.float64)
    for key, value in tensor_leaves(td).items():
        assert out[key].dtype == torch.float64
        assert torch.equal(out[key], value.double())
    assert td["a"].dtype == torch.float32  # not in place


def test_to_device_sets_device():
    td = make_td()
    out = td.to("cpu")
    assert out.device == torch.device("cpu")
    assert out["n"].device == torch.device("cpu")
    assert out["n", "m"].device == torch.device("cpu")
    for key, value in tensor_leaves(td).items():
        assert torch.equal(out[key], value)


def test_to_another_tensordict_uses_its_device():
    out = make_td().to(TensorDict(device="cpu"))
    assert out.device == torch.device("cpu")


def test_to_device_meta_casts_every_leaf():
    out = make_td().to("meta")
    assert out.device == torch.device("meta")
    assert all(v.device.type == "meta" for v in tensor_leaves(out).values())


@pytest.mark.parametrize("source_device", [None, "cpu"])
def test_to_device_as_a_context_writes_back(source_device):
    td = TensorDict({"x": torch.zeros(3)}, [3], device=source_device)
    with td.to("cpu") as moved:
        moved["y"] = moved["x"] + 1
        moved["x"] = torch.full((3,), 5.0)
    assert torch.equal(td["y"], torch.ones(3))
    assert torch.equal(td["x"], torch.full((3,), 5.0))
    assert td.device == (None if source_device is None else torch.device("cpu"))


def test_to_device_context_leaves_the_source_until_exit():
    td = TensorDict({"x": torch.zeros(3)}, [3])
    with td.to("meta") as moved:  # another device: the source is written back on exit only
        moved["y"] = torch.empty(3, device="meta")
        assert "y" not in td.keys()
    assert td["y"].device.type == "meta" and td["x"].device.type == "meta"


def test_cpu():
    out = make_td().cpu()
    assert out.device == torch.device("cpu")
    assert all(v.device.type == "cpu" for v in tensor_leaves(out).values())


@pytest.mark.parametrize(
    "method, dtype",
    [
        ("double", torch.float64),
        ("float", torch.float32),
        ("half", torch.float16),
        ("int", torch.int32),
        ("bool", torch.bool),
        ("int64", torch.int64),
        ("bfloat16", torch.bfloat16),
    ],
)
def test_cast_methods(method, dtype):
    td = make_td()
    out = getattr(td, method)()
    for key, value in tensor_leaves(td).items():
        assert out[key].dtype == dtype
        assert torch.equal(out[key], value.to(dtype))


def test_to_keeps_non_tensor():
    td = TensorDict({"a": torch.zeros(2), "s": "text"}, [2])
    assert td.to(torch.float64)["s"] == "text"
    assert td.to("cpu")["s"] == "text"


# ---------------------------------------------------------------- clone / detach / contiguous
def test_clone_is_deep():
    td = make_td()
    cl = td.clone()
    for key, value in tensor_leaves(td).items():
        assert cl[key] is not value
        assert cl[key].data_ptr() != value.data_ptr()
        assert torch.equal(cl[key], value)
    assert cl["n"] is not td["n"]
    cl["a"].zero_()
    cl["n", "new"] = torch.zeros(2, 3)
    assert (td["a"] != 0).all()
    assert ("n", "new") not in td.keys(True)


def test_clone_keeps_metadata():
    td = TensorDict({"a": torch.zeros(2, 3), "s": "x"}, [2, 3], device="cpu", names=["p", "q"])
    cl = td.clone()
    assert cl.batch_size == td.batch_size
    assert cl.device == td.device
    assert cl.names == ["p", "q"]
    assert cl["s"] == "x"


def test_clone_not_recurse_shares_tensors():
    td = make_td()
    cl = td.clone(recurse=False)
    assert cl["a"] is td["a"]
    assert cl["n"] is not td["n"]


def test_detach():
    td = make_td().requires_grad_()
    y = td.apply(lambda x: x * 2)
    out = y.detach()
    for key, value in tensor_leaves(y).items():
        assert value.requires_grad
        assert not out[key].requires_grad
        assert out[key].data_ptr() == value.data_ptr()


def test_detach_():
    td = make_td().requires_grad_().apply(lambda x: x * 2)
    td.detach_()
    assert not any(v.requires_grad for v in tensor_leaves(td).values())


def test_contiguous():
    td = make_td().expand(4, 2, 3)
    assert not td.is_contiguous()
    out = td.contiguous()
    assert out.is_contiguous()
    for key, value in tensor_leaves(td).items():
        assert out[key].is_contiguous()
        assert torch.equal(out[key], value)


# ---------------------------------------------------------------- zero_ / fill_
def test_zero_():
    td = make_td()
    ptrs = {k: v.data_ptr() for k, v in tensor_leaves(td).items()}
    assert td.zero_() is td
    for key, value in tensor_leaves(td).items():
        assert (value == 0).all()
        assert value.data_ptr() == ptrs[key]


def test_fill_leaf():
    td = make_td()
    b = td["n", "b"]
    assert td.fill_(("n", "b"), 7) is td
    assert td["n", "b"] is b
    assert (b == 7).all()
    assert torch.equal(td["a"], torch.arange(1.0, 7.0).reshape(2, 3))


def test_fill_nested_tensordict():
    td = make_td()
    td.fill_("n", -1.5)
    assert (td["n", "b"] == -1.5).all() and (td["n", "m", "c"] == -1.5).all()
    assert (td["a"] > 0).all()


# ---------------------------------------------------------------- requires_grad_
def test_requires_grad_():
    td = make_td()
    assert not td.requires_grad
    assert td.requires_grad_() is td
    assert all(v.requires_grad for v in tensor_leaves(td).values())
    assert td.requires_grad
    td.requires_grad_(False)
    assert not any(v.requires_grad for v in tensor_leaves(td).values())


def test_requires_grad_backward_flows_to_leaves():
    td = make_td().requires_grad_()
    loss = sum((v * 2).sum() for v in tensor_leaves(td).values())
    loss.backward()
    for value in tensor_leaves(td).values():
        assert torch.equal(value.grad, torch.full_like(value, 2.0))


def test_requires_grad_skips_integer_leaves():
    td = TensorDict({"f": torch.zeros(2), "i": torch.zeros(2, dtype=torch.int64)}, [2])
    td.requires_grad_()
    assert td["f"].requires_grad
    assert not td["i"].requires_grad


# ---------------------------------------------------------------- arithmetic operators
ARITH = [
    (operator.add, "+"),
    (operator.sub, "-"),
    (operator.mul, "*"),
    (operator.truediv, "/"),
    (operator.pow, "**"),
]
COMPARE = [
    (operator.eq, "=="),
    (operator.ne, "!="),
    (operator.lt, "<"),
    (operator.le, "<="),
    (operator.gt, ">"),
    (operator.ge, ">="),
]


@pytest.mark.parametrize("op, sym", ARITH + COMPARE, ids=[s for _, s in ARITH + COMPARE])
def test_operator_with_tensordict(op, sym):
    td = make_td()
    other = td.apply(lambda x: (x % 3) + 1)
    out = op(td, other)
    assert isinstance(out, TensorDict)
    assert out.batch_size == td.batch_size
    for key, value in tensor_leaves(td).items():
        assert torch.equal(out[key], op(value, other[key])), key


@pytest.mark.parametrize("op, sym", ARITH + COMPARE, ids=[s for _, s in ARITH + COMPARE])
@pytest.mark.parametrize("scalar", [2, 2.5])
def test_operator_with_scalar(op, sym, scalar):
    td = make_td()
    out = op(td, scalar)
    for key, value in tensor_leaves(td).items():
        assert torch.equal(out[key], op(value, scalar)), key


@pytest.mark.parametrize("op, sym", ARITH + COMPARE, ids=[s for _, s in ARITH + COMPARE])
def test_reflected_operator_with_scalar(op, sym):
    td = make_td()
    out = op(3, td)
    for key, value in tensor_leaves(td).items():
        # 3 / x may be computed as 3 * (1 / x): allow rounding, but check dtype and shape
        torch.testing.assert_close(out[key], op(3, value), msg=str(key))


@pytest.mark.parametrize("op, sym", ARITH + COMPARE, ids=[s for _, s in ARITH + COMPARE])
def test_operator_with_tensor(op, sym):
    td = make_flat_td()
    t = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    out = op(td, t)
    for key, value in tensor_leaves(td).items():
        assert torch.equal(out[key], op(value, t)), key


def test_operator_with_broadcast_tensor():
    td = make_td()
    t = torch.tensor(3.0)
    out = td * t
    for key, value in tensor_leaves(td).items():
        assert torch.equal(out[key], value * 3.0), key


def test_unary_operators():
    td = make_td()
    neg, pos, ab = -td, +td, abs(-td)
    for key, value in tensor_leaves(td).items():
        assert torch.equal(neg[key], -value)
        assert torch.equal(pos[key], value)
        assert torch.equal(ab[key], value.abs())


def test_operators_leave_operands_unchanged():
    td = make_td()
    before = td.clone()
    _ = td + 1, td * td, td == 2, 1 - td
    for key, value in tensor_leaves(before).items():
        assert torch.equal(td[key], value)


def test_operator_key_mismatch_raises():
    td = make_td()
    with pytest.raises(KeyError, match="'n'"):
        td + td.select("a")
    with pytest.raises(KeyError, match="'n'"):
        td == td.select("a")


def test_comparison_result_is_bool():
    out = make_td() == 2.0
    assert all(v.dtype == torch.bool for v in tensor_leaves(out).values())


def test_readme_arithmetic():
    td = TensorDict.fromkeys(["a", "b", "c"], 0)
    td += 1
    assert (td == 1).all()


# ---------------------------------------------------------------- in-place operators
INPLACE = [
    (operator.iadd, operator.add),
    (operator.isub, operator.sub),
    (operator.imul, operator.mul),
    (operator.itruediv, operator.truediv),
]


@pytest.mark.parametrize("iop, op", INPLACE, ids=["+=", "-=", "*=", "/="])
@pytest.mark.parametrize("kind", ["scalar", "tensor", "tensordict"])
def test_inplace_operator_keeps_storage(iop, op, kind):
    td = make_flat_td()
    before = {k: (v, v.data_ptr(), v.clone()) for k, v in tensor_leaves(td).items()}
    if kind == "scalar":
        other = 2.0
    elif kind == "tensor":
        other = torch.tensor([[1.0, 2.0, 4.0], [8.0, 0.5, 0.25]])
    else:
        other = td.apply(lambda x: x * 0 + 4.0)
    expected_other = {k: (other if kind != "tensordict" else other[k]) for k in before}
    result = iop(td, other)
    assert result is td
    for key, (tensor, ptr, orig) in before.items():
        assert td[key] is tensor, key
        assert td[key].data_ptr() == ptr, key
        assert torch.equal(td[key], op(orig, expected_other[key])), key


def test_inplace_operator_on_locked_tensordict_is_allowed():
    td = make_td().lock_()
    a = td["a"]
    td += 1
    assert td["a"] is a
    assert torch.equal(a, torch.arange(2.0, 8.0).reshape(2, 3))


@pytest.mark.parametrize(
    "name, fn", [("add_", torch.add), ("mul_", torch.mul), ("sub_", torch.sub)]
)
def test_inplace_methods(name, fn):
    td = make_td()
    orig = td.clone()
    out = getattr(td, name)(3)
    assert out is td
    for key, value in tensor_leaves(orig).items():
        assert torch.equal(td[key], fn(value, 3))


@pytest.mark.parametrize("name", ["exp", "sqrt", "neg", "abs", "sigmoid", "log", "floor"])
def test_unary_methods_and_their_inplace_twin(name):
    td = make_td()
    out = getattr(td, name)()
    for key, value in tensor_leaves(td).items():
        assert torch.equal(out[key], getattr(torch, name)(value)), key
    ptrs = {k: v.data_ptr() for k, v in tensor_leaves(td).items()}
    expected = {k: getattr(torch, name)(v) for k, v in tensor_leaves(td).items()}
    assert getattr(td, name + "_")() is td
    for key, value in tensor_leaves(td).items():
        assert value.data_ptr() == ptrs[key]
        assert torch.equal(value, expected[key]), key


# ---------------------------------------------------------------- all / any
def test_all_any_return_python_bool():
    td = make_td()
    assert td.all() is True
    assert td.any() is True
    zero = td.clone().zero_()
    assert zero.all() is False
    assert zero.any() is False
    mixed = td.clone()
    mixed["n", "m", "c"].zero_()
    assert mixed.all() is False
    assert mixed.any() is True


def test_bool_of_tensordict_is_refused():
    with pytest.raises(Exception, match="all"):
        bool(make_td())


def test_bool_of_tensordict_raises_runtime_error():
    # as torch (a tensor of several values) and the reference
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(make_td())


def test_equality_with_dicts_and_other_objects():
    td = make_td()
    assert (td == td.to_dict()).all() and not (td != td.to_dict()).any()
    # an object that is not comparable leaf by leaf is never equal (Python's fallback)
    assert (td == "z") is False and (td != "z") is True


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("name", ["all", "any"])
def test_all_any_along_dim(name, dim):
    td = make_td() > 3
    out = getattr(td, name)(dim)
    d = dim % 2
    bs = [s for i, s in enumerate(td.batch_size) if i != d]
    assert out.batch_size == torch.Size(bs)
    for key, value in tensor_leaves(td).items():
        assert torch.equal(out[key], getattr(torch, name)(value, dim=d)), key


# ---------------------------------------------------------------- shared memory
def test_share_memory_():
    td = make_td()
    assert not td.is_shared()
    out = td.share_memory_()
    assert out is td
    assert td.is_shared()
    assert all(v.is_shared() for v in tensor_leaves(td).values())
    # a shared tensordict is locked: its keys may no longer change
    assert td.is_locked
    with pytest.raises(RuntimeError, match="locked"):
        td["new"] = torch.zeros(2, 3)


def test_is_shared_false_for_regular_tensors():
    assert TensorDict({"a": torch.zeros(2)}, [2]).is_shared() is False


# ---------------------------------------------------------------- CUDA
@cuda
@needs_cuda
def test_to_cuda_and_back():
    td = make_td()
    gpu = td.to("cuda")
    assert gpu.device.type == "cuda"
    assert all(v.is_cuda for v in tensor_leaves(gpu).values())
    assert gpu["n"].device.type == "cuda"
    back = gpu.cpu()
    for key, value in tensor_leaves(td).items():
        assert torch.equal(back[key], value)


@cuda
@needs_cuda
def test_cuda_method():
    gpu = make_td().cuda()
    assert gpu.is_cuda
    assert gpu.device == torch.device("cuda", torch.cuda.current_device())
    assert all(v.is_cuda for v in tensor_leaves(gpu).values())
    assert gpu.cuda(0).device == torch.device("cuda", 0)


@cuda
@needs_cuda
def test_cuda_tensordict_casts_on_write_and_index_write():
    td = TensorDict(batch_size=[3], device="cuda")
    td["a"] = torch.zeros(3)
    td[1] = TensorDict({"b": torch.ones(2)}, [])
    assert td["a"].is_cuda and td["b"].is_cuda
    assert torch.equal(td["b"].cpu()[1], torch.ones(2))
