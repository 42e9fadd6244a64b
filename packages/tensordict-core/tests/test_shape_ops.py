"""Batch-shape operations: each leaf must equal the same torch op applied to the original
tensor over its batch dimensions (feature dimensions carried along)."""

from __future__ import annotations

import pytest
import torch
from core_helpers import check_leafwise, leaves

from tensordict import TensorDict

NB = 2  # batch dims of make_td


def make_td():
    return TensorDict(
        {
            "a": torch.arange(6.0).reshape(2, 3),
            "f": torch.arange(2 * 3 * 4).reshape(2, 3, 4),
            "n": {"g": torch.arange(2 * 3 * 2 * 5, dtype=torch.float64).reshape(2, 3, 2, 5)},
            "s": "text",
        },
        [2, 3],
    )


def feat(x):
    return x.shape[NB:]


# ---------------------------------------------------------------- view / reshape
@pytest.mark.parametrize("shape", [(6,), (-1,), (3, 2), (1, 6), (6, 1, 1), (2, -1)])
def test_view(shape):
    td = make_td()
    out = td.view(*shape)
    expected_bs = torch.empty(2, 3).view(*shape).shape
    check_leafwise(out, td, lambda x: x.view(*expected_bs, *feat(x)), expected_bs)
    # a view shares storage
    out["a"].fill_(-1)
    assert (td["a"] == -1).all()


def test_view_accepts_size_object_and_same_shape_is_identity():
    td = make_td()
    assert td.view(torch.Size([3, 2])).batch_size == torch.Size([3, 2])
    assert td.view(2, 3) is td


def test_view_dtype():
    td = TensorDict({"a": torch.zeros(2, 3)}, [2])
    out = td.view(torch.int32)
    assert out["a"].dtype == torch.int32
    assert torch.equal(out["a"], td["a"].view(torch.int32))


@pytest.mark.parametrize("shape", [(6,), (-1,), (3, 2), (1, 2, 3), (3, -1)])
def test_reshape(shape):
    td = make_td()
    out = td.reshape(*shape)
    expected_bs = torch.empty(2, 3).reshape(*shape).shape
    check_leafwise(out, td, lambda x: x.reshape(*expected_bs, *feat(x)), expected_bs)


@pytest.mark.parametrize("method", ["reshape", "view"])
def test_reshape_view_to_empty_batch(method):
    td = TensorDict({"a": torch.tensor([5.0]), "f": torch.arange(3.0).reshape(1, 3)}, [1])
    out = getattr(td, method)(())
    assert out.batch_size == torch.Size([])
    assert torch.equal(out["a"], torch.tensor(5.0))
    assert torch.equal(out["f"], torch.arange(3.0))


def test_reshape_empty_batch_to_itself():
    td = TensorDict({"a": torch.tensor(5.0)}, [])
    out = td.reshape(())
    assert out.batch_size == torch.Size([])
    assert torch.equal(out["a"], torch.tensor(5.0))


def test_expand_empty_batch_to_itself():
    td = TensorDict({"a": torch.tensor(5.0)}, [])
    assert torch.equal(td.expand(())["a"], torch.tensor(5.0))


def test_reshape_tuple_argument():
    td = make_td()
    assert td.reshape((3, 2)).batch_size == torch.Size([3, 2])


def test_reshape_non_contiguous():
    td = make_td().permute(1, 0)
    out = td.reshape(-1)
    check_leafwise(out, td, lambda x: x.reshape(6, *x.shape[NB:]), [6])


# ---------------------------------------------------------------- squeeze / unsqueeze
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2, -3])
def test_unsqueeze(dim):
    td = make_td()
    out = td.unsqueeze(dim)
    d = dim if dim >= 0 else dim + NB + 1  # batch-dim position, not the leaf's
    bs = list(td.batch_size)
    bs.insert(d, 1)
    check_leafwise(out, td, lambda x: x.unsqueeze(d), bs)


def test_squeeze_leaf_only_tensordict():
    td = TensorDict({"a": torch.zeros(1, 3, 1, 2), "b": torch.ones(1, 3, 1)}, [1, 3, 1])
    out = td.squeeze()
    assert out.batch_size == torch.Size([3])
    assert torch.equal(out["a"], td["a"].squeeze(0).squeeze(1))
    out0 = td.squeeze(0)
    assert out0.batch_size == torch.Size([3, 1])
    assert torch.equal(out0["a"], td["a"].squeeze(0))
    out_last = td.squeeze(-1)
    assert out_last.batch_size == torch.Size([1, 3])
    # -1 is the last *batch* dim: the feature dim of size 2 is untouched
    assert torch.equal(out_last["a"], td["a"].squeeze(2))


