"""Tensorclass instances through the hooks (the tensorclass package is built elsewhere).

The save/load code talks to tensorclasses through a small protocol: the
``_is_tensorclass`` marker, the ``_tensordict`` (and ``_non_tensordict``) attributes and
the ``from_tensordict`` classmethod. A stand-in class checks it here; the real package
is exercised when it is installed.
"""

from __future__ import annotations

import json

import pytest
import torch
from memmap_helpers import HAS_TENSORCLASS

from tensordict import MemoryMappedTensor, TensorDict
from tensordict.memmap import td_memmap, td_memmap_, td_memmap_like


class Point:
    """The smallest tensorclass-like class."""

    _is_tensorclass = True

    def __init__(self, td, non_tensor=None):
        self._tensordict = td
        self._non_tensordict = dict(non_tensor or {})

    @classmethod
    def from_tensordict(cls, td):
        return cls(td)

    @property
    def batch_size(self):
        return self._tensordict.batch_size


def test_stand_in_tensorclass_round_trip(tmp_path):
    p = Point(TensorDict({"x": torch.arange(3.0)}, [3]), {"label": "origin"})
    out = td_memmap(p, tmp_path / "p")
    assert isinstance(out, Point) and type(out._tensordict["x"]) is MemoryMappedTensor
    meta = json.loads((tmp_path / "p" / "meta.json").read_text())
    assert meta["_type"] == f"<class '{Point.__module__}.{Point.__qualname__}'>"
    assert (tmp_path / "p" / "_tensordict" / "x.memmap").is_file()
    loaded = TensorDict.load_memmap(tmp_path / "p")
    assert isinstance(loaded, Point)
    assert (
        torch.equal(loaded._tensordict["x"], torch.arange(3.0))
        and loaded._tensordict["label"] == "origin"
    )


def test_stand_in_tensorclass_in_place_and_like(tmp_path):
    p = Point(TensorDict({"x": torch.ones(2)}, [2]))
    assert td_memmap_(p, tmp_path / "a") is p and type(p._tensordict["x"]) is MemoryMappedTensor
    like = td_memmap_like(p, tmp_path / "b")
    assert isinstance(like, Point) and not like._tensordict["x"].any()


@pytest.mark.skipif(not HAS_TENSORCLASS, reason="the tensorclass distribution is not installed")
def test_real_tensorclass_round_trip(tmp_path):
    import tensordict.tensorclass as tc

    try:
        decorator = tc.tensorclass
        decorator(type("Probe", (), {"__annotations__": {"x": torch.Tensor}}))
    except (NotImplementedError, AttributeError, TypeError):
        pytest.skip("the installed tensorclass distribution does not provide @tensorclass yet")

    @decorator
    class Sample:
        x: torch.Tensor
        name: str

    s = Sample(x=torch.arange(3), name="n", batch_size=[3])
    s.memmap(tmp_path)
    loaded = Sample.load_memmap(tmp_path)
    assert (
        isinstance(loaded, Sample) and torch.equal(loaded.x, torch.arange(3)) and loaded.name == "n"
    )
