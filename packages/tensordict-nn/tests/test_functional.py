"""from_module / from_modules / to_module: parameters as tensordicts, functional calls,
ensembles with torch.vmap and meta-learning updates."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.func import functional_call, stack_module_state

import tensordict
from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.nn import TensorDictParams


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Tanh(), nn.Linear(4, 2))


# --------------------------------------------------------------------------- from_module


def test_from_module_mirrors_the_tree_without_copies():
    net = _net()
    params = TensorDict.from_module(net)
    assert sorted(params.keys(True, True)) == [
        ("0", "bias"), ("0", "weight"),
        ("1", "bias"), ("1", "num_batches_tracked"), ("1", "running_mean"),
        ("1", "running_var"), ("1", "weight"),
        ("3", "bias"), ("3", "weight"),
    ]  # fmt: skip
    assert (
        params["0", "weight"] is net[0].weight
        and params["1", "running_mean"] is net[1].running_mean
    )
    assert not params.is_locked and tensordict.from_module(net).is_locked
    assert "2" not in params.keys()
    assert "2" in TensorDict.from_module(net, filter_empty=False).keys()


def test_from_module_as_module_and_state_dict():
    net = _net()
    as_module = TensorDict.from_module(net, as_module=True)
    assert isinstance(as_module, TensorDictParams) and as_module["0", "weight"] is net[0].weight
    via_sd = TensorDict.from_module(net, use_state_dict=True)
    assert via_sd["1", "running_var"] is net[1].running_var


def test_from_modules_stacks_and_keeps_kinds():
    nets = [_net() for _ in range(3)]
    stacked = TensorDict.from_modules(*nets)
    assert stacked.batch_size == (3,) and stacked.is_locked
    assert isinstance(stacked["0", "weight"], nn.Parameter) and stacked["0", "weight"].is_leaf
    assert not isinstance(stacked["1", "running_mean"], nn.Parameter)
    for i, net in enumerate(nets):
        torch.testing.assert_close(stacked["0", "weight"][i], net[0].weight.detach())
    lazy = TensorDict.from_modules(*nets, lazy_stack=True)
    assert (
        isinstance(lazy, LazyStackedTensorDict)
        and lazy.tensordicts[1]["3", "bias"] is nets[1][3].bias
    )
    same = TensorDict.from_modules(nets[0], nets[0], expand_identical=True)
    assert same["0", "weight"].stride(0) == 0
    assert isinstance(TensorDict.from_modules(*nets, as_module=True), TensorDictParams)


@pytest.mark.parametrize("as_module", [False, True])
def test_from_modules_expand_identical_shares_the_parameter(as_module):
    shared = nn.Linear(3, 3)
    nets = [nn.Sequential(shared, nn.Linear(3, 2)) for _ in range(3)]
    params = TensorDict.from_modules(*nets, as_module=as_module, expand_identical=True)
    weight = params["0", "weight"]
    assert not isinstance(weight, nn.Parameter)  # a view of the shared one
    assert weight.data_ptr() == shared.weight.data_ptr() and weight.stride(0) == 0
    assert isinstance(params["1", "weight"], nn.Parameter)
    template = nn.Sequential(nn.Linear(3, 3, device="meta"), nn.Linear(3, 2, device="meta"))

    def call(p, x):
        with p.to_module(template, preserve_module_state=False):
            return template(x)

    x = torch.randn(3)
    torch.vmap(call, (0, None))(params, x).sum().backward()
    # the shared layer gets the sum over the three copies; the others are not touched
    expected = torch.autograd.grad(
        sum(net(x).sum() for net in nets), shared.weight, retain_graph=False
    )[0]
    torch.testing.assert_close(shared.weight.grad, expected)
    assert nets[0][1].weight.grad is None and params["1", "weight"].grad is not None


def test_from_modules_as_module_under_vmap():
    nets = [nn.Linear(3, 2) for _ in range(4)]
    params = TensorDict.from_modules(*nets, as_module=True)
    assert isinstance(params, TensorDictParams)
    template = nn.Linear(3, 2, device="meta")

    def call(p, x):
        with p.to_module(template, preserve_module_state=False):
            return template(x)

    x = torch.randn(3)
    out = torch.vmap(call, (0, None))(params, x)
    torch.testing.assert_close(out, torch.stack([net(x) for net in nets]).detach())
    out.sum().backward()
    assert all(p.grad is not None for p in params.values(True, True))


def test_from_modules_lazy_stack_is_not_a_module():
    with pytest.raises(RuntimeError, match="TensorDictParams"):
        TensorDict.from_modules(nn.Linear(2, 2), nn.Linear(2, 2), as_module=True, lazy_stack=True)


def test_from_modules_rejects_different_structures():
    with pytest.raises(ValueError, match="same structure"):
        TensorDict.from_modules(nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 2)))
    with pytest.raises(ValueError, match="different shapes"):
        TensorDict.from_modules(nn.Linear(2, 2), nn.Linear(3, 2))


# --------------------------------------------------------------------------- to_module


def test_to_module_returns_the_swap_and_puts_values_in():
    net = nn.Linear(2, 2)
    old_weight = net.weight
    zeros = TensorDict.from_module(net).detach().clone().zero_()
    swap = zeros.to_module(net)
    assert swap["weight"] is old_weight
    assert isinstance(net.weight, nn.Parameter) and (net.weight == 0).all()
    assert "weight" in dict(net.named_parameters())
    swap.to_module(net, return_swap=False)
    assert net.weight is old_weight


def test_to_module_context_manager_restores_even_on_exception():
    net = _net()
    before = {k: v for k, v in TensorDict.from_module(net).items(True, True)}
    zeros = TensorDict.from_module(net).detach().clone().zero_()
    with pytest.raises(ZeroDivisionError):
        with zeros.to_module(net):
            assert (net[0].weight == 0).all()
            1 / 0
    after = TensorDict.from_module(net)
    for key, value in before.items():
        assert after.get(key) is value, key


def test_to_module_inplace_copies_into_the_same_tensors():
    net = nn.Linear(2, 2)
    weight = net.weight
    original = weight.detach().clone()
    zeros = TensorDict.from_module(net).detach().clone().zero_()
    with zeros.to_module(net, inplace=True) as swap:
        assert net.weight is weight and (weight == 0).all()
        torch.testing.assert_close(swap["weight"], original)
    assert net.weight is weight
    torch.testing.assert_close(weight.detach(), original)


def test_to_module_swap_dest_and_use_state_dict():
    net = nn.Linear(2, 2)
    weight = net.weight
    dest = TensorDict()
    zeros = TensorDict.from_module(net).detach().clone().zero_()
    assert zeros.to_module(net, swap_dest=dest) is dest and dest["weight"] is weight
    dest.to_module(net)
    assert net.weight is weight
    with zeros.to_module(net, use_state_dict=True):
        assert (net.weight == 0).all() and isinstance(net.weight, nn.Parameter)
    assert net.weight is weight


def test_to_module_missing_name_names_it_and_leaves_the_module_unchanged():
    net = _net()
    before = {k: v for k, v in TensorDict.from_module(net).items(True, True)}
    bad = TensorDict.from_module(net).detach().clone()
    bad["3", "wieght"] = torch.zeros(2, 4)
    with pytest.raises(KeyError, match=r"Linear has no parameter or buffer '3\.wieght'.*unchanged"):
        bad.to_module(net)
    bad = TensorDict({"7": {"weight": torch.zeros(1)}, "0": {"weight": torch.zeros(4, 3)}})
    with pytest.raises(KeyError, match="'7' names no submodule"):
        bad.to_module(net)
    after = TensorDict.from_module(net)
    assert all(after.get(k) is v for k, v in before.items())


def test_to_module_preserve_module_state():
    net = nn.Linear(4, 2)
    net.weight.requires_grad_(False)
    plain = TensorDict.from_module(net).detach().clone()
    plain.to_module(net)
    assert isinstance(net.weight, nn.Parameter) and not net.weight.requires_grad
    assert net.bias.requires_grad and sorted(net.state_dict()) == ["bias", "weight"]
    plain.to_module(net, preserve_module_state=False)
    assert not isinstance(net.weight, nn.Parameter) and "weight" not in net.state_dict()
    buffers = nn.Module()
    buffers.register_buffer("buf", torch.ones(2))
    TensorDict(buf=nn.Parameter(torch.zeros(2))).to_module(buffers)
    assert "buf" in dict(buffers.named_buffers()) and not isinstance(buffers.buf, nn.Parameter)


def test_to_module_shared_submodule_is_restored():
    shared = nn.Linear(3, 3)
    net = nn.Sequential(shared, nn.Sequential(shared))
    weight = shared.weight
    params = TensorDict.from_module(net)
    with params.detach().clone().zero_().to_module(net):
        assert (shared.weight == 0).all()
    assert shared.weight is weight


def _module_state(module: nn.Module) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Every parameter and buffer of ``module``: the object and a copy of its values."""
    named = [*module.named_parameters(), *module.named_buffers()]
    return {name: (t, t.detach().clone()) for name, t in named}


