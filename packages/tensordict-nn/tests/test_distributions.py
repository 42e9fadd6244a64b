"""Distributions and parameter mappings, checked against torch.distributions and numerical
integration."""

from __future__ import annotations

import math

import pytest
import torch
from torch import distributions as D

from tensordict import TensorDict
from tensordict.nn import (
    AddStateIndependentNormalScale,
    CompositeDistribution,
    Delta,
    NormalParamExtractor,
    OneHotCategorical,
    TruncatedNormal,
    add_custom_mapping,
    biased_softplus,
    inv_softplus,
    mappings,
    rand_one_hot,
    set_composite_lp_aggregate,
)

# --------------------------------------------------------------------------- Delta


def test_delta_shapes_samples_and_log_prob():
    param = torch.randn(3, 4, 2)
    d = Delta(param)
    assert d.batch_shape == (3, 4) and d.event_shape == (2,)
    assert d.sample((5,)).shape == (5, 3, 4, 2)
    assert (
        torch.equal(d.sample(), param) and torch.equal(d.mode, param) and torch.equal(d.mean, param)
    )
    assert torch.isinf(d.log_prob(param)).all() and (d.log_prob(param) > 0).all()
    other = param.clone()
    other[0, 0, 1] += 1
    lp = d.log_prob(other)
    assert lp[0, 0] == -math.inf and lp.shape == (3, 4) and (lp[1:] == math.inf).all()
    custom = Delta(torch.zeros(3, 4), batch_shape=[3], event_shape=[4])
    assert custom.batch_shape == (3,) and custom.event_shape == (4,)
    with pytest.raises(NotImplementedError, match="entropy"):
        d.entropy()


def test_delta_rsample_is_differentiable():
    param = torch.zeros(2, requires_grad=True)
    Delta(param).rsample((3,)).sum().backward()
    assert param.grad.tolist() == [3.0, 3.0]
    assert not Delta(param).sample().requires_grad


# --------------------------------------------------------------------------- TruncatedNormal


