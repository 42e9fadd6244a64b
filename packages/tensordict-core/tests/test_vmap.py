"""``torch.vmap`` over tensordicts (through their pytree registration).

Inside the vmapped function a tensordict has the per-sample batch size; a tensordict
returned by the function gets the vmapped dimension back at ``out_dims``.
"""

from __future__ import annotations

import pytest
import torch

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
    """Negative dims count from each leaf's end (pytree semantics): the batch dims when the
    leaves have no feature dimensions."""
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