def _assert_unchanged(module: nn.Module, before: dict) -> None:
    after = dict([*module.named_parameters(), *module.named_buffers()])
    assert sorted(after) == sorted(before)
    for name, (tensor, values) in before.items():
        assert after[name] is tensor, name
        torch.testing.assert_close(tensor.detach(), values, rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["swap", "requires_grad", "inplace", "state_dict"])
def test_to_module_refuses_a_value_of_another_shape_and_leaves_the_module(mode):
    net = nn.Sequential(nn.Linear(4, 2), nn.Linear(2, 3))
    before = _module_state(net)
    bad = TensorDict.from_module(net).detach().clone().zero_()
    bad["1", "weight"] = torch.zeros(5, 5)  # the second layer: the first one is written first
    if mode == "requires_grad":  # values written as they are (no nn.Parameter wrapping)
        bad = bad.requires_grad_()
    kwargs = {"inplace": mode == "inplace", "use_state_dict": mode == "state_dict"}
    with pytest.raises(RuntimeError, match=r"'1\.weight' has shape \(5, 5\).*\(3, 2\)"):
        bad.to_module(net, **kwargs)
    _assert_unchanged(net, before)
    assert net[1](torch.ones(2)).shape == (3,)


def test_to_module_refuses_the_params_of_a_model_of_other_sizes():
    small, large = nn.Linear(4, 2), nn.Linear(5, 3)
    before = _module_state(small)
    params = TensorDict.from_module(large)
    with pytest.raises(RuntimeError, match=r"'(weight|bias)' has shape.*in Linear has shape"):
        params.to_module(small)
    with pytest.raises(RuntimeError, match="'bias' has shape"):
        TensorDict(bias=torch.zeros(5)).to_module(small)
    _assert_unchanged(small, before)
    target = TensorDict.from_module(small, as_module=True)  # a TensorDictParams target
    weight = target["weight"]
    with pytest.raises(RuntimeError, match=r"'weight' has shape \(3, 5\)"):
        params.to_module(target)
    assert target["weight"] is weight and target["weight"].shape == (2, 4)


