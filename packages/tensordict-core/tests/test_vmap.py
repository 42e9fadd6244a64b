"""``torch.vmap`` over tensordicts (through their pytree registration).

Inside the vmapped function a tensordict has the per-sample batch size; a tensordict
returned by the function gets the vmapped dimension back at ``out_dims``.
"""

from __future__ import annotations

import pytest
import torch

import tensordict
from tensordict import TensorDict


def make_td() -> TensorDict:
    """Batch ``[5, 3]``; one leaf without feature dims, a nested one with one, a string."""
    return TensorDict(
        {
            "a": torch.randn(5, 3),
            "n": {"b": torch.randn(5, 3, 2)},
            "s": "text",
        },
        [5, 3],
    )


def test_in_dims_0_gives_the_per_sample_batch_size():
    td = make_td()

    def fn(t):
        assert isinstance(t, TensorDict)
        assert t.batch_size == torch.Size([3])
        assert t["n"].batch_size == torch.Size([3])
        assert t["a"].shape == torch.Size([3]) and t["n", "b"].shape == torch.Size([3, 2])
        assert t["s"] == "text"
        return t.apply(lambda x: x * 2)

    out = torch.vmap(fn)(td)
    assert isinstance(out, TensorDict)
    assert out.batch_size == td.batch_size and out["n"].batch_size == td.batch_size
    for key in ("a", ("n", "b")):
        assert torch.equal(out[key], td[key] * 2)
    assert out["s"] == "text"


def test_in_dims_1():
    td = make_td()

    def fn(t):
        assert t.batch_size == torch.Size([5])
        assert t["n", "b"].shape == torch.Size([5, 2])
        return t["a"] + t["n", "b"].sum(-1)

    out = torch.vmap(fn, in_dims=1)(td)
    assert torch.equal(out, (td["a"] + td["n", "b"].sum(-1)).T)


def test_in_dims_1_returning_a_tensordict_with_out_dims_1():
    td = make_td()
    out = torch.vmap(lambda t: t.apply(torch.sin), in_dims=1, out_dims=1)(td)
    assert out.batch_size == torch.Size([5, 3])
    assert torch.allclose(out["n", "b"], td["n", "b"].sin())
    out = torch.vmap(lambda t: t.apply(torch.sin), in_dims=1, out_dims=0)(td)
    assert out.batch_size == torch.Size([3, 5])
    assert out["n"].batch_size == torch.Size([3, 5])
    assert torch.allclose(out["n", "b"], td["n", "b"].sin().transpose(0, 1))


def test_in_dims_none_for_a_tensordict():
    td = TensorDict({"w": torch.randn(3, 2), "b": torch.randn(2)}, [])
    x = torch.randn(7, 3)

    def fn(x, p):
        assert p.batch_size == torch.Size([])
        return x @ p["w"] + p["b"]

    out = torch.vmap(fn, (0, None))(x, td)
    assert torch.allclose(out, x @ td["w"] + td["b"])


def test_negative_in_and_out_dims_without_feature_dims():
    """Negative dims count from the end of the batch dims (here the leaves have no
    feature dims; see the tests on batch dims below for leaves that have)."""
    td = TensorDict({"a": torch.randn(5, 3), "n": {"b": torch.randn(5, 3)}}, [5, 3])

    def fn(t):
        assert t.batch_size == torch.Size([5])
        return t.apply(lambda x: x + 1)

    out = torch.vmap(fn, in_dims=-1, out_dims=-1)(td)
    assert out.batch_size == torch.Size([5, 3])
    assert torch.equal(out["n", "b"], td["n", "b"] + 1)
    out = torch.vmap(fn, in_dims=-1, out_dims=0)(td)
    assert out.batch_size == torch.Size([3, 5])
    assert torch.equal(out["a"], (td["a"] + 1).T)
    out = torch.vmap(lambda t: t, in_dims=-2)(td)
    assert out.batch_size == torch.Size([5, 3])


