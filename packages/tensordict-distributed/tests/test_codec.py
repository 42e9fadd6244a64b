"""The message layer in one process: encoding, checks, and what repeated transfers reuse."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict._wire import wire as _wire
from tensordict.distributed import _buffers, _message, _parts

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
    """What a send and a receive do, the wire being a copy of each part into its target."""
    desc, parts, meta, pooled = _message.pack_parts(src, CPU)
    data_len = meta["nbytes"]
    hit = _message.cached(template, desc, data_len)
    if hit is not None:
        targets, kind = hit.parts, "cached"
    else:
        landing = _message.Landing(template, _message.parse(desc, "test"), data_len, CPU)
        assert not landing.problems, landing.problems
        targets, kind = landing.targets(_parts.segments(meta, data_len)), "checked"
        assert not landing.problems, landing.problems
    assert len(targets) == len(parts)
    for (target, copies), (data, fill) in zip(targets, parts):
        if fill is not None:
            fill()
        target.copy_(data)
        _wire.copy_pairs(copies)
    if hit is None:
        landing.finish(template, desc)
    if pooled is not None:
        _buffers.give(pooled)
    return kind


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
    _, parts, _, pooled = _message.pack_parts(src, CPU)
    assert len(parts) == 1 and pooled is None  # nothing from the pool to give back
    data, fill = parts[0]
    assert (
        fill is None and data.untyped_storage().data_ptr() == src["a"].untyped_storage().data_ptr()
    )


def _ptr(t):
    return t.untyped_storage().data_ptr() + t.storage_offset() * t.element_size()


def test_large_leaves_travel_on_their_own_without_copies():
    big = 1 << 19  # float32: 2 MiB, above LARGE_BYTES
    assert big * 4 >= _parts.LARGE_BYTES

    def make(value):
        return TensorDict(
            {
                "small": torch.full((3,), value),
                "big": torch.full((big,), value),
                "tail": {"x": torch.arange(4) + int(value), "y": torch.full((2, 2), value)},
                "big2": torch.full((big,), -value, dtype=torch.float64),
            },
            [],
        )

    src, template = make(1.0), make(0.0)
    desc, parts, meta, pooled = _message.pack_parts(src, CPU)
    # packed bytes, big, packed bytes, big2: the large leaves are sent from their memory
    assert len(parts) == 4 and len(meta["segments"]) == 4
    assert _ptr(parts[1][0]) == _ptr(src["big"]) and _ptr(parts[3][0]) == _ptr(src["big2"])
    assert parts[1][1] is None and parts[3][1] is None  # nothing to fill
    _buffers.give(pooled)
    # the receiver takes the large parts straight into its own (contiguous) leaves
    landing = _message.Landing(template, meta, meta["nbytes"], CPU)
    targets = landing.targets(_parts.segments(meta, meta["nbytes"]))
    assert _ptr(targets[1][0]) == _ptr(template["big"])
    assert _ptr(targets[3][0]) == _ptr(template["big2"])
    # "small" is alone in the first packed part: it lands directly too; only the two
    # leaves packed together ("tail") are copied out of the buffer
    copies = [pair for _, group in targets for pair in group]
    assert sorted(d.shape for d, _ in copies) == [torch.Size([2, 2]), torch.Size([4])]
    landing.discard()
    big_before, big2_before = template["big"], template["big2"]
    assert transfer(src, template) == "checked"
    assert (template == make(1.0)).all()
    assert template["big"] is big_before  # written in place
    src["big"].fill_(3.0)
    src["tail", "x"].fill_(9)
    assert transfer(src, template) == "cached"
    assert (template["big"] == 3.0).all() and (template["tail", "x"] == 9).all()
    assert (template["big2"] == -1.0).all() and template["big2"] is big2_before
    # a destination leaf that cannot take the bytes directly: received into the buffer
    odd = make(0.0).set("big", torch.zeros(2 * big)[::2])
    assert transfer(src, odd) == "checked"
    assert (odd["big"] == 3.0).all() and (odd["small"] == 1.0).all()
    with pytest.raises(ValueError, match="segments"):
        _parts.segments({"segments": [[0, 8], [4, 16]]}, 16)  # overlapping parts


def test_a_leaf_given_new_memory_in_place_is_noticed():
    def make(value):
        return TensorDict({"big": torch.full((1 << 19,), value), "s": torch.full((3,), value)})

    src, template = make(1.0), make(0.0)
    assert transfer(src, template) == "checked"
    src["big"].data = torch.full((1 << 19,), 2.0)  # same object, shape and strides
    src["s"].data = torch.full((3,), 2.0)
    assert transfer(src, template) == "cached"  # the sender packs from the new memory
    assert (template == make(2.0)).all()
    template["big"].data = torch.zeros(1 << 19)  # the receiver's leaf too
    assert transfer(src, template) == "checked"  # it lands in the new memory
    assert (template == make(2.0)).all()


def test_small_leaves_go_in_pieces_filled_and_copied_out_part_by_part(monkeypatch):
    monkeypatch.setattr(_parts, "CHUNK_BYTES", 1 << 12)  # 4 KiB pieces

    def make(value):
        leaves = {f"k{i:02d}": torch.full((256,), value + i) for i in range(10)}  # 1 KiB each
        return TensorDict(
            {**leaves, "n": {"strided": torch.arange(40.0).reshape(4, 10)[:, ::2] + value}}, []
        )

    src, template = make(1.0), make(0.0)
    desc, parts, meta, pooled = _message.pack_parts(src, CPU)
    # 11 leaves of 1 KiB (the strided one is 80 bytes): pieces of at most 4 KiB, cut
    # between leaves; one message per piece, never one per leaf
    assert [b - a for a, b in meta["segments"]] == [4096, 4096, 2048 + 80]
    assert len(parts) == 3 and all(fill is not None for _, fill in parts)
    pooled.fill_(255)
    parts[1][1]()  # fills its own bytes only
    assert (parts[1][0].view(torch.float32) == torch.arange(5.0, 9.0).repeat_interleave(256)).all()
    assert (parts[0][0] == 255).all() and (parts[2][0] == 255).all()
    _buffers.give(pooled)
    # the receiver copies each part's leaves out as soon as that part has arrived
    landing = _message.Landing(template, meta, meta["nbytes"], CPU)
    targets = landing.targets(_parts.segments(meta, meta["nbytes"]))
    assert [len(copies) for _, copies in targets] == [4, 4, 3]
    landing.discard()
    assert transfer(src, template) == "checked"
    assert (template == make(1.0)).all()
    src["n", "strided"].add_(100.0)
    assert transfer(src, template) == "cached"
    assert (template == src).all()


def test_a_leaf_outside_the_announced_segments_is_refused(monkeypatch):
    monkeypatch.setattr(_parts, "CHUNK_BYTES", 1 << 10)
    src = TensorDict({f"k{i}": torch.full((256,), float(i)) for i in range(3)}, [])
    template = src.apply(torch.zeros_like)
    _, parts, meta, pooled = _message.pack_parts(src, CPU)
    _buffers.give(pooled)
    assert meta["segments"] == [[0, 1024], [1024, 2048], [2048, 3072]]
    meta = {**meta, "segments": [[0, 1024], [2048, 3072]]}  # "k1" would never arrive
    landing = _message.Landing(template, meta, meta["nbytes"], CPU)
    targets = landing.targets(_parts.segments(meta, meta["nbytes"]))
    assert landing.problems == [
        "the description places a leaf outside the data segments it announces"
    ]
    assert all(not copies for _, copies in targets)  # into scratch: nothing is written
    landing.discard()


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