def test_to_module_inplace_needs_the_same_shape_and_a_dtype_that_holds_the_values():
    net = nn.Sequential(nn.Linear(4, 2), nn.BatchNorm1d(2))
    before = _module_state(net)
    # broadcastable, which copy_ would accept: every row would get the same values
    broadcast = TensorDict.from_module(net).detach().clone()
    broadcast["0", "weight"] = torch.ones(4)
    with pytest.raises(RuntimeError, match=r"'0\.weight' has shape \(4,\).*same shape"):
        broadcast.to_module(net, inplace=True)
    fractional = TensorDict.from_module(net).detach().clone().zero_()
    fractional["1", "num_batches_tracked"] = torch.tensor(2.5)
    with pytest.raises(RuntimeError, match=r"'1\.num_batches_tracked' has dtype torch\.float32"):
        fractional.to_module(net, inplace=True)
    with pytest.raises(RuntimeError, match=r"'1\.num_batches_tracked' has dtype"):
        fractional.to_module(net, inplace=True, use_state_dict=True)
    _assert_unchanged(net, before)
    # a float64 copy of the values is cast back without loss of kind
    doubled = TensorDict.from_module(net).detach().clone().double() * 2
    doubled["1", "num_batches_tracked"] = torch.tensor(3)
    doubled.to_module(net, inplace=True, return_swap=False)
    torch.testing.assert_close(net[0].weight.detach(), before["0.weight"][1] * 2)
    assert net[1].num_batches_tracked.item() == 3


