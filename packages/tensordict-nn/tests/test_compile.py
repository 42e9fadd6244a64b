"""torch.compile(fullgraph=True) traces tensordict modules without graph breaks.

The ``aot_eager`` backend traces through dynamo and AOTAutograd (where graph breaks and
unsupported ops show up) without spending minutes on code generation.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import (
    EnsembleModule,
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    TensorDictModule,
    TensorDictSequential,
    set_interaction_type,
)

pytestmark = pytest.mark.slow


def _assert_td_close(actual, expected):
    assert set(actual.keys(True, True)) == set(expected.keys(True, True))
    for key in expected.keys(True, True):
        torch.testing.assert_close(actual[key], expected[key])


def test_three_module_sequence_with_a_deterministic_probabilistic_module():
    torch.manual_seed(0)
    seq = TensorDictSequential(
        TensorDictModule(nn.Linear(4, 8), in_keys=["obs"], out_keys=["hidden"]),
        TensorDictModule(
            nn.Sequential(nn.Tanh(), nn.Linear(8, 4), NormalParamExtractor()),
            in_keys=["hidden"],
            out_keys=["loc", "scale"],
        ),
        ProbabilisticTensorDictModule(
            in_keys=["loc", "scale"],
            out_keys=["action"],
            distribution_class=torch.distributions.Normal,
            distribution_kwargs={"validate_args": False},
            return_log_prob=True,
        ),
    )

    def run(obs):
        with set_interaction_type("deterministic"):
            return seq(TensorDict(obs=obs, batch_size=obs.shape[:1]))

    obs = torch.randn(5, 4)
    compiled = torch.compile(run, fullgraph=True, backend="aot_eager")
    _assert_td_close(compiled(obs), run(obs))
    torch.testing.assert_close(compiled(obs)["action"], run(obs)["loc"])


def test_vmapped_ensemble():
    torch.manual_seed(0)
    ensemble = EnsembleModule(
        TensorDictModule(nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2)), ["x"], ["y"]),
        num_copies=4,
    )

    def run(x):
        return ensemble(TensorDict(x=x, batch_size=x.shape[:1]))["y"]

    x = torch.randn(6, 3)
    compiled = torch.compile(run, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x), run(x))


@pytest.mark.parametrize("chunk_size", [None, 1])
def test_vmap_of_a_functional_call_compiles_without_graph_breaks(chunk_size):
    torch.manual_seed(0)
    net = nn.Linear(3, 4)
    params = TensorDict.from_module(net).expand(2).clone().apply(lambda p: p + torch.randn_like(p))

    def call(params, x):
        def one(p, x):
            with p.to_module(net):
                return net(x)

        return torch.vmap(one, (0, None), chunk_size=chunk_size)(params, x)

    x = torch.randn(5, 3)
    torch._dynamo.reset()
    compiled = torch.compile(call, fullgraph=True, backend="aot_eager")
    expected = torch.stack([x @ params["weight"][i].T + params["bias"][i] for i in range(2)])
    torch.testing.assert_close(compiled(params, x), expected)
    torch.testing.assert_close(call(params, x), expected)