def test_squeeze_non_unit_dim_is_noop():
    td = make_td()
    out = td.squeeze(0)
    assert out.batch_size == td.batch_size
    assert torch.equal(out["a"], td["a"])


@pytest.mark.parametrize("dim", [None, 0])
def test_squeeze_with_nested_tensordict(dim):
    td = make_td().unsqueeze(0)
    out = td.squeeze() if dim is None else td.squeeze(dim)
    check_leafwise(out, td, lambda x: x.squeeze(0), [2, 3])


def test_unsqueeze_squeeze_round_trip_leaf_only():
    td = TensorDict({"a": torch.arange(6.0).reshape(2, 3, 1)}, [2, 3])
    out = td.unsqueeze(1).squeeze(1)
    assert out.batch_size == td.batch_size
    assert torch.equal(out["a"], td["a"])


# ---------------------------------------------------------------- permute / transpose / movedim
@pytest.mark.parametrize("dims", [(1, 0), (0, 1), (-1, -2)])
def test_permute(dims):
    td = make_td()
    out = td.permute(*dims)
    perm = [d % NB for d in dims]
    bs = [td.batch_size[d] for d in perm]
    check_leafwise(out, td, lambda x: x.permute(*perm, *range(NB, x.ndim)), bs)


def test_permute_list_argument():
    td = make_td()
    assert td.permute([1, 0]).batch_size == torch.Size([3, 2])


def test_permute_three_dims_with_nested():
    td = TensorDict(
        {
            "a": torch.randn(2, 3, 4, 5),
            "n": TensorDict({"b": torch.randn(2, 3, 4, 6)}, [2, 3, 4, 6]),
        },
        [2, 3, 4],
    )
    out = td.permute(2, 0, 1)
    assert torch.equal(out["a"], td["a"].permute(2, 0, 1, 3))
    assert torch.equal(out["n", "b"], td["n", "b"].permute(2, 0, 1, 3))
    assert out["n"].batch_size == torch.Size([4, 2, 3, 6])


@pytest.mark.parametrize("dims", [(0, 1), (1, 0), (0, -1), (-1, -2)])
def test_transpose(dims):
    td = make_td()
    out = td.transpose(*dims)
    d0, d1 = (d % NB for d in dims)
    check_leafwise(out, td, lambda x: x.transpose(d0, d1), [3, 2])


def test_movedim():
    td = TensorDict({"a": torch.randn(2, 3, 4, 5)}, [2, 3, 4])
    out = td.movedim(0, 2)
    assert out.batch_size == torch.Size([3, 4, 2])
    assert torch.equal(out["a"], td["a"].movedim(0, 2))


# ---------------------------------------------------------------- expand / repeat / flip
@pytest.mark.parametrize("shape", [(4, 2, 3), (2, 3), (5, 4, -1, -1)])
def test_expand(shape):
    td = make_td()
    out = td.expand(*shape)
    bs = [s if s != -1 else td.batch_size[i - (len(shape) - NB)] for i, s in enumerate(shape)]
    check_leafwise(out, td, lambda x: x.expand(*bs, *feat(x)), bs)


def test_expand_singleton_dim_and_size_arg():
    td = TensorDict(
        {"a": torch.arange(3.0).reshape(1, 3), "n": {"b": torch.zeros(1, 3, 2)}}, [1, 3]
    )
    out = td.expand(torch.Size([4, 3]))
    assert torch.equal(out["a"], td["a"].expand(4, 3))
    assert out["n", "b"].shape == (4, 3, 2)


def test_expand_as_and_broadcast_to():
    td = TensorDict({"a": torch.arange(3.0)}, [3])
    assert torch.equal(td.expand_as(torch.zeros(2, 3))["a"], td["a"].expand(2, 3))
    assert td.broadcast_to([2, 3]).batch_size == torch.Size([2, 3])


@pytest.mark.parametrize("repeats", [(2, 1), (1, 3), (2, 2), (3, 2, 2)])
def test_repeat(repeats):
    td = make_td()
    out = td.repeat(*repeats)

    def fn(x):
        return x.repeat(*repeats, *([1] * (x.ndim - NB)))

    bs = fn(torch.empty(2, 3)).shape
    check_leafwise(out, td, fn, bs)


@pytest.mark.parametrize("dims", [(0,), (1,), (0, 1), (-1,)])
def test_flip(dims):
    td = make_td()
    out = td.flip(*dims)
    ds = [d % NB for d in dims]
    check_leafwise(out, td, lambda x: x.flip(ds), [2, 3])


