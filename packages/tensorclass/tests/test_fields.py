"""Field values: tensors, nested collections, non-tensor data, casting options."""

from __future__ import annotations

from collections import UserDict
from typing import Any

import numpy as np
import pytest
import torch
from tc_helpers import Batch, Nested, make_batch

from tensordict import (
    MetaData,
    NonTensorData,
    NonTensorStack,
    TensorClass,
    TensorDict,
    lazy_stack,
    set_list_to_stack,
    tensorclass,
)


def test_fields_are_the_stored_entries(batch):
    assert batch.obs is batch._tensordict["obs"]
    assert batch.info is batch._tensordict["info"]
    stored = batch._tensordict._tensordict["label"]
    assert isinstance(stored, NonTensorData) and stored.data == "train"
    assert batch.label == "train" and batch.get("label") == "train"
    assert batch._non_tensordict == {}


def test_nested_tensorclass_keeps_its_class_and_data(nested):
    child = nested.child
    assert isinstance(child, Nested) and child.z == "inner"
    assert nested.get("child")._tensordict is child._tensordict
    assert torch.equal(nested.get(("child", "X")), child.X)
    assert nested.get(("child", "z")) == "inner"
    nested.set(("child", "z"), "renamed")
    assert child.z == "renamed"


def test_field_write_through_nested_instances(nested):
    nested.child.X = torch.zeros(3, 4, 5)
    assert torch.equal(nested.get(("child", "X")), torch.zeros(3, 4, 5))


def test_non_tensor_values_stack_without_silent_collapse():
    a = Batch(obs=torch.zeros(2, 3), reward=torch.zeros(2, 1), info=None, label="a", batch_size=[2])
    b = a.clone()
    b.label = "b"
    same = Batch.stack([a, a.clone()])  # identical values are stacked too, as the reference
    assert same.label == [["a", "a"], ["a", "a"]] and same[1, 0].label == "a"
    mixed = Batch.stack([a, b])
    stored = mixed._tensordict._tensordict["label"]
    assert isinstance(stored, NonTensorStack)
    assert mixed.label == [["a", "a"], ["b", "b"]]
    assert mixed[1].label == "b" and mixed[:, 0].label == ["a", "b"]


def test_optional_and_any_fields():
    class Opt(TensorClass):
        x: torch.Tensor | None = None
        anything: Any = None

    obj = Opt(batch_size=[2])
    assert obj.x is None and obj.anything is None
    obj.anything = torch.ones(2)
    assert isinstance(obj.anything, torch.Tensor)
    obj.anything = "text"
    assert obj.anything == "text"
    obj.anything = TensorDict(a=torch.zeros(2), batch_size=[2])
    assert isinstance(obj.anything, TensorDict)


def test_tensor_field_holding_a_string_reads_the_string():
    class Loose(TensorClass):
        y: torch.Tensor

    obj = Loose(y="a string!")
    assert obj.y == "a string!"
    obj.y = torch.ones(())
    assert isinstance(obj.y, torch.Tensor)
    assert Loose(y=torch.zeros(())).y.item() == 0.0


def test_default_casting_rules():
    class Default(TensorClass):
        n: int
        arr: Any
        things: list
        mapping: dict

    obj = Default(n=3, arr=np.arange(2), things=[1, 2], mapping={"a": 1})
    assert isinstance(obj.n, torch.Tensor) and obj.n.item() == 3
    assert isinstance(obj.arr, torch.Tensor) and obj.arr.tolist() == [0, 1]
    assert obj.mapping == {"a": 1}
    # a list follows core's list rule, as in the reference: numbers become a tensor,
    # other values one per batch element (checked against the batch size)
    assert isinstance(obj.things, torch.Tensor) and obj.things.tolist() == [1, 2]

    class Labels(TensorClass):
        things: list

    labels = Labels(things=["a", "b"], batch_size=[2])
    assert list(labels.things) == ["a", "b"] and labels[1].things == "b"
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        Labels(things=["a", "b", "c"], batch_size=[2])
    with pytest.warns(DeprecationWarning), set_list_to_stack(False):  # one value
        whole = Labels(things=["a", "b", "c"], batch_size=[2])
    assert whole.things == ["a", "b", "c"] and whole[0].things == ["a", "b", "c"]


def test_nocast_keeps_numbers_and_arrays():
    @tensorclass(nocast=True)
    class Raw:
        a: Any

    assert Raw(1).a == 1 and isinstance(Raw(1).a, int)
    assert isinstance(Raw(False).a, bool)
    arr = np.array([1, 2])
    assert Raw(arr).a is arr
    assert isinstance(Raw(torch.ones(2)).a, torch.Tensor)


