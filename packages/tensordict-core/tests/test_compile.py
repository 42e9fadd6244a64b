"""``torch.compile(fullgraph=True)`` over the common tensordict operations.

Each case runs once eagerly and once compiled on identical inputs: the compiled call must
trace without a graph break (``fullgraph=True`` raises on one), give the same result, leave
its inputs in the same state, and not recompile for a second tensordict of the same
structure. The ``eager`` backend keeps this fast (dynamo still traces the whole function);
a few cases also run through ``aot_eager`` (AOT autograd, functionalization, backward).
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from core_helpers import assert_same as _assert_same
from torch._dynamo.testing import CompileCounterWithBackend

import tensordict
from tensordict import TensorDict

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def make_td(seed: int = 0) -> TensorDict:
    g = torch.Generator().manual_seed(seed)
    return TensorDict(
        {
            "a": torch.randn(3, 4, generator=g),
            "n": {"b": torch.randn(3, 4, 2, generator=g), "i": torch.arange(12).reshape(3, 4)},
            "s": "text",
        },
        [3, 4],
    )


def assert_same(actual, expected, path="out"):
    _assert_same(actual, expected, exact=True, path=path)


def make_tensors(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(3, 4, generator=g), torch.randn(3, 4, 2, generator=g)


def check(fn, make=make_td, backend="eager"):
    """``fn(*make())`` compiled with fullgraph equals eager, without recompiling."""
    torch._dynamo.reset()
    args = make() if isinstance(make(), tuple) else (make(),)
    eager_args = make() if isinstance(make(), tuple) else (make(),)
    expected = fn(*eager_args)
    counter = CompileCounterWithBackend(backend)
    compiled = torch.compile(fn, fullgraph=True, backend=counter)
    actual = compiled(*args)
    assert_same(actual, expected)
    assert_same(args, eager_args, "inputs")  # same in-place effects on the inputs
    # a second tensordict with the same structure reuses the compiled code
    again = make(1) if isinstance(make(1), tuple) else (make(1),)
    compiled(*again)
    assert counter.frame_count <= 1, f"recompiled: {counter.frame_count} frames"
    return actual


# ------------------------------------------------------------------ construction
CONSTRUCTION = {
    "dict": lambda a, b: TensorDict({"a": a, "n": {"b": b}}, [3, 4]),
    "kwargs": lambda a, b: TensorDict(a=a, b=b, batch_size=[3]),
    "int_batch_size": lambda a, b: TensorDict({"a": a}, 3),
    "no_batch_size": lambda a, b: TensorDict({"a": a, "b": b}),
    "device": lambda a, b: TensorDict({"a": a}, [3], device="cpu"),
    "names": lambda a, b: TensorDict({"a": a, "b": b}, [3, 4], names=["x", "y"]),
    "nested_tensordict": lambda a, b: TensorDict({"n": TensorDict({"b": b}, [3, 4, 2])}, [3]),
    "tuple_key": lambda a, b: TensorDict({("n", "b"): b}, [3, 4]),
    "scalars_and_strings": lambda a, b: TensorDict({"a": a, "r": 1.5, "s": "x"}, []),
    "from_leaves_of_another": lambda a, b: TensorDict(
        {k: v * 2 for k, v in TensorDict({"a": a, "b": b}, [3, 4]).items()}, [3, 4]
    ),
    "lock": lambda a, b: TensorDict({"a": a}, [3], lock=True),
}


@pytest.mark.parametrize("name", CONSTRUCTION)
def test_construction(name):
    check(CONSTRUCTION[name], make_tensors)


# ------------------------------------------------------------------ get / set
def _setitem(td, key, value):
    td[key] = value
    return td


GET_SET = {
    "getitem": lambda td: td["a"] + 1,
    "getitem_nested": lambda td: td["n", "b"].sum(-1) + td["a"],
    "get": lambda td: td.get("a") * 2,
    "get_nested": lambda td: td.get(("n", "b")),
    "get_default": lambda td: td.get("missing", td["a"]) + 1,
    "get_string": lambda td: td["a"] * len(td["s"]),
    "set": lambda td: td.set("c", td["a"] * 2),
    "set_nested_existing": lambda td: td.set(("n", "c"), td["a"] + 1),
    "set_nested_new": lambda td: td.set(("x", "y", "z"), td["a"]),
    "setitem": lambda td: _setitem(td, "c", td["a"] + 1),
    "setitem_nested": lambda td: _setitem(td, ("n", "c"), td["a"] + 1),
    "set_inplace": lambda td: td.set("a", td["a"] * 2, inplace=True),
    "set_": lambda td: td.set_(("n", "b"), td["n", "b"] * 0),
    "update": lambda td: td.update({"z": td["a"], ("n", "c"): td["a"]}),
    "update_tensordict": lambda td: td.update(td.apply(lambda x: x + 1)),
    "pop": lambda td: td.pop("a") + 1,
    "del": lambda td: td.del_(("n", "b")),
    "select": lambda td: td.select("a", ("n", "b")),
    "exclude": lambda td: td.exclude(("n", "i"), "s"),
    "keys_loop": lambda td: [td[k] for k in td.keys(True, True) if k != "s"],
    "items_loop": lambda td: sum(
        v.float().sum() for v in td.values(True, True) if isinstance(v, torch.Tensor)
    ),
    "contains": lambda td: td["a"] * (2 if ("n", "b") in td.keys(True) else 3),
}


@pytest.mark.parametrize("name", GET_SET)
def test_get_set(name):
    check(GET_SET[name])


# ------------------------------------------------------------------ apply
APPLY = {
    "apply": lambda td: td.apply(lambda x: x * 2),
    "apply_two": lambda td: td.apply(lambda x, y: x + y, td),
    "apply_drop": lambda td: td.apply(lambda x: x if x.is_floating_point() else None),
    "apply_batch_size": lambda td: td.apply(lambda x: x[:, 0], batch_size=[3]),
    "named_apply": lambda td: td.named_apply(lambda k, x: x + len(k)),
    "apply_": lambda td: td.exclude("s").apply_(lambda x: x + 1),
}


@pytest.mark.parametrize("name", APPLY)
def test_apply(name):
    check(APPLY[name])


# ------------------------------------------------------------------ indexing
def _setindex(td, index, value):
    td[index] = value
    return td


INDEXING = {
    "int": lambda td: td[1],
    "negative_int": lambda td: td[-1],
    "slice": lambda td: td[1:],
    "step_slice": lambda td: td[::2, 1:3],
    "tuple": lambda td: td[:, 1],
    "ellipsis": lambda td: td[..., 0],
    "none": lambda td: td[None],
    "tensor": lambda td: td[torch.tensor([0, 2])],
    "list": lambda td: td[[2, 0]],
    "bool_mask": lambda td: td[torch.tensor([True, False, True])],
    "set_at_int": lambda td: _setindex(td, 0, td[1]),
    "set_at_slice_scalar": lambda td: _setindex(td, (slice(None), 0), 0.0),
    "set_at_tensor": lambda td: _setindex(td, torch.tensor([0, 1]), td[1:].clone()),
}


@pytest.mark.parametrize("name", INDEXING)
def test_indexing(name):
    check(INDEXING[name])


# ------------------------------------------------------------------ shape ops
SHAPE = {
    "reshape": lambda td: td.reshape(-1),
    "reshape_2d": lambda td: td.reshape(4, 3),
    "view": lambda td: td.view(12),
    "permute": lambda td: td.permute(1, 0),
    "unsqueeze": lambda td: td.unsqueeze(0),
    "unsqueeze_neg": lambda td: td.unsqueeze(-1),
    "squeeze": lambda td: td.unsqueeze(1).squeeze(1),
    "squeeze_all": lambda td: td.unsqueeze(0).unsqueeze(-1).squeeze(),
    "flatten": lambda td: td.flatten(0, 1),
    "unflatten": lambda td: td.flatten(0, 1).unflatten(0, (3, 4)),
    "transpose": lambda td: td.transpose(0, 1),
    "expand": lambda td: td.expand(2, 3, 4),
    "unbind": lambda td: td.unbind(1),
    "split": lambda td: td.split([1, 2], 0),
    "chunk": lambda td: td.chunk(2, 1),
    "torch_functions": lambda td: torch.flatten(torch.permute(torch.unsqueeze(td, 0), (0, 2, 1))),
}


@pytest.mark.parametrize("name", SHAPE)
def test_shape_ops(name):
    check(SHAPE[name])


# ------------------------------------------------------------------ arithmetic
def float_td(seed: int = 0) -> TensorDict:
    return make_td(seed).exclude("s", ("n", "i"))


ARITHMETIC = {
    "add_scalar": lambda td: td + 1,
    "mul_td": lambda td: td * td,
    "sub_tensor": lambda td: td - torch.ones(()),
    "tensor_first": lambda td: torch.full((3, 4), 2.0) * td.select("a"),
    "rsub": lambda td: 1 - td,
    "div_pow": lambda td: (td / 2) ** 2,
    "div_tensor": lambda td: td / torch.full((), 2.0),
    "pow_tensor": lambda td: td ** torch.full((), 2.0),
    "floordiv_tensor": lambda td: td // torch.full((), 0.5),
    "mod_tensor": lambda td: td % torch.full((), 0.5),
    "tensor_rsub": lambda td: torch.ones(3, 4) - td.select("a"),
    "tensor_rdiv": lambda td: torch.ones(3, 4) / td.select("a"),
    "tensor_rpow": lambda td: torch.full((3, 4), 2.0) ** td.select("a"),
    "tensor_compare": lambda td: torch.zeros(3, 4) < td.select("a"),
    "neg": lambda td: -td,
    "exp": lambda td: td.exp(),
    "torch_exp": lambda td: torch.exp(td),
    "clamp": lambda td: td.clamp(-0.5, 0.5),
    "compare": lambda td: td > 0,
    "mul_": lambda td: td.mul_(2),
    "add_td_": lambda td: td.add_(td),
    "zero_": lambda td: td.zero_(),
    "float_cast": lambda td: td.double(),
    "mixed": lambda td: (td * 2 + td.exp()).clamp_max(3) / (1 + td.abs()),
}


@pytest.mark.parametrize("name", ARITHMETIC)
def test_arithmetic(name):
    check(ARITHMETIC[name], float_td)


# ------------------------------------------------------------------ where, gather, reductions
OTHER_OPS = {
    "where": lambda td: torch.where(td["a"] > 0, td, td * 0),
    "where_scalar": lambda td: torch.where(td["a"] > 0, td, 1.0),
    "masked_fill": lambda td: td.masked_fill(td["a"] > 0, 1.0),
    "gather": lambda td: torch.gather(td, 1, torch.tensor([[0, 2], [1, 1], [3, 0]])),
    "sum": lambda td: td.sum(),
    "mean_dim": lambda td: td.mean(0),
    "amax_dim": lambda td: torch.amax(td, 1),
}


@pytest.mark.parametrize("name", OTHER_OPS)
def test_where_gather_reductions(name):
    check(OTHER_OPS[name], float_td)


# ------------------------------------------------------------------ stack / cat
STACK_CAT = {
    "stack": lambda td: torch.stack([td, td * 2], 0),
    "stack_dim": lambda td: torch.stack([td, td], -1),
    "cat": lambda td: torch.cat([td, td], 0),
    "cat_dim1": lambda td: torch.cat([td, td[:, :1]], 1),
    # torch.stack(a_tuple) is not dispatched by dynamo (it scans lists, not tuples, for
    # __torch_function__ arguments): pass a list, or call tensordict.stack
    "stack_unbind": lambda td: torch.stack(list(td.unbind(1)), 0),
    "tensordict_stack_tuple": lambda td: tensordict.stack(td.unbind(1), 0),
    "tensordict_stack": lambda td: tensordict.stack([td, td], 1),
    "tensordict_cat": lambda td: tensordict.cat([td, td], 1),
}


@pytest.mark.parametrize("name", STACK_CAT)
def test_stack_cat(name):
    check(STACK_CAT[name], float_td)


def test_stack_keeps_equal_strings():
    check(lambda td: torch.stack([td, td], 0))


# ------------------------------------------------------------------ end to end
def _step(obs, w, b):
    td = TensorDict({"obs": obs, "params": {"w": w, "b": b}}, [])
    batch = TensorDict({"x": td["obs"]}, [obs.shape[0]])
    batch["y"] = batch["x"] @ td["params", "w"] + td["params", "b"]
    batch = batch.reshape(2, -1).apply(torch.tanh)
    batch.set(("stats", "mean"), batch["y"].mean(-1))
    out = torch.cat([batch[0], batch[1]], 0)
    return out["stats", "mean"].sum(), out


def _step_inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(6, 3, generator=g),
        torch.randn(3, 2, generator=g),
        torch.randn(2, generator=g),
    )


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_end_to_end_step(backend):
    check(_step, _step_inputs, backend=backend)


@pytest.mark.parametrize("name", ["apply", "named_apply"])
def test_aot_eager_apply(name):
    check(APPLY[name], backend="aot_eager")


@pytest.mark.parametrize("name", ["mixed", "mul_", "tensor_first"])
def test_aot_eager_arithmetic(name):
    check(ARITHMETIC[name], float_td, backend="aot_eager")


@pytest.mark.parametrize("name", ["reshape", "permute", "unbind", "split"])
def test_aot_eager_shape_ops(name):
    check(SHAPE[name], backend="aot_eager")


def test_backward_through_a_compiled_function():
    def loss(td):
        return (td.apply(torch.sin) * td).reshape(-1)["a"].sum()

    td = float_td().requires_grad_()
    td_ref = float_td().requires_grad_()
    torch._dynamo.reset()
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    compiled(td).backward()
    loss(td_ref).backward()
    assert torch.allclose(td["a"].grad, td_ref["a"].grad)


def test_tensordict_input_and_output_keep_their_metadata():
    td = TensorDict({"a": torch.zeros(3, 4)}, [3, 4], names=["x", "y"], device="cpu")
    out = check(lambda t: t.apply(lambda x: x + 1), lambda seed=0: td.clone())
    assert out.names == ["x", "y"] and out.device == torch.device("cpu")


# ------------------------------------------------------------------ lock, keys, unbatched
def test_lock_and_unlock_inside_a_compiled_function_warn_once_and_match_eager():
    def fn(td):
        td = td.clone()
        td.lock_()
        y = td["a"] + 1
        locked = td.is_locked and td["n"].is_locked
        td.unlock_()
        td["z"] = y
        return td, locked

    td = make_td()
    torch._dynamo.reset()
    with pytest.warns(UserWarning, match="lock_\\(\\) in compiled code"):
        compiled, locked = torch.compile(fn, fullgraph=True)(td)
    expected, _ = fn(td)
    assert locked and not compiled.is_locked and not compiled["n"].is_locked
    assert_same(compiled, expected)


def test_a_write_into_a_tensordict_locked_inside_compiled_code_raises():
    def fn(td):
        td = td.clone().lock_()
        td["new"] = td["a"]
        return td

    torch._dynamo.reset()
    with pytest.raises(Exception, match="locked"):
        torch.compile(fn)(make_td())


@pytest.mark.parametrize("keywords", [False, True])
def test_new_unsafe_with_the_reference_signature(keywords):
    def fn(a, b):
        if keywords:
            return TensorDict._new_unsafe(
                source={"a": a, "b": b}, batch_size=torch.Size([3]), device=None, names=None
            )
        return TensorDict._new_unsafe({"a": a, "b": b}, torch.Size([3]))

    out = check(fn, make_tensors)
    assert out.batch_size == (3,)


def test_key_helpers():
    def fn(td):
        key = tensordict.unravel_key(("n", ("b",)))
        keys = tensordict.unravel_key_list(["a", ("n", ("b",))])
        return td[key].sum(-1) + td[keys[0]]

    check(fn)


def test_clone_of_unbatched_entries_compiles_once():
    def make(seed=0):
        g = torch.Generator().manual_seed(seed)
        return TensorDict(
            a=torch.randn(3, generator=g),
            u=tensordict.UnbatchedTensor(torch.randn(5, generator=g)),
            batch_size=[3],
        )

    out = check(lambda td: td.clone(), make)
    assert type(out.get("u")) is tensordict.UnbatchedTensor
    assert out.get("u").batch_size == (3,)


def test_recompiles_once_per_structure_and_never_for_new_values():
    """A new set of keys is a new structure (the reference recompiles too); a structure
    seen before, with other values, reuses its compiled code."""

    def make(n_keys, seed):
        g = torch.Generator().manual_seed(seed)
        return TensorDict({f"k{i}": torch.randn(3, generator=g) for i in range(n_keys)}, [3])

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("eager")
    fn = torch.compile(lambda td: td.apply(lambda x: x + 1), backend=counter)
    for n_keys in (1, 2, 3):
        out = fn(make(n_keys, 0))
        assert_same(out, make(n_keys, 0).apply(lambda x: x + 1))
    assert counter.frame_count == 3
    for seed in (1, 2):
        for n_keys in (1, 2, 3):
            fn(make(n_keys, seed))
    assert counter.frame_count == 3


# ---------------------------------------------------------------------- nested_compile_region
def _region_input() -> TensorDict:
    return TensorDict(
        x=torch.arange(3.0),
        n=TensorDict(y=torch.ones(3, 2), batch_size=[3]),
        label="run-1",
        batch_size=[3],
        names=["t"],
    )


def test_nested_compile_region_takes_and_returns_tensordicts():
    # a region compiled once and called twice, fed its own output: the tree specs of a
    # tensordict (nested levels, a non-tensor entry, names) are constants Dynamo rebuilds
    def step(td):
        return td.apply(lambda x: x * 2 + 1)

    region = torch.compiler.nested_compile_region(step)
    counter = CompileCounterWithBackend("eager")

    @torch.compile(fullgraph=True, backend=counter)
    def twice(td):
        return region(region(td))

    expected = step(step(_region_input()))
    out = twice(_region_input())
    _assert_same(out, expected)
    assert (
        out["label"] == "run-1"
        and out.names
        == [
            "t",
        ]
        and out["n"].batch_size == (3,)
    )
    _assert_same(twice(_region_input()), expected)
    assert counter.frame_count == 1  # no recompile for new values


def test_nested_compile_region_returning_a_tensor():
    @torch.compiler.nested_compile_region
    def total(td):
        return td["x"].sum() + td["n", "y"].sum()

    @torch.compile(fullgraph=True)
    def f(td):
        return total(td) * total(td.exclude("label"))

    td = _region_input()
    assert f(td).item() == (3.0 + 6.0) ** 2


def test_nested_compile_region_takes_a_lazy_stack():
    from tensordict import lazy_stack

    def step(td):
        return td.apply(lambda x: x + 1)

    region = torch.compiler.nested_compile_region(step)

    @torch.compile(fullgraph=True, backend="eager")
    def twice(td):
        return region(region(td))

    stack = lazy_stack([TensorDict(a=torch.zeros(2)), TensorDict(a=torch.ones(2), b=torch.ones(1))])
    out = twice(stack)
    expected = step(step(stack))
    assert type(out) is type(stack)
    for got, want in zip(out.tensordicts, expected.tensordicts, strict=True):
        _assert_same(got, want)