def test_flip_list_fliplr_flipud():
    td = make_td()
    assert torch.equal(td.flip([0, 1])["f"], td["f"].flip([0, 1]))
    assert torch.equal(td.fliplr()["f"], td["f"].flip(1))
    assert torch.equal(td.flipud()["f"], td["f"].flip(0))


# ---------------------------------------------------------------- flatten / unflatten
def test_flatten_all_batch_dims():
    td = make_td()
    out = td.flatten()
    check_leafwise(out, td, lambda x: x.flatten(0, 1), [6])


def test_flatten_range():
    td = TensorDict({"a": torch.randn(2, 3, 4, 5), "n": {"b": torch.randn(2, 3, 4)}}, [2, 3, 4])
    out = td.flatten(1, 2)
    assert out.batch_size == torch.Size([2, 12])
    assert torch.equal(out["a"], td["a"].flatten(1, 2))
    assert torch.equal(out["n", "b"], td["n", "b"].flatten(1, 2))
    # end_dim=-1 means the last *batch* dim, not the feature dim of "a"
    out2 = td.flatten(0, -1)
    assert out2.batch_size == torch.Size([24])
    assert out2["a"].shape == (24, 5)


def test_unflatten():
    td = TensorDict({"a": torch.arange(30).reshape(6, 5), "n": {"b": torch.zeros(6)}}, [6])
    out = td.unflatten(0, (2, 3))
    assert out.batch_size == torch.Size([2, 3])
    assert torch.equal(out["a"], td["a"].unflatten(0, (2, 3)))
    assert out["n"].batch_size == torch.Size([2, 3])
    assert td.unflatten(0, (-1, 2)).batch_size == torch.Size([3, 2])


def test_flatten_unflatten_round_trip(assert_td_equal):
    td = make_td()
    assert_td_equal(td.flatten(0, 1).unflatten(0, (2, 3)), td)


# ---------------------------------------------------------------- unbind / split / chunk
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unbind(dim):
    td = make_td()
    d = dim % NB
    parts = td.unbind(dim)
    assert len(parts) == td.batch_size[d]
    for i, part in enumerate(parts):
        bs = [s for j, s in enumerate(td.batch_size) if j != d]
        check_leafwise(part, td, lambda x, i=i: x.select(d, i), bs)


def test_unbind_shares_storage():
    td = make_td()
    td.unbind(0)[1]["a"].fill_(-5)
    assert (td["a"][1] == -5).all()


@pytest.mark.parametrize("split_size, dim", [(1, 0), (2, 1), ([1, 2], 1), ([2], 0), (5, 1)])
def test_split(split_size, dim):
    td = make_td()
    parts = td.split(split_size, dim)
    ref = td["a"].split(split_size, dim)
    assert len(parts) == len(ref)
    for i, part in enumerate(parts):
        bs = ref[i].shape
        check_leafwise(part, td, lambda x, i=i: x.split(split_size, dim)[i], bs)


@pytest.mark.parametrize(
    "chunks, dim, sizes", [(2, 1, [2, 1]), (3, 1, [1, 1, 1]), (2, 0, [1, 1]), (4, 1, [1, 1, 1])]
)
def test_chunk(chunks, dim, sizes):
    td = make_td()
    parts = td.chunk(chunks, dim)
    ref = td["f"].chunk(chunks, dim)
    assert [p.batch_size[dim] for p in parts] == sizes == [r.shape[dim] for r in ref]
    for part, r in zip(parts, ref):
        assert torch.equal(part["f"], r)


def test_tensor_split():
    td = TensorDict({"a": torch.arange(5)}, [5])
    parts = td.tensor_split(3)
    ref = td["a"].tensor_split(3)
    assert [p.batch_size[0] for p in parts] == [r.shape[0] for r in ref]
    for p, r in zip(parts, ref):
        assert torch.equal(p["a"], r)


def test_readme_shape_examples():
    data = TensorDict(
        {"key 1": torch.ones(3, 4, 5), "key 2": torch.zeros(3, 4, 5, dtype=torch.bool)},
        batch_size=[3, 4],
    )
    assert data.view(-1).batch_size == torch.Size([12])
    assert data.reshape(-1).batch_size == torch.Size([12])
    assert data.unsqueeze(-1).batch_size == torch.Size([3, 4, 1])
    assert data.unsqueeze(-1)["key 1"].shape == torch.Size([3, 4, 1, 5])


# ---------------------------------------------------------------- every kind of tensordict
def _f(x):  # feature dims of a leaf of an any_td tensordict (batch (2, 3))
    return tuple(range(2, x.ndim))


