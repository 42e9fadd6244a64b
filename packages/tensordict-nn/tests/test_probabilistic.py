"""Probabilistic modules, interaction types and probabilistic sequences."""

from __future__ import annotations

import functools
import threading

import pytest
import torch
from torch import distributions as D
from torch import nn

from tensordict import NonTensorData, TensorDict
from tensordict.nn import (
    CompositeDistribution,
    InteractionType,
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
    interaction_type,
    set_composite_lp_aggregate,
    set_interaction_type,
)


def normal_module(**kwargs):
    return ProbabilisticTensorDictModule(
        in_keys=["loc", "scale"], out_keys=["action"], distribution_class=D.Normal, **kwargs
    )


def _td(n=3):
    return TensorDict(loc=torch.arange(float(n)), scale=torch.ones(n), batch_size=[n])


# --------------------------------------------------------------------------- interaction types


def test_interaction_type_names_and_scopes():
    assert InteractionType.from_str("RanDom") is InteractionType.RANDOM
    with pytest.raises(ValueError, match="foo is not a valid InteractionType"):
        InteractionType.from_str("foo")
    assert interaction_type() is None
    with set_interaction_type("mode"):
        assert interaction_type() is InteractionType.MODE
        with set_interaction_type(InteractionType.RANDOM):
            assert interaction_type() is InteractionType.RANDOM
        assert interaction_type() is InteractionType.MODE
    assert interaction_type() is None

    @set_interaction_type("mean")
    def inside():
        return interaction_type()

    assert inside() is InteractionType.MEAN and interaction_type() is None


def test_thread_local_interaction_type():
    seen = []
    with set_interaction_type("mode", thread_local=True):
        thread = threading.Thread(target=lambda: seen.append(interaction_type()))
        thread.start()
        thread.join()
        assert interaction_type() is InteractionType.MODE
    assert seen == [None]


@pytest.mark.parametrize(
    "kind,expected",
    [
        ("deterministic", lambda d: d.mean),
        ("mode", lambda d: d.mode),
        ("mean", lambda d: d.mean),
        ("median", lambda d: d.icdf(torch.full_like(d.mean, 0.5))),
    ],
)
def test_deterministic_kinds_against_the_distribution(kind, expected):
    td = TensorDict(
        concentration1=torch.tensor([2.0, 5.0]), concentration0=torch.tensor([3.0, 1.5])
    )
    module = ProbabilisticTensorDictModule(
        in_keys=["concentration1", "concentration0"], out_keys=["x"], distribution_class=D.Beta
    )
    dist = D.Beta(td["concentration1"], td["concentration0"])
    if kind == "median":
        dist = D.Normal(torch.tensor([1.0, 2.0]), torch.ones(2))
        module = ProbabilisticTensorDictModule(["loc", "scale"], ["x"], distribution_class=D.Normal)
        td = TensorDict(loc=dist.loc, scale=dist.scale)
    with set_interaction_type(kind):
        torch.testing.assert_close(module(td)["x"], expected(dist))


def test_deterministic_fallbacks():
    # discrete: the mode (the mean of a categorical is not a value of it)
    cat = ProbabilisticTensorDictModule(
        in_keys=["probs"], out_keys=["x"], distribution_class=D.Categorical
    )
    assert cat(TensorDict(probs=torch.tensor([0.2, 0.8])))["x"] == 1
    # no mean, no mode, but rsample: an empirical mean
    tanh_normal = functools.partial(
        D.TransformedDistribution,
        D.Normal(torch.zeros(2), torch.ones(2)),
        [D.transforms.TanhTransform()],
    )
    torch.manual_seed(0)
    m = ProbabilisticTensorDictModule(
        in_keys=[], out_keys=["x"], distribution_class=tanh_normal, n_empirical_estimate=4000
    )
    assert m(TensorDict())["x"].abs().max() < 0.05
    lkj = functools.partial(D.LKJCholesky, 3, 5)
    with pytest.raises(RuntimeError, match="DETERMINISTIC, MEAN and MODE"):
        ProbabilisticTensorDictModule(in_keys=[], out_keys=["x"], distribution_class=lkj)(
            TensorDict()
        )
    with set_interaction_type("random"):
        assert ProbabilisticTensorDictModule(in_keys=[], out_keys=["x"], distribution_class=lkj)(
            TensorDict()
        )["x"].shape == (3, 3)


def test_random_sampling_is_reparameterised():
    loc = torch.zeros(3, requires_grad=True)
    td = TensorDict(loc=loc, scale=torch.ones(3), batch_size=[3])
    out = normal_module(default_interaction_type="random")(td)
    out["action"].sum().backward()
    assert loc.grad.tolist() == [1.0, 1.0, 1.0]


# --------------------------------------------------------------------------- the module