def test_to_module_accepts_stacked_values_and_per_sample_shapes_under_vmap():
    nets = [nn.Linear(3, 2) for _ in range(4)]
    stacked = TensorDict.from_modules(*nets)  # [4, 2, 3] weights
    template = nn.Linear(3, 2)
    # stacked values into a module (as the reference; meta copies make a stacked template)
    with stacked.detach().to("meta").to_module(template, preserve_module_state=False):
        meta_template = copy.deepcopy(template)
    assert meta_template.weight.shape == (4, 2, 3) and meta_template.weight.is_meta
    assert template.weight.shape == (2, 3)

    def call(p, x):  # inside vmap the values show their per-sample shape [2, 3]
        with p.to_module(meta_template):
            return meta_template(x)

    x = torch.randn(3)
    out = torch.vmap(call, (0, None))(stacked, x)
    torch.testing.assert_close(out, torch.stack([net(x) for net in nets]).detach())
    bad = stacked.clone()
    bad["weight"] = torch.zeros(4, 3, 3)
    with pytest.raises(RuntimeError, match=r"'weight' has shape \(3, 3\).*\(4, 2, 3\)"):
        torch.vmap(call, (0, None))(bad, x)
    assert meta_template.weight.shape == (4, 2, 3)


def test_to_module_into_stacked_params_checks_the_dims_after_the_batch():
    net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 3))
    params = TensorDict.from_modules(net, net, as_module=True)  # batch [2]
    weight = params["1", "weight"]
    three = params[0].expand(3).clone().apply(lambda x: x.data * 0)  # batch [3]: accepted
    with three.to_module(params):
        assert params["1", "weight"].shape == (3, 3, 2) and (params == 0).all()
    assert params["1", "weight"] is weight
    bad = three.clone()
    bad["1", "weight"] = torch.zeros(3, 2, 3)  # the layer's own dims are wrong
    with pytest.raises(RuntimeError, match=r"'1\.weight' has shape \(3, 2, 3\).*\(2, 3, 2\)"):
        bad.to_module(params)
    assert params["1", "weight"] is weight and params["0", "weight"].shape == (2, 2, 2)


def test_to_module_into_a_tensordict_params():
    params = TensorDict.from_module(nn.Linear(2, 2), as_module=True)
    weight = params["weight"]
    zeros = params.apply(lambda x: x.data * 0)
    with zeros.to_module(params):
        assert (params == 0).all()
    assert params["weight"] is weight


def test_functional_call_with_gradients_to_the_values():
    net = nn.Linear(3, 1)
    x = torch.randn(5, 3)
    params = TensorDict.from_module(net).detach().clone().requires_grad_()
    with params.to_module(net):
        out = net(x).sum()
    out.backward()
    torch.testing.assert_close(params["weight"].grad, x.sum(0, keepdim=True))
    torch.testing.assert_close(params["bias"].grad, torch.full((1,), 5.0))
    assert net.weight.grad is None  # the module's own parameters were not used