@pytest.mark.parametrize(
    "loc,scale,a,b",
    [(0.0, 1.0, -1.0, 2.0), (1.5, 0.5, 0.0, 1.0), (-2.0, 3.0, -1.0, 4.0), (0.0, 1.0, 2.0, 3.0)],
)
def test_truncated_normal_against_numerical_integration(loc, scale, a, b):
    d = TruncatedNormal(
        torch.tensor(loc, dtype=torch.float64),
        torch.tensor(scale, dtype=torch.float64),
        torch.tensor(a, dtype=torch.float64),
        torch.tensor(b, dtype=torch.float64),
    )
    x = torch.linspace(a, b, 20001, dtype=torch.float64)
    density = d.log_prob(x).exp()
    # the density integrates to one over [a, b] ...
    torch.testing.assert_close(
        torch.trapezoid(density, x), torch.tensor(1.0, dtype=torch.float64), atol=1e-6, rtol=0
    )
    # ... is the normal density up to that normalisation ...
    normal = D.Normal(
        torch.tensor(loc, dtype=torch.float64), torch.tensor(scale, dtype=torch.float64)
    )
    ratio = density / normal.log_prob(x).exp()
    torch.testing.assert_close(ratio, ratio[0].expand_as(ratio))
    # ... and its moments, entropy and CDF are the integrals
    mean = torch.trapezoid(x * density, x)
    var = torch.trapezoid((x - mean) ** 2 * density, x)
    entropy = -torch.trapezoid(density * density.log(), x)
    torch.testing.assert_close(d.mean, mean, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(d.variance, var, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(d.entropy(), entropy, atol=1e-6, rtol=1e-6)
    mid = (a + b) / 2
    cdf_mid = torch.trapezoid(density[x <= mid], x[x <= mid])
    torch.testing.assert_close(
        d.cdf(torch.tensor(mid, dtype=torch.float64)), cdf_mid, atol=1e-4, rtol=0
    )
    torch.testing.assert_close(
        d.icdf(d.cdf(torch.tensor(mid, dtype=torch.float64))),
        torch.tensor(mid, dtype=torch.float64),
    )
    assert d.mode == min(max(loc, a), b)


def test_truncated_normal_samples_stay_in_bounds_and_carry_gradients():
    loc = torch.zeros(4, requires_grad=True)
    d = TruncatedNormal(loc, torch.ones(4), -0.5, 0.5)
    sample = d.rsample((1000,))
    assert sample.shape == (1000, 4) and sample.min() >= -0.5 and sample.max() <= 0.5
    sample.sum().backward()
    assert loc.grad is not None and torch.isfinite(loc.grad).all()
    torch.testing.assert_close(sample.mean(0).detach(), d.mean.detach(), atol=0.05, rtol=0)
    with pytest.raises(ValueError, match="a < b"):
        TruncatedNormal(0.0, 1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="support"):
        TruncatedNormal(torch.zeros(1), torch.ones(1), -1.0, 1.0, validate_args=True).log_prob(
            torch.tensor([2.0])
        )


# --------------------------------------------------------------------------- OneHotCategorical


def test_one_hot_categorical_against_torch():
    logits = torch.randn(5, 4)
    ours, ref = OneHotCategorical(logits=logits), D.OneHotCategorical(logits=logits)
    sample = ours.sample((3,))
    assert sample.shape == (3, 5, 4) and (sample.sum(-1) == 1).all()
    torch.testing.assert_close(ours.log_prob(sample), ref.log_prob(sample))
    torch.testing.assert_close(ours.entropy(), ref.entropy())
    assert torch.equal(ours.mode.argmax(-1), logits.argmax(-1))
    assert torch.equal(ours.deterministic_sample, ours.mode)
    probs = logits.softmax(-1)
    torch.testing.assert_close(
        OneHotCategorical(probs=probs).log_prob(sample), ref.log_prob(sample)
    )


def test_one_hot_straight_through_rsample():
    logits = torch.zeros(4, requires_grad=True)
    d = OneHotCategorical(logits=logits)
    sample = d.rsample()
    assert (sample.detach().sum() == 1) and set(sample.detach().tolist()) <= {0.0, 1.0}
    (sample * torch.arange(4.0)).sum().backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0


def test_rand_one_hot():
    torch.manual_seed(0)
    sample = rand_one_hot(torch.tensor([[0.0, 50.0, 0.0], [50.0, 0.0, 0.0]]))
    assert sample.tolist() == [[0, 1, 0], [1, 0, 0]]
    counts = (
        rand_one_hot(torch.tensor([0.2, 0.8]).expand(4000, 2), do_softmax=False).float().mean(0)
    )
    torch.testing.assert_close(counts, torch.tensor([0.2, 0.8]), atol=0.03, rtol=0)


# --------------------------------------------------------------------------- mappings and extractors


def test_mappings_and_softplus_helpers():
    x = torch.tensor([-1.0, 0.0, 1.0])
    torch.testing.assert_close(mappings("softplus")(x), torch.nn.functional.softplus(x))
    torch.testing.assert_close(mappings("exp")(x), x.exp())
    torch.testing.assert_close(mappings("relu")(x), x.relu())
    torch.testing.assert_close(mappings("none")(x), x)
    torch.testing.assert_close(
        mappings("expln")(x), torch.tensor([math.exp(-1), 1.0, 1 + math.log(2)])
    )
    assert mappings("biased_softplus_2.0")(torch.zeros(1)).item() == pytest.approx(2.0)
    f = mappings("biased_softplus_3.0_0.5")
    assert f(torch.zeros(1)).item() == pytest.approx(3.0) and f(
        torch.tensor([-1e4])
    ).item() == pytest.approx(0.5)
    assert biased_softplus(1.0)(torch.zeros(1)).item() == pytest.approx(1.0)
    assert torch.nn.functional.softplus(torch.tensor(inv_softplus(1.5))).item() == pytest.approx(
        1.5
    )
    add_custom_mapping("cube", lambda t: t**3)
    assert mappings("cube")(torch.tensor(2.0)) == 8
    with pytest.raises(NotImplementedError, match="Unknown mapping"):
        mappings("nope")
    with pytest.raises(TypeError, match="callable"):
        add_custom_mapping("bad", 3)


def test_normal_param_extractor():
    loc, scale = NormalParamExtractor()(torch.tensor([[1.0, 2.0, 0.0, -100.0]]))
    assert loc.tolist() == [[1.0, 2.0]]
    assert scale[0, 0].item() == pytest.approx(1.0) and scale[0, 1].item() == pytest.approx(
        0.01, abs=1e-4
    )
    _, scale = NormalParamExtractor("exp", scale_lb=0.1)(torch.tensor([0.0, 0.0, 0.0, -10.0]))
    assert scale.tolist() == pytest.approx([1.0, 0.1])
    with pytest.raises(ValueError, match=r"last dimension of even size.*shape \(3,\).*odd"):
        NormalParamExtractor()(torch.zeros(3))


def test_normal_param_extractor_needs_a_dimension():
    x = torch.tensor(1.0)
    with pytest.raises(RuntimeError, match="at least one dimension, the last of even size.*0-dim"):
        NormalParamExtractor()(x)
    assert x.item() == 1.0


def test_add_state_independent_normal_scale():
    module = AddStateIndependentNormalScale(3, scale_mapping="relu", init_value=2.0)
    loc, scale, extra = module(torch.zeros(5, 3), torch.ones(1))
    assert scale.shape == (5, 3) and (scale == 2).all() and extra.tolist() == [1.0]
    assert isinstance(module.scale, torch.nn.Parameter)
    buffer_only = AddStateIndependentNormalScale((2,), make_param=False)
    assert "scale" in dict(buffer_only.named_buffers())
    with pytest.raises(RuntimeError, match="scale shape"):
        module(torch.zeros(5, 4))


# --------------------------------------------------------------------------- CompositeDistribution


def _params():
    return TensorDict(
        {
            "cont": {"loc": torch.randn(3, 4), "scale": torch.rand(3, 4) + 0.5},
            ("nested", "disc"): {"logits": torch.randn(3, 10)},
        },
        [3],
    )


def _composite(params, **kwargs):
    return CompositeDistribution(
        params, distribution_map={"cont": D.Normal, ("nested", "disc"): D.Categorical}, **kwargs
    )


def test_composite_samples_and_log_prob_match_the_components():
    params = _params()
    dist = _composite(params)
    assert dist.batch_shape == (3,) and set(dist.dists) == {"cont", ("nested", "disc")}
    sample = dist.sample((2,))
    assert sample.batch_size == (2, 3)
    assert sample["cont"].shape == (2, 3, 4) and sample["nested", "disc"].shape == (2, 3)
    normal = D.Normal(params["cont", "loc"], params["cont", "scale"])
    cat = D.Categorical(logits=params["nested", "disc", "logits"])
    lp = dist.log_prob(sample)
    torch.testing.assert_close(lp["cont_log_prob"], normal.log_prob(sample["cont"]))
    torch.testing.assert_close(
        lp["nested", "disc_log_prob"], cat.log_prob(sample["nested", "disc"])
    )
    with set_composite_lp_aggregate(True):
        total = dist.log_prob(sample)
        expected = normal.log_prob(sample["cont"]).sum(-1) + cat.log_prob(sample["nested", "disc"])
        torch.testing.assert_close(total, expected)
        assert "cont_log_prob" in sample.keys()  # written back when aggregating
        torch.testing.assert_close(dist.entropy(), normal.entropy().sum(-1) + cat.entropy())
    ent = dist.entropy()
    torch.testing.assert_close(ent["cont_entropy"], normal.entropy())
    torch.testing.assert_close(ent["nested", "disc_entropy"], cat.entropy())


def test_composite_names_modes_and_cdf():
    params = _params()
    dist = _composite(
        params, name_map={"cont": ("out", "cont"), ("nested", "disc"): ("out", "disc")}
    )
    sample = dist.sample()
    assert set(sample.keys(True, True)) == {("out", "cont"), ("out", "disc")}
    assert torch.equal(dist.mode["out", "cont"], params["cont", "loc"])
    assert torch.equal(
        dist.deterministic_sample["out", "disc"], params["nested", "disc", "logits"].argmax(-1)
    )
    cont_only = CompositeDistribution(params.select("cont"), distribution_map={"cont": D.Normal})
    s = cont_only.rsample((5,))
    cont_only.cdf(s)
    cont_only.icdf(s)
    torch.testing.assert_close(s["cont_icdf"], s["cont"], atol=1e-4, rtol=1e-4)


def test_composite_from_distributions_and_missing_params():
    d = CompositeDistribution.from_distributions(
        TensorDict(batch_size=[2]),
        {"a": D.Normal(torch.zeros(2), 1.0), ("b", "c"): D.Bernoulli(torch.full((2,), 0.5))},
    )
    s = d.sample()
    assert s["a"].shape == (2,) and s["b", "c"].shape == (2,)
    with pytest.raises(KeyError, match="no parameters for 'x'"):
        CompositeDistribution(TensorDict(), {"x": D.Normal})


def test_composite_rsample_keeps_gradients():
    params = _params()
    params["cont", "loc"].requires_grad_()
    sample = CompositeDistribution(params.select("cont"), {"cont": D.Normal}).rsample()
    sample["cont"].sum().backward()
    assert params["cont", "loc"].grad is not None
