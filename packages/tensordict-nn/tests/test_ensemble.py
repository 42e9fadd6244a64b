"""EnsembleModule: independently initialised copies run with torch.vmap."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import EnsembleModule, TensorDictModule, TensorDictParams, TensorDictSequential


def _module(seed=0):
    torch.manual_seed(seed)
    return TensorDictModule(
        nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1)), in_keys=["x"], out_keys=["y"]
    )


def test_copies_are_reinitialised_and_registered():
    module = _module()
    original = module.module[0].weight.detach().clone()
    ensemble = EnsembleModule(module, num_copies=3)
    assert isinstance(ensemble.params_td, TensorDictParams) and ensemble.params_td.batch_size == (
        3,
    )
    weights = ensemble.params_td["module", "0", "weight"]
    assert not torch.equal(weights[0], weights[1]) and not torch.equal(weights[1], weights[2])
    assert torch.equal(module.module[0].weight, original), "the given module is left as it was"
    names = [name for name, _ in ensemble.named_parameters()]
    assert names and all(name.startswith("params_td.") for name in names)
    assert ensemble.in_keys == ["x"] and ensemble.out_keys == ["y"]


def test_forward_equals_each_copy_run_alone():
    ensemble = EnsembleModule(_module(), num_copies=4)
    td = TensorDict(x=torch.randn(5, 2), batch_size=[5])
    out = ensemble(td)
    assert out["y"].shape == (4, 5, 1) and out.batch_size == (4, 5)
    # every copy saw the same input, returned beside the outputs; the input is unchanged
    assert out["x"].shape == (4, 5, 2) and all(torch.equal(x, td["x"]) for x in out["x"])
    assert list(td.keys()) == ["x"] and td.batch_size == (5,)
    reference = _module(seed=1)
    for i in range(4):
        with ensemble.params_td[i].to_module(reference):
            expected = reference(td.clone())["y"]
        torch.testing.assert_close(out["y"][i], expected)


def test_gradients_reach_every_copy():
    ensemble = EnsembleModule(_module(), num_copies=2)
    ensemble(TensorDict(x=torch.randn(5, 2), batch_size=[5]))["y"].sum().backward()
    grads = [p.grad for p in ensemble.parameters()]
    assert all(g is not None and g.shape[0] == 2 for g in grads)


def test_chained_ensembles():
    first = EnsembleModule(_module(), num_copies=3)
    second = EnsembleModule(
        TensorDictModule(nn.Linear(1, 2), in_keys=["y"], out_keys=["z"]),
        num_copies=3,
        expand_input=False,
    )
    out = TensorDictSequential(first, second)(TensorDict(x=torch.randn(5, 2), batch_size=[5]))
    assert out["z"].shape == (3, 5, 2)
    with pytest.raises(RuntimeError, match="num_copies=3"):
        second(TensorDict(y=torch.randn(5, 1), batch_size=[5]))


def test_reset_parameters_recursive_resets_every_copy():
    ensemble = EnsembleModule(_module(), num_copies=2)
    before = ensemble.params_td.detach().clone()
    ensemble.reset_parameters_recursive()
    assert not torch.equal(
        before["module", "0", "weight"], ensemble.params_td["module", "0", "weight"]
    )
    with pytest.raises(ValueError, match="num_copies"):
        EnsembleModule(_module(), num_copies=0)


def test_a_plain_module_is_refused():
    plain = nn.Linear(2, 2)
    weight = plain.weight.detach().clone()
    with pytest.raises(
        TypeError, match=r"needs a tensordict module \(a TensorDictModuleBase.*Linear"
    ):
        EnsembleModule(plain, num_copies=3)
    assert torch.equal(plain.weight.detach(), weight)  # not re-initialised
    ensemble = EnsembleModule(TensorDictModule(plain, ["x"], ["y"]), num_copies=3)
    assert ensemble(TensorDict(x=torch.ones(2)))["y"].shape == (3, 2)


def test_expand_input_false_maps_over_the_input_too():
    """Copy ``i`` reads row ``i`` of the input; results equal each copy run alone."""
    ensemble = EnsembleModule(
        TensorDictModule(nn.Linear(3, 2), in_keys=["x"], out_keys=["y"]),
        num_copies=4,
        expand_input=False,
    )
    td = TensorDict(x=torch.randn(4, 5, 3), n={"z": torch.randn(4, 5)}, batch_size=[4, 5])
    out = ensemble(td)
    assert out.batch_size == (4, 5) and out["y"].shape == (4, 5, 2)
    torch.testing.assert_close(out["n", "z"], td["n", "z"])
    reference = nn.Linear(3, 2)
    for i in range(4):
        with ensemble.params_td[i]["module"].to_module(reference):
            torch.testing.assert_close(out["y"][i], reference(td["x"][i]))
    assert list(td.keys()) == ["x", "n"], "the input is left as it was"
