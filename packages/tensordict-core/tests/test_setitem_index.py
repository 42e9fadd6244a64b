"""Writing along the batch: ``td[index] = tensordict | dict | tensor | number``, and lazy
pre-allocation of an empty tensordict (``td = TensorDict(batch_size=[N]); td[i] = foo()``)."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict


def make_td():
    return TensorDict(
        {"a": torch.zeros(4, 3, 2), "n": {"b": torch.zeros(4, 3, dtype=torch.int64)}}, [4, 3]
    )


def sample(value, batch=()):
    return TensorDict(
        {
            "a": torch.full((*batch, 2), float(value)),
            "n": {"b": torch.full(batch, int(value), dtype=torch.int64)},
        },
        list(batch),
    )


@pytest.mark.parametrize(
    "index, batch",
    [
        (0, (3,)),
        (-1, (3,)),
        (slice(1, 3), (2, 3)),
        ((0, 1), ()),
        ((slice(None), 2), (4,)),
        ((Ellipsis, 0), (4,)),
        (torch.tensor([3, 0]), (2, 3)),
        ([1, 2], (2, 3)),
        (torch.tensor([True, False, True, False]), (2, 3)),
        (torch.tensor([[True, False, False]] * 4), (4,)),
        ((slice(None), [0, 2]), (4, 2)),
    ],
)
def test_setitem_tensordict_matches_leafwise(index, batch):
    td = make_td()
    a, b = td["a"], td["n", "b"]
    value = sample(7, batch)
    td[index] = value
    # expected: the same write done leaf by leaf on copies of the original tensors, with
    # the ellipsis spelled out over the two batch dims (leaf "a" has a feature dim)
    full = (slice(None), 0) if isinstance(index, tuple) and index[0] is Ellipsis else index
    exp_a = torch.zeros(4, 3, 2)
    exp_a[full] = value["a"]
    exp_b = torch.zeros(4, 3, dtype=torch.int64)
    exp_b[full] = value["n", "b"]
    assert torch.equal(td["a"], exp_a)
    assert torch.equal(td["n", "b"], exp_b)
    # written in place: storage kept
    assert td["a"] is a and td["n", "b"] is b


def test_setitem_dict():
    td = make_td()
    td[1] = {"a": torch.ones(3, 2), "n": {"b": torch.full((3,), 5, dtype=torch.int64)}}
    assert torch.equal(td["a"][1], torch.ones(3, 2))
    assert (td["a"][[0, 2, 3]] == 0).all()
    assert torch.equal(td["n", "b"][1], torch.full((3,), 5))


def test_setitem_broadcasts_smaller_batch():
    td = make_td()
    td[1:3] = sample(4)  # batch [] broadcast to [2, 3]
    assert (td["a"][1:3] == 4).all()
    assert (td["n", "b"][1:3] == 4).all()
    assert (td["a"][0] == 0).all() and (td["a"][3] == 0).all()


def test_setitem_partial_keys_only_touches_those():
    td = make_td()
    td[0] = TensorDict({"a": torch.ones(3, 2)}, [3])
    assert (td["a"][0] == 1).all()
    assert (td["n", "b"] == 0).all()


def test_setitem_number_fills_all_leaves():
    td = make_td()
    td[2] = 3
    assert (td["a"][2] == 3).all() and (td["n", "b"][2] == 3).all()
    assert (td["a"][:2] == 0).all() and (td["n", "b"][3] == 0).all()


def test_setitem_tensor_of_indexed_batch_shape():
    td = make_td()
    td[:, 0] = torch.tensor([1.0, 2.0, 3.0, 4.0])
    exp = torch.zeros(4, 3, 2)
    exp[:, 0] = torch.tensor([1.0, 2.0, 3.0, 4.0])[:, None]
    assert torch.equal(td["a"], exp)
    assert torch.equal(td["n", "b"][:, 0], torch.tensor([1, 2, 3, 4]))


def test_setitem_new_key_in_value_is_allocated():
    td = TensorDict({"x": torch.zeros(3)}, [3])
    td[1] = {"x": torch.tensor(1.0), "new": torch.tensor(2.0)}
    assert torch.equal(td["x"], torch.tensor([0.0, 1.0, 0.0]))
    assert td["new"].shape == (3,)
    assert td["new"][1] == 2.0


def test_setitem_nested_with_extra_batch_dims():
    td = TensorDict({"deep": TensorDict({"h": torch.zeros(3, 2, 5)}, [3, 2])}, [3])
    td[1] = TensorDict({"deep": TensorDict({"h": torch.ones(2, 5)}, [2])}, [])
    assert (td["deep", "h"][1] == 1).all()
    assert (td["deep", "h"][[0, 2]] == 0).all()


def test_setitem_after_ellipsis_checks_the_right_dim():
    td = TensorDict({"a": torch.zeros(2, 4)}, [2, 4])
    td[..., 3] = TensorDict({"a": torch.ones(2)}, [2])
    assert torch.equal(td["a"][:, 3], torch.ones(2))


# ---------------------------------------------------------------- lazy pre-allocation
def foo(i):
    data = TensorDict({}, batch_size=[])
    data["a"] = torch.full((3,), float(i))
    data["b"] = TensorDict({"c": torch.full((2,), i, dtype=torch.int64)}, batch_size=[])
    return data


@pytest.mark.parametrize("order", [[0, 1, 2, 3], [2, 0, 3, 1], [3, 2, 1, 0]])
def test_lazy_preallocation_any_order(order):
    n = 4
    td = TensorDict({}, batch_size=[n])
    for i in order:
        td[i] = foo(i)
    assert set(td.keys(True, True)) == {"a", ("b", "c")}
    assert td["a"].shape == (n, 3) and td["a"].dtype == torch.float32
    assert td["b"].batch_size == torch.Size([n])
    assert td["b", "c"].shape == (n, 2) and td["b", "c"].dtype == torch.int64
    expected = torch.stack([foo(i) for i in range(n)])
    assert torch.equal(td["a"], expected["a"])
    assert torch.equal(td["b", "c"], expected["b", "c"])


def test_lazy_preallocation_writes_in_place_after_first():
    td = TensorDict(batch_size=[3])
    td[0] = foo(0)
    a, c = td["a"], td["b", "c"]
    td[1] = foo(1)
    td[2] = foo(2)
    assert td["a"] is a and td["b", "c"] is c
    assert torch.equal(a[:, 0], torch.tensor([0.0, 1.0, 2.0]))


def test_lazy_preallocation_multi_dim_batch_and_slices():
    td = TensorDict(batch_size=[2, 3])
    td[1] = TensorDict({"x": torch.ones(3, 5), "n": {"y": torch.ones(3, dtype=torch.long)}}, [3])
    td[0, 1:] = TensorDict({"x": torch.full((2, 5), 2.0), "n": {"y": torch.full((2,), 2)}}, [2])
    assert td["x"].shape == (2, 3, 5)
    assert td["n"].batch_size == torch.Size([2, 3])
    assert torch.equal(td["x"][1], torch.ones(3, 5))
    assert torch.equal(td["x"][0, 1:], torch.full((2, 5), 2.0))
    assert torch.equal(td["n", "y"][1], torch.ones(3, dtype=torch.long))
    assert torch.equal(td["n", "y"][0, 1:], torch.full((2,), 2))


def test_lazy_preallocation_with_dict_and_non_tensor():
    td = TensorDict(batch_size=[3])
    td[0] = {"x": torch.ones(2), "s": "hello"}
    assert td["x"].shape == (3, 2)
    assert td["s"] == "hello"
    assert td[2]["s"] == "hello"


def test_lazy_preallocation_with_tensor_index():
    td = TensorDict(batch_size=[3])
    td[torch.tensor([2, 0])] = TensorDict({"x": torch.tensor([[1.0], [2.0]])}, [2])
    assert td["x"].shape == (3, 1)
    assert td["x"][2, 0] == 1.0 and td["x"][0, 0] == 2.0


def test_lazy_preallocation_uses_the_tensordict_device():
    td = TensorDict(batch_size=[3], device="meta")
    td[1] = TensorDict({"x": torch.ones(2), "n": {"y": torch.ones(())}}, [])
    assert td["x"].device.type == "meta"
    assert td["n", "y"].device.type == "meta"
    assert td["n"].device == torch.device("meta")


def test_readme_preallocation_repr():
    n = 10
    data = TensorDict({}, batch_size=[n])
    for i in range(n):
        data[i] = foo(i)
    assert data.batch_size == torch.Size([10])
    assert data["a"].shape == torch.Size([10, 3])
    assert data["b"].batch_size == torch.Size([10])
    assert data["b", "c"].shape == torch.Size([10, 2])
