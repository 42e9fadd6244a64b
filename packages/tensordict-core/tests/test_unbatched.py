"""UnbatchedTensor: an entry that the batch operations of a tensordict leave whole.

Oracles: the payload itself (same storage: ``data_ptr``, same shape) for batch operations;
the batch size of the result for its ``batch_size``; the same torch operation on the plain
tensor for everything else (results, exception types and messages).
"""

from __future__ import annotations

import math
import operator
import pickle
import warnings

import numpy as np
import pytest
import torch

from tensordict import TensorDict, UnbatchedTensor, lazy_stack, pad


def make(batch=(3,), payload=None):
    payload = torch.randn(10) if payload is None else payload
    td = TensorDict(
        a=UnbatchedTensor(payload), b=torch.randn(*batch, 2), n={"c": torch.zeros(batch)},
        batch_size=batch,
    )  # fmt: skip
    return td, payload


def assert_carried(result, payload):
    """The unbatched entry of ``result`` is the payload (same storage and shape) with the
    result's batch size."""
    got = result.get("a")
    assert type(got) is UnbatchedTensor
    assert got.data_ptr() == payload.data_ptr() and got.shape == payload.shape
    assert got.batch_size == result.batch_size


def test_is_a_tensor_with_a_batch_size():
    data = torch.arange(6.0).reshape(2, 3)
    u = UnbatchedTensor(data)
    assert isinstance(u, torch.Tensor) and u.shape == (2, 3) and u.batch_size == ()
    assert u.data_ptr() == data.data_ptr()
    assert UnbatchedTensor([1, 2]).dtype == torch.int64
    u.batch_size = [4]
    assert u.batch_size == torch.Size([4]) and UnbatchedTensor(data, batch_size=[5]).batch_size == (
        5,
    )
    assert not UnbatchedTensor(torch.zeros(2, requires_grad=True)).requires_grad  # detached


def test_stored_and_read_as_itself():
    td, payload = make()
    assert isinstance(td["a"], UnbatchedTensor) and td["a"].batch_size == (3,)
    assert td["a"].data_ptr() == payload.data_ptr()
    td.set("z", UnbatchedTensor(torch.zeros(7)))  # any shape
    assert td["z"].shape == (7,) and td["z"].batch_size == (3,)


@pytest.mark.parametrize(
    "op",
    [
        lambda td: td[0],
        lambda td: td[:2],
        lambda td: td[torch.tensor([True, False, True])],
        lambda td: td[None],
        lambda td: td.reshape(1, 3),
        lambda td: td.view(3, 1),
        lambda td: td.unsqueeze(0),
        lambda td: td.unsqueeze(0).squeeze(0),
        lambda td: td.reshape(1, 3).transpose(0, 1),
        lambda td: td.reshape(1, 3).permute(1, 0),
        lambda td: td.unflatten(0, (1, 3)),
        lambda td: td.unflatten(0, (1, 3)).flatten(0, 1),
        lambda td: td.expand(2, 3),
        lambda td: td.repeat(2),
        lambda td: td.flip(0),
        lambda td: td.roll(1, 0),
        lambda td: td.gather(0, torch.tensor([0, 0])),
        lambda td: td.masked_select(torch.tensor([True, False, True])),
        lambda td: td.unbind(0)[1],
        lambda td: td.split(2)[1],
        lambda td: td.chunk(2)[0],
        lambda td: td.sum(0),
        lambda td: td.mean(),
        lambda td: pad(td, [0, 1]),
        lambda td: torch.unbind(td, 0)[0],
        lambda td: torch.squeeze(td.unsqueeze(0)),
        lambda td: torch.permute(td.reshape(1, 3), (1, 0)),
        lambda td: torch.stack([td, td], 1),
        lambda td: torch.cat([td, td], 0),
        lambda td: lazy_stack([td, td], 0),
        lambda td: lazy_stack([td, td], 0)[1],
    ],
)
def test_batch_operations_carry_the_payload(op):
    td, payload = make()
    result = op(td)
    assert_carried(result, payload)
    assert td.get("a").batch_size == (3,)  # the input's entry is not changed


def test_nested_tensordict_entry_gets_its_own_batch_size():
    td = TensorDict(
        n=TensorDict(u=UnbatchedTensor(torch.zeros(7)), batch_size=[3, 2]), batch_size=[3]
    )
    assert td[0].get(("n", "u")).batch_size == (2,)
    assert td.unsqueeze(0).get(("n", "u")).batch_size == (1, 3, 2)


def test_other_operations_apply_like_on_a_tensor():
    td, payload = make()
    assert torch.equal((td + 1)["a"], payload + 1) and type((td + 1)["a"]) is UnbatchedTensor
    assert (td * 2)["a"].batch_size == (3,)
    assert td.int()["a"].dtype == torch.int32 and type(td.int()["a"]) is UnbatchedTensor
    cloned = td.clone()["a"]
    assert torch.equal(cloned, payload) and cloned.data_ptr() != payload.data_ptr()
    assert (torch.ones_like(td)["a"] == 1).all()
    assert td.copy()["a"] is td["a"] and td.select("a")["a"] is td["a"]
    assert td.exclude("b")["a"] is td["a"]
    out = td.apply(lambda x: x * 3)
    assert torch.equal(out["a"], payload * 3) and type(out["a"]) is UnbatchedTensor


