"""TensorDict methods, operators and torch functions on instances: same class back, same
data as the operation on the wrapped tensordict."""

from __future__ import annotations

import pytest
import torch
from tc_helpers import Batch, Nested, assert_same_data, make_batch

from tensordict import TensorClass, TensorDict, lazy_stack
from tensordict.tensorclass._forward import NO_WRAP, forwarded_names


def test_every_tensordict_method_is_on_the_class():
    missing = [name for name in forwarded_names() if not hasattr(Batch, name)]
    assert not missing
    public = {n for n in dir(TensorDict) if not n.startswith("_")}
    assert public <= set(dir(Batch))
    assert len(public) > 300  # generated from TensorDict, not listed by hand


# calls that build a new instance
SAME_CLASS = [
    lambda b: b[1],
    lambda b: b[1:3],
    lambda b: b[torch.tensor([0, 2])],
    lambda b: b[torch.tensor([True, False, True, False])],
    lambda b: b.clone(),
    lambda b: b.copy(),
    lambda b: b.to(torch.float64),
    lambda b: b.float(),
    lambda b: b.detach(),
    lambda b: b.contiguous(),
    lambda b: b.reshape(2, 2),
    lambda b: b.view(2, 2),
    lambda b: b.unsqueeze(0),
    lambda b: b.unsqueeze(0).squeeze(0),
    lambda b: b.expand(3, 4),
    lambda b: b.reshape(2, 2).permute(1, 0),
    lambda b: b.reshape(2, 2).transpose(0, 1),
    lambda b: b.reshape(2, 2).flatten(0, 1),
    lambda b: b.flip(0),
    lambda b: b.roll(1, 0),
    lambda b: b.repeat(2),
    lambda b: b.repeat_interleave(2, dim=0),
    lambda b: b.exclude("reward").apply(lambda x: x + 1),
    lambda b: b.select("obs", "reward") * 2,
    lambda b: b.select("obs", "reward").abs(),
    lambda b: b.select("obs").sum(0),
    lambda b: b.select("obs").mean(0),
    lambda b: b.masked_fill(torch.tensor([True, False, True, False]), 0),
    lambda b: b.gather(0, torch.tensor([3, 1])),
    lambda b: b.pad([1, 1]),
    lambda b: torch.zeros_like(b),
    lambda b: torch.full_like(b, 3.0),
    lambda b: torch.cat([b, b], 0),
    lambda b: torch.stack([b, b], 1),
    lambda b: torch.squeeze(b.unsqueeze(1)),
    lambda b: torch.clone(b),
    lambda b: torch.gather(b, 0, torch.tensor([0, 2])),
    lambda b: Batch.stack([b, b]),
    lambda b: Batch.cat([b, b]),
    lambda b: Batch.maybe_dense_stack([b, b]),
]


@pytest.mark.parametrize("call", SAME_CLASS)
def test_methods_return_the_class_with_the_tensordict_result(call):
    b = make_batch()
    out = call(b)
    assert type(out) is Batch
    assert_same_data(out, call(b._tensordict))  # the same call on the wrapped tensordict


def test_split_unbind_chunk_give_tuples_of_the_class(batch):
    for parts, twins in (
        (batch.unbind(0), batch._tensordict.unbind(0)),
        (batch.split(2), batch._tensordict.split(2)),
        (batch.chunk(2), batch._tensordict.chunk(2)),
        (torch.unbind(batch, 0), batch._tensordict.unbind(0)),
        (batch.tensor_split([1, 3]), batch._tensordict.tensor_split([1, 3])),
    ):
        assert type(parts) is tuple and len(parts) == len(twins)
        for part, twin in zip(parts, twins):
            assert type(part) is Batch
            assert_same_data(part, twin)
    assert [type(x) for x in batch] == [Batch] * 4


def test_in_place_methods_return_the_instance(batch):
    obs = batch.obs
    assert batch.select("obs", "reward").zero_() is not batch
    assert batch.apply_(lambda x: x.fill_(1) if x.is_floating_point() else x) is batch
    assert torch.equal(obs, torch.ones(4, 3)) and batch.obs is obs
    assert batch.update({"reward": torch.zeros(4, 1)}) is batch
    assert torch.equal(batch.reward, torch.zeros(4, 1))
    batch.obs += 1
    assert torch.equal(batch.obs, torch.full((4, 3), 2.0))


