"""Making tensorclasses: both forms, the options, the generated constructor, bad input."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, ClassVar

import numpy as np
import pytest
import torch
from tc_helpers import Batch, Nested, make_batch

import tensordict
from tensordict import TensorClass, TensorCollection, TensorDict, TensorDictBase, tensorclass


def test_decorator_and_base_class_give_the_same_behaviour():
    @tensorclass
    class Dec:
        obs: torch.Tensor
        label: str = "x"

    class Sub(TensorClass):
        obs: torch.Tensor
        label: str = "x"

    for cls in (Dec, Sub):
        obj = cls(obs=torch.zeros(3, 2), batch_size=[3])
        assert obj.obs.shape == (3, 2) and obj.label == "x"
        assert obj.batch_size == torch.Size([3]) and obj.device is None
        assert tensordict.is_tensorclass(cls) and tensordict.is_tensorclass(obj)
        assert isinstance(obj, (TensorCollection, TensorDictBase))
        assert dataclasses.is_dataclass(obj)
        assert [f.name for f in cls.fields()] == ["obs", "label"]
    assert not tensordict.is_tensorclass(TensorClass)
    assert not tensordict.is_tensorclass(TensorDict())


def test_decorated_class_keeps_its_name_methods_and_instances():
    class Plain:
        obs: torch.Tensor

        def double(self) -> torch.Tensor:
            return self.obs * 2

    Made = tensorclass(Plain)
    obj = Made(obs=torch.ones(2), batch_size=[2])
    assert Made.__name__ == Made.__qualname__.rsplit(".", 1)[-1] == "Plain"
    assert isinstance(obj, Plain) and issubclass(Made, TensorClass)
    assert torch.equal(obj.double(), torch.full((2,), 2.0))


def test_tensorclass_module_is_the_decorator():
    @tensordict.tensorclass(nocast=True)
    class Count:
        n: int

    assert Count(n=3).n == 3 and Count._nocast


def test_signature_lists_fields_then_keywords():
    params = inspect.signature(Batch).parameters
    assert list(params) == ["obs", "reward", "info", "label", "batch_size", "device", "names"]
    assert params["label"].default == "train"
    assert params["batch_size"].kind is inspect.Parameter.KEYWORD_ONLY


def test_positional_and_keyword_arguments():
    obs, reward = torch.randn(2, 3), torch.randn(2, 1)
    info = TensorDict(step=torch.arange(2), batch_size=[2])
    a = Batch(obs, reward, info, "eval", batch_size=[2])
    b = Batch(obs=obs, reward=reward, info=info, label="eval", batch_size=[2])
    assert a.obs is obs and b.obs is obs and a.label == b.label == "eval"


def test_missing_field_and_unknown_keyword_raise_type_error():
    with pytest.raises(TypeError, match="missing 2 required positional arguments"):
        Batch(obs=torch.zeros(2, 3), batch_size=[2])
    with pytest.raises(TypeError, match="unexpected keyword argument 'rewards'"):
        Batch(obs=torch.zeros(2, 3), reward=torch.zeros(2, 1), info=None, rewards=1)


def test_wrong_shape_names_the_field_and_both_shapes():
    with pytest.raises(RuntimeError, match=r"field 'reward' of Batch.*\(3, 1\).*batch_size=\(4,\)"):
        Batch(obs=torch.zeros(4, 3), reward=torch.zeros(3, 1), info=None, batch_size=[4])


def test_wrong_shaped_assignment_leaves_the_instance_unchanged(batch):
    before = batch.obs
    with pytest.raises(
        RuntimeError, match=r"batch dimension mismatch for field 'obs'.*\(5, 3\).*\(4,\)"
    ):
        batch.obs = torch.zeros(5, 3)
    assert batch.obs is before
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        batch.info = TensorDict(step=torch.arange(2), batch_size=[2])
    assert batch.info.batch_size == (4,)


def test_defaults_default_factory_and_none():
    class WithDefaults(TensorClass):
        x: torch.Tensor = None
        y: torch.Tensor = dataclasses.field(default_factory=lambda: torch.ones(3, 2))
        meta: dict = dataclasses.field(default_factory=dict)

    a, b = WithDefaults(batch_size=[3]), WithDefaults(batch_size=[3])
    assert a.x is None and "x" not in a._tensordict.keys()
    assert torch.equal(a.y, torch.ones(3, 2)) and a.y is not b.y
    assert a.meta == {} and a.meta is not b.meta
    a.x = torch.zeros(3)
    assert torch.equal(a.x, torch.zeros(3))
    a.x = None
    assert a.x is None and "x" not in a._tensordict.keys()


def test_classvar_and_initvar():
    class WithVars(TensorClass):
        x: torch.Tensor
        scale: dataclasses.InitVar[float] = 1.0
        kind: ClassVar[str] = "constant"

        def __post_init__(self, scale: float) -> None:
            self.x = self.x * scale

    obj = WithVars(torch.ones(2), scale=3.0, batch_size=[2])
    assert torch.equal(obj.x, torch.full((2,), 3.0))
    assert WithVars.kind == "constant" and "kind" not in WithVars.__expected_keys__
    assert [f.name for f in WithVars.fields()] == ["x"]


def test_post_init_runs_on_construction_and_rebuilds():
    calls = []

    class Checked(TensorClass):
        x: torch.Tensor

        def __post_init__(self) -> None:
            calls.append(self.batch_size)
            if (self.x < 0).any():
                raise ValueError("negative x")

    obj = Checked(x=torch.ones(4), batch_size=[4])
    obj[:2]
    assert calls == [torch.Size([4]), torch.Size([2])]
    with pytest.raises(ValueError, match="negative x"):
        Checked(x=-torch.ones(2), batch_size=[2])
    with pytest.raises(ValueError, match="negative x"):
        Checked.from_tensordict(TensorDict(x=-torch.ones(2), batch_size=[2]))

    class Skipping(TensorClass, skip_post_init_on_rebuild=True):
        x: torch.Tensor

        def __post_init__(self) -> None:
            calls.append("skipping")

    calls.clear()
    Skipping(x=torch.ones(4), batch_size=[4])[:2].clone()
    assert calls == ["skipping"]


def test_inheritance_adds_fields_and_keeps_options():
    class Base(TensorClass, nocast=True):
        a: int

    class Child(Base):
        b: torch.Tensor

    obj = Child(a=1, b=torch.zeros(2), batch_size=[2])
    assert [f.name for f in Child.fields()] == ["a", "b"]
    assert obj.a == 1 and isinstance(obj.a, int) and Child._nocast
    assert isinstance(obj[0], Child) and obj[0].a == 1


def test_options_in_brackets_keywords_and_decorator():
    class A(TensorClass["nocast", "frozen"]):
        n: int

    class B(TensorClass, nocast=True, frozen=True):
        n: int

    @tensorclass(nocast=True, frozen=True)
    class C:
        n: int

    for cls in (A, B, C):
        assert cls._nocast and cls._frozen and not cls._autocast
        assert cls(n=1).n == 1
    assert not TensorClass._nocast and not TensorClass._frozen
    assert TensorClass["nocast"] is TensorClass["nocast"]


def test_exclusive_and_unknown_options():
    with pytest.raises(TypeError, match="exclusive"):

        @tensorclass(autocast=True, nocast=True)
        class Both:
            x: torch.Tensor

    with pytest.raises(TypeError, match="tensor_only"):

        class Also(TensorClass, tensor_only=True, autocast=True):
            x: torch.Tensor

    with pytest.raises(TypeError, match="unknown tensorclass option"):

        class Unknown(TensorClass, fast=True):
            x: torch.Tensor

    with pytest.raises(TypeError, match="option names"):
        TensorClass["fast"]


def test_kw_only_fields():
    class Kw(TensorClass, kw_only=True):
        a: torch.Tensor
        b: torch.Tensor

    assert Kw(a=torch.zeros(1), b=torch.ones(1)).b.item() == 1.0
    with pytest.raises(TypeError, match="positional"):
        Kw(torch.zeros(1), torch.ones(1))


def test_reserved_names_need_shadow():
    for name in ("reshape", "batch_size", "names", "device", "sum"):
        with pytest.raises(AttributeError, match=f"Attribute name {name} can't be used"):
            type("Bad", (TensorClass,), {"__annotations__": {name: torch.Tensor}})

    class Shadowing(TensorClass, shadow=True):
        batch_size: Any
        sum: torch.Tensor

    obj = Shadowing(batch_size=0, sum=torch.ones(3))
    assert obj.batch_size == 0 and torch.equal(obj.sum, torch.ones(3))
    assert obj._tensordict.batch_size == torch.Size([])
    obj.batch_size = 1
    assert obj.batch_size == 1
    assert isinstance(obj.clone(), Shadowing) and obj.clone().batch_size == 1


def test_data_and_grad_are_allowed_field_names():
    class Holder(TensorClass):
        data: torch.Tensor

    holder = Holder(data=torch.ones(2), batch_size=[2])
    assert torch.equal(holder.data, torch.ones(2))


def test_frozen_instances_refuse_writes():
    @tensorclass(frozen=True)
    class Point:
        x: torch.Tensor

    p = Point(x=torch.zeros(2), batch_size=[2])
    assert p.is_locked and hash(p) == hash(p) and {p: 1}[p] == 1
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'x'"):
        p.x = torch.ones(2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        del p.x
    with pytest.raises(RuntimeError, match="'x': Point is frozen"):  # a lock error
        p.set("x", torch.ones(2))
    for name, value in (("batch_size", []), ("names", ["n"])):
        with pytest.raises(dataclasses.FrozenInstanceError, match=f"field '{name}'"):
            setattr(p, name, value)
    assert torch.equal(p.x, torch.zeros(2)) and p.batch_size == (2,) and p.names == [None]
    p.set_("x", torch.ones(2))  # in place: allowed, as on a locked tensordict
    assert torch.equal(p.x, torch.ones(2))
    with pytest.raises(TypeError, match="unhashable"):
        hash(make_batch())
    with pytest.raises(TypeError, match="frozen tensorclass cannot subclass"):

        class Frozen(Batch, frozen=True):
            pass


def test_device_and_names_keywords():
    obj = Nested(X=torch.zeros(3, 4), z="a", batch_size=[3, 4], device="cpu", names=["env", "t"])
    assert obj.device == torch.device("cpu") and obj.names == ["env", "t"]
    assert obj[0].names == ["t"]
    with pytest.raises(RuntimeError, match="device cannot be set"):
        obj.device = "cpu"
    obj.batch_size = [3]
    assert obj.batch_size == torch.Size([3]) and isinstance(obj.batch_size, torch.Size)


def test_setting_an_unknown_attribute_raises():
    b = make_batch()
    with pytest.raises(AttributeError, match="Cannot set the attribute 'foo'.*obs"):
        b.foo = 1
    with pytest.raises(AttributeError, match="Cannot set the attribute 'newkey'"):
        b.set("newkey", torch.zeros(4))
    assert "foo" not in b._tensordict.keys() and "newkey" not in b._tensordict.keys()


def test_the_base_classes_cannot_be_instantiated():
    from tensordict import TypedTensorDict

    with pytest.raises(NotImplementedError, match="TensorClass is a base class"):
        TensorClass(batch_size=[3])
    with pytest.raises(NotImplementedError, match="base class"):
        TensorClass["frozen"]()
    with pytest.raises(TypeError, match="TypedTensorDict is a base class"):
        TypedTensorDict()

    class NoFields(TensorClass):
        pass

    assert NoFields(batch_size=[3]).batch_size == (3,)


def _tensor_only_and_typed():
    from tensordict import TypedTensorDict

    class Only(TensorClass["tensor_only"]):
        x: torch.Tensor
        y: torch.Tensor | None = None

    class Typed(TypedTensorDict):
        x: torch.Tensor
        y: torch.Tensor | None = None

    return Only, Typed


@pytest.mark.parametrize("kind", ["tensor_only", "typed"])
def test_tensor_field_refuses_a_string_at_construction_and_assignment(kind):
    Only, Typed = _tensor_only_and_typed()
    cls = Only if kind == "tensor_only" else Typed
    with pytest.raises(TypeError, match=r"\.x is annotated Tensor.*got a str \('abc'\)"):
        cls(x="abc", batch_size=[])
    with pytest.raises(TypeError, match=r"\.y is annotated .*got a str"):
        cls(x=torch.zeros(3), y="abc", batch_size=[3])
    obj = cls(x=torch.zeros(3), batch_size=[3])
    x = obj.x
    writes = [
        lambda: setattr(obj, "x", "abc"),
        lambda: obj.set("x", "abc"),
        lambda: obj.set("y", ["a", "b", "c"]),  # strings one per row: a NonTensorStack
        lambda: obj.update({"x": "abc"}),
        lambda: obj.update(TensorDict(y="abc")),
    ]
    for write in writes:
        with pytest.raises(TypeError, match=r"\.[xy] is annotated .*got a (str|list)"):
            write()
        assert obj.x is x and obj.get("y") is None and sorted(obj.keys()) == ["x"]
    # values that become tensors are fine
    obj.x = [1.0, 2.0, 3.0]
    obj.y = np.arange(3)
    assert obj.x.tolist() == [1.0, 2.0, 3.0] and obj.y.tolist() == [0, 1, 2]
    with pytest.raises(TypeError, match=r"\.x is annotated Tensor"):  # data from outside
        cls.from_tensordict(TensorDict(x="abc"))


def test_a_plain_tensorclass_keeps_accepting_a_string_in_a_tensor_field():
    # the reference's own tests build such instances (autocast off: nothing is cast)
    @tensorclass
    class Loose:
        y: torch.Tensor

    assert Loose(y="a string!").y == "a string!"


@pytest.mark.parametrize("source", ["dict", "tensordict"])
def test_from_dict_and_from_tensordict_refuse_unknown_keys(source):
    Only, Typed = _tensor_only_and_typed()
    for cls in (Batch, Only, Typed):
        data = {"x": torch.zeros(3), "obs": torch.zeros(3), "z": torch.zeros(3)}
        data = {k: v for k, v in data.items() if k != ("obs" if cls is not Batch else "x")}
        td = TensorDict(data, batch_size=[3])
        before = dict(td.items())
        with pytest.raises(ValueError, match=rf"'z' is not a field of {cls.__name__}, whose"):
            if source == "dict":
                cls.from_dict(data, batch_size=[3])
            else:
                cls.from_tensordict(td)
        assert dict(td.items()) == before  # the tensordict given is not changed
    with pytest.raises(ValueError, match="'extra' is not a field of Batch"):
        Batch.from_tensordict(TensorDict(obs=torch.zeros(2)), non_tensordict={"extra": 1})


def test_missing_fields_from_dict_and_from_tensordict():
    Only, Typed = _tensor_only_and_typed()
    # a tensorclass reads a field left out as None (as its constructor allows x=None, and
    # as the reference): the data round-trips
    partial = Only.from_dict({"y": torch.ones(2)}, batch_size=[2])
    assert partial.x is None and torch.equal(partial.y, torch.ones(2))
    assert Only.from_tensordict(partial.to_tensordict()).x is None
    # a typed tensordict needs its required fields, as its constructor
    with pytest.raises(TypeError, match=r"Typed.from_dict\(\) missing required field\(s\): x"):
        Typed.from_dict({"y": torch.ones(2)}, batch_size=[2])
    with pytest.raises(TypeError, match=r"missing required field\(s\): x"):
        Typed.from_tensordict(TensorDict(y=torch.ones(2)))
    full = Typed.from_dict({"x": torch.zeros(2)}, auto_batch_size=True)
    assert full.batch_size == (2,) and full.get("y") is None