@pytest.mark.parametrize("top_leaf", [True, False])
def test_nested_tensordict_with_more_batch_dims(top_leaf):
    td = TensorDict({"n": TensorDict({"b": torch.randn(4, 3, 6, 2)}, [4, 3, 6])}, [4])
    if top_leaf:
        td["a"] = torch.zeros(4)

    def fn(t):
        assert t.batch_size == torch.Size([])
        assert t["n"].batch_size == torch.Size([3, 6])
        return t.apply(lambda x: x.mean(-1, keepdim=True))

    out = torch.vmap(fn)(td)
    assert out.batch_size == torch.Size([4])
    assert out["n"].batch_size == torch.Size([4, 3, 6])
    assert torch.allclose(out["n", "b"], td["n", "b"].mean(-1, keepdim=True))


def test_function_returning_a_new_tensordict():
    x = torch.randn(6, 4)

    def fn(row):
        return TensorDict({"double": row * 2, "stats": {"sum": row.sum()}}, [])

    out = torch.vmap(fn)(x)
    assert isinstance(out, TensorDict)
    assert out.batch_size == torch.Size([6])
    assert out["stats"].batch_size == torch.Size([6])
    assert torch.equal(out["double"], x * 2)
    assert torch.allclose(out["stats", "sum"], x.sum(-1))


def test_function_returning_a_batched_tensordict():
    x = torch.randn(6, 4)
    out = torch.vmap(lambda row: TensorDict({"r": row}, [4]), out_dims=1)(x)
    assert out.batch_size == torch.Size([4, 6])
    assert torch.equal(out["r"], x.T)


def test_ensemble_over_stacked_params():
    """The reference README's ensemble, without nn: one parameter set per model."""
    x = torch.randn(4, 3)
    params = torch.stack(
        [TensorDict({"w": torch.randn(3, 2), "b": torch.randn(2)}, []) for _ in range(7)]
    )
    assert params.batch_size == torch.Size([7])
    y = torch.vmap(lambda x, p: x @ p["w"] + p["b"], (None, 0))(x, params)
    assert y.shape == torch.Size([7, 4, 2])
    expected = torch.stack([x @ params["w"][i] + params["b"][i] for i in range(7)])
    torch.testing.assert_close(y, expected)


def test_nested_vmap():
    td = make_td()

    def inner(t):
        assert t.batch_size == torch.Size([])
        assert t["n"].batch_size == torch.Size([])
        return t["a"] * t["n", "b"].sum()

    out = torch.vmap(torch.vmap(inner))(td)
    assert torch.allclose(out, td["a"] * td["n", "b"].sum(-1))
    out = torch.vmap(torch.vmap(lambda t: t.apply(lambda x: x * 3)))(td)
    assert out.batch_size == td.batch_size
    assert torch.allclose(out["n", "b"], td["n", "b"] * 3)


@pytest.mark.parametrize(
    "fn, expected",
    [
        (lambda t: t * 2, lambda x: x * 2),
        (lambda t: t + t, lambda x: x + x),
        (lambda t: 1 - t, lambda x: 1 - x),
        (lambda t: -t, lambda x: -x),
        (lambda t: t.exp(), lambda x: x.exp()),
        (lambda t: t.clamp(-0.5, 0.5), lambda x: x.clamp(-0.5, 0.5)),
        (lambda t: t.clone().mul_(3), lambda x: x * 3),
        (lambda t: t.clone().exp_(), lambda x: x.exp()),
        (lambda t: t.clone().add_(t), lambda x: x + x),
        (lambda t: t.clone().zero_(), lambda x: x * 0),
        (lambda t: torch.stack([t, t], 0)[1], lambda x: x),
        (lambda t: t.unsqueeze(0).squeeze(0), lambda x: x),
        (lambda t: t[1:], lambda x: x[:, 1:]),
    ],
    ids=[
        "mul",
        "add",
        "rsub",
        "neg",
        "exp",
        "clamp",
        "mul_",
        "exp_",
        "add_",
        "zero_",
        "stack",
        "shape",
        "index",
    ],
)
def test_tensordict_ops_inside_vmap(fn, expected):
    """Ops that run one ``torch._foreach_*`` kernel eagerly fall back to leaf by leaf
    inside vmap (foreach kernels have no batching rule)."""
    td = make_td().exclude("s")
    out = torch.vmap(fn)(td)
    for key in ("a", ("n", "b")):
        torch.testing.assert_close(out[key], expected(td[key]))