def test_in_place_update_from_a_tensorclass_merges_nested(nested):
    other = nested.clone().zero_()
    other.z = "new"
    other.child.z = "new child"
    nested.update(other)
    assert nested.z == "new" and nested.child.z == "new child"
    assert isinstance(nested.child, Nested)
    assert (nested.X == 0).all() and (nested.child.X == 0).all()


def test_arithmetic_and_comparisons():
    class Pair(TensorClass):
        a: torch.Tensor
        b: torch.Tensor

    p = Pair(a=torch.arange(3.0), b=torch.ones(3), batch_size=[3])
    for out, expected in (
        (p + 1, (torch.arange(3.0) + 1, torch.full((3,), 2.0))),
        (1 - p, (1 - torch.arange(3.0), torch.zeros(3))),
        (p * p, (torch.arange(3.0) ** 2, torch.ones(3))),
        (p / 2, (torch.arange(3.0) / 2, torch.full((3,), 0.5))),
        (-p, (-torch.arange(3.0), -torch.ones(3))),
        (abs(-p), (torch.arange(3.0), torch.ones(3))),
    ):
        assert type(out) is Pair
        assert torch.equal(out.a, expected[0]) and torch.equal(out.b, expected[1])
    eq = p == p.clone()
    assert type(eq) is Pair and eq.a.dtype == torch.bool and eq.all()
    assert not (p != p).any() and (p > -1).all() and isinstance(p.all(), bool)


def test_lock_context_managers(batch):
    assert not batch.is_locked
    with batch.lock_():
        assert batch.is_locked
        with pytest.raises(RuntimeError, match="locked"):
            batch._tensordict["new"] = torch.zeros(4)
        with batch.unlock_():
            assert not batch.is_locked
        assert batch.is_locked
    assert not batch.is_locked


def test_view_context_writes_back():
    class Img(TensorClass):
        X: torch.Tensor

    data = Img(X=torch.ones(3, 4, 5), batch_size=[3, 4])
    with data.view(-1) as flat:
        assert type(flat) is Img and flat.batch_size == (12,)
        flat.X *= 0
    assert (data.X == 0).all()


def test_classmethods_return_the_class_they_are_called_on():
    class Pair(TensorClass):
        a: torch.Tensor
        b: torch.Tensor

    class Child(Pair):
        pass

    from_dict = Pair.from_dict({"a": torch.zeros(3), "b": torch.ones(3)}, auto_batch_size=True)
    assert type(from_dict) is Pair and from_dict.batch_size == (3,)
    assert type(Child.from_dict({"a": torch.zeros(2), "b": torch.ones(2)})) is Child
    keys = Pair.fromkeys(["a", "b"], 0)
    assert type(keys) is Pair and keys.a.item() == 0
    listed = Pair.from_list([{"a": 1, "b": 2}, {"a": 3, "b": 4}])
    assert type(listed) is Pair and listed.a.tolist() == [1, 3]
    p = Pair(a=torch.zeros(2), b=torch.ones(2), batch_size=[2])
    for name in ("stack", "cat", "lazy_stack", "maybe_dense_stack"):
        assert type(getattr(Pair, name)([p, p])) is Pair, name


def test_accessors_return_entries_not_instances(batch):
    for name in NO_WRAP & {"get", "pop", "to_tensordict", "values", "items"}:
        assert hasattr(batch, name)
    assert batch.get("info") is batch.info
    assert type(batch.to_tensordict()) is TensorDict
    assert type(batch.select("obs", as_tensordict=True)) is TensorDict
    assert batch.select("obs").reward is None
    assert batch.get("missing") is None and batch.get("missing", 0) == 0
    assert batch.get_at("obs", 1).shape == (3,)
    assert batch.is_non_tensor("label") and not batch.is_non_tensor("obs")
    assert list(batch.keys()) == list(batch._tensordict.keys())
    with pytest.raises(ValueError, match="Invalid indexing arguments: 'obs'"):
        batch["obs"]