def test_log_prob_keys_and_values():
    module = normal_module(return_log_prob=True)
    assert module.out_keys == ["action", "action_log_prob"]
    assert module.dist_params_keys == ["loc", "scale"] and module.dist_sample_keys == ["action"]
    td = module(_td())
    ref = D.Normal(_td()["loc"], _td()["scale"])
    torch.testing.assert_close(td["action_log_prob"], ref.log_prob(td["action"]))
    torch.testing.assert_close(module.log_prob(td), ref.log_prob(td["action"]))
    nested = ProbabilisticTensorDictModule(
        in_keys={"loc": ("p", "mu"), "scale": ("p", "sigma")},
        out_keys=[("act", "a")],
        distribution_class=D.Normal,
        return_log_prob=True,
    )
    assert nested.log_prob_key == ("act", "a_log_prob")
    explicit = normal_module(return_log_prob=True, log_prob_key=("lp", "x"))
    assert ("lp", "x") in explicit(_td()).keys(True)


def test_log_prob_keys_follow_the_aggregation_setting_of_construction():
    with set_composite_lp_aggregate(True):
        module = normal_module(return_log_prob=True)
        assert module.log_prob_key == "sample_log_prob"
        assert "sample_log_prob" in module(_td()).keys()
    with pytest.raises(RuntimeError, match="composite_lp_aggregate"):
        module.log_prob_key


def test_distribution_kwargs_and_errors():
    module = ProbabilisticTensorDictModule(
        in_keys=["low"],
        out_keys=["x"],
        distribution_class=D.Uniform,
        distribution_kwargs={"high": 2.0},
    )
    with set_interaction_type("mean"):
        assert module(TensorDict(low=torch.tensor(0.0)))["x"] == 1.0
    bad = ProbabilisticTensorDictModule(in_keys=["loc"], out_keys=["x"])  # Delta takes "param"
    with pytest.raises(TypeError, match="must match"):
        bad(TensorDict(loc=torch.zeros(1)))
    with pytest.raises(TypeError, match="generator must be"):
        normal_module(generator=1.5)


def test_num_samples():
    module = normal_module(num_samples=4, default_interaction_type="random", return_log_prob=True)
    td = module(_td())
    assert td.batch_size == (4, 3) and td["action"].shape == (4, 3)
    assert td["action_log_prob"].shape == (4, 3)
    with set_interaction_type("mode"):
        assert module(_td()).batch_size == (3,)


def test_cache_dist():
    module = normal_module(cache_dist=True)
    module(_td())
    assert isinstance(module._dist, D.Normal)


def test_generators():
    def draw(module, td=None):
        return module(td if td is not None else _td())["action"].clone()

    random = dict(default_interaction_type="random")
    a = normal_module(generator=torch.Generator().manual_seed(0), **random)
    b = normal_module(generator=0, **random)
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = draw(a)
    assert torch.equal(torch.get_rng_state(), state), "the global generator is untouched"
    assert torch.equal(first, draw(b)) and not torch.equal(first, draw(a))
    keyed = normal_module(generator=("meta", "rng"), **random)
    td = _td()
    td["meta", "rng"] = NonTensorData(7)
    s1 = draw(keyed, td)
    seed_after = td["meta", "rng"]
    td2 = _td()
    td2["meta", "rng"] = NonTensorData(7)
    assert torch.equal(s1, draw(keyed, td2)) and seed_after != 7
    gen_td = _td()
    gen_td["meta", "rng"] = NonTensorData(torch.Generator().manual_seed(0))
    assert torch.equal(draw(keyed, gen_td), first)
    tensor_seed = TensorDict(loc=torch.zeros(3), scale=torch.ones(3), meta={"rng": torch.tensor(7)})
    draw(keyed, tensor_seed)
    assert isinstance(tensor_seed["meta", "rng"], torch.Tensor) and tensor_seed["meta", "rng"] != 7


def test_composite_distribution_in_a_module():
    params = TensorDict(
        params={
            "cont": {"loc": torch.zeros(3, 2), "scale": torch.ones(3, 2)},
            "disc": {"logits": torch.zeros(3, 4)},
        },
        batch_size=[3],
    )
    module = ProbabilisticTensorDictModule(
        in_keys=["params"],
        distribution_class=CompositeDistribution,
        return_log_prob=True,
        distribution_kwargs={"distribution_map": {"cont": D.Normal, "disc": D.Categorical}},
    )
    assert module.dist_sample_keys == ["cont", "disc"]
    assert module.log_prob_keys == ["cont_log_prob", "disc_log_prob"]
    with pytest.raises(RuntimeError, match="several log-probabilities"):
        module.log_prob_key
    td = module(params)
    assert td["cont"].shape == (3, 2) and td["disc"].shape == (3,)
    torch.testing.assert_close(td["cont_log_prob"], D.Normal(0.0, 1.0).log_prob(td["cont"]))
    lp = module.log_prob(td)
    torch.testing.assert_close(
        lp["disc_log_prob"], torch.full((3,), -torch.tensor(4.0).log().item())
    )
    with set_composite_lp_aggregate(True):
        agg = ProbabilisticTensorDictModule(
            in_keys=["params"],
            distribution_class=CompositeDistribution,
            return_log_prob=True,
            distribution_kwargs={"distribution_map": {"cont": D.Normal, "disc": D.Categorical}},
        )
        out = agg(params.clone())
        torch.testing.assert_close(
            out["sample_log_prob"], out["cont_log_prob"].sum(-1) + out["disc_log_prob"]
        )


