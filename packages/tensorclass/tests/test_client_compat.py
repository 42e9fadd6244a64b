"""``Cls.__getattr__`` of tensorclasses, which TorchRL reads at import to chain its own
attribute fallback (docs: compatibility)."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorClass, tensorclass


@tensorclass
class Decorated:
    x: torch.Tensor


class Subclassed(TensorClass):
    x: torch.Tensor


@pytest.mark.parametrize("cls", [Decorated, Subclassed])
def test_class_getattr_raises_attribute_error_for_an_instance(cls):
    obj = cls(x=torch.zeros(2), batch_size=[2])
    with pytest.raises(AttributeError, match=f"'{cls.__name__}' object has no attribute 'missing'"):
        cls.__getattr__(obj, "missing")
    # a class attribute that is missing is still an ordinary AttributeError
    assert not hasattr(cls, "missing") and getattr(cls, "missing", 3) == 3


def test_a_chained_fallback_as_torchrl_installs_it():
    @tensorclass
    class Trajectory:
        data: torch.Tensor

    original = Trajectory.__getattr__

    def fallback(self, name):
        try:
            return original(self, name)
        except AttributeError:
            if name.startswith("_"):
                raise
            return f"looked up {name}"

    Trajectory.__getattr__ = fallback
    traj = Trajectory(data=torch.ones(3), batch_size=[3])
    assert traj.reward == "looked up reward"  # the fallback runs for missing names
    assert torch.equal(traj.data, torch.ones(3))  # fields read as before
    assert traj[1:].batch_size == (2,)  # and the class keeps working
    with pytest.raises(AttributeError):
        traj._private
    # other tensorclasses are untouched
    assert not hasattr(Decorated(x=torch.zeros(1), batch_size=[1]), "reward")


def test_instances_have_no_instance_level_getattr():
    # field reads stay plain attribute reads: no __getattr__ on the class itself
    assert "__getattr__" not in vars(Decorated) and "__getattr__" not in vars(TensorClass)
