"""``torch.export`` of tensordict modules: called with keyword arguments named after their
in_keys, or with a tensordict whose batch dims are exported as dynamic. The oracle is the
module itself, called eagerly on the same inputs."""

from __future__ import annotations

import io
import logging

import pytest
import torch
from torch import nn
from torch.export import Dim

from tensordict import TensorDict
from tensordict.nn import (
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictParams,
    TensorDictSequential,
)


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def assert_exported_like_eager(module, strict, **kwargs):
    program = torch.export.export(module, args=(), kwargs=kwargs, strict=strict)
    exported = _as_tuple(program.module()(**kwargs))
    eager = _as_tuple(module(**kwargs))
    assert len(exported) == len(eager)
    for got, want in zip(exported, eager, strict=True):
        torch.testing.assert_close(got, want)


def _normal_policy(**kwargs):
    return ProbabilisticTensorDictSequential(
        TensorDictModule(
            nn.Sequential(nn.Linear(3, 4), NormalParamExtractor()), ["x"], ["loc", "scale"]
        ),
        ProbabilisticTensorDictModule(
            in_keys=["loc", "scale"],
            out_keys=["action"],
            distribution_class=torch.distributions.Normal,
            distribution_kwargs={"validate_args": False},
            default_interaction_type="deterministic",
            **kwargs,
        ),
    )


MODULES = {
    "module": lambda: (TensorDictModule(nn.Linear(3, 4), ["x"], ["y"]), {}),
    "nested keys": lambda: (
        TensorDictModule(nn.Linear(3, 4), [("obs", "x")], [("out", "y")]),
        {"rename": "obs_x"},
    ),
    "sequential": lambda: (
        TensorDictSequential(
            TensorDictModule(nn.Linear(3, 4), ["x"], ["y"]),
            TensorDictModule(nn.Linear(4, 2), ["y"], ["z"]),
        ),
        {},
    ),
    "selected_out_keys": lambda: (
        TensorDictSequential(
            TensorDictModule(nn.Linear(3, 4), ["x"], ["y"]),
            TensorDictModule(nn.Linear(4, 2), ["y"], ["z"]),
            selected_out_keys=["z"],
        ),
        {},
    ),
    "probabilistic": lambda: (_normal_policy(return_log_prob=True), {}),
}


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("name", list(MODULES))
def test_export_with_keyword_arguments_named_after_in_keys(name, strict):
    torch.manual_seed(0)
    module, options = MODULES[name]()
    assert_exported_like_eager(module, strict, **{options.get("rename", "x"): torch.randn(5, 3)})


def test_selected_out_keys_are_what_the_program_returns():
    seq = MODULES["selected_out_keys"]()[0]
    program = torch.export.export(seq, args=(), kwargs={"x": torch.randn(5, 3)})
    out = program.module()(x=torch.randn(5, 3))
    assert isinstance(out, torch.Tensor) and out.shape == (5, 2)


def test_probabilistic_module_alone_with_its_distribution_parameters():
    module = ProbabilisticTensorDictModule(
        in_keys=["loc", "scale"],
        out_keys=["action"],
        distribution_class=torch.distributions.Normal,
        distribution_kwargs={"validate_args": False},
        default_interaction_type="deterministic",
    )
    loc = torch.randn(5, 2)
    assert_exported_like_eager(module, False, loc=loc, scale=loc.abs() + 0.1)


def _policy_on_obs():
    return TensorDictSequential(
        TensorDictModule(nn.Linear(3, 4), [("obs", "x")], ["y"]),
        TensorDictModule(nn.Linear(4, 2), ["y"], ["z"]),
    )


def test_dynamic_batch_dim_of_a_tensordict_input():
    torch.manual_seed(0)
    policy = _policy_on_obs()
    example = TensorDict({"obs": {"x": torch.randn(5, 3)}}, [5])
    batch = Dim("batch")
    program = torch.export.export(policy, args=(example,), dynamic_shapes=([{0: batch}],))
    for n in (2, 7):
        td = TensorDict({"obs": {"x": torch.randn(n, 3)}}, [n])
        out = program.module()(td.clone())
        assert out.batch_size == (n,)
        torch.testing.assert_close(out["z"], policy(td.clone())["z"])


def test_several_dynamic_batch_dims():
    module = TensorDictModule(lambda x, y: x * y + 1, ["x", "y"], ["z"])
    example = TensorDict(x=torch.randn(4, 3, 2), y=torch.randn(4, 3, 2), batch_size=[4, 3])
    envs, time = Dim("envs"), Dim("time")
    shapes = ([{0: envs, 1: time}, {0: envs, 1: time}],)
    program = torch.export.export(module, args=(example,), dynamic_shapes=shapes, strict=False)
    td = TensorDict(x=torch.randn(6, 5, 2), y=torch.randn(6, 5, 2), batch_size=[6, 5])
    out = program.module()(td.clone())
    assert out.batch_size == (6, 5)
    torch.testing.assert_close(out["z"], td["x"] * td["y"] + 1)


def test_a_dynamic_program_saved_and_loaded_keeps_taking_other_sizes():
    torch.manual_seed(0)
    policy = _policy_on_obs()
    example = TensorDict({"obs": {"x": torch.randn(5, 3)}}, [5])
    program = torch.export.export(
        policy, args=(example,), dynamic_shapes=([{0: Dim("batch")}],), strict=False
    )
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    buffer.seek(0)
    # torch.export.load reads the example inputs (a TensorDict) with weights_only=True,
    # falls back to a full unpickle, and logs it with a malformed message that pytest's
    # log capture turns into an error: keep that logger quiet here.
    serde_log = logging.getLogger("torch._export.serde.serialize")
    serde_log.disabled = True
    try:
        loaded = torch.export.load(buffer)
    finally:
        serde_log.disabled = False
    td = TensorDict({"obs": {"x": torch.randn(9, 3)}}, [9])
    out = loaded.module()(td.clone())
    assert out.batch_size == (9,)
    torch.testing.assert_close(out["z"], policy(td.clone())["z"])


def test_tensordict_params_inside_an_exported_module():
    class Affine(nn.Module):
        def __init__(self):
            super().__init__()
            self.params = TensorDictParams(TensorDict(w=torch.randn(3, 4), b=torch.randn(4)))

        def forward(self, x):
            return x @ self.params["w"] + self.params["b"]

    module = Affine()
    x = torch.randn(5, 3)
    for strict in (False, True):
        program = torch.export.export(module, (x,), strict=strict)
        torch.testing.assert_close(program.module()(x), module(x))
        names = {name for name, _ in program.named_parameters()}
        assert any(name.endswith("w") for name in names), names
