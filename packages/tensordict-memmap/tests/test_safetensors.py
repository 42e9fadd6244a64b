"""safetensors files (extra ``safetensors``): round trips and the flat-name convention."""

from __future__ import annotations

import pytest
import torch
from memmap_helpers import HAS_SAFETENSORS, needs_safetensors

from tensordict import NonTensorData, NonTensorStack, TensorDict, from_safetensors, to_safetensors

pytestmark = needs_safetensors


def test_round_trip_keeps_structure(tmp_path):
    td = TensorDict(
        {
            "w": torch.randn(2, 3),
            "layer": {"b": torch.ones(2), "deep": {"k": torch.arange(2)}},
            "s": "txt",
        },
        [2],
        names=["n"],
    )
    to_safetensors(td, tmp_path / "m.safetensors")
    back = from_safetensors(tmp_path / "m.safetensors")
    assert back.batch_size == (2,) and back.names == ["n"] and back["layer"].batch_size == (2,)
    assert torch.equal(back["w"], td["w"]) and torch.equal(
        back["layer", "deep", "k"], td["layer", "deep", "k"]
    )
    assert back["s"] == "txt"


def test_names_are_dot_joined_and_plain_checkpoints_load(tmp_path):
    from safetensors import safe_open
    from safetensors.torch import save_file

    to_safetensors(TensorDict({"a": {"b": torch.zeros(1)}}, []), tmp_path / "x.safetensors")
    with safe_open(str(tmp_path / "x.safetensors"), "pt") as handle:
        assert list(handle.keys()) == ["a.b"]
    save_file(
        {"enc.w": torch.ones(2), "enc.sub.b": torch.zeros(3), "head": torch.ones(1)},
        str(tmp_path / "c.safetensors"),
    )
    ckpt = from_safetensors(tmp_path / "c.safetensors")
    assert ckpt.batch_size == () and torch.equal(ckpt["enc", "sub", "b"], torch.zeros(3))
    assert torch.equal(ckpt["head"], torch.ones(1))


def test_values_safetensors_cannot_hold(tmp_path):
    with pytest.raises(TypeError, match="not JSON"):
        to_safetensors(TensorDict({"v": NonTensorData(1j)}, []), tmp_path / "a.safetensors")
    with pytest.raises(TypeError, match="stack of non-tensor"):
        to_safetensors(TensorDict({"v": NonTensorStack("a", "b")}, [2]), tmp_path / "b.safetensors")
    with pytest.raises(ValueError, match="same|safetensors name"):
        to_safetensors(
            TensorDict({"a.b": torch.zeros(1), "a": {"b": torch.zeros(1)}}, []),
            tmp_path / "c.safetensors",
        )


def test_shared_tensors_are_saved_as_copies(tmp_path):
    t = torch.arange(4.0)
    to_safetensors(TensorDict({"a": t, "b": t}, [4]), tmp_path / "s.safetensors")
    back = from_safetensors(tmp_path / "s.safetensors")
    assert torch.equal(back["a"], t) and torch.equal(back["b"], t)


def test_flag_is_consistent():
    assert HAS_SAFETENSORS