# --------------------------------------------------------------------------- ensembles and meta-learning


def test_ensemble_of_five_mlps_equals_the_models_one_by_one(make_mlp):
    models = [make_mlp(4, 16, 3, seed=i) for i in range(5)]
    x = torch.randn(8, 4)
    params = TensorDict.from_modules(*models)
    template = make_mlp(4, 16, 3)

    def call(p, inp):
        with p.to_module(template):
            return template(inp)

    out = torch.vmap(call, (0, None))(params, x)
    loss = out.pow(2).sum()
    grads = torch.autograd.grad(loss, list(params.values(True, True)))
    grads = TensorDict(dict(zip(params.keys(True, True), grads)), batch_size=[5])
    for i, model in enumerate(models):
        ref = model(x)
        torch.testing.assert_close(out[i], ref)
        ref_grads = torch.autograd.grad(ref.pow(2).sum(), list(model.parameters()))
        for (name, _), g in zip(model.named_parameters(), ref_grads):
            torch.testing.assert_close(grads[i].get(tuple(name.split("."))), g)


def test_ensemble_matches_torch_func_stack_module_state(make_mlp):
    models = [make_mlp(4, 8, 2, seed=10 + i) for i in range(3)]
    x = torch.randn(6, 4)
    state, buffers = stack_module_state(models)
    template = make_mlp(4, 8, 2)
    expected = torch.vmap(
        lambda p, b, inp: functional_call(template, (p, b), (inp,)), (0, 0, None)
    )(state, buffers, x)
    params = TensorDict.from_modules(*models)

    def call(p, inp):
        with p.to_module(template):
            return template(inp)

    torch.testing.assert_close(torch.vmap(call, (0, None))(params, x), expected)


def test_maml_update_inside_to_module_equals_functional_call(make_mlp):
    torch.manual_seed(0)
    model = make_mlp(3, 8, 1, seed=3)
    x_in, y_in = torch.randn(10, 3), torch.randn(10, 1)
    x_out, y_out = torch.randn(10, 3), torch.randn(10, 1)
    lr = 0.1

    # tensordict route
    params = TensorDict.from_module(model)
    with params.to_module(model):
        inner = (model(x_in) - y_in).pow(2).mean()
    grads = torch.autograd.grad(inner, list(params.values(True, True)), create_graph=True)
    grads = TensorDict(dict(zip(params.keys(True, True), grads)))
    adapted = params - lr * grads
    with adapted.to_module(model):
        outer = (model(x_out) - y_out).pow(2).mean()
    meta_grads = torch.autograd.grad(outer, list(params.values(True, True)))

    # torch.func route
    named = dict(model.named_parameters())
    inner_ref = (functional_call(model, named, (x_in,)) - y_in).pow(2).mean()
    grads_ref = torch.autograd.grad(inner_ref, list(named.values()), create_graph=True)
    adapted_ref = {k: v - lr * g for (k, v), g in zip(named.items(), grads_ref)}
    outer_ref = (functional_call(model, adapted_ref, (x_out,)) - y_out).pow(2).mean()
    meta_grads_ref = torch.autograd.grad(outer_ref, list(named.values()))

    torch.testing.assert_close(outer, outer_ref)
    by_name = dict(zip(params.keys(True, True), meta_grads))
    for name, g in zip(named, meta_grads_ref):
        torch.testing.assert_close(by_name[tuple(name.split("."))], g)
    assert all(isinstance(p, nn.Parameter) for p in model.parameters())


def test_vmap_with_batchnorm_buffers(make_mlp):
    nets = [_net().eval() for _ in range(2)]
    params = TensorDict.from_modules(*nets)
    template = _net().eval()
    x = torch.randn(5, 3)

    def call(p, inp):
        with p.to_module(template):
            return template(inp)

    out = torch.vmap(call, (0, None))(params, x)
    for i, net in enumerate(nets):
        torch.testing.assert_close(out[i], net(x))


