"""The printed form: fields by name, then batch_size, device and is_shared."""

from __future__ import annotations

from typing import Any

import torch

from tensordict import TensorClass


class Point(TensorClass):
    xy: torch.Tensor
    name: str
    child: Any = None


def test_repr_lists_fields_then_metadata():
    inner = Point(xy=torch.zeros(2, 2), name="in", batch_size=[2])
    p = Point(xy=torch.zeros(2, 2), name="out", child=inner, batch_size=[2])
    expected = """Point(
    child=Point(
        child=None,
        name='in',
        xy=Tensor(shape=torch.Size([2, 2]), device=cpu, dtype=torch.float32, is_shared=False),
        batch_size=torch.Size([2]),
        device=None,
        is_shared=False),
    name='out',
    xy=Tensor(shape=torch.Size([2, 2]), device=cpu, dtype=torch.float32, is_shared=False),
    batch_size=torch.Size([2]),
    device=None,
    is_shared=False)"""
    assert repr(p) == expected and str(p) == expected


def test_shadowed_metadata_fields():
    class Shadow(TensorClass, shadow=True):
        batch_size: Any
        device: Any

    s = Shadow(batch_size=0, device="cuda:7")
    assert repr(s) == (
        "Shadow(\n"
        "    batch_size=Tensor(shape=torch.Size([]), device=cpu, dtype=torch.int64, is_shared=False),\n"
        "    device='cuda:7',\n"
        "    shape=torch.Size([]),\n"
        "    is_shared=False)"
    )