def test_autocast_converts_to_the_annotation():
    class Inner(TensorClass, autocast=True):
        t: torch.Tensor
        td: TensorDict

    class Cast(TensorClass, autocast=True):
        t: torch.Tensor
        i: int
        s: str
        f: float
        arr: np.ndarray
        td: TensorDict
        inner: Inner
        anything: Any
        either: Inner | None = None

    obj = Cast(
        t=1,
        i=torch.ones(()),
        s=2,
        f=1,
        arr=3,
        td={"a": 0.0},
        inner={"t": 2, "td": {"b": torch.zeros(())}},
        anything=1,
        either={"t": 1},
    )
    assert isinstance(obj.t, torch.Tensor) and obj.t.item() == 1
    assert obj.i == 1 and isinstance(obj.i, int)
    assert obj.s == "2" and obj.f == 1.0 and isinstance(obj.f, float)
    assert isinstance(obj.arr, np.ndarray) and obj.arr.tolist() == 3
    assert isinstance(obj.td, TensorDict) and obj.td["a"].item() == 0.0
    assert isinstance(obj.inner, Inner) and isinstance(obj.inner.td, TensorDict)
    assert obj.inner.t.item() == 2
    assert isinstance(obj.anything, torch.Tensor)
    assert obj.either == {"t": 1}  # unions are not converted
    with pytest.raises(TypeError, match="cannot cast a str to a tensor"):
        obj.t = "text"
    assert obj.t.item() == 1


def test_autocast_nested_mapping_fills_missing_fields_with_none():
    class Node(TensorClass, autocast=True):
        t: torch.Tensor
        child: Node | None = None
        other: Node = None

    obj = Node(t=torch.zeros(()), other={"t": torch.ones(())})
    assert isinstance(obj.other, Node) and obj.other.child is None and obj.other.other is None


def test_tensor_only():
    class Only(TensorClass, tensor_only=True):
        a: torch.Tensor
        td: TensorDict
        raw: NonTensorData = None
        c: torch.Tensor | None = None

    locked = TensorDict(x=torch.ones(())).lock_()
    obj = Only(a=1, td=UserDict({"nested": locked, "u": UserDict({"t": torch.zeros(())})}))
    assert isinstance(obj.a, torch.Tensor) and obj.c is None
    assert isinstance(obj.td, TensorDict) and obj.td["nested"] is locked
    assert isinstance(obj.td["u"], TensorDict)
    value = UserDict({"k": "v"})
    obj.raw = value
    assert isinstance(obj.raw, NonTensorData) and obj.raw.data is value
    for bad in (Any, str, "torch.Tensor | str"):
        with pytest.raises(TypeError, match="tensor_only requires"):
            type("Bad", (TensorClass,), {"__annotations__": {"b": bad}}, tensor_only=True)
    type("Legacy", (TensorClass,), {"__annotations__": {"b": torch.IntTensor}}, tensor_only=True)


def test_delete_a_field(batch):
    del batch.obs
    assert "obs" not in batch._tensordict.keys()
    with pytest.raises(AttributeError, match="obs"):
        batch.obs
    batch.obs = torch.ones(4, 3)
    assert torch.equal(batch.obs, torch.ones(4, 3))
    assert make_batch().obs.shape == (4, 3)  # other instances unaffected


def test_user_properties_and_setattr_overrides():
    seen = []

    class WithProperty(TensorClass):
        a: torch.Tensor
        _c: Any = None

        @property
        def c(self) -> Any:
            return self._c

        @c.setter
        def c(self, value: Any) -> None:
            self._c = value

        def __setattr__(self, name: str, value: Any) -> None:
            seen.append(name)
            super().__setattr__(name, value)

    obj = WithProperty(a=torch.zeros(()))
    assert seen == ["a"]
    obj.c = "1"
    assert obj.c == "1" and obj._tensordict["_c"] == "1" and seen == ["a", "c", "_c"]


def test_metadata_field_reads_its_value():
    class Meta(TensorClass):
        info: MetaData

    obj = Meta(info=MetaData("abc"))
    assert obj.info == "abc"
    assert isinstance(obj._tensordict._tensordict["info"], MetaData)
    assert Meta.stack([obj, obj]).info == "abc"


def test_lazy_backed_instances_read_their_fields():
    a = Nested(X=torch.zeros(3), z="a", batch_size=[])
    b = Nested(X=torch.ones(3), z="b", batch_size=[])
    lazy = lazy_stack([a, b])
    assert type(lazy) is Nested and type(lazy._tensordict).__name__ == "LazyStackedTensorDict"
    assert torch.equal(lazy.X, torch.stack([a.X, b.X]))
    assert lazy.z == ["a", "b"] and lazy.child is None
    assert lazy[1].z == "b"
    # the class reads through descriptors from now on, dense instances included
    assert torch.equal(Nested(X=torch.ones(2), z="c", batch_size=[2]).X, torch.ones(2))