def test_get_reads_like_the_attribute(nested):
    # a field (None when unset, whatever the default), another attribute, a nested key
    # through a field holding a tensorclass, and the default for any other name
    nested.child.child = None
    assert nested.get("child", 5) is nested.child and nested.child.get("child", 5) is None
    assert nested.get("batch_size") == torch.Size([3, 4]) == nested.get(("shape",))
    assert nested.get("names") == [None, None] and nested.get("device") is None
    assert nested.get(("child", "batch_size")) == torch.Size([3, 4])
    assert nested.get(("child", "z")) == "inner"
    assert nested.get(("child", "missing"), 1) == 1 and nested.get("missing", 2) == 2
    batch = make_batch()
    batch._tensordict["extra"] = torch.arange(4)  # an entry that is not a field
    assert torch.equal(batch.get("extra"), torch.arange(4))
    assert torch.equal(batch.get(("info", "step")), torch.arange(4))

    class Point(TensorClass):
        x: torch.Tensor

    point = Point(x=torch.zeros(2), batch_size=[2])
    del point.x  # a deleted field reads as missing
    assert point.get("x", 3) == 3
    # the keywords of a lazy stack's get() reach it
    ragged = lazy_stack([TensorDict(x=torch.ones(3)), TensorDict(x=torch.full((2,), 2.0))])
    listed = Point.from_tensordict(ragged).get("x", as_list=True)
    assert [t.tolist() for t in listed] == [[1.0, 1.0, 1.0], [2.0, 2.0]]
    padded = Point.from_tensordict(ragged).get("x", as_padded_tensor=True)
    assert padded.tolist() == [[1.0, 1.0, 1.0], [2.0, 2.0, 0.0]]


def test_setitem_by_index(batch):
    other = make_batch()
    batch[1:3] = other[1:3]
    assert torch.equal(batch.obs[1:3], other.obs[1:3])
    batch[0] = 0
    assert (batch.obs[0] == 0).all()

    class Foreign(TensorClass):
        obs: torch.Tensor
        z: torch.Tensor

    with pytest.raises(ValueError, match="same-class or compatible class"):
        batch[0] = Foreign(obs=torch.zeros(3), z=torch.zeros(1))
    assert not (batch.obs[0] != 0).any()


def test_reductions_and_all_any(nested):
    ones = nested.apply(lambda x: torch.ones_like(x))
    assert ones.all() and isinstance(ones.all(), bool)
    assert type(ones.all(dim=0)) is Nested and ones.all(dim=0).all()
    ones.child.X.zero_()
    assert not ones.all() and ones.any()


def test_grad_data_and_backward():
    class Loss(TensorClass):
        actor: torch.Tensor
        critic: torch.Tensor

    x = torch.randn(3, requires_grad=True)
    losses = Loss(actor=x.sum(), critic=x.pow(2).sum())
    assert losses.requires_grad
    (losses.actor + losses.critic).backward()
    assert torch.allclose(x.grad, 1 + 2 * x.detach())
    assert type(losses.data) is Loss and not losses.data.requires_grad


def test_cast_filter_option_is_the_default_of_dtype_casts():
    from tensordict import is_inexact

    class Mesh(TensorClass, cast_filter=is_inexact):
        points: torch.Tensor
        cells: torch.Tensor

    mesh = Mesh(points=torch.zeros(4, 3), cells=torch.zeros(2, 3, dtype=torch.long))
    for out in (mesh.bfloat16(), mesh.to(torch.bfloat16), mesh.to(dtype=torch.bfloat16)):
        assert type(out) is Mesh
        assert out.points.dtype is torch.bfloat16 and out.cells.dtype is torch.int64
    assert mesh.bfloat16(cast_filter=None).cells.dtype is torch.bfloat16
    assert mesh.to(torch.float64, cast_filter=None).cells.dtype is torch.float64
    assert Batch._flags.cast_filter is None
    assert make_batch().to(torch.float64).info["step"].dtype is torch.float64


@pytest.mark.parametrize(
    "call",
    [
        lambda b: b.update({"obs": torch.ones(4, 3), "extra": torch.zeros(4)}),
        lambda b: b.update(TensorDict(extra=torch.zeros(4), batch_size=[4])),
        lambda b: b.update(extra=torch.zeros(4)),
        lambda b: b.update_({"extra": torch.zeros(4)}),
        lambda b: b.update({("extra", "deep"): torch.zeros(4)}),
    ],
)
def test_update_refuses_keys_that_are_not_fields(batch, call):
    before = batch.to_tensordict()
    with pytest.raises(ValueError, match=r"Batch.update_?: 'extra' is not a field of Batch"):
        call(batch)
    assert_same_data(batch, before)  # obs not written either
    # nested keys inside a field and keys_to_update are fine
    batch.update({("info", "new"): torch.ones(4)})
    batch.update({"obs": torch.ones(4, 3), "extra": 0}, keys_to_update=["obs"])
    assert (batch.obs == 1).all() and (batch.info["new"] == 1).all()


def test_from_dict_instance_refuses_keys_that_are_not_fields(batch):
    with pytest.raises(AttributeError, match="'extra' is not a field of Batch"):
        batch.from_dict_instance({"obs": torch.zeros(4, 3), "extra": torch.zeros(4)})
