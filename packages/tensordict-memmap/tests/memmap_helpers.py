"""Shared helpers of the tensordict-memmap tests."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tensordict import LazyStackedTensorDict, NonTensorStack, TensorDict

HAS_H5PY = importlib.util.find_spec("h5py") is not None
HAS_SAFETENSORS = importlib.util.find_spec("safetensors") is not None
HAS_TENSORCLASS = importlib.util.find_spec("tensordict.tensorclass") is not None

needs_h5py = pytest.mark.skipif(
    not HAS_H5PY, reason="h5py is not installed (extra 'h5': pip install tensordict-memmap[h5])"
)
needs_safetensors = pytest.mark.skipif(
    not HAS_SAFETENSORS,
    reason="safetensors is not installed (extra 'safetensors': "
    "pip install tensordict-memmap[safetensors])",
)

ROOT = Path(__file__).resolve().parents[3]


def sample_td() -> TensorDict:
    """A tensordict exercising every kind of entry the format stores."""
    return TensorDict(
        {
            "float": torch.arange(12, dtype=torch.float32).view(3, 4),
            "int": torch.arange(3, dtype=torch.int64),
            "bool": torch.tensor([True, False, True]),
            "bf16": torch.ones(3, 2, dtype=torch.bfloat16),
            "nested": {"x": torch.randn(3, 5), "deeper": {"y": torch.zeros(3, dtype=torch.int8)}},
            "text": "a string",
            "labels": NonTensorStack("a", "b", "c"),
        },
        batch_size=[3],
    )


def sample_lazy() -> LazyStackedTensorDict:
    """A lazy stack whose members have different shapes and an exclusive key."""
    return LazyStackedTensorDict(
        TensorDict({"a": torch.zeros(2, 3), "b": torch.ones(2)}, [2]),
        TensorDict({"a": torch.ones(2, 5), "b": torch.full((2,), 2.0), "only": torch.ones(2)}, [2]),
        stack_dim=0,
    )


def assert_same(loaded, expected) -> None:
    """Leaf-by-leaf equality (type of each leaf aside), including non-tensor values."""
    assert loaded.batch_size == expected.batch_size
    keys = set(expected.keys(True, True))
    assert set(loaded.keys(True, True)) == keys
    for key in keys:
        a, b = loaded.get(key), expected.get(key)
        if isinstance(b, torch.Tensor):
            assert a.dtype == b.dtype, key
            assert torch.equal(torch.as_tensor(a).as_subclass(torch.Tensor), b), key
        else:  # non-tensor values, unwrapped as td[key] gives them
            assert loaded[key] == expected[key], key


def run_python(code: str, *args: str, timeout: float = 120) -> str:
    """Run ``code`` in a fresh interpreter of this environment; returns stdout."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout
    )
    if out.returncode != 0:
        raise AssertionError(f"subprocess failed:\n{out.stderr}")
    return out.stdout


def folder_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> content): compare before and after."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(Path(root).rglob("*"))
        if path.is_file()
    }
