"""Tensorclasses with the rest of tensordict and torch: nesting, lazy stacks, pytree, vmap,
pickling, consolidation, state dicts, dataclass conversion."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import weakref
from typing import Any

import pytest
import torch
from tc_helpers import Batch, Nested, assert_same_data, make_batch
from torch.utils._pytree import tree_flatten, tree_map

import tensordict
from tensordict import (
    LazyStackedTensorDict,
    NonTensorStack,
    TensorClass,
    TensorCollection,
    TensorDict,
    from_dataclass,
    lazy_stack,
    tensorclass,
)


def test_tensor_collection_is_the_common_base(batch):
    for obj in (batch, TensorDict(), lazy_stack([TensorDict(), TensorDict()])):
        assert isinstance(obj, TensorCollection)
    assert not isinstance(torch.zeros(1), TensorCollection)
    assert tensordict.is_tensor_collection(batch)


def test_tensorclass_as_an_entry_of_a_tensordict(batch):
    td = TensorDict(b=batch, x=torch.zeros(4), batch_size=[4])
    assert td["b"] is batch
    assert torch.equal(td["b", "obs"], batch.obs) and td["b", "label"] == "train"
    for out in (td[1:3], td.clone(), td.apply(lambda x: x * 1), td.to(torch.float64), td + 0):
        assert type(out["b"]) is Batch
        assert out["b"].batch_size == out.batch_size
    stacked = torch.stack([td, td])
    assert type(stacked["b"]) is Batch and stacked["b"].batch_size == (2, 4)
    catted = torch.cat([td, td])
    assert type(catted["b"]) is Batch and torch.equal(catted["b"].obs, torch.cat([batch.obs] * 2))
    assert ("b", "obs") in td.keys(include_nested=True)
    td.set(("b", "label"), "eval")
    assert batch.label == "eval"


def test_nested_class_survives_stack_and_cat(nested):
    stacked, catted = torch.stack([nested, nested]), torch.cat([nested, nested], 1)
    for out in (stacked, catted):
        assert type(out) is Nested and type(out.child) is Nested
    # stacking keeps one value per element (identical ones too), as the reference does;
    # concatenating identical values keeps one value
    assert stacked.z == [[["outer"] * 4] * 3] * 2 and stacked.child.z == [[["inner"] * 4] * 3] * 2
    assert catted.z == "outer" and catted.child.z == "inner"


def test_stacking_different_classes_raises_type_error(batch):
    class Other(TensorClass):
        obs: torch.Tensor

    other = Other(obs=torch.zeros(4, 3), batch_size=[4])
    with pytest.raises(TypeError, match="no implementation found|Multiple dispatch failed"):
        torch.stack([batch, other])


def test_combining_an_instance_with_a_tensordict_raises(batch):
    td = batch.to_tensordict()
    before = batch.to_tensordict()
    for items in ([batch, td], [td, batch]):
        with pytest.raises(TypeError, match="torch.stack: cannot combine Batch and TensorDict"):
            torch.stack(items)
        with pytest.raises(RuntimeError, match="torch.cat: cannot combine Batch and TensorDict"):
            torch.cat(items)
    assert_same_data(batch, before)
    # converted first, they stack
    stacked = torch.stack([batch, Batch.from_tensordict(td)])
    assert type(stacked) is Batch and stacked.batch_size == (2, 4)


def test_lazy_stack_of_instances(nested):
    other = nested.clone()
    lazy = LazyStackedTensorDict.lazy_stack([nested, other])
    assert type(lazy) is Nested and isinstance(lazy._tensordict, LazyStackedTensorDict)
    assert torch.equal(lazy[0].X, nested.X) and type(lazy[1]) is Nested
    assert type(nested.to_lazystack(0)) is Nested
    # a nested tensorclass read from the lazy stack keeps its class, and writes reach
    # the members
    child = lazy.child
    assert type(child) is Nested and isinstance(child._tensordict, LazyStackedTensorDict)
    assert torch.equal(child[1].X, other.child.X)
    assert child.z == [[["inner"] * 4] * 3] * 2
    child[1].X.zero_()
    assert not other.child.X.any() and nested.child.X.any()


def test_pytree_and_tree_map(batch):
    leaves, _ = tree_flatten(batch)
    assert sum(isinstance(x, torch.Tensor) for x in leaves) == 3
    doubled = tree_map(lambda x: x * 2 if isinstance(x, torch.Tensor) else x, batch)
    assert type(doubled) is Batch and torch.equal(doubled.obs, batch.obs * 2)
    assert doubled.label == "train"


def test_vmap_keeps_the_class():
    class Pair(TensorClass):
        x: torch.Tensor
        y: torch.Tensor
        note: str = "n"

    data = Pair(x=torch.zeros(3, 4), y=torch.ones(3, 4), batch_size=[3, 4])
    seen = []

    def fn(p: Pair) -> Pair:
        seen.append(type(p))
        return p * 2

    out = torch.vmap(fn)(data)
    assert seen == [Pair] and type(out) is Pair
    assert torch.equal(out.y, torch.full((3, 4), 2.0)) and out.note == "n"


def test_pickle_copy_and_deepcopy(batch):
    loaded = pickle.loads(pickle.dumps(batch))
    assert type(loaded) is Batch
    assert_same_data(loaded, batch)
    shallow = copy.copy(batch)
    assert shallow.obs is batch.obs and shallow._tensordict is not batch._tensordict
    deep = copy.deepcopy(batch)
    assert deep.obs is not batch.obs and torch.equal(deep.obs, batch.obs)


def test_consolidate_and_pickle_the_consolidated(batch):
    cons = batch.consolidate()
    assert type(cons) is Batch and cons._consolidated is not None
    assert_same_data(cons, batch)
    assert_same_data(pickle.loads(pickle.dumps(cons)), batch)


def test_consolidate_a_tensordict_holding_instances(batch, nested):
    td = TensorDict(b=batch[:3], n=nested[:, 0], batch_size=[3])
    cons = td.consolidate()
    assert cons.is_consolidated()
    assert type(cons["b"]) is Batch and type(cons["n"]) is Nested
    assert type(cons["n"].child) is Nested and cons["n"].child.z == "inner"
    assert_same_data(cons["b"], batch[:3])
    assert_same_data(cons["n"], nested[:, 0])
    back = pickle.loads(pickle.dumps(cons))  # one buffer; the classes found again by name
    assert back.is_consolidated() and type(back["n"]) is Nested
    assert_same_data(back["b"], batch[:3])
    # a class this process does not know is not imported: a plain TensorDict, with a warning
    meta = cons._consolidated["metadata"]
    meta["td"]["entries"]["b"]["class"] = "no_such_module.Unknown"
    with pytest.warns(UserWarning, match="no_such_module.Unknown"):
        plain = tensordict.from_consolidated(cons._consolidated["storage"], meta)
    assert type(plain["b"]) is TensorDict and torch.equal(plain["b", "obs"], batch.obs[:3])


def test_state_dict_roundtrip(nested):
    sd = nested.state_dict()
    assert list(sd) == ["X", "child.X"] and sd["X"] is not nested.X
    assert sd._metadata[""] == {
        "batch_size": torch.Size([3, 4]),
        "device": None,
        "_type": "Nested",
        "_non_tensor": {"z": "outer"},
    }
    assert sd._metadata["child"]["_non_tensor"] == {"z": "inner", "child": None}
    target = nested.clone().zero_()
    target.z = target.child.z = "changed"
    x = target.X
    assert target.load_state_dict(sd) is target
    assert target.X is x and torch.equal(x, nested.X)  # copied in place
    assert torch.equal(target.child.X, nested.child.X) and type(target.child) is Nested
    assert target.z == "outer" and target.child.z == "inner"
    nested_sd = nested.state_dict(flatten=False)
    assert list(nested_sd) == ["X", "child"] and list(nested_sd["child"]) == ["X"]
    target.zero_()
    target.load_state_dict(nested_sd)
    assert torch.equal(target.child.X, nested.child.X)


def test_state_dict_bad_input_changes_nothing(nested):
    target = nested.clone().zero_()
    sd = nested.state_dict()
    sd["unknown"] = torch.zeros(())
    with pytest.raises(KeyError, match="Key 'unknown' wasn't expected"):
        target.load_state_dict(sd)
    del sd["unknown"]
    sd["child.X"] = torch.zeros(2)
    with pytest.raises(RuntimeError, match=r"'child.X' has shape \(2,\)"):
        target.load_state_dict(sd)
    assert (target.X == 0).all()  # the valid entry was not written either


def test_legacy_state_dict_layout():
    class Pair(TensorClass):
        x: torch.Tensor
        y: torch.Tensor

    p = Pair(x=torch.zeros(3), y=torch.zeros(3))
    legacy = {
        "_tensordict": {
            "x": torch.ones(3),
            "y": torch.full((3,), 2.0),
            "__batch_size": torch.Size([]),
            "__device": None,
        },
        "_non_tensordict": {},
    }
    p.load_state_dict(legacy)
    assert p.x.tolist() == [1.0] * 3 and p.y.tolist() == [2.0] * 3


def test_tensordict_holding_a_tensorclass_state_dict(batch):
    td = TensorDict(b=batch, batch_size=[4])
    target = TensorDict(b=batch.clone().zero_(), batch_size=[4])
    target.load_state_dict(td.state_dict())
    assert torch.equal(target["b"].obs, batch.obs) and type(target["b"]) is Batch


def test_from_dataclass_class_and_instance():
    @dataclasses.dataclass
    class Obs:
        pixels: torch.Tensor
        label: str
        count: int = 0

    ObsTC = from_dataclass(Obs)
    assert ObsTC.__name__ == "Obs_tc" and tensordict.is_tensorclass(ObsTC)
    assert from_dataclass(ObsTC) is ObsTC
    obj = ObsTC(pixels=torch.zeros(2, 3), label="cat", batch_size=[2])
    assert obj.count == 0 and isinstance(obj.count, int)  # a 0-d tensor cannot fit [2]
    assert isinstance(ObsTC(pixels=torch.zeros(3), label="x").count, torch.Tensor)
    instance = Obs(torch.zeros(4, 3), "dog", 2)
    tc = from_dataclass(instance, batch_size=[4])
    assert tc.batch_size == (4,) and tc.label == "dog" and tc.pixels is instance.pixels
    assert tc.count == 2  # an int that a 0-d tensor cannot hold at batch size [4]

    @dataclasses.dataclass
    class Pix:
        pixels: torch.Tensor
        label: str

    auto = from_dataclass(Pix(torch.zeros(4, 3), "cat"), auto_batch_size=True)
    assert auto.batch_size == (4, 3) and type(auto).__name__ == "Pix_tc"
    nocast = from_dataclass(Obs, nocast=True)(pixels=torch.zeros(1), label="x", count=5)
    assert nocast.count == 5 and isinstance(nocast.count, int)
    via_td = TensorDict.from_dataclass(instance, as_tensorclass=True)
    assert tensordict.is_tensorclass(via_td) and via_td.label == "dog"
    target = from_dataclass(instance, dest_cls=ObsTC)
    assert type(target) is ObsTC


def test_to_tensordict_converts_nested_classes(nested):
    td = nested.to_tensordict()
    assert type(td) is TensorDict and type(td["child"]) is TensorDict
    assert ("child", "X") in td.keys(True)
    assert td["X"] is not nested.X and torch.equal(td["X"], nested.X)


def test_autograd_through_fields():
    x = torch.randn(3, requires_grad=True)
    b = make_batch()
    b.obs = x.expand(4, 3) * 2
    b.obs.sum().backward()
    assert torch.allclose(x.grad, torch.full((3,), 8.0))


def test_pad_sequence_of_instances():
    class Sample(TensorClass):
        a: torch.Tensor
        b: str

    first = Sample(a=torch.tensor([1, 1]), b="asd")
    second = Sample(a=torch.tensor([2]), b="efg")
    padded = tensordict.pad_sequence([first, second])
    assert type(padded) is Sample and padded.batch_size == (2,)
    assert padded.a.tolist() == [[1, 1], [2, 0]] and padded.b == ["asd", "efg"]


def test_to_dict_and_from_dict_instance_keep_classes_and_casts():
    class Node(TensorClass, autocast=True):
        x: torch.Tensor = None
        y: int = None
        z: Node | None = None

    td = TensorDict(a=torch.randn(()), b=Node(x=torch.zeros(()), y=1, z=Node(y=2)))
    as_dict = td.to_dict()
    assert as_dict["b"]["y"] == 1 and as_dict["b"]["z"] == {"y": 2}
    rebuilt = td.from_dict_instance(as_dict, auto_batch_size=True)
    node = rebuilt["b"]
    assert type(node) is Node and type(node.z) is Node
    assert isinstance(node.y, int) and node.z.y == 2 and isinstance(node.x, torch.Tensor)


def test_extend_a_lazily_stacked_instance(nested):
    lazy = lazy_stack([nested[0], nested[1]])
    lazy.extend([nested[2]])
    assert type(lazy) is Nested and lazy.batch_size == (3, 4)
    assert torch.equal(lazy[2].X, nested.X[2])
    with pytest.raises(TypeError, match="lazily stacked"):
        nested.extend([nested[0]])


@tensorclass
class _Node:
    x: torch.Tensor
    child: Any = None


def test_assert_close_compares_instances_holding_ragged_lazy_stacks_member_by_member():
    # TorchRL's MCTS trees: a node holds a lazy stack of children of other shapes
    kids = lazy_stack([_Node(x=torch.zeros(2)), _Node(x=torch.zeros(3))])
    root = _Node(x=torch.ones(1), child=kids)
    assert tensordict.assert_close(root, root.clone())
    assert tensordict.assert_close(root, root._tensordict)  # an instance against its data
    other = root.clone()
    other.child[1].x += 1
    with pytest.raises(AssertionError, match="key \\('child', 'x'\\) does not match"):
        tensordict.assert_close(root, other)
    assert root.child[1].x.sum() == 0  # the inputs are unchanged


def test_a_non_tensor_field_of_a_ragged_lazy_stack_of_instances_reads_per_member():
    # TorchRL's MCTS trees read a weakref field through lazy stacks of nodes of other sizes
    first, second = _Node(x=torch.zeros(2)), _Node(x=torch.zeros(3))
    parents = [weakref.ref(first), weakref.ref(second)]
    a = _Node(x=torch.zeros(2), child=NonTensorStack(parents[0], parents[0]), batch_size=[2])
    b = _Node(x=torch.zeros(3), child=parents[1], batch_size=[3])
    stack = lazy_stack([a, b])
    assert type(stack) is _Node and stack.batch_size == (2, -1)
    refs = stack.child  # one list per member, each value of the member's batch size
    assert [len(r) for r in refs] == [2, 3]
    assert refs[0][1]() is first and all(r() is second for r in refs[1])
    assert stack[1].child() is second  # an int along the stack: the member
    with pytest.raises(RuntimeError, match="ragged NonTensorStack"):
        stack._tensordict.get("child").reshape(-1)