def test_chunk_size():
    td = make_td()
    out = torch.vmap(lambda t: t["a"].sum(), chunk_size=2)(td)
    torch.testing.assert_close(out, td["a"].sum(-1))


def test_names_follow_the_removed_dimension():
    td = TensorDict({"a": torch.zeros(5, 3)}, [5, 3], names=["env", "time"])

    def fn(t):
        assert t.batch_size == torch.Size([3])
        assert t.names == ["time"]
        return t["a"]

    torch.vmap(fn)(td)


def test_per_sample_gradients():
    """grad inside vmap, with tensordicts of parameters in and out."""
    params = TensorDict({"w": torch.randn(3), "b": torch.randn(())}, [])
    x, y = torch.randn(8, 3), torch.randn(8)

    def loss(p, x, y):
        return ((x @ p["w"] + p["b"] - y) ** 2).sum()

    grads = torch.vmap(torch.func.grad(loss), (None, 0, 0))(params, x, y)
    assert isinstance(grads, TensorDict)
    assert grads.batch_size == torch.Size([8])
    for i in range(8):
        g = torch.func.grad(loss)(params, x[i], y[i])
        torch.testing.assert_close(grads[i]["w"], g["w"])
        torch.testing.assert_close(grads[i]["b"], g["b"])


def test_nested_levels_without_leaves_follow_their_parent():
    """A nested level holding no tensor (only non-tensor or unbatched entries, or none)
    gets the vmapped dimension removed and put back like its parent."""
    from tensordict import NonTensorData, UnbatchedTensor

    table = torch.ones(2)
    td = TensorDict(
        x=torch.randn(4, 3, 2),
        n={"s": NonTensorData("hi")},
        e={},
        u={"t": UnbatchedTensor(table), "deeper": {"s": "x"}},
        batch_size=[4, 3],
    )
    seen = []

    def fn(t):
        seen.append([t[k].batch_size for k in ("n", "e", "u", ("u", "deeper"))])
        return t.set("y", t["x"] * 2)

    out = torch.vmap(fn, in_dims=1)(td)
    assert seen[0] == [(4,)] * 4
    assert out.batch_size == (3, 4)
    for key in ("n", "e", "u", ("u", "deeper")):
        assert out[key].batch_size == (3, 4)
    assert out["n", "s"] == "hi" and out["u", "deeper", "s"] == "x"
    assert out["u", "t"].batch_size == (3, 4) and out["u", "t"].data_ptr() == table.data_ptr()
    torch.testing.assert_close(out["y"], td["x"].transpose(0, 1) * 2)


def test_deep_nesting_values_and_batch_sizes():
    """Levels of different batch sizes, several nested tensordicts per level."""
    m = TensorDict(c=torch.randn(4, 5, 6, 1), batch_size=[4, 5, 6])
    n = TensorDict(b=torch.randn(4, 5, 2), m=m, d=torch.randn(4, 5), batch_size=[4, 5])
    td = TensorDict(a=torch.randn(4, 3), n=n, k={"e": torch.randn(4, 1)}, batch_size=[4])
    seen = []

    def fn(t):
        seen.append((t.batch_size, t["n"].batch_size, t["n", "m"].batch_size, t["k"].batch_size))
        return t.apply(lambda x: x + 1)

    out = torch.vmap(fn)(td)
    assert seen[0] == ((), (5,), (5, 6), ())
    assert out.batch_size == (4,) and out["n"].batch_size == (4, 5)
    assert out["n", "m"].batch_size == (4, 5, 6) and out["k"].batch_size == (4,)
    for key, value in td.items(True, True):
        torch.testing.assert_close(out[key], value + 1)
    rows = torch.vmap(lambda t: t["n", "m", "c"].sum() + t["a"].sum())(td)
    expected = torch.stack([td[i]["n", "m", "c"].sum() + td[i]["a"].sum() for i in range(4)])
    torch.testing.assert_close(rows, expected)


# ------------------------------------------------------------------ dims name batch dims
# The oracle: the function applied to each slice along the mapped batch dim, the results
# stacked along the output dim (as torch.vmap does for one tensor).


