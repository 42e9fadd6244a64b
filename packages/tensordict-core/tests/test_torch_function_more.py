"""The whole ``torch.*`` function table on tensordicts.

Every case compares ``torch.f(td, ...)`` with the same torch call on each leaf (for batch
shape operations, the call that touches the batch dimensions and carries the feature
dimensions along).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from functools import partial

import pytest
import torch
from core_helpers import check_leafwise as core_check_leafwise
from core_helpers import tensor_leaves

from tensordict import TensorDict
from tensordict._combine.functional import TORCH_ALIASES, TORCH_METHODS
from tensordict._engine.ops import UNARY
from tensordict.base import TD_HANDLED_FUNCTIONS, TensorDictBase

#: leaf by leaf, any result batch size (the shape functions change it)
check_leafwise = partial(core_check_leafwise, batch_size=None)


def make_td(offset: float = 0.0) -> TensorDict:
    """Batch ``[2, 3]``: a leaf without feature dims, a nested one with one, an int, a string."""
    return TensorDict(
        {
            "a": torch.arange(6.0).reshape(2, 3) + offset,
            "n": {"b": torch.arange(24.0).reshape(2, 3, 4) - offset},
            "i": torch.arange(6).reshape(2, 3),
            "s": "text",
        },
        [2, 3],
    )


# (id, torch call on the tensordict, the same call on a leaf carrying its feature dims)
SHAPE_CASES = [
    ("permute", lambda t: torch.permute(t, (1, 0)), lambda x: x.permute(1, 0, *range(2, x.ndim))),
    ("permute_kw", lambda t: torch.permute(t, dims=(1, 0)), lambda x: x.transpose(0, 1)),
    ("reshape", lambda t: torch.reshape(t, (3, 2)), lambda x: x.reshape(3, 2, *x.shape[2:])),
    ("reshape_kw", lambda t: torch.reshape(t, shape=(-1,)), lambda x: x.reshape(6, *x.shape[2:])),
    ("unsqueeze0", lambda t: torch.unsqueeze(t, 0), lambda x: x.unsqueeze(0)),
    ("unsqueeze_neg", lambda t: torch.unsqueeze(t, -1), lambda x: x.unsqueeze(2)),
    ("unsqueeze_kw", lambda t: torch.unsqueeze(t, dim=1), lambda x: x.unsqueeze(1)),
    ("squeeze", lambda t: torch.squeeze(torch.unsqueeze(t, 1)), lambda x: x),
    ("squeeze_dim", lambda t: torch.squeeze(torch.unsqueeze(t, 0), 0), lambda x: x),
    ("flatten", lambda t: torch.flatten(t), lambda x: x.flatten(0, 1)),
    ("flatten_dims", lambda t: torch.flatten(t, 0, -1), lambda x: x.flatten(0, 1)),
    (
        "unflatten",
        lambda t: torch.unflatten(torch.flatten(t), 0, (3, 2)),
        lambda x: x.reshape(3, 2, *x.shape[2:]),
    ),
    (
        "unflatten_kw",
        lambda t: torch.unflatten(torch.flatten(t), 0, sizes=(2, 3)),
        lambda x: x,
    ),
    ("transpose", lambda t: torch.transpose(t, 0, 1), lambda x: x.transpose(0, 1)),
    ("transpose_neg", lambda t: torch.transpose(t, -1, -2), lambda x: x.transpose(0, 1)),
    ("swapaxes", lambda t: torch.swapaxes(t, 0, 1), lambda x: x.swapaxes(0, 1)),
    ("swapdims", lambda t: torch.swapdims(t, 0, 1), lambda x: x.swapdims(0, 1)),
    ("movedim", lambda t: torch.movedim(t, 0, 1), lambda x: x.movedim(0, 1)),
    ("moveaxis", lambda t: torch.moveaxis(t, 1, 0), lambda x: x.movedim(1, 0)),
    ("narrow", lambda t: torch.narrow(t, 1, 1, 2), lambda x: x.narrow(1, 1, 2)),
    ("narrow_kw", lambda t: torch.narrow(t, dim=0, start=1, length=1), lambda x: x[1:2]),
    ("flip", lambda t: torch.flip(t, (0, 1)), lambda x: x.flip(0, 1)),
    ("flip_kw", lambda t: torch.flip(t, dims=(1,)), lambda x: x.flip(1)),
    ("fliplr", lambda t: torch.fliplr(t), lambda x: x.flip(1)),
    ("flipud", lambda t: torch.flipud(t), lambda x: x.flip(0)),
    ("clone", lambda t: torch.clone(t), lambda x: x),
    ("detach", lambda t: torch.detach(t), lambda x: x),
]


@pytest.mark.parametrize(
    "call, leaf_call", [c[1:] for c in SHAPE_CASES], ids=[c[0] for c in SHAPE_CASES]
)
def test_shape_functions_leafwise(call, leaf_call):
    td = make_td()
    out = call(td)
    check_leafwise(out, td, leaf_call)
    # leaves without feature dimensions: literally the same torch call
    assert torch.equal(out["a"], call(td["a"]))
    assert out.batch_size == call(td["a"]).shape
    assert out["n"].batch_size == out.batch_size


def test_shape_functions_on_nested_batch_dims():
    td = TensorDict({"n": TensorDict({"b": torch.zeros(2, 3, 5, 4)}, [2, 3, 5])}, [2, 3])
    out = torch.permute(td, (1, 0))
    assert out["n"].batch_size == torch.Size([3, 2, 5])
    assert out["n", "b"].shape == torch.Size([3, 2, 5, 4])


def test_clone_copies_and_detach_detaches():
    td = make_td().apply(lambda x: x.float().requires_grad_())
    cl = torch.clone(td)
    assert cl["a"].data_ptr() != td["a"].data_ptr()
    det = torch.detach(td)
    assert not det["a"].requires_grad and det["a"].data_ptr() == td["a"].data_ptr()
    det_ = torch.detach_(td.detach().clone().requires_grad_())
    assert not det_["a"].requires_grad


@pytest.mark.parametrize(
    "call, leaf_call",
    [
        (lambda t: torch.unbind(t, 1), lambda x: x.unbind(1)),
        (lambda t: torch.unbind(t, -2), lambda x: x.unbind(0)),
        (lambda t: torch.split(t, 2, 1), lambda x: x.split(2, 1)),
        (lambda t: torch.split(t, [1, 2], 1), lambda x: x.split([1, 2], 1)),
        (lambda t: torch.split(t, split_size_or_sections=1, dim=0), lambda x: x.split(1, 0)),
        (lambda t: torch.chunk(t, 2, 1), lambda x: x.chunk(2, 1)),
        (lambda t: torch.chunk(t, 2), lambda x: x.chunk(2)),
        (lambda t: torch.tensor_split(t, 2, 1), lambda x: x.tensor_split(2, 1)),
        (lambda t: torch.tensor_split(t, [1], 0), lambda x: x.tensor_split([1], 0)),
    ],
    ids=[
        "unbind",
        "unbind_neg",
        "split",
        "split_sizes",
        "split_kw",
        "chunk",
        "chunk0",
        "tsplit",
        "tsplit_idx",
    ],
)
def test_splitting_functions_leafwise(call, leaf_call):
    td = make_td()
    parts = call(td)
    assert isinstance(parts, tuple)
    expected = {key: leaf_call(leaf) for key, leaf in tensor_leaves(td).items()}
    assert len(parts) == len(expected[("a",)])
    for i, part in enumerate(parts):
        assert part.batch_size == expected[("a",)][i].shape
        for key, chunks in expected.items():
            assert torch.equal(part[key], chunks[i]), (i, key)
        assert part["s"] == "text"


FLOAT_UNARY = [name for name in UNARY]


@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_unary_pointwise_leafwise(name):
    fn = getattr(torch, name)
    td = TensorDict(
        {"a": torch.rand(2, 3) * 0.8 + 0.1, "n": {"b": torch.rand(2, 3, 4) * 0.8 + 0.1}}, [2, 3]
    )
    out = fn(td)
    for key, leaf in tensor_leaves(td).items():
        torch.testing.assert_close(out[key], fn(leaf), equal_nan=True)


@pytest.mark.parametrize("name", [n for n in FLOAT_UNARY if hasattr(torch, n + "_")])
def test_unary_inplace_functions(name):
    td = TensorDict({"a": torch.rand(2, 3) * 0.8 + 0.1}, [2, 3])
    before = td["a"].clone()
    a = td["a"]
    out = getattr(torch, name + "_")(td)
    assert out is td and td["a"] is a
    torch.testing.assert_close(a, getattr(torch, name)(before), equal_nan=True)


BINARY_CASES = [
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "maximum",
    "minimum",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "remainder",
    "floor_divide",
    "multiply",
    "subtract",
    "divide",
    "true_divide",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "not_equal",
]


@pytest.mark.parametrize("name", BINARY_CASES)
def test_binary_pointwise_leafwise(name):
    fn = getattr(torch, name)
    td, other = make_td(1.0).exclude("i"), make_td(2.0).exclude("i").abs() + 1
    out = fn(td, other)
    for key, leaf in tensor_leaves(td).items():
        torch.testing.assert_close(out[key], fn(leaf, other[key]), equal_nan=True)
    scalar = fn(td, torch.tensor(2.0))
    for key, leaf in tensor_leaves(td).items():
        torch.testing.assert_close(scalar[key], fn(leaf, torch.tensor(2.0)), equal_nan=True)


@pytest.mark.parametrize(
    "name", ["add", "sub", "mul", "div", "maximum", "lt", "ge", "subtract", "remainder"]
)
def test_binary_with_tensordict_second(name):
    """``torch.f(tensor, td)``: the tensor against every leaf, in that order."""
    fn = getattr(torch, name)
    td = make_td(1.0).select("a", "n")
    t = torch.full((2, 3), 3.0)
    out = fn(t, td.select("a"))
    assert torch.equal(out["a"], fn(t, td["a"]))
    out = fn(t[..., None], td.select("n"))  # broadcasts against the feature dim
    torch.testing.assert_close(out["n", "b"], fn(t[..., None], td["n", "b"]), equal_nan=True)
    out = fn(t, other=td.select("a"))
    assert torch.equal(out["a"], fn(t, td["a"]))


def test_binary_keywords():
    td = make_td()
    assert torch.equal(torch.add(td, 1, alpha=3)["a"], torch.add(td["a"], 1, alpha=3))
    assert torch.equal(torch.add(input=td, other=2)["a"], td["a"] + 2)
    assert torch.equal(torch.sub(td, other=td)["n", "b"], torch.zeros(2, 3, 4))


def test_clamp_clip_rsub_lerp():
    td = make_td()
    for fn in (torch.clamp, torch.clip):
        out = fn(td, 1, 4)
        for key, leaf in tensor_leaves(td).items():
            assert torch.equal(out[key], fn(leaf, 1, 4)), key
        out = fn(td, min=2)
        assert torch.equal(out["a"], fn(td["a"], min=2))
    assert torch.equal(torch.clamp_min(td, 3)["n", "b"], torch.clamp_min(td["n", "b"], 3))
    assert torch.equal(torch.clamp_max(td, 3)["a"], torch.clamp_max(td["a"], 3))
    assert torch.equal(torch.rsub(td, 10)["a"], torch.rsub(td["a"], 10))
    f = td.exclude("i")
    assert torch.equal(torch.lerp(f, f * 3, 0.5)["a"], torch.lerp(f["a"], f["a"] * 3, 0.5))
    assert torch.equal(torch.addcmul(f, f, f)["a"], torch.addcmul(f["a"], f["a"], f["a"]))


def test_bitwise_and_logical():
    td = TensorDict({"x": torch.tensor([0, 1, 2, 3]), "n": {"y": torch.tensor([5, 6, 7, 8])}}, [4])
    for name in (
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "logical_and",
        "logical_or",
        "logical_xor",
    ):
        fn = getattr(torch, name)
        out = fn(td, td + 1)
        for key, leaf in tensor_leaves(td).items():
            assert torch.equal(out[key], fn(leaf, leaf + 1)), (name, key)


@pytest.mark.parametrize(
    "fn, kwargs",
    [
        (torch.zeros_like, {}),
        (torch.ones_like, {}),
        (torch.full_like, {"fill_value": 7}),
        (torch.zeros_like, {"dtype": torch.float64}),
        (torch.ones_like, {"dtype": torch.int32}),
        (torch.full_like, {"fill_value": 2.5, "dtype": torch.float16}),
    ],
)
def test_like_functions_leafwise(fn, kwargs):
    td = make_td()
    out = fn(td, **kwargs)
    assert out.batch_size == td.batch_size and out["n"].batch_size == td["n"].batch_size
    for key, leaf in tensor_leaves(td).items():
        assert torch.equal(out[key], fn(leaf, **kwargs)), key
        assert out[key].dtype == fn(leaf, **kwargs).dtype
    assert out["s"] == "text"


@pytest.mark.parametrize("fn", [torch.empty_like, torch.rand_like, torch.randn_like])
def test_random_and_empty_like(fn):
    td = make_td().exclude("i")
    out = fn(td)
    for key, leaf in tensor_leaves(td).items():
        assert out[key].shape == leaf.shape and out[key].dtype == leaf.dtype, key
        assert out[key].data_ptr() != leaf.data_ptr()
    out = fn(td, dtype=torch.float64)
    assert all(v.dtype == torch.float64 for v in tensor_leaves(out).values())


def test_randint_like():
    td = make_td()
    out = torch.randint_like(td, 5)
    for key, leaf in tensor_leaves(td).items():
        assert out[key].shape == leaf.shape and out[key].dtype == leaf.dtype
        assert ((out[key] >= 0) & (out[key] < 5)).all()


def test_like_device_argument_sets_the_device():
    td = make_td()
    out = torch.zeros_like(td, device="cpu")
    assert out.device == torch.device("cpu")
    assert out["n"].device == torch.device("cpu")
    assert torch.ones_like(
        TensorDict({"a": torch.zeros(2)}, [2], device="cpu")
    ).device == torch.device("cpu")


def test_like_error_names_the_entry():
    td = TensorDict({"f": torch.zeros(2), "n": {"i": torch.zeros(2, dtype=torch.int64)}}, [2])
    with pytest.raises(RuntimeError, match=r"\('n', 'i'\).*int64"):
        torch.rand_like(td)


def test_numel_and_is_floating_point():
    td = make_td()
    assert torch.numel(td) == 6 == torch.numel(td["a"])
    assert torch.is_floating_point(td.exclude("i")) is True
    assert torch.is_floating_point(td) is False


def test_every_table_name_is_registered():
    for name in TORCH_METHODS:
        fn = getattr(torch, name, None)
        if fn is not None:
            assert fn in TD_HANDLED_FUNCTIONS, name
    for name in TORCH_ALIASES:
        assert getattr(torch, name) in TD_HANDLED_FUNCTIONS, name
    for fn in (torch.stack, torch.cat, torch.zeros_like, torch.randint_like):
        assert fn in TD_HANDLED_FUNCTIONS


class _Bare(TensorDictBase):
    """A tensordict type with none of the batch-shape methods."""

    @property
    def batch_size(self):
        return torch.Size([])


def test_missing_method_raises_type_error_naming_it():
    with pytest.raises(
        TypeError, match=r"torch.permute\(\) is not supported for _Bare.*permute\(\)"
    ):
        torch.permute(_Bare(), (0,))


def test_tensordict_in_a_non_first_position_of_a_shape_function():
    with pytest.raises(TypeError, match="first argument"):
        torch.narrow(torch.zeros(3), 0, make_td(), 1)


def test_unhandled_function_still_raises_type_error():
    with pytest.raises(TypeError):
        torch.mm(make_td(), make_td())


# ------------------------------------------------------------------ torch.testing.assert_close
def float_td(offset: float = 0.0) -> TensorDict:
    return TensorDict(
        {"a": torch.arange(6.0).reshape(2, 3) + offset, "n": {"b": torch.ones(2, 3, 4)}}, [2, 3]
    )


def test_tensordicts_are_mappings():
    td = float_td()
    assert isinstance(td, Mapping) and isinstance(td, MutableMapping)
    assert not isinstance(torch.zeros(1), Mapping)


def test_assert_close_passes_for_close_tensordicts():
    td = float_td()
    torch.testing.assert_close(td, td.clone())
    torch.testing.assert_close(td, td + 1e-7)
    torch.testing.assert_close(td, td + 0.01, atol=0.1, rtol=0)


def test_assert_close_names_the_differing_leaf():
    td = float_td()
    other = td.clone()
    other["n", "b"][1, 2, 3] = 5.0
    with pytest.raises(AssertionError, match=r"(?s)not close.*\['n'\]\['b'\]"):
        torch.testing.assert_close(td, other)
    other = td.clone()
    other["a"][0, 0] = -1
    with pytest.raises(AssertionError, match=r"\['a'\]"):
        torch.testing.assert_close(td, other)


def test_assert_close_compares_key_sets():
    td = float_td()
    extra = td.clone().set("c", torch.zeros(2, 3))
    with pytest.raises(AssertionError, match=r"(?s)keys.*do not match.*\['c'\]"):
        torch.testing.assert_close(td, extra)
    nested_extra = td.clone().set(("n", "z"), torch.zeros(2, 3))
    with pytest.raises(AssertionError, match=r"(?s)keys.*do not match.*\['z'\].*\['n'\]"):
        torch.testing.assert_close(td, nested_extra)


def test_assert_close_checks_dtype_and_shape():
    td = float_td()
    with pytest.raises(AssertionError, match="dtype"):
        torch.testing.assert_close(td, td.double())
    torch.testing.assert_close(td, td.double(), check_dtype=False)
    with pytest.raises(AssertionError, match="shape"):
        torch.testing.assert_close(td, td.unsqueeze(0))


def test_assert_close_against_a_dict():
    td = float_td()
    torch.testing.assert_close(td, {"a": td["a"].clone(), "n": {"b": td["n", "b"].clone()}})


@pytest.mark.parametrize(
    "call",
    [
        lambda t, x: t - x,
        lambda t, x: t / x,
        lambda t, x: t**x,
        lambda t, x: t // x,
        lambda t, x: t % x,
        lambda t, x: t < x,
        lambda t, x: t.add(x),
        lambda t, x: t.sub(x, alpha=2),
        lambda t, x: torch.Tensor.__rsub__(t, x),
        lambda t, x: x - t,
        lambda t, x: x / t,
        lambda t, x: x**t,
    ],
    ids=[
        "rsub",
        "rdiv",
        "rpow",
        "rfloordiv",
        "rmod",
        "gt",
        "add",
        "sub_alpha",
        "dunder",
        "sub",
        "div",
        "pow",
    ],
)
def test_tensor_methods_and_operators_with_a_tensordict_operand(call):
    """``Tensor`` methods and operators with a tensordict operand act leaf by leaf."""
    td = TensorDict({"a": torch.rand(2, 3) + 0.5, "n": {"b": torch.rand(2, 3) + 0.5}}, [2, 3])
    t = torch.full((2, 3), 1.5)
    out = call(t, td)
    assert isinstance(out, TensorDict)
    for key, leaf in tensor_leaves(td).items():
        torch.testing.assert_close(out[key], call(t, leaf))


# ------------------------------------------------------------------ where / gather (from _ops_batch)
def _right(cond, leaf):
    return cond.reshape(cond.shape + (1,) * (leaf.ndim - cond.ndim))


def test_torch_where_leafwise():
    td, other = make_td(1.0).exclude("s"), make_td(5.0).exclude("s")
    cond = torch.tensor([[True, False, True], [False, False, True]])
    out = torch.where(cond, td, other)
    for key, leaf in tensor_leaves(td).items():
        assert torch.equal(out[key], torch.where(_right(cond, leaf), leaf, other[key])), key
    out = torch.where(cond, td, 0)
    for key, leaf in tensor_leaves(td).items():
        assert torch.equal(out[key], torch.where(_right(cond, leaf), leaf, 0)), key
    out = torch.where(cond, -1.0, td.select("a"))
    assert torch.equal(out["a"], torch.where(cond, -1.0, td["a"]))


def test_torch_gather_leafwise():
    td = make_td().exclude("s")
    index = torch.tensor([[2, 0], [1, 1]])
    out = torch.gather(td, 1, index)
    assert out.batch_size == index.shape
    for key, leaf in tensor_leaves(td).items():
        idx = _right(index, leaf).expand(*index.shape, *leaf.shape[2:])
        assert torch.equal(out[key], torch.gather(leaf, 1, idx)), key


def test_torch_masked_fill_leafwise():
    td = make_td().exclude("s")
    mask = torch.tensor([[True, False, True], [False, False, True]])
    out = torch.masked_fill(td, mask, 0)
    for key, leaf in tensor_leaves(td).items():
        assert torch.equal(out[key], leaf.masked_fill(_right(mask, leaf), 0)), key
