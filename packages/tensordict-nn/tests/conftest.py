"""Shared fixtures of the tensordict-nn tests.

Tests are collected with ``--import-mode=importlib``: shared helpers are fixtures.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import pytest
import torch
from torch import nn


def _tensorclass_or_skip() -> Callable:
    """The ``@tensorclass`` decorator, or a skip when the tensorclass distribution is
    not installed or does not provide it yet."""
    try:
        module = importlib.import_module("tensordict.tensorclass")
    except ModuleNotFoundError:
        pytest.skip("tensorclass is not installed (pip install tensordict-nn[tensorclass])")
    decorator = getattr(module, "tensorclass", None)
    if decorator is None or not callable(decorator):
        pytest.skip("the installed tensorclass distribution does not provide @tensorclass yet")
    try:

        @decorator
        class _Probe:
            x: torch.Tensor

        probe = _Probe(x=torch.zeros(2), batch_size=[2])
        probe.to_tensordict()
        type(probe).from_tensordict(probe.to_tensordict())
    except Exception as err:  # an incomplete tensorclass package
        pytest.skip(f"the installed tensorclass distribution is incomplete: {err!r}")
    return decorator


@pytest.fixture
def tensorclass() -> Callable:
    """``@tensorclass`` (skips when the tensorclass distribution is absent/incomplete)."""
    return _tensorclass_or_skip()


def _mlp(n_in: int = 3, n_hidden: int = 8, n_out: int = 2, seed: int | None = None) -> nn.Module:
    if seed is not None:
        torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.Tanh(), nn.Linear(n_hidden, n_out))


@pytest.fixture
def make_mlp() -> Callable[..., nn.Module]:
    """``make_mlp(n_in, n_hidden, n_out, seed=None)``: a 2-layer tanh MLP."""
    return _mlp


@pytest.fixture
def no_cuda() -> None:
    if torch.cuda.is_available():
        pytest.skip("tests the behaviour without CUDA")
