"""``TensorDictBase`` carries the whole interface at run time: the methods every kind
shares are installed on it, the ones each kind implements its own way are declared on it
as placeholders, and every concrete kind of core defines them all (the contract)."""

from __future__ import annotations

from unittest import mock

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase, lazy_stack
from tensordict._base.installed import HOLDERS, SharedMethods
from tensordict._base.kind_methods import KIND_METHODS, KIND_PROPERTIES, is_placeholder
from tensordict._shared.install import INSTALLED

KINDS = (TensorDict, LazyStackedTensorDict)
#: the list interface of lazy stacks (``append``, ``insert`` …) is theirs alone
LAZY_ONLY = {"append", "extend", "extend_at", "get_nestedtensor", "hook_in", "hook_out",
             "insert", "valid_keys"}  # fmt: skip


def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def _resolved(cls: type, name: str) -> object:
    """The class attribute ``name`` of ``cls`` as the MRO finds it (properties too)."""
    return next(klass.__dict__[name] for klass in cls.__mro__ if name in klass.__dict__)


@pytest.mark.parametrize("cls", KINDS)
def test_every_public_method_of_a_kind_is_declared_on_the_base(cls):
    missing = _public(cls) - LAZY_ONLY - _public(TensorDictBase)
    assert not missing, f"{cls.__name__} has public names TensorDictBase lacks: {sorted(missing)}"


@pytest.mark.parametrize("cls", KINDS)
def test_every_kind_implements_every_kind_method(cls):
    left = [n for n in (*KIND_METHODS, *KIND_PROPERTIES) if is_placeholder(_resolved(cls, n))]
    assert not left, f"{cls.__name__} does not implement {left}"


def test_the_shared_methods_are_the_base_class_own():
    assert {"update_at_", "get_at", "set_at_", "state_dict", "pad", "consolidate"} <= set(INSTALLED)
    for name in INSTALLED:  # held by a class TensorDictBase derives from, not by a kind
        assert name in vars(SharedMethods) and name not in vars(TensorDictBase)
    # a dense tensordict uses them as they are; a lazy stack overrides a few hooks
    assert all(_resolved(TensorDict, n) is vars(SharedMethods)[n] for n in INSTALLED)
    overridden = {
        n for n in INSTALLED if _resolved(LazyStackedTensorDict, n) is not vars(SharedMethods)[n]
    }
    assert overridden == {"_plan_at", "entry_class", "get_item_shape", "to_padded_tensor"}


def test_the_base_class_own_dictionary_stays_small():
    """torch.compile guards a traced method through its class's dictionary, at a cost that
    grows with its size: the installed methods live in the holder classes."""
    assert len(vars(TensorDictBase)) < 150
    assert TensorDictBase.__mro__[1 : 1 + len(HOLDERS)] == HOLDERS


def test_patching_the_base_method_reaches_every_kind():
    # what TorchRL's tests do to check that replay-buffer writes go through update_at_
    calls = []
    original = TensorDictBase.update_at_

    def spy(self, *args, **kwargs):
        calls.append(type(self).__name__)
        return original(self, *args, **kwargs)

    dense = TensorDict(x=torch.zeros(4), batch_size=[4])
    lazy = lazy_stack([TensorDict(x=torch.zeros(2), batch_size=[2])] * 2)
    with mock.patch.object(TensorDictBase, "update_at_", spy):
        dense.update_at_({"x": torch.ones(())}, 1)
        lazy.update_at_({"x": torch.ones(())}, (0, 1))
    assert calls == ["TensorDict", "LazyStackedTensorDict"]
    assert dense["x"].tolist() == [0.0, 1.0, 0.0, 0.0]


def test_a_subclass_that_lacks_a_kind_method_says_so():
    class Partial(TensorDictBase):
        pass

    obj = Partial.__new__(Partial)
    with pytest.raises(NotImplementedError, match=r"Partial does not implement reshape\(\)"):
        obj.reshape(2)
    with pytest.raises(NotImplementedError, match=r"Partial does not implement select\(\)"):
        obj.select("a")
    # a missing property reads as an AttributeError too: hasattr stays safe
    assert not hasattr(obj, "names") and not hasattr(obj, "is_locked")
    with pytest.raises(NotImplementedError, match="names"):
        obj.names
