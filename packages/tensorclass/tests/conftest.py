"""Shared fixtures of the tensorclass tests; the shared helpers and classes are in
``tc_helpers.py``, importable because this file puts the folder on ``sys.path`` (tests are
collected with ``--import-mode=importlib``, which does not)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tc_helpers  # noqa: E402


@pytest.fixture
def batch() -> tc_helpers.Batch:
    """A ``Batch`` of batch size ``[4]``: two tensor fields, a nested tensordict and a
    string field (see ``tc_helpers.make_batch``)."""
    return tc_helpers.make_batch()


@pytest.fixture
def nested() -> tc_helpers.Nested:
    """A ``Nested`` (batch size ``[3, 4]``) holding another ``Nested`` in its ``child``."""
    return tc_helpers.make_nested()


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
