"""TensorCollection (the common base), the wrapper protocol, torch.autograd.grad."""

from __future__ import annotations

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorCollection, TensorDict, TensorDictBase
from tensordict._leaves.collection import data_of, wrapped


class Wrapper(TensorCollection):
    """The wrapper protocol (``_wraps_tensordict``, ``_tensordict``, ``_rewrap``); the
    tensorclass distribution's tests cover real wrappers nested in tensordicts."""

    _wraps_tensordict = True

    def __init__(self, td: TensorDict) -> None:
        self._tensordict = td

    @classmethod
    def _rewrap(cls, td: TensorDict) -> Wrapper:
        return cls(td)


def test_tensor_collection_is_the_base_of_every_tensordict():
    td = TensorDict(a=torch.zeros(2), batch_size=[2])
    lazy = LazyStackedTensorDict(td, td)
    for obj in (td, lazy):
        assert isinstance(obj, TensorCollection)
    assert issubclass(TensorDictBase, TensorCollection)
    assert not isinstance(torch.zeros(1), TensorCollection)


def test_wrapped_and_data_of():
    a, b = Wrapper(TensorDict(x=torch.zeros(2))), Wrapper(TensorDict(x=torch.ones(2)))
    tds, rewrap = wrapped([a, b])
    assert tds == [a._tensordict, b._tensordict] and rewrap.__self__ is Wrapper
    assert wrapped([a, TensorDict()]) is None and wrapped([]) is None
    assert data_of(a) is a._tensordict and data_of(a._tensordict) is a._tensordict


def test_autograd_grad_over_tensordicts():
    x = torch.randn(3, requires_grad=True)
    y = torch.randn(3, requires_grad=True)
    inputs = TensorDict(x=x, nested={"y": y}, label="l", batch_size=[3])
    outputs = TensorDict(a=x * 2 + y, b=(x * y).sum().expand(3), batch_size=[3])
    grads = torch.autograd.grad(outputs, inputs, torch.ones_like(outputs))
    assert type(grads) is TensorDict and set(grads.keys(True, True)) == {"x", ("nested", "y")}
    expected = torch.autograd.grad(
        [x * 2 + y, (x * y).sum().expand(3)], [x, y], [torch.ones(3)] * 2
    )
    assert torch.allclose(grads["x"], expected[0])
    assert torch.allclose(grads["nested", "y"], expected[1])
    with pytest.raises(TypeError, match="grad_outputs is a tensordict"):
        torch.autograd.grad((x * 2,), inputs, TensorDict(a=torch.ones(3), batch_size=[3]))