@pytest.mark.parametrize("as_module", [False, True])
def test_to_module_with_parameters_bound_to_a_first_class_dim(as_module):
    """Stacked parameters indexed with a first-class dim: the module computes every copy
    at once, its output carries the dim (the oracle: each copy's parameters, one by one)."""
    from functorch import dim as ftdim

    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    stacked = TensorDict.from_module(module, as_module=as_module).expand(5).clone()
    stacked = stacked.apply(lambda p: p + torch.randn_like(p))
    x = torch.randn(6, 3)
    oracle = copy.deepcopy(module)  # (the swap below leaves plain attributes in module)
    d0 = ftdim.dims(1)
    TensorDictParams(stacked)[d0].to_module(module, preserve_module_state=False)
    y = module(x)
    assert y.dims == (d0,)
    for i in range(5):
        with stacked[i].to_module(oracle):
            torch.testing.assert_close(y.order(d0)[i], oracle(x))


def _ensemble_call(module):
    def call(params, td):
        with params.to_module(module):
            return module(td)

    return call


@pytest.mark.parametrize(
    "make",
    [
        lambda: tensordict.nn.TensorDictModule(_net().eval(), ["x"], ["y"]),
        lambda: tensordict.nn.TensorDictSequential(
            tensordict.nn.TensorDictModule(nn.Linear(3, 4), ["x"], ["h"]),
            tensordict.nn.TensorDictModule(nn.Linear(4, 2), ["h"], ["y"]),
        ),
    ],
    ids=["module with buffers (BatchNorm)", "sequential"],
)
@pytest.mark.parametrize("chunk_size", [None, 2])
@pytest.mark.parametrize("params_dim", [0, -1])
def test_vmap_over_stacked_parameters_matches_each_copy(make, chunk_size, params_dim):
    """vmap(call, (params_dim, None)) over parameters stacked along their one batch dim
    (-1 names it too, whatever the parameters' own dims): each row is that copy's module
    applied alone."""
    torch.manual_seed(0)
    module = make()
    copies = [
        TensorDict.from_module(module)
        .detach()
        .clone()
        .apply(lambda p: p + torch.rand_like(p) if p.is_floating_point() else p)  # var > 0
        for _ in range(3)
    ]
    params = torch.stack(copies, 0)
    td = TensorDict(x=torch.randn(5, 3), batch_size=[5])
    out = torch.vmap(_ensemble_call(module), (params_dim, None), chunk_size=chunk_size)(params, td)
    assert out.batch_size == (3, 5)
    for i, copy_params in enumerate(copies):
        expected = _ensemble_call(module)(copy_params, td.clone())["y"]
        torch.testing.assert_close(out["y"][i], expected)


@pytest.mark.parametrize("randomness", ["same", "different"])
def test_vmap_randomness_over_stacked_parameters(randomness):
    module = tensordict.nn.TensorDictModule(
        nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.5)), ["x"], ["y"]
    ).train()
    params = TensorDict.from_modules(*[copy.deepcopy(module) for _ in range(2)])
    params = params.detach().clone().apply(torch.ones_like)  # equal copies
    td = TensorDict(x=torch.ones(4, 3), batch_size=[4])
    out = torch.vmap(_ensemble_call(module), (0, None), randomness=randomness)(params, td)
    same = torch.equal(out["y"][0], out["y"][1])
    assert same is (randomness == "same")


def test_a_module_applied_to_a_first_class_dim_index_maps_over_the_bound_dim():
    from functorch import dim as ftdim

    torch.manual_seed(0)
    td = TensorDict(a=torch.randn(3, 4, 5, 2), batch_size=[3, 4, 5])
    d0 = ftdim.dims(1)
    module = tensordict.nn.TensorDictModule(nn.Linear(2, 7), in_keys=["a"], out_keys=["y"])
    out = module(td[d0])
    assert out["y"].dims == (d0,)
    torch.testing.assert_close(out["y"].order(d0), module.module(td["a"]))
