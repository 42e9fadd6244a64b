"""Shared fixtures of the tensordict-core tests.

Tests are collected with ``--import-mode=importlib``, so helpers cannot be imported from
a sibling test module; the few shared helpers are exposed as fixtures instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from tensordict import TensorDict


def _leaves(td: Any) -> dict:
    """``{nested_key_tuple: value}`` for every leaf of ``td`` (non-tensors as raw data)."""
    out = {}
    for key, value in td.items(include_nested=True, leaves_only=True):
        key = key if isinstance(key, tuple) else (key,)
        out[key] = getattr(value, "data", value) if not isinstance(value, torch.Tensor) else value
    return out


def _assert_td_equal(actual: Any, expected: Any, *, check_dtype: bool = True) -> None:
    """Same batch size, same leaf keys and exactly equal leaves (and dtypes)."""
    assert actual.batch_size == expected.batch_size, (actual.batch_size, expected.batch_size)
    la, le = _leaves(actual), _leaves(expected)
    assert set(la) == set(le), (sorted(la), sorted(le))
    for key, value in le.items():
        got = la[key]
        if isinstance(value, torch.Tensor):
            assert isinstance(got, torch.Tensor), key
            assert got.shape == value.shape, (key, got.shape, value.shape)
            if check_dtype:
                assert got.dtype == value.dtype, (key, got.dtype, value.dtype)
            assert torch.equal(got, value.to(got.dtype)), key
        else:
            assert got == value, key


@pytest.fixture
def leaves() -> Callable[[Any], dict]:
    """``leaves(td)`` -> ``{key_tuple: leaf}``."""
    return _leaves


@pytest.fixture
def assert_td_equal() -> Callable[..., None]:
    """``assert_td_equal(actual, expected)``: batch size, keys and leaf values all equal."""
    return _assert_td_equal


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