#: op on the tensordict -> (the same op on a leaf or on the batch-shaped label codes,
#: the result's batch size or, for splitting ops, the index of the part checked)
ANY_TD_SHAPE_OPS = {
    "reshape(6)": (lambda td: td.reshape(6), lambda x: x.reshape(6, *x.shape[2:]), [6]),
    "view(3, 2)": (lambda td: td.view(3, 2), lambda x: x.reshape(3, 2, *x.shape[2:]), [3, 2]),
    "flatten": (lambda td: td.flatten(0, 1), lambda x: x.flatten(0, 1), [6]),
    "unflatten": (lambda td: td.unflatten(1, (3, 1)), lambda x: x.unflatten(1, (3, 1)), [2, 3, 1]),
    "permute": (lambda td: td.permute(1, 0), lambda x: x.permute(1, 0, *_f(x)), [3, 2]),
    "transpose": (lambda td: td.transpose(0, 1), lambda x: x.transpose(0, 1), [3, 2]),
    "unsqueeze(0)": (lambda td: td.unsqueeze(0), lambda x: x.unsqueeze(0), [1, 2, 3]),
    "unsqueeze(-1)": (lambda td: td.unsqueeze(-1), lambda x: x.unsqueeze(2), [2, 3, 1]),
    "squeeze": (lambda td: td.unsqueeze(1).squeeze(1), lambda x: x, [2, 3]),
    "expand": (lambda td: td.expand(4, 2, 3), lambda x: x.expand(4, *x.shape), [4, 2, 3]),
    "repeat": (
        lambda td: td.repeat(2, 1),
        lambda x: x.repeat(2, 1, *[1] * (x.ndim - 2)),
        [4, 3],
    ),
    "flip": (lambda td: td.flip(1), lambda x: x.flip(1), [2, 3]),
    "narrow": (lambda td: td.narrow(1, 1, 2), lambda x: x.narrow(1, 1, 2), [2, 2]),
    "unbind(1)[2]": (lambda td: td.unbind(1)[2], lambda x: x.select(1, 2), [2]),
    "unbind(0)[1]": (lambda td: td.unbind(0)[1], lambda x: x.select(0, 1), [3]),
    "split(2, 1)[1]": (lambda td: td.split(2, 1)[1], lambda x: x.split(2, 1)[1], [2, 1]),
    "chunk(2, 0)[0]": (lambda td: td.chunk(2, 0)[0], lambda x: x.chunk(2, 0)[0], [1, 3]),
}


def _label_codes(td, vocab):
    """The per-element labels of ``td`` as a tensor of their indices in ``vocab``."""
    labels = dict(td.items())["label"].tolist()  # one value or a stack: per element
    return torch.tensor(_codes(labels, vocab))


def _codes(labels, vocab):
    if isinstance(labels, list):
        return [_codes(x, vocab) for x in labels]
    return vocab.index(labels)


@pytest.mark.parametrize("op", list(ANY_TD_SHAPE_OPS))
def test_shape_ops_over_every_kind(any_td, op):
    """Every tensor leaf is the same torch op on the leaf; the per-element labels move like
    a tensor of the batch shape; the one-value tag is kept."""
    call, leaf_op, batch_size = ANY_TD_SHAPE_OPS[op]
    out = call(any_td)
    check_leafwise(out, any_td, leaf_op, batch_size, non_tensors=False)
    flat = [v for row in dict(any_td.items())["label"].tolist() for v in row]
    vocab = sorted(set(flat))
    assert torch.equal(_label_codes(out, vocab), leaf_op(_label_codes(any_td, vocab)))
    assert leaves(out)[("tag",)] == "t"


@pytest.mark.parametrize("batch", [[], [4], [4, 3], [2, 4]])
@pytest.mark.parametrize("shape", [[], [4], [3], [4, 3], [4, 3, 2], [2, 4]])
def test_a_leaf_fits_when_its_shape_starts_with_the_batch_size(batch, shape):
    from tensordict._keys.shape import leads_with

    fits = list(shape[: len(batch)]) == batch
    assert leads_with(torch.Size(shape), torch.Size(batch)) is fits
    value = torch.zeros(shape)
    for build in (
        lambda: TensorDict({"x": value}, batch),
        lambda: TensorDict({}, batch).set("x", value),
        lambda: TensorDict({}, batch).update({"x": value}),
        lambda: TensorDict({"x": torch.zeros(batch)}, batch).apply(lambda _: value),
    ):
        if fits:
            assert build()["x"] is value
        else:
            with pytest.raises(RuntimeError, match="x"):
                build()
