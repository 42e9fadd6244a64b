"""What clients of the reference (TorchRL) use of ``tensordict.nn`` beyond its public
names, with the reference's meaning (docs: compatibility), and the reference's own
examples: the README's checkpoint round trip and ``torch.export`` with keyword tensors."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from tensordict import TensorDict
from tensordict.nn import (
    InteractionType,
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictModuleBase,
    TensorDictSequential,
    composite_lp_aggregate,
    set_composite_lp_aggregate,
    set_skip_existing,
)
from tensordict.nn.distributions.truncated_normal import TruncatedNormal, TruncatedStandardNormal
from tensordict.nn.functional_modules import _exclude_td_from_pytree
from tensordict.nn.probabilistic import _use_generator
from tensordict.nn.utils import _set_skip_existing_None


# ------------------------------------------------------------------ nn.utils / functional_modules
class _AddOne(TensorDictModuleBase):
    in_keys, out_keys = ["x"], ["y"]

    @_set_skip_existing_None()
    def forward(self, tensordict):
        return tensordict.set("y", tensordict["x"] + 1)


def test_set_skip_existing_none_follows_the_global_setting():
    td = TensorDict(x=torch.zeros(()), y=torch.zeros(()))
    with set_skip_existing(True):
        assert _AddOne()(td)["y"].item() == 0.0  # y present: skipped
    assert _AddOne()(td)["y"].item() == 1.0


def test_set_skip_existing_none_checks_the_forward_signature():
    with pytest.raises(RuntimeError, match="named 'td'"):

        class Bad(TensorDictModuleBase):
            @_set_skip_existing_None()
            def forward(self, td):
                return td


def test_nn_utils_serves_the_mappings():
    from tensordict.nn import utils
    from tensordict.nn.distributions import utils as dist_utils

    for name in ("biased_softplus", "expln", "inv_softplus", "mappings", "add_custom_mapping"):
        assert getattr(utils, name) is getattr(dist_utils, name)
    assert torch.allclose(utils.mappings("biased_softplus_1.0")(torch.zeros(1)), torch.ones(1))


def test_use_generator_draws_from_the_generator_and_restores_the_global_state():
    torch.manual_seed(3)
    expected_global = torch.rand(2)
    torch.manual_seed(3)
    gen = torch.Generator().manual_seed(0)
    with _use_generator(gen):
        drawn = torch.rand(2)
    assert torch.equal(drawn, torch.rand(2, generator=torch.Generator().manual_seed(0)))
    assert torch.equal(torch.rand(2), expected_global)  # the global stream did not move
    second = torch.Generator().manual_seed(0)
    torch.rand(2, generator=second)
    assert torch.equal(gen.get_state(), second.get_state())  # gen advanced by the draw
    with _use_generator(None):  # nothing happens
        torch.rand(1)


def test_exclude_td_from_pytree_makes_tensordicts_leaves():
    td = TensorDict(a=torch.zeros(1), b=TensorDict(c=torch.zeros(1)))
    assert len(tree_leaves([td])) == 2
    with _exclude_td_from_pytree():
        assert tree_leaves([td, torch.ones(1)])[0] is td
    assert len(tree_leaves([td])) == 2  # registered again


# ------------------------------------------------------------------ settings and enums
def test_setters_set_and_unset():
    setter = set_composite_lp_aggregate(True)
    before = composite_lp_aggregate()
    setter.set()
    try:
        assert composite_lp_aggregate() is True
    finally:
        setter.unset()
    assert composite_lp_aggregate() == before
    clone = setter.clone()
    assert clone is not setter and clone.value is True


def test_interaction_type_is_a_string_enum():
    assert str(InteractionType.DETERMINISTIC) == "deterministic"
    assert InteractionType.MODE == "mode" and f"{InteractionType.RANDOM}" == "random"
    assert InteractionType("mean") is InteractionType.MEAN


# ------------------------------------------------------------------ probabilistic privates
def _normal_module(**kwargs):
    return ProbabilisticTensorDictModule(
        in_keys=["loc", "scale"],
        out_keys=["action"],
        distribution_class=torch.distributions.Normal,
        **kwargs,
    )


def test_out_keys_and_aggregate_at_init():
    module = _normal_module(return_log_prob=True)
    assert module._out_keys == ["action"]
    assert module.out_keys == ["action", "action_log_prob"]
    assert module._composite_lp_aggreate_at_init is composite_lp_aggregate()
    message = module._CHANGE_IN_C_LP_A.format("M", False, True)
    assert "M" in message and "False -> True" in message


@pytest.mark.parametrize("kind", ["int", "tensor"])
def test_resolve_generator_from_a_seed_writes_the_next_seed_back(kind):
    module = _normal_module(generator="seed")
    td = (
        TensorDict(seed=torch.tensor(7))
        if kind == "tensor"
        else TensorDict().set_non_tensor("seed", 7)
    )
    gen, writeback = module._resolve_generator(td)
    expected = torch.rand(3, generator=torch.Generator().manual_seed(7))
    assert torch.equal(torch.rand(3, generator=gen), expected)
    writeback(gen)
    new_seed = td["seed"]
    assert int(new_seed) != 7
    assert isinstance(new_seed, torch.Tensor) == (kind == "tensor")


def test_resolve_generator_owned_missing_and_bad():
    owned = torch.Generator().manual_seed(1)
    assert _normal_module(generator=owned)._resolve_generator(TensorDict()) == (owned, None)
    assert _normal_module()._resolve_generator(TensorDict()) == (None, None)
    assert _normal_module(generator="seed")._resolve_generator(TensorDict()) == (None, None)
    with pytest.raises(TypeError, match="generator key"):
        _normal_module(generator="seed")._resolve_generator(TensorDict(seed=torch.zeros(2)))


def test_dist_sample_kinds_generator_and_num_samples():
    dist = torch.distributions.Normal(torch.ones(2), torch.ones(2))
    module = _normal_module()
    assert torch.equal(module._dist_sample(dist, InteractionType.MODE), torch.ones(2))
    assert torch.equal(module._dist_sample(dist, "mean"), torch.ones(2))
    drawn = module._dist_sample(dist, "random", generator=torch.Generator().manual_seed(0))
    again = module._dist_sample(dist, "random", generator=torch.Generator().manual_seed(0))
    assert torch.equal(drawn, again)
    multi = _normal_module(num_samples=3)
    assert multi._dist_sample(dist, "random").shape == (3, 2)
    assert torch.equal(multi._dist_sample(dist, "mode"), torch.ones(3, 2))  # repeated


def test_update_td_lp_renames_to_the_modules_log_prob_keys():
    module = _normal_module(return_log_prob=True, log_prob_keys=["lp"])
    lp = TensorDict(action_log_prob=torch.ones(2), other=torch.zeros(2))
    module._update_td_lp(lp)
    assert set(lp.keys()) == {"lp", "other"} and torch.equal(lp["lp"], torch.ones(2))


def test_compute_in_and_out_keys_reads_nothing_of_self():
    mods = [
        TensorDictModule(nn.Identity(), ["x"], ["y"]),
        TensorDictModule(nn.Identity(), ["y", "z"], ["w", "y"]),
    ]
    # TorchRL calls it on an instance whose __init__ has not run
    blank = TensorDictSequential.__new__(TensorDictSequential)
    # out_keys in the order of their last write: "y" is written again after "w"
    assert blank._compute_in_and_out_keys(mods) == (["x", "z"], ["w", "y"])
    assert TensorDictSequential(*mods).in_keys == ["x", "z"]


# ------------------------------------------------------------------ distributions
def test_truncated_standard_normal_is_the_unit_truncated_normal():
    a, b = torch.tensor([-1.0, 0.0]), torch.tensor([2.0, 1.0])
    std = TruncatedStandardNormal(a, b)
    same = TruncatedNormal(torch.zeros(2), torch.ones(2), a, b)
    x = torch.tensor([0.5, 0.5])
    for attr in ("mean", "variance"):
        assert torch.allclose(getattr(std, attr), getattr(same, attr))
    assert torch.allclose(std.log_prob(x), same.log_prob(x))
    assert torch.allclose(std.entropy(), same.entropy())
    # the mass of [a, b] under N(0, 1), from the normal CDF
    normal = torch.distributions.Normal(0.0, 1.0)
    assert torch.allclose(std.auc, normal.cdf(b) - normal.cdf(a))
    assert std.expand([3, 2]).batch_shape == (3, 2)
    sample = std.sample((100,))
    assert bool(((sample >= a) & (sample <= b)).all())


# ------------------------------------------------------------------ fx
def test_symbolic_trace_module_and_sequences():
    from tensordict.prototype.fx import TDGraphModule, symbolic_trace

    torch.manual_seed(0)
    seq = TensorDictSequential(
        TensorDictModule(nn.Linear(3, 4), in_keys=[("obs", "x")], out_keys=["h"]),
        TensorDictSequential(
            TensorDictModule(nn.Tanh(), in_keys=["h"], out_keys=["y"]),
            TensorDictModule(nn.Linear(4, 2), in_keys=["h"], out_keys=[("n", "z")]),
        ),
    )
    traced = symbolic_trace(seq)
    assert isinstance(traced, TDGraphModule)
    td = TensorDict(obs=TensorDict(x=torch.randn(5, 3), batch_size=[5]), batch_size=[5])
    got, want = traced(td.clone()), seq(td.clone())
    assert set(got.keys(True, True)) == set(want.keys(True, True))
    for key in want.keys(True, True):
        assert torch.equal(got[key], want[key])
    reads = [
        n for n in traced.graph.nodes if n.op == "call_function" and "getitem" in str(n.target)
    ]
    assert len(reads) == 1  # "h" flows between modules; only ("obs", "x") is read
    single = symbolic_trace(TensorDictModule(nn.Linear(3, 1), in_keys=["x"], out_keys=["y"]))
    out = single(TensorDict(x=torch.ones(2, 3), batch_size=[2]))
    assert out["y"].shape == (2, 1)
    with pytest.raises(TypeError, match="TensorDictModule or a TensorDictSequential"):
        symbolic_trace(nn.Linear(1, 1))


# ------------------------------------------------------------------ torch.export with keywords
def test_dispatching_forward_shows_an_optional_tensordict():
    import inspect

    module = TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["y"])
    params = inspect.signature(module.forward).parameters
    assert params["tensordict"].default is None
    assert any(p.kind is p.VAR_KEYWORD for p in params.values())


def test_export_with_keyword_tensors():
    torch.manual_seed(0)
    module = TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["y"])
    x = torch.randn(2, 3)
    program = torch.export.export(module, args=(), kwargs={"x": x}, strict=False)
    assert torch.allclose(program.module()(x=x), module(x=x))
    seq = TensorDictSequential(
        TensorDictModule(nn.Linear(3, 4), in_keys=[("obs", "x")], out_keys=["h"]),
        TensorDictModule(nn.Tanh(), in_keys=["h"], out_keys=["y"]),
    )
    program = torch.export.export(seq, args=(), kwargs={"obs_x": x}, strict=False)
    got, want = program.module()(obs_x=x), seq(obs_x=x)
    assert all(torch.allclose(g, w) for g, w in zip(got, want, strict=True))


def test_export_of_a_probabilistic_policy():
    torch.manual_seed(0)
    policy = ProbabilisticTensorDictSequential(
        TensorDictModule(
            nn.Sequential(nn.Linear(3, 4), NormalParamExtractor()),
            in_keys=["obs"],
            out_keys=["loc", "scale"],
        ),
        ProbabilisticTensorDictModule(
            in_keys=["loc", "scale"],
            out_keys=["action"],
            distribution_class=torch.distributions.Normal,
            # argument validation reads the data (scale > 0): export cannot trace it, here
            # as in the reference
            distribution_kwargs={"validate_args": False},
        ),
    )
    obs = torch.randn(2, 3)
    program = torch.export.export(policy, args=(), kwargs={"obs": obs}, strict=False)
    got, want = program.module()(obs=obs), policy(obs=obs)
    assert all(torch.allclose(g, w) for g, w in zip(got, want, strict=True))


# ------------------------------------------------------------------ the README's checkpoint
def _model():
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))


def test_checkpoint_round_trip_through_memory_mapped_files(tmp_path):
    pytest.importorskip("tensordict.memmap", reason="needs tensordict-memmap")
    torch.manual_seed(0)
    model = _model().eval()
    model[1].running_mean.add_(0.5)
    params = TensorDict.from_module(model)
    params.memmap(tmp_path / "ckpt")

    fresh = _model().eval()
    loaded = TensorDict.load_memmap(tmp_path / "ckpt")
    loaded.to_module(fresh)
    x = torch.randn(5, 3)
    assert torch.equal(fresh(x), model(x))
    weight = fresh[0].weight
    assert isinstance(weight, nn.Parameter) and weight.requires_grad
    assert weight.data_ptr() == loaded["0", "weight"].data_ptr()  # the mapped memory
    assert list(dict(fresh.named_parameters())) == list(dict(model.named_parameters()))
    # a sub-module from its sub-tensordict
    layer = nn.Linear(4, 2)
    loaded["3"].to_module(layer)
    assert torch.equal(layer.weight, model[3].weight)
    # as a context manager, the fresh values come back afterwards
    other = _model().eval()
    before = other[0].weight.detach().clone()
    with loaded.to_module(other):
        assert torch.equal(other(x), model(x))
    assert torch.equal(other[0].weight, before)
