"""CudaGraphModule: eager with a one-time warning without CUDA; capture and replay on CUDA."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import CudaGraphModule, TensorDictModule
from tensordict.nn.cudagraphs import CudaGraphModule as Cls

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_runs_eagerly_with_one_warning_without_cuda(no_cuda, monkeypatch):
    monkeypatch.setattr(Cls, "_warned_eager", False)
    module = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
    graphed = CudaGraphModule(module, warmup=1)
    with pytest.warns(UserWarning, match="runs eagerly"):
        out = graphed(TensorDict(x=torch.zeros(2)))
    assert out["y"].tolist() == [1.0, 1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert graphed(TensorDict(x=torch.ones(2)))["y"].tolist() == [2.0, 2.0]
    plain = CudaGraphModule(lambda a, b: a * b)
    assert plain(torch.full((2,), 2.0), torch.full((2,), 3.0)).tolist() == [6.0, 6.0]


def test_state_dict_is_the_modules():
    lin = nn.Linear(2, 2)
    graphed = CudaGraphModule(TensorDictModule(lin, ["x"], ["y"]))
    assert set(graphed.state_dict()) == {"module.weight", "module.bias"}


@pytest.mark.cuda
@cuda
def test_capture_and_replay_tensordict_module():
    lin = nn.Linear(4, 3).cuda()
    module = TensorDictModule(lin, in_keys=["x"], out_keys=["y"])
    graphed = CudaGraphModule(module, warmup=2)
    for _ in range(5):
        x = torch.randn(8, 4, device="cuda")
        out = graphed(TensorDict(x=x, batch_size=[8]))
        torch.testing.assert_close(out["y"], lin(x))
    assert graphed._graph is not None
    kept = graphed(TensorDict(x=torch.zeros(8, 4, device="cuda"), batch_size=[8]))["y"].clone()
    graphed(TensorDict(x=torch.ones(8, 4, device="cuda"), batch_size=[8]))
    torch.testing.assert_close(kept, lin(torch.zeros(8, 4, device="cuda")))
    with pytest.raises(ValueError, match="shape"):
        graphed(TensorDict(x=torch.zeros(9, 4, device="cuda"), batch_size=[9]))


@pytest.mark.cuda
@cuda
def test_capture_and_replay_plain_function():
    def fn(a, b):
        return (a * b).sin(), a + b

    graphed = CudaGraphModule(fn, warmup=1)
    for _ in range(4):
        a, b = torch.randn(16, device="cuda"), torch.randn(16, device="cuda")
        s, t = graphed(a, b)
        torch.testing.assert_close(s, (a * b).sin())
        torch.testing.assert_close(t, a + b)
    with pytest.raises(ValueError, match="dtype|shape"):
        graphed(torch.randn(16, device="cuda", dtype=torch.float64), b)
