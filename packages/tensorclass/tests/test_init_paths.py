"""The generated constructor checks values in one pass (non-tensor values validated in
place afterwards) and hands what it does not handle to the generic path: both give the
same instances and the same errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from tensordict import NonTensorData, TensorClass, TensorDict


class Labeled(TensorClass):
    a: torch.Tensor
    b: torch.Tensor
    label: str = "x"


class Strict(TensorClass, tensor_only=True):
    a: torch.Tensor
    b: torch.Tensor


def _generic(cls, *values, batch_size=None, device=None, names=None):
    """An instance built by the generic body (what a subclass's own __init__ reaches)."""
    obj = object.__new__(cls)
    obj._init_fields(values, batch_size, device, names)
    return obj


def test_non_tensor_default_is_stored_in_field_order():
    obj = Labeled(a=torch.zeros(3, 2), b=torch.ones(3), batch_size=[3])
    ref = _generic(Labeled, torch.zeros(3, 2), torch.ones(3), "x", batch_size=[3])
    assert list(obj._tensordict.keys()) == ["a", "b", "label"] == list(ref._tensordict.keys())
    assert type(obj._tensordict._tensordict["label"]) is NonTensorData
    assert obj.label == ref.label == "x" and obj.batch_size == (3,)


def test_names_device_and_numbers_as_the_generic_path():
    obj = Labeled(a=torch.zeros(3, 2), b=np.ones(3), label="y", batch_size=[3], device="cpu",
                  names=["t"])  # fmt: skip
    assert obj.device == torch.device("cpu") and obj.names == ["t"]
    assert obj.label == "y" and type(obj.b) is torch.Tensor and obj.b.shape == (3,)


def test_errors_tensors_first_then_values_then_tensor_typed():
    with pytest.raises(RuntimeError, match="'b'"):  # the tensor error, though label is bad too
        Labeled(a=torch.zeros(3), b=torch.zeros(2), label=torch.zeros(2).numpy(), batch_size=[3])
    with pytest.raises(TypeError, match=r"Strict\.a"):
        Strict(a="text", b=torch.zeros(3), batch_size=[3])
    with pytest.raises(RuntimeError, match="'b'"):
        Strict(a="text", b=torch.zeros(2), batch_size=[3])


def test_tensordict_and_dict_values_take_the_generic_path():
    obj = Labeled(a={"x": torch.zeros(3)}, b=TensorDict(y=torch.ones(3), batch_size=[3]),
                  batch_size=[3])  # fmt: skip
    assert type(obj.a) is TensorDict and torch.equal(obj.b["y"], torch.ones(3))


def test_default_factory_runs_once_per_instance():
    calls = []

    class WithFactory(TensorClass):
        a: torch.Tensor
        extra: torch.Tensor = dataclasses.field(
            default_factory=lambda: calls.append(1) or torch.ones(2)
        )

    obj = WithFactory(a=torch.zeros(2), batch_size=[2])
    assert calls == [1] and torch.equal(obj.extra, torch.ones(2))


def test_a_tensor_field_given_a_string_reads_it_back():
    class Loose(TensorClass):
        a: torch.Tensor

    obj = Loose(a="text", batch_size=[])
    assert obj.a == "text"
    obj2 = Loose(a=torch.zeros(2), batch_size=[2])
    assert torch.equal(obj2.a, torch.zeros(2))


def test_a_subclass_init_calling_super():
    class Child(Labeled):
        def __init__(self, a, b):
            super().__init__(a=a, b=b, label="child", batch_size=[a.shape[0]])

    obj = Child(torch.zeros(2), torch.ones(2))
    assert obj.label == "child" and type(obj) is Child and obj[1:].batch_size == (1,)


def test_reserved_names_cover_what_the_generated_constructor_uses():
    """Every local and global name of the generated fast constructor, but the fields' own,
    is in the list that sends a class with such a field name to the plain constructor."""
    from tensordict.tensorclass._init import _INIT_NAMES

    class Probe(TensorClass):
        a: torch.Tensor
        b: torch.Tensor = None
        c: str = "x"

    code = Probe.__init__.__code__
    assert code.co_nlocals > code.co_argcount + code.co_kwonlyargcount  # the fast body
    used = set(code.co_varnames) | (set(code.co_names) & set(Probe.__init__.__globals__))
    own = {"a", "b", "c"} | {n for n in used if n.startswith(("_d_", "_f_"))}
    assert used - own <= _INIT_NAMES, sorted(used - own - _INIT_NAMES)


@pytest.mark.parametrize("name", ["_source", "_bs", "_td", "_Tensor", "_st"])
def test_a_field_named_like_a_constructor_name(name):
    """Such a class gets the plain constructor: same instance as the generic body."""
    from tensordict import tensorclass

    cls = tensorclass(
        type(f"F{name}", (), {"__annotations__": {name: torch.Tensor, "b": torch.Tensor}})
    )
    code = cls.__init__.__code__  # the plain constructor: no local but its parameters
    assert code.co_nlocals == code.co_argcount + code.co_kwonlyargcount
    x, y = torch.arange(3.0), torch.ones(3, 2)
    obj = cls(x, y, batch_size=[3])
    ref = _generic(cls, x, y, batch_size=[3])
    assert torch.equal(getattr(obj, name), x) and torch.equal(obj.b, y)
    assert obj.batch_size == ref.batch_size == (3,)
    assert list(obj._tensordict.keys()) == list(ref._tensordict.keys()) == [name, "b"]
    with pytest.raises(RuntimeError, match=name):  # the shape check names the field
        cls(torch.zeros(2), y, batch_size=[3])