def make_featured() -> TensorDict:
    """Batch ``[4, 3]``; leaves with 0, 1 and 2 feature dims, one nested level."""
    return TensorDict(
        {
            "a": torch.randn(4, 3),
            "f": torch.randn(4, 3, 5),
            "n": {"b": torch.randn(4, 3, 2, 6), "c": torch.randn(4, 3)},
        },
        [4, 3],
    )


def row_by_row(fn, td, in_dim, out_dim):
    return torch.stack([fn(row) for row in td.unbind(in_dim)], out_dim)


def assert_same(out, expected):
    assert type(out) is type(expected) and out.batch_size == expected.batch_size
    assert set(out.keys(True, True)) == set(expected.keys(True, True))
    for key, value in expected.items(True, True):
        torch.testing.assert_close(out[key], value)


@pytest.mark.parametrize("in_dim", [0, 1, -1, -2])
@pytest.mark.parametrize("out_dim", [0, 1, -1, -2])
def test_in_and_out_dims_are_batch_dims_whatever_the_feature_dims(in_dim, out_dim):
    td = make_featured()

    def fn(t):
        assert t.batch_size == torch.Size([3 if in_dim in (0, -2) else 4])
        return t.apply(lambda x: x * 2 + 1)

    out = torch.vmap(fn, (in_dim,), out_dim)(td)
    assert_same(out, row_by_row(fn, td, in_dim, out_dim))
    assert out["n"].batch_size == out.batch_size


def test_a_tensor_result_of_a_tensordict_mapped_along_its_last_batch_dim():
    td = make_featured()
    out = torch.vmap(lambda t: t["f"].sum(-1) + t["n", "c"], (-1,))(td)
    torch.testing.assert_close(out, (td["f"].sum(-1) + td["n", "c"]).T)


def test_mixed_tensors_tensordicts_and_unmapped_arguments():
    td = make_featured()
    x = torch.randn(3, 7)  # mapped along 0, as td along 1
    w = torch.randn(5)  # not mapped

    def fn(t, x, w):
        return t["f"] @ w + x.sum()

    out = torch.vmap(fn, (1, 0, None))(td, x, w)
    expected = torch.stack([fn(t, xi, w) for t, xi in zip(td.unbind(1), x.unbind(0))])
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("dims", [{"in_dims": (-3,)}, {"out_dims": -3}])
def test_a_negative_dim_beyond_the_batch_dims_raises_naming_the_batch_size(dims):
    """(A positive dim past the batch dims is each leaf's own dim, as torch takes it: the
    torch.func transforms map their basis that way.)"""
    td = make_featured()
    before = td.clone()
    with pytest.raises(ValueError, match=r"not a batch dimension.*batch size \[") as info:
        torch.vmap(lambda t: t, **dims)(td)
    assert "[4, 3]" in str(info.value) or "[3]" in str(info.value)
    assert "must be >= -" in str(info.value)  # the rule that was broken, not a range
    assert_same(td, before)


def test_out_dims_as_a_one_tuple_for_one_tensordict():
    td = make_featured()
    out = torch.vmap(lambda t: t + 0, (1,), (1,))(td)
    assert_same(out, td)


@pytest.mark.parametrize("chunk_size", [1, 2, 5])
def test_chunks_give_the_unchunked_result(chunk_size):
    td = make_featured()

    def fn(t):
        return t.apply(torch.cos)

    out = torch.vmap(fn, (1,), -1, chunk_size=chunk_size)(td)
    assert_same(out, row_by_row(fn, td, 1, -1))


def test_names_of_the_other_batch_dims_survive():
    td = TensorDict({"a": torch.zeros(2, 3, 4, 5)}, [2, 3, 4], names=["x", "y", "z"])
    seen = []
    out = torch.vmap(lambda t: seen.append(t.names) or t, (1,))(td)
    assert seen == [["x", "z"]] and out.names == [None, "x", "z"]
    assert torch.vmap(lambda t: t, (-1,), -1)(td).names == ["x", "y", None]
    assert torch.vmap(lambda t: t, (1,), 2)(td).names == ["x", "z", None]


