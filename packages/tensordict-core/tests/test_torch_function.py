"""``torch.*`` functions called on tensordicts dispatch to the tensordict implementation
and agree with the same function applied leaf by leaf."""

from __future__ import annotations

import pytest
import torch
from core_helpers import tensor_leaves

import tensordict
from tensordict import TensorDict


def make_td(offset=0.0):
    return TensorDict(
        {
            "a": torch.arange(6.0).reshape(2, 3) + offset,
            "n": {"b": torch.arange(24.0).reshape(2, 3, 4) - offset},
            "s": "text",
        },
        [2, 3],
    )


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_torch_stack(dim):
    tds = [make_td(i) for i in range(3)]
    out = torch.stack(tds, dim)
    assert isinstance(out, TensorDict)
    d = dim % 3
    bs = list(tds[0].batch_size)
    bs.insert(d, 3)
    assert out.batch_size == torch.Size(bs)
    assert out["n"].batch_size == torch.Size(bs)
    for key in tensor_leaves(tds[0]):
        assert torch.equal(out[key], torch.stack([t[key] for t in tds], d)), key
    # identical non-tensor values are stacked too; .data reads their common value
    assert out.get("s").data == "text" and out["s"] == out.get("s").tolist()


def test_torch_stack_keyword_dim_and_tensordict_stack():
    tds = [make_td(i) for i in range(2)]
    for out in (torch.stack(tds, dim=1), tensordict.stack(tds, 1), tensordict.stack(tds, dim=1)):
        assert out.batch_size == torch.Size([2, 2, 3])
        assert torch.equal(out["a"], torch.stack([t["a"] for t in tds], 1))


def test_torch_stack_out():
    tds = [make_td(i) for i in range(2)]
    out = torch.stack(tds).zero_()
    a = out["a"]
    result = torch.stack(tds, 0, out=out)
    assert result is out
    assert out["a"] is a
    assert torch.equal(a, torch.stack([t["a"] for t in tds]))


def test_readme_stack_cat():
    tds = [
        TensorDict(
            {"key 1": torch.ones(3, 4, 5), "key 2": torch.zeros(3, 4, 5, dtype=torch.bool)},
            batch_size=[3, 4],
        )
        for _ in range(2)
    ]
    stacked = torch.stack(tds, 1)
    assert stacked.shape == torch.Size([3, 2, 4])
    assert stacked["key 1"].shape == torch.Size([3, 2, 4, 5])
    catted = torch.cat(tds, 0)
    assert catted.shape == torch.Size([6, 4])
    assert catted["key 1"].shape == torch.Size([6, 4, 5])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_torch_cat(dim):
    tds = [make_td(i) for i in range(3)]
    out = torch.cat(tds, dim)
    d = dim % 2
    for key in tensor_leaves(tds[0]):
        assert torch.equal(out[key], torch.cat([t[key] for t in tds], d)), key
    assert out["n"].batch_size == out.batch_size
    assert out["s"] == "text"


def test_torch_cat_different_sizes_along_dim():
    t1 = TensorDict({"a": torch.zeros(2, 3)}, [2])
    t2 = TensorDict({"a": torch.ones(5, 3)}, [5])
    out = tensordict.cat([t1, t2])
    assert out.batch_size == torch.Size([7])
    assert torch.equal(out["a"], torch.cat([t1["a"], t2["a"]]))


def test_torch_cat_out():
    tds = [make_td(i) for i in range(2)]
    out = torch.cat(tds, 1).zero_()
    a = out["a"]
    assert torch.cat(tds, 1, out=out) is out
    assert out["a"] is a
    assert torch.equal(a, torch.cat([t["a"] for t in tds], 1))


@pytest.mark.parametrize("dim", [0, 1])
def test_torch_unbind(dim):
    td = make_td()
    parts = torch.unbind(td, dim)
    assert isinstance(parts, tuple) and len(parts) == td.batch_size[dim]
    for i, part in enumerate(parts):
        for key, value in tensor_leaves(td).items():
            assert torch.equal(part[key], value.select(dim, i)), key