def test_dispatch_on_a_probabilistic_module():
    module = normal_module(return_log_prob=True)
    action, lp = module(loc=torch.zeros(2), scale=torch.ones(2))
    assert action.tolist() == [0.0, 0.0] and lp.shape == (2,)


# --------------------------------------------------------------------------- sequences


def _policy(**kwargs):
    torch.manual_seed(0)
    return ProbabilisticTensorDictSequential(
        TensorDictModule(
            nn.Sequential(nn.Linear(3, 4), NormalParamExtractor()), ["obs"], ["loc", "scale"]
        ),
        normal_module(return_log_prob=True, **kwargs),
    )


def test_sequence_get_dist_log_prob_and_entropy():
    policy = _policy(default_interaction_type="random")
    assert policy.return_composite is False
    td = TensorDict(obs=torch.randn(5, 3), batch_size=[5])
    out = policy(td)
    dist = policy.get_dist(out)
    assert isinstance(dist, D.Normal)
    torch.testing.assert_close(policy.log_prob(out), dist.log_prob(out["action"]))
    torch.testing.assert_close(out["action_log_prob"], dist.log_prob(out["action"]))
    torch.testing.assert_close(policy.entropy(out), dist.entropy())
    assert policy.default_interaction_type is InteractionType.RANDOM
    assert policy.dist_params_keys == ["loc", "scale"] and policy.dist_sample_keys == ["action"]
    assert policy.in_keys == ["obs"] and policy.out_keys == [
        "loc",
        "scale",
        "action",
        "action_log_prob",
    ]
    with pytest.warns(DeprecationWarning):
        assert isinstance(policy.det_part, TensorDictSequential)


def test_sequence_return_composite_and_intermediate_samples():
    seq = ProbabilisticTensorDictSequential(
        TensorDictModule(lambda x: x + 1, ["x"], ["loc"]),
        ProbabilisticTensorDictModule(
            ["loc"], ["y"], distribution_class=D.Normal, distribution_kwargs={"scale": 1.0}
        ),
        TensorDictModule(lambda y: y * 2, ["y"], ["loc2"]),
        ProbabilisticTensorDictModule(
            {"loc": "loc2"}, ["z"], distribution_class=D.Normal, distribution_kwargs={"scale": 1.0}
        ),
    )
    assert seq.return_composite is True
    td = TensorDict(x=torch.zeros(4), batch_size=[4])
    dist = seq.get_dist(td.clone())
    assert isinstance(dist, CompositeDistribution) and set(dist.dists) == {"y", "z"}
    out = seq(td)
    lp = seq.log_prob(out)
    torch.testing.assert_close(lp["y_log_prob"], D.Normal(out["loc"], 1.0).log_prob(out["y"]))
    torch.testing.assert_close(lp["z_log_prob"], D.Normal(out["loc2"], 1.0).log_prob(out["z"]))
    assert isinstance(seq[:2], ProbabilisticTensorDictSequential)
    assert type(seq[2:3]) is TensorDictSequential
    with pytest.raises(TypeError, match="last module must be probabilistic.*TensorDictModule"):
        ProbabilisticTensorDictSequential(
            seq[1], TensorDictModule(lambda y: y, ["y"], ["w"]), return_composite=False
        )


def test_sequence_without_probabilistic_modules_runs_but_has_no_distribution():
    det = TensorDictModule(lambda x: x + 1, ["x"], ["y"])
    seq = ProbabilisticTensorDictSequential(det)  # accepted, as the reference
    assert seq.return_composite is True
    td = TensorDict(x=torch.zeros(()))
    assert seq(td)["y"] == 1
    for method in (seq.get_dist, seq.log_prob):
        with pytest.raises(RuntimeError, match=r"no probabilistic module.*\['TensorDictModule'\]"):
            method(td)
    # return_composite=False needs a probabilistic last module; no modules at all: none
    with pytest.raises(TypeError, match="last module must be probabilistic.*TensorDictModule"):
        ProbabilisticTensorDictSequential(det, return_composite=False)
    with pytest.raises(ValueError, match="needs modules.*none were given"):
        ProbabilisticTensorDictSequential()
    # deterministic modules after a probabilistic one: a composite distribution
    seq = ProbabilisticTensorDictSequential(
        ProbabilisticTensorDictModule(
            ["loc"], ["y"], distribution_class=D.Normal, distribution_kwargs={"scale": 1.0}
        ),
        TensorDictModule(lambda y: y * 2, ["y"], ["z"]),
    )
    assert seq.return_composite is True
    assert set(seq.get_dist(TensorDict(loc=torch.zeros(2), batch_size=[2])).dists) == {"y"}


def test_sequence_selected_out_keys_and_inplace():
    policy = ProbabilisticTensorDictSequential(
        TensorDictModule(lambda x: (x, x.abs() + 1), ["x"], ["loc", "scale"]),
        normal_module(return_log_prob=True),
        selected_out_keys=["action"],
    )
    td = policy(TensorDict(x=torch.zeros(2), batch_size=[2]))
    assert set(td.keys()) == {"x", "action"}
