"""Shared fixtures of the tensordict-core tests; the shared helpers are in
``core_helpers.py``, importable because this file puts the folder on ``sys.path`` (tests are
collected with ``--import-mode=importlib``, which does not)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import core_helpers  # noqa: E402

from tensordict import TensorDict  # noqa: E402


@pytest.fixture
def leaves() -> Callable[[Any], dict]:
    """``leaves(td)`` -> ``{key_tuple: leaf}`` (see ``core_helpers.leaves``)."""
    return core_helpers.leaves


@pytest.fixture
def assert_td_equal() -> Callable[..., None]:
    """``assert_td_equal(actual, expected)``: see ``core_helpers.assert_same``."""
    return core_helpers.assert_same


@pytest.fixture(params=core_helpers.ANY_TD_KINDS)
def any_td(request: pytest.FixtureRequest) -> Any:
    """A tensordict of batch size ``(2, 3)`` of every kind: dense, nested, lazy stacks on
    dims 0 and 1, an indexed view; each holds non-tensor entries (see
    ``core_helpers.make_any_td``)."""
    return core_helpers.make_any_td(request.param)


@pytest.fixture
def nested_td() -> TensorDict:
    """A small nested tensordict with distinct values in every leaf (batch [2, 3])."""
    return TensorDict(
        {
            "a": torch.arange(6, dtype=torch.float32).reshape(2, 3),
            "b": {
                "c": torch.arange(24, dtype=torch.int64).reshape(2, 3, 4),
                "d": {"e": torch.arange(6, dtype=torch.float64).reshape(2, 3, 1) + 100},
            },
        },
        batch_size=[2, 3],
    )
