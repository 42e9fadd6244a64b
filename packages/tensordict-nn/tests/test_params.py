"""TensorDictParams: a tensordict whose leaves are a module's parameters and buffers."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from torch import nn
from torch.nn.parameter import Buffer

from tensordict import TensorDict
from tensordict.nn import TensorDictParams


def _holder(params: TensorDictParams) -> nn.Module:
    module = nn.Module()
    module.params = params
    return module


def test_leaves_become_parameters_and_buffers():
    p = TensorDictParams(
        TensorDict(w=torch.zeros(3), n=torch.zeros((), dtype=torch.long), sub={"b": torch.ones(2)})
    )
    assert isinstance(p["w"], nn.Parameter) and p["w"].requires_grad
    assert isinstance(p["sub", "b"], nn.Parameter)
    assert isinstance(p["n"], Buffer) and not isinstance(p["n"], nn.Parameter)
    assert TensorDictParams(a=0, b=1.0)["b"].requires_grad
    assert isinstance(TensorDictParams({"a": 0})["a"], Buffer)


def test_no_convert_keeps_plain_tensors_as_buffers():
    param = nn.Parameter(torch.zeros(2))
    p = TensorDictParams(TensorDict(param=param, buf=torch.ones(2)), no_convert=True)
    assert p["param"] is param
    assert isinstance(p["buf"], Buffer) and not isinstance(p["buf"], nn.Parameter)


def test_module_protocol_names_state_dict_and_optimizer():
    p = TensorDictParams(
        TensorDict(w=torch.ones(3), sub={"b": torch.ones(2)}, n=torch.zeros((), dtype=torch.long))
    )
    holder = _holder(p)
    assert sorted(n for n, _ in holder.named_parameters()) == ["params.sub.b", "params.w"]
    assert sorted(holder.state_dict()) == ["params.n", "params.sub.b", "params.w"]
    assert {id(t) for t in holder.parameters()} == {id(p["w"]), id(p["sub", "b"])}
    opt = torch.optim.SGD(holder.parameters(), lr=0.5)
    (p["w"].sum() + p["sub", "b"].sum()).backward()
    opt.step()
    assert p["w"].tolist() == [0.5] * 3 and p["sub", "b"].tolist() == [0.5] * 2


def test_state_dict_round_trip_in_place():
    p = TensorDictParams(TensorDict(w=torch.ones(3), sub={"b": torch.ones(2)}))
    holder = _holder(p)
    w = p["w"]
    state = {k: v * 0 + 7 for k, v in holder.state_dict().items()}
    holder.load_state_dict(state)
    assert p["w"] is w and p["w"].tolist() == [7.0] * 3 and isinstance(p["sub", "b"], nn.Parameter)
    missing = holder.load_state_dict({}, strict=False)
    assert sorted(missing.missing_keys) == ["params.sub.b", "params.w"]
    with pytest.raises(RuntimeError, match="Missing key"):
        holder.load_state_dict({})
    with pytest.raises(RuntimeError, match="size mismatch"):
        holder.load_state_dict({"params.w": torch.zeros(4), "params.sub.b": torch.zeros(2)})


def test_load_state_dict_of_a_plain_tensordict():
    p = TensorDictParams(TensorDict(a=torch.ones(2), b={"c": torch.ones(1)}))
    p.load_state_dict(p.detach().clone().zero_().state_dict())
    assert (p == 0).all() and isinstance(p["b", "c"], nn.Parameter)
    assert sorted(p.state_dict()) == ["a", "b.c"]


def test_module_casts_reach_the_leaves():
    p = TensorDictParams(TensorDict(w=torch.ones(3), n=torch.zeros((), dtype=torch.long)))
    holder = _holder(p)
    w = p["w"]
    holder.double()
    assert p["w"].dtype == torch.float64 and p["w"] is w
    assert p["n"].dtype == torch.long


def test_writes_are_converted_and_in_place_ops_allowed():
    p = TensorDictParams(TensorDict(w=torch.ones(3)))
    p["new"] = torch.zeros(2)
    p.set(("nested", "x"), torch.zeros(1))
    assert isinstance(p["new"], nn.Parameter) and isinstance(p["nested", "x"], nn.Parameter)
    p.update({"other": torch.ones(1)})
    assert isinstance(p["other"], nn.Parameter)
    assert p.new.requires_grad  # entries are module attributes too
    del p["new"]
    assert "new" not in p.keys()
    p.zero_()
    assert (p == 0).all()
    p.copy_(p.data.apply(lambda x: x + 1))
    assert (p == 1).all()


def test_clone_copy_and_ties():
    shared = nn.Parameter(torch.ones(2))
    p = TensorDictParams(
        TensorDict(a=shared, b={"c": shared}, n=Buffer(torch.zeros(1))), no_convert=True
    )
    clone = p.clone()
    assert type(clone) is TensorDictParams
    assert clone["a"] is clone["b", "c"] and clone["a"] is not shared
    assert isinstance(clone["a"], nn.Parameter) and isinstance(clone["n"], Buffer)
    assert clone["a"].data_ptr() != shared.data_ptr()
    copied = p.copy()
    assert copied["a"] is shared and copied["n"] is p["n"]
    assert copy.deepcopy(p)["a"] is not shared


def test_ops_return_plain_tensordicts_except_to():
    p = TensorDictParams(TensorDict(w=torch.ones(3)))
    assert type(p.apply(lambda x: x * 2)) is TensorDict
    assert type(p.detach()) is TensorDict and type(p.data) is TensorDict
    moved = p.to(torch.float64)
    assert type(moved) is TensorDictParams and isinstance(moved["w"], nn.Parameter)
    assert moved["w"].dtype == torch.float64 and p["w"].dtype == torch.float32
    on_cpu = p.to("cpu")
    assert type(on_cpu) is TensorDictParams and on_cpu.device == torch.device("cpu")


def test_get_post_hook():
    p = TensorDictParams(TensorDict(a={"b": torch.zeros(())}, e=torch.zeros(())))
    p.register_get_post_hook(lambda self, x: x.data)
    assert not p["e"].requires_grad and not p.get(("a", "b")).requires_grad
    assert all(not v.requires_grad for v in p.values(True, True))
    assert p["e"].data_ptr() == p._tensordict["e"].data_ptr()


def test_pickle_keeps_kinds_and_lock():
    p = TensorDictParams(
        TensorDict(w=torch.ones(3), n=torch.zeros((), dtype=torch.long)), lock=True
    )
    restored = pickle.loads(pickle.dumps(p))
    assert type(restored) is TensorDictParams and restored.is_locked
    assert isinstance(restored["w"], nn.Parameter) and torch.equal(restored["w"], p["w"])


def test_no_forward_and_bad_source():
    with pytest.raises(RuntimeError, match="no forward"):
        TensorDictParams(a=torch.zeros(1))()
    with pytest.raises(TypeError, match="tensordict or a dict"):
        TensorDictParams([1, 2])
