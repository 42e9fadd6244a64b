"""Classes and helpers shared by the tensorclass tests.

The expectation of most tests is the same operation on the tensordict the instance wraps
(a :class:`~tensordict.TensorDict`, tested on its own by tensordict-core): compared leaf
by leaf with :func:`assert_same_data`.
"""

from __future__ import annotations

from typing import Any

import torch

from tensordict import NonTensorData, NonTensorStack, TensorClass, TensorDict, TensorDictBase

B = 4


class Batch(TensorClass):
    obs: torch.Tensor
    reward: torch.Tensor
    info: TensorDict
    label: str = "train"


class Nested(TensorClass):
    X: torch.Tensor
    z: str
    child: Nested | None = None


def make_batch(batch: int = B) -> Batch:
    return Batch(
        obs=torch.randn(batch, 3),
        reward=torch.randn(batch, 1),
        info=TensorDict(step=torch.arange(batch), batch_size=[batch]),
        batch_size=[batch],
    )


def make_nested() -> Nested:
    inner = Nested(X=torch.randn(3, 4, 5), z="inner", batch_size=[3, 4])
    return Nested(X=torch.randn(3, 4, 2), z="outer", child=inner, batch_size=[3, 4])


def leaves(obj: Any) -> dict[tuple[str, ...], Any]:
    """``{key tuple: value}`` of the leaves (tensors and Python values) of a tensorclass or
    tensordict, at any depth; a tensorclass contributes the leaves of its data."""
    out: dict[tuple[str, ...], Any] = {}
    data = obj._tensordict if hasattr(type(obj), "_field_specs") else obj
    for key in data.keys():
        value = data._get_str(key, None)
        if isinstance(value, TensorDictBase):
            for sub, leaf in leaves(value).items():
                out[(key, *sub)] = leaf
        elif isinstance(value, NonTensorData):
            out[(key,)] = value.data
        elif isinstance(value, NonTensorStack):
            out[(key,)] = value.tolist()
        else:
            out[(key,)] = value
    return out


def assert_same_data(actual: Any, expected: Any) -> None:
    """Same batch size, same keys, equal leaves (tensors: same shape, dtype and values)."""
    assert tuple(actual.batch_size) == tuple(expected.batch_size), (
        actual.batch_size,
        expected.batch_size,
    )
    a, e = leaves(actual), leaves(expected)
    assert sorted(a) == sorted(e), (sorted(a), sorted(e))
    for key, value in e.items():
        got = a[key]
        if isinstance(value, torch.Tensor):
            assert isinstance(got, torch.Tensor), (key, type(got))
            assert got.shape == value.shape and got.dtype == value.dtype, (key, got, value)
            assert torch.equal(got, value), key
        else:
            assert got == value, (key, got, value)
