"""The message layer in one process: encoding, checks, and what repeated transfers reuse."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.distributed import _buffers, _message

CPU = torch.device("cpu")


def sample(value: float = 1.0) -> TensorDict:
    return TensorDict(
        {
            "a": torch.full((3, 2), value),
            "n": {"b": torch.arange(3) + int(value)},
            "s": f"v{value}",
        },
        [3],
    )


def transfer(src, template):
    """What a receive does once the bytes have arrived."""
    desc, data, meta = _message.pack(src, CPU)
    hit = _message.cached(template, desc, data.numel())
    if hit is not None:
        hit.buffer.copy_(data)
        hit.finish()
        return "cached"
    landing = _message.Landing(template, _message.parse(desc, "test"), data.numel(), CPU)
    assert not landing.problems, landing.problems
    landing.buffer.copy_(data)
    landing.finish(template, desc)
    _message.release(data, src)
    return "checked"


def test_round_trip_nested_lazy_non_tensor():
    src = TensorDict(
        {"ls": LazyStackedTensorDict(sample(1.0), sample(2.0).exclude("s").set("s", "w"))}, [2, 3]
    )
    desc, data, meta = _message.pack(src, CPU)
    out = _message.unpack(_message.parse(desc, "test"), data.clone())
    assert isinstance(out["ls"], LazyStackedTensorDict)
    assert (out == src).all() and out["ls"][1]["s"] == "w"
    assert out.is_consolidated()


def test_repeated_transfers_reuse_and_stay_correct():
    src, template = sample(1.0), sample(0.0)
    assert transfer(src, template) == "checked"
    assert (template == sample(1.0)).all()
    src["a"].fill_(5.0)  # in place: same layout, the next transfer reuses everything
    assert transfer(src, template) == "cached"
    assert (template["a"] == 5.0).all()
    src["a"] = torch.full((3, 2), 7.0)  # a new leaf object: the sender lays out again
    assert transfer(src, template) == "cached"  # ... but the description is the same
    assert (template["a"] == 7.0).all()
    src.set_non_tensor("s", "changed")  # a new description: checked again
    assert transfer(src, template) == "checked"
    assert template["s"] == "changed"
    template["a"] = torch.zeros(3, 2)  # the receiver's leaf replaced: checked again
    assert transfer(src, template) == "checked"
    assert (template["a"] == 7.0).all()


def test_mismatch_is_reported_and_nothing_written():
    template = sample(0.0).set("a", torch.zeros(3, 4))
    desc, data, _ = _message.pack(sample(1.0), CPU)
    landing = _message.Landing(template, _message.parse(desc, "test"), data.numel(), CPU)
    assert landing.problems == [
        "'a': expected a tensor of shape (3, 4) and dtype torch.float32, got a tensor of "
        "shape (3, 2) and dtype torch.float32"
    ]
    assert (template["a"] == 0).all()


def test_consolidated_sender_is_sent_from_its_own_buffer():
    src = sample(1.0).consolidate()
    _, data, _ = _message.pack(src, CPU)
    assert data.untyped_storage().data_ptr() == src["a"].untyped_storage().data_ptr()
    _message.release(data, src)  # not given to the pool: it is the tensordict's own
    assert all(
        b.untyped_storage().data_ptr() != data.untyped_storage().data_ptr() for b in _buffers._free
    )


def test_tensorclass_names_resolve_only_from_imported_modules(monkeypatch):
    module = types.ModuleType("td_test_fake_module")

    class Fake:
        _is_tensorclass = True

        @classmethod
        def _from_tensordict(cls, td):
            obj = cls()
            obj.td = td
            return obj

    Fake.__module__, Fake.__qualname__ = module.__name__, "Fake"
    module.Fake = Fake
    monkeypatch.setitem(sys.modules, module.__name__, module)
    assert _message.resolve_tensorclass("td_test_fake_module:Fake") is Fake
    assert _message.resolve_tensorclass("td_test_fake_module.Fake") is Fake
    wrapped = _message.wrap(sample(), "td_test_fake_module:Fake")
    assert isinstance(wrapped, Fake) and (wrapped.td == sample()).all()
    with pytest.raises(ValueError, match="never imports code"):
        _message.resolve_tensorclass("some_module_never_imported_here:Thing")
    with pytest.raises(ValueError, match="does not name a tensorclass"):
        _message.resolve_tensorclass("sys:path")