def test_torch_split_and_chunk():
    td = make_td()
    for parts, ref in (
        (torch.split(td, 2, 1), td["n", "b"].split(2, 1)),
        (torch.split(td, [1, 2], 1), td["n", "b"].split([1, 2], 1)),
        (torch.chunk(td, 2, 0), td["n", "b"].chunk(2, 0)),
        (torch.tensor_split(td, 3, 1), td["n", "b"].tensor_split(3, 1)),
    ):
        assert len(parts) == len(ref)
        for p, r in zip(parts, ref):
            assert torch.equal(p["n", "b"], r)


def test_torch_shape_functions():
    td = make_td()
    b = td["n", "b"]
    assert torch.equal(torch.unsqueeze(td, 0)["n", "b"], b.unsqueeze(0))
    assert torch.equal(torch.squeeze(torch.unsqueeze(td.select("a"), 0), 0)["a"], td["a"])
    assert torch.equal(torch.permute(td, (1, 0))["n", "b"], b.permute(1, 0, 2))
    assert torch.equal(torch.transpose(td, 0, 1)["n", "b"], b.transpose(0, 1))
    assert torch.equal(torch.swapaxes(td, 0, 1)["n", "b"], b.transpose(0, 1))
    assert torch.equal(torch.movedim(td, 0, 1)["n", "b"], b.movedim(0, 1))
    assert torch.equal(torch.reshape(td, (3, 2))["n", "b"], b.reshape(3, 2, 4))
    assert torch.equal(torch.flatten(td)["n", "b"], b.flatten(0, 1))
    assert torch.equal(torch.unflatten(torch.flatten(td), 0, (2, 3))["n", "b"], b)
    assert torch.equal(torch.flip(td, (1,))["n", "b"], b.flip(1))
    assert torch.equal(torch.narrow(td, 1, 1, 2)["n", "b"], b.narrow(1, 1, 2))


def test_torch_clone_and_detach():
    td = make_td()
    cl = torch.clone(td)
    assert isinstance(cl, TensorDict)
    assert cl["a"] is not td["a"] and torch.equal(cl["a"], td["a"])
    det = torch.detach(td.requires_grad_())
    assert not det["a"].requires_grad


@pytest.mark.parametrize(
    "fn", [torch.exp, torch.sqrt, torch.neg, torch.abs, torch.sigmoid, torch.tanh]
)
def test_torch_pointwise_unary(fn):
    td = make_td(1.0).select("a")
    out = fn(td)
    assert torch.equal(out["a"], fn(td["a"]))


@pytest.mark.parametrize("fn", [torch.add, torch.sub, torch.mul, torch.maximum, torch.eq, torch.lt])
def test_torch_pointwise_binary(fn):
    td, other = make_td(), make_td(2.0)
    out = fn(td, other)
    for key, value in tensor_leaves(td).items():
        assert torch.equal(out[key], fn(value, other[key])), key
    out_scalar = fn(td, torch.tensor(2.0)) if fn is torch.maximum else fn(td, 2)
    for key, value in tensor_leaves(td).items():
        expected = fn(value, torch.tensor(2.0)) if fn is torch.maximum else fn(value, 2)
        assert torch.equal(out_scalar[key], expected), key


def test_torch_clamp():
    td = make_td()
    out = torch.clamp(td, 1, 4)
    for key, value in tensor_leaves(td).items():
        assert torch.equal(out[key], value.clamp(1, 4)), key


def test_torch_all_any_numel():
    td = make_td(1.0).select("a")
    assert torch.all(td) is True
    assert torch.any(td.clone().zero_()) is False
    assert torch.numel(td) == 6


@pytest.mark.parametrize(
    "fn, expected",
    [(torch.zeros_like, 0.0), (torch.ones_like, 1.0)],
)
def test_torch_like_functions(fn, expected):
    td = make_td()
    out = fn(td)
    for key, value in tensor_leaves(td).items():
        assert out[key].shape == value.shape and out[key].dtype == value.dtype
        assert (out[key] == expected).all()
    assert out.batch_size == td.batch_size


def test_torch_full_like_and_empty_like():
    td = make_td()
    full = torch.full_like(td, 7)
    assert all((v == 7).all() for v in tensor_leaves(full).values())
    empty = torch.empty_like(td)
    for key, value in tensor_leaves(td).items():
        assert empty[key].shape == value.shape
        assert empty[key].data_ptr() != value.data_ptr()


def test_unhandled_torch_function_raises_type_error():
    with pytest.raises(TypeError):
        torch.mm(make_td(), make_td())