def test_plain_tensors_beside_it_stay_plain():
    u = UnbatchedTensor(torch.ones(2))
    t = torch.ones(2)
    out = torch._foreach_add([u, t], 1)
    assert type(out[0]) is UnbatchedTensor and type(out[1]) is torch.Tensor
    assert type(u + t) is UnbatchedTensor and type(t + 1) is torch.Tensor


def test_stack_of_the_same_storage_is_silent_different_storage_warns():
    data = torch.randn(5)
    tds = [TensorDict(x=torch.ones(3), u=UnbatchedTensor(data), batch_size=[3]) for _ in range(2)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stacked = torch.stack(tds)
    assert stacked["u"].data_ptr() == data.data_ptr() and stacked["u"].batch_size == (2, 3)
    other = TensorDict(x=torch.ones(3), u=UnbatchedTensor(torch.ones(5)), batch_size=[3])
    with pytest.warns(UserWarning, match="'u'.*different data storage"):
        kept = torch.stack([tds[0], other])
    assert kept["u"].data_ptr() == data.data_ptr()  # the first one's


def test_stack_with_out_writes_the_payload_whole():
    data = torch.tensor(1)
    items = [
        TensorDict(x=torch.zeros(2), u=UnbatchedTensor(data), batch_size=[2]) for _ in range(3)
    ]
    out = TensorDict(x=torch.empty(3, 2), u=UnbatchedTensor(torch.tensor(5)), batch_size=[3, 2])
    assert torch.stack(items, 0, out=out) is out
    assert out["u"].item() == 1 and out["u"].batch_size == (3, 2)


def test_indexed_write_writes_the_payload_whole_or_leaves_it():
    td, payload = make()
    td[0] = TensorDict(
        a=UnbatchedTensor(torch.full((10,), 7.0)), b=torch.ones(2), n={"c": torch.ones(())}
    )
    assert torch.equal(td["a"], torch.full((10,), 7.0)) and td["a"].data_ptr() == payload.data_ptr()
    td[1] = TensorDict(b=torch.ones(2), n={"c": torch.ones(())})  # no "a": unchanged
    assert torch.equal(td["a"], torch.full((10,), 7.0))
    before = td.clone()
    with pytest.raises(RuntimeError, match="UnbatchedTensor at key 'a'"):
        td[2] = TensorDict(
            a=UnbatchedTensor(torch.zeros(4)), b=torch.ones(2), n={"c": torch.ones(())}
        )
    assert (td == before).all()


def test_auto_batch_size_ignores_it():
    td = TensorDict(a=UnbatchedTensor(0), b=torch.randn(2, 3)).auto_batch_size_(batch_dims=2)
    assert td.batch_size == (2, 3) and td["a"] == 0 and td["a"].batch_size == (2, 3)
    td = TensorDict(a=UnbatchedTensor(torch.zeros(5, 6)), b=torch.zeros(5, 2)).auto_batch_size_()
    assert td.batch_size == (5, 2)


@pytest.mark.parametrize(
    "data",
    [
        torch.tensor(3),
        torch.tensor([3]),
        torch.tensor([[3]]),
        torch.tensor(True),
        torch.tensor(1.25),
        torch.tensor(1 + 2j),
        torch.tensor([1, 2]),
        torch.empty(0),
    ],
    ids=repr,
)
@pytest.mark.parametrize(
    "convert",
    [
        str,
        format,
        lambda x: format(x, ".2f"),
        bool,
        int,
        float,
        complex,
        operator.index,
        round,
        lambda x: round(x, 1),
        math.trunc,
        math.floor,
        math.ceil,
        lambda x: x.item(),
        lambda x: x.tolist(),
    ],
)
def test_python_conversions_are_those_of_the_plain_tensor(data, convert):
    def run(x):
        try:
            return False, convert(x)
        except Exception as err:  # noqa: BLE001 - the error itself is compared
            return True, (type(err), str(err))

    expected = run(data)
    got = run(UnbatchedTensor(data))
    assert got[0] == expected[0]
    if expected[0]:
        assert got[1] == expected[1]
    else:
        assert not isinstance(got[1], UnbatchedTensor)
        if isinstance(expected[1], torch.Tensor):
            assert torch.equal(got[1], expected[1])
        else:
            assert got[1] == expected[1]


def test_index_numpy_repr_pickle():
    u = UnbatchedTensor(torch.tensor(1))
    assert [10, 20, 30][u] == 20 and hex(u) == "0x1"
    data = torch.tensor([[1, 2], [3, 4]])
    np.testing.assert_array_equal(np.asarray(UnbatchedTensor(data)), data.numpy())
    assert np.asarray(UnbatchedTensor(data), dtype=np.float64).dtype == np.float64
    assert repr(UnbatchedTensor(torch.tensor([1.0, 2.0]))) == "UnbatchedTensor(tensor([1., 2.]))"
    assert str(UnbatchedTensor(torch.tensor([1.0, 2.0]))) == str(torch.tensor([1.0, 2.0]))
    back = pickle.loads(pickle.dumps(UnbatchedTensor(data, batch_size=[4])))
    assert type(back) is UnbatchedTensor and back.batch_size == (4,) and torch.equal(back, data)


def test_copy_shares_storage_as_subclass_unwraps():
    u = UnbatchedTensor(torch.arange(3), batch_size=[2])
    c = u.copy()
    assert c is not u and c.data_ptr() == u.data_ptr() and c.batch_size == (2,)
    assert type(u.as_subclass(torch.Tensor)) is torch.Tensor


# ---------------------------------------------------------------------- torch.vmap
def vmap_td():
    table = torch.randn(7, 11)
    td = TensorDict(
        a=UnbatchedTensor(table), x=torch.randn(4, 3, 7),
        n={"u": UnbatchedTensor(table), "y": torch.randn(4, 3)},
        batch_size=[4, 3],
    )  # fmt: skip
    return td, table


def test_vmap_does_not_map_over_it_and_the_function_sees_it_whole():
    """Each call sees the table whole; the results equal the function row by row."""
    td, table = vmap_td()
    seen = []

    def fn(t):
        seen.append((type(t.get("a")), t.get("a").shape, t.get("a").batch_size, t.batch_size))
        return t["x"] @ t["a"] + t["n", "u"].sum()

    out = torch.vmap(fn)(td)
    assert seen[0][1:] == ((7, 11), (3,), (3,)) and issubclass(seen[0][0], UnbatchedTensor)
    expected = torch.stack([fn(td[i]) for i in range(4)])
    assert out.shape == (4, 3, 11) and type(out) is torch.Tensor
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("in_dims", [0, 1])
def test_vmap_returning_the_tensordict_keeps_the_entry(in_dims):
    td, table = vmap_td()
    out = torch.vmap(lambda t: t.set("y", t["x"] * 2), in_dims=in_dims, out_dims=in_dims)(td)
    assert out.batch_size == (4, 3)
    assert_carried(out, table)
    nested = out["n", "u"]
    assert type(nested) is UnbatchedTensor and nested.data_ptr() == table.data_ptr()
    assert nested.batch_size == out["n"].batch_size == (4, 3)
    torch.testing.assert_close(out["y"], td["x"] * 2)
    td.zero_()  # the same storage: the rebuilt entries see the write
    assert (torch.vmap(lambda t: t)(td)["a"] == 0).all()


def test_vmap_rebuilt_tensordict_takes_the_out_dims_batch_size():
    td, table = vmap_td()
    out = torch.vmap(lambda t: TensorDict(u=t["a"], x=t["x"]), in_dims=1)(td)
    assert out.batch_size == (3,)
    assert_carried(TensorDict(a=out["u"], batch_size=out.batch_size), table)
    assert out["u"].batch_size == (3,)
    torch.testing.assert_close(out["x"], td["x"].transpose(0, 1))


@pytest.mark.parametrize("nested", [False, True])
def test_vmap_returning_it_bare_gives_it_back_with_the_vmapped_batch_size(nested):
    td, table = vmap_td()
    fn = torch.vmap(torch.vmap(lambda t: t["a"])) if nested else torch.vmap(lambda t: t["a"])
    out = fn(td)
    assert type(out) is UnbatchedTensor and out.shape == (7, 11)
    assert out.data_ptr() == table.data_ptr() and out.batch_size == (4, 3)
    out = torch.vmap(lambda t: t["a"], in_dims=1)(td)
    assert type(out) is UnbatchedTensor and out.batch_size == (3, 4)


def test_vmap_results_computed_from_it_are_batched_values():
    """Arithmetic mixing it with batched values is batched: vmap stacks it as usual."""
    td, table = vmap_td()
    out = torch.vmap(lambda t: t["a"] + t["x"].sum())(td)
    expected = torch.stack([table + td["x"][i].sum(-1).sum() for i in range(4)])
    assert out.shape == (4, 7, 11)
    torch.testing.assert_close(out, expected.reshape(4, 7, 11))

    def loss(p, t):
        return (t["x"].sum(-1) * p["w"]).sum() + t["a"].sum() * p["w"].sum()

    p = TensorDict(w=torch.ones(3))
    grads = torch.vmap(torch.func.grad(loss), (None, 0))(p, td)
    expected = torch.stack([torch.func.grad(loss)(p, td[i])["w"] for i in range(4)])
    assert grads.batch_size == (4,)
    torch.testing.assert_close(grads["w"], expected)