def test_writes_into_a_locked_tensordict_raise_as_outside_vmap():
    td = make_featured().lock_()
    seen = []

    def write(t):
        seen.append(t.is_locked)
        t.set("new", t["a"])
        return t

    with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict") as outside:
        write(td)
    with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict") as inside:
        torch.vmap(write, (1,))(td)
    assert str(inside.value) == str(outside.value) and seen == [True, True]
    assert "new" not in td.keys()
    # a value map inside gives a new, unlocked tensordict, as outside
    out = torch.vmap(lambda t: t.apply(lambda x: x + 1).set("new", t["a"]), (1,))(td)
    assert torch.equal(out["new"], td["a"].T)


def test_writes_inside_land_in_the_result():
    td = make_featured()
    out = torch.vmap(lambda t: t.set(("n", "d"), t["f"].sum(-1)), (-1,))(td)
    torch.testing.assert_close(out["n", "d"], td["f"].sum(-1).T)
    assert "d" not in td["n"].keys()


# ------------------------------------------------------------------ lazy stacks
def make_lazy(stack_dim: int, same_shapes: bool = True):
    """Three members of batch ``[4]``; ``f``'s feature size differs if not ``same_shapes``."""
    members = [
        TensorDict({"a": torch.randn(4), "f": torch.randn(4, 2 if same_shapes else i + 1)}, [4])
        for i in range(3)
    ]
    return tensordict.lazy_stack(members, stack_dim)


def _values(td):
    """The members' values, row by row (works for any lazy stack and dense tensordicts)."""
    return [t.to_dict() for t in td.unbind(0)]


@pytest.mark.parametrize("stack_dim", [0, 1])
@pytest.mark.parametrize("in_dim", [0, 1, -1])
def test_lazy_stack_mapped_along_any_batch_dim(stack_dim, in_dim):
    lazy = make_lazy(stack_dim)

    def fn(t):
        return t.apply(lambda x: x * 3)

    out = torch.vmap(fn, (in_dim,))(lazy)
    expected = row_by_row(fn, lazy, in_dim, 0)
    assert out.batch_size == expected.batch_size
    for key in ("a", "f"):
        torch.testing.assert_close(out[key], expected[key])
    if in_dim % 2 != stack_dim:  # the members have the dim: the result stays a lazy stack
        assert isinstance(out, tensordict.LazyStackedTensorDict)
        assert out.stack_dim == 1  # the mapped dim comes first (out_dims=0)


def test_heterogeneous_lazy_stack_mapped_along_a_member_dim():
    lazy = make_lazy(0, same_shapes=False)
    seen = []
    out = torch.vmap(lambda t: seen.append(type(t).__name__) or t.set("g", t["a"] + 1), (1,))(lazy)
    assert seen == ["LazyStackedTensorDict"]
    assert isinstance(out, tensordict.LazyStackedTensorDict) and out.batch_size == (4, 3)
    for i, member in enumerate(out.tensordicts):
        assert torch.equal(member["f"], lazy.tensordicts[i]["f"])
        assert torch.equal(member["g"], lazy.tensordicts[i]["a"] + 1)


def test_heterogeneous_lazy_stack_mapped_along_its_stack_dim_raises_naming_the_key():
    lazy = make_lazy(0, same_shapes=False)
    with pytest.raises(RuntimeError, match="'f'"):
        torch.vmap(lambda t: t, (0,))(lazy)


@pytest.mark.parametrize("in_dim", [0, 1])
def test_lazy_stack_nested_in_a_tensordict(in_dim):
    inner = TensorDict({"a": torch.randn(3, 4, 2)}, [3, 4])
    td = TensorDict(
        {"parent": tensordict.lazy_stack([inner, inner * 2], 0), "x": torch.randn(2, 3)}, [2, 3]
    )
    out = torch.vmap(lambda t: t.apply(lambda x: x - 1), (in_dim,))(td)
    expected = row_by_row(lambda t: t.apply(lambda x: x - 1), td, in_dim, 0)
    assert out.batch_size == expected.batch_size
    assert out["parent"].batch_size == expected["parent"].batch_size
    for key in ("x", ("parent", "a")):
        torch.testing.assert_close(out[key], expected[key])
