"""TensorDictSequential and the small wrappers (WrapModule, TensorDictModuleWrapper,
as_tensordict_module, make_tensordict)."""

from __future__ import annotations

from collections import OrderedDict

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import tensordict
from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.nn import (
    TensorDictModule,
    TensorDictModuleWrapper,
    TensorDictSequential,
    WrapModule,
    as_tensordict_module,
    make_tensordict,
    set_skip_existing,
)


def add(src, dst, amount=1.0):
    return TensorDictModule(lambda x: x + amount, in_keys=[src], out_keys=[dst])


def test_keys_are_computed_from_the_members():
    seq = TensorDictSequential(
        TensorDictModule(lambda a, b: a + b, in_keys=["k1", "k2"], out_keys=["foo"]),
        TensorDictModule(lambda a, c: a + c, in_keys=["k1", "k3"], out_keys=["k1"]),
        TensorDictModule(lambda f, c: f + c, in_keys=["foo", "k3"], out_keys=["k2"]),
    )
    assert seq.in_keys == ["k1", "k2", "k3"]
    assert seq.out_keys == ["foo", "k1", "k2"]


def test_run_matches_the_modules_one_by_one(make_mlp):
    m1, m2 = make_mlp(3, 5, 4, seed=0), make_mlp(4, 5, 2, seed=1)
    seq = TensorDictSequential(
        TensorDictModule(m1, in_keys=["obs"], out_keys=[("h", "x")]),
        TensorDictModule(m2, in_keys=[("h", "x")], out_keys=["out"]),
    )
    obs = torch.randn(6, 3)
    td = seq(TensorDict(obs=obs, batch_size=[6]))
    torch.testing.assert_close(td["out"], m2(m1(obs)))
    torch.testing.assert_close(seq(obs=obs)[1], m2(m1(obs)))


def test_nested_sequences_flatten_keys():
    inner = TensorDictSequential(add("a", "b"), add("b", "c"))
    outer = TensorDictSequential(inner, add("c", "d"))
    assert outer.in_keys == ["a"] and outer.out_keys == ["b", "c", "d"]
    assert outer(TensorDict(a=torch.zeros(())))["d"] == 3


def test_indexing_mutation_and_ordered_dict():
    m0, m1, m2 = add("a", "b"), add("b", "c"), add("c", "d")
    seq = TensorDictSequential(m0, m1, m2)
    assert len(seq) == 3 and seq[1] is m1
    assert isinstance(seq[:2], TensorDictSequential) and list(seq[:2]._module_list()) == [m0, m1]
    seq[2] = add("b", "z")
    del seq[1]
    assert len(seq) == 2 and seq.out_keys == ["b", "z"]
    named = TensorDictSequential(OrderedDict(first=m0, second=lambda td: td * 2))
    assert isinstance(named.module, nn.ModuleDict) and named["first"] is m0
    td = named(TensorDict(a=torch.ones(())))
    assert td["a"] == 2 and td["b"] == 4


def test_plain_callables_are_wrapped():
    seq = TensorDictSequential(lambda td: td.set("b", td["a"] + 1), add("b", "c"))
    assert isinstance(seq[0], WrapModule)
    assert seq(TensorDict(a=torch.zeros(())))["c"] == 2
    with pytest.raises(ValueError, match="tensordict modules or callables"):
        TensorDictSequential(3)


@pytest.mark.parametrize("inplace", [True, False, None])
@pytest.mark.parametrize("module_inplace", [True, False])
def test_inplace(inplace, module_inplace):
    seq = TensorDictSequential(
        TensorDictModule(lambda x: x + 1, ["input"], [("mid", "0")], inplace=module_inplace),
        TensorDictModule(lambda y: y * 2, [("mid", "0")], ["output"], inplace=module_inplace),
        inplace=inplace,
    )
    td = TensorDict(input=torch.ones(()))
    out = seq(td)
    assert out["output"] == 4
    if inplace or (inplace is None and module_inplace):
        assert out is td and "input" in out
    else:
        assert out is not td and "input" not in out
        assert "output" not in td


def test_tensordict_out_receives_the_outputs_only():
    seq = TensorDictSequential(add("a", "c"), add("b", "d"))
    inp = TensorDict(a=torch.zeros(()), b=torch.zeros(()))
    out = TensorDict()
    assert seq(inp, tensordict_out=out) is out
    assert set(out.keys()) == {"c", "d"} and set(inp.keys()) == {"a", "b"}


def test_selected_out_keys_drop_intermediates_but_not_inputs():
    seq = TensorDictSequential(
        add("k1", "tmp"), add("tmp", "k1"), add("k1", "final"), selected_out_keys=["final"]
    )
    assert seq.out_keys == ["final"] and seq.out_keys_source == ["tmp", "k1", "final"]
    td = seq(TensorDict(k1=torch.zeros(())))
    assert set(td.keys()) == {"k1", "final"} and td["final"] == 3
    seq.reset_out_keys()
    assert "tmp" in seq(TensorDict(k1=torch.zeros(())))
    with pytest.raises(ValueError, match="Can't select non existent"):
        seq.select_out_keys("nope")


def test_select_subsequence():
    seq = TensorDictSequential(
        OrderedDict(
            l0=add("x", "y"),
            l1=add("y", "z"),
            l2=TensorDictModule(lambda x, y: x + y, ["x", "y"], ["a"]),
        )
    )
    sub = seq.select_subsequence(out_keys=["a"])
    assert list(sub.module) == ["l0", "l2"] and sub["l0"] is seq["l0"]
    sub = seq.select_subsequence(in_keys=["y"])
    assert list(sub.module) == ["l1", "l2"]
    with pytest.raises(ValueError, match="No modules left"):
        seq.select_subsequence(in_keys=["z"], out_keys=["y"])


_KEYS = ("a", "b", "c", "d", "e")


@settings(max_examples=40, deadline=None)
@given(
    in_keys=st.one_of(st.none(), st.lists(st.sampled_from(_KEYS), min_size=1, max_size=2)),
    out_keys=st.one_of(st.none(), st.lists(st.sampled_from(_KEYS), min_size=1, max_size=2)),
)
def test_select_subsequence_nested_equals_flat(in_keys, out_keys):
    """A nested sequence reduces to the same computation as its flat form."""
    flat = TensorDictSequential(add("a", "b"), add("b", "c"), add("b", "d"), add("d", "e"))
    nested = TensorDictSequential(
        TensorDictSequential(add("a", "b"), add("b", "c")),
        TensorDictSequential(add("b", "d"), add("d", "e")),
    )
    try:
        sub_flat = flat.select_subsequence(in_keys=in_keys, out_keys=out_keys)
    except ValueError:
        with pytest.raises(ValueError):
            nested.select_subsequence(in_keys=in_keys, out_keys=out_keys)
        return
    sub_nested = nested.select_subsequence(in_keys=in_keys, out_keys=out_keys)
    td = TensorDict({k: torch.zeros(()) for k in _KEYS})
    assert (sub_flat(td.clone()) == sub_nested(td.clone())).all()


def test_partial_tolerant_skips_and_runs_on_lazy_members():
    seq = TensorDictSequential(add("a", "b"), add("c", "d"), partial_tolerant=True)
    td = seq(TensorDict(a=torch.zeros(1)))
    assert "b" in td and "d" not in td
    lazy = LazyStackedTensorDict(
        TensorDict(a=torch.zeros(1), c=torch.ones(1)), TensorDict(a=torch.ones(1))
    )
    out = seq(lazy)
    assert out[0]["d"].tolist() == [2.0]
    assert "d" not in out[1].keys() and out[1]["b"].tolist() == [2.0]
    strict = TensorDictSequential(add("a", "b"), add("c", "d"))
    with pytest.raises(KeyError, match="'c'"):
        strict(TensorDict(a=torch.zeros(1)))


def test_skip_existing_on_a_sequence():
    seq = TensorDictSequential(add("in", "out"))
    with set_skip_existing(True):
        assert seq(TensorDict({"in": torch.zeros(()), "out": torch.zeros(())}))["out"] == 0
    assert seq(TensorDict({"in": torch.zeros(()), "out": torch.zeros(())}))["out"] == 1


def test_sequence_parameters_and_training():
    lin = nn.Linear(3, 1)
    seq = TensorDictSequential(TensorDictModule(lin, ["x"], ["y"]), add("y", "z"))
    assert list(seq.parameters()) == list(lin.parameters())
    sub = seq.select_subsequence(out_keys=["y"])
    opt = torch.optim.SGD(seq.parameters(), lr=0.1)
    before = lin.weight.detach().clone()
    seq(TensorDict(x=torch.randn(4, 3), batch_size=[4]))["z"].sum().backward()
    opt.step()
    assert not torch.equal(before, lin.weight) and sub[0].module is lin


# --------------------------------------------------------------------------- wrappers


def test_wrap_module():
    fn = WrapModule(lambda td: TensorDict(y=td["x"] + 1), in_keys=["x"], out_keys=["y"])
    td = TensorDict(x=torch.zeros(()))
    out = fn(td)
    assert out is not td and set(out.keys()) == {"y"}
    inplace = WrapModule(lambda td: TensorDict(y=td["x"] + 1), inplace=True)
    assert inplace(td) is td and td["y"] == 1
    with pytest.raises(ValueError, match="callable"):
        WrapModule(3)


def test_module_wrapper_forwards_keys_selection_and_attributes():
    inner = TensorDictModule(lambda x: (x + 1, x + 2), in_keys=["x"], out_keys=["a", "b"])
    wrapper = TensorDictModuleWrapper(inner)
    assert wrapper.in_keys == ["x"] and wrapper.out_keys == ["a", "b"]
    assert wrapper.select_out_keys("b") is wrapper and inner.out_keys == ["b"]
    assert set(wrapper(TensorDict(x=torch.zeros(()))).keys()) == {"x", "b"}
    assert wrapper(x=torch.zeros(())) == 2
    wrapper.reset_out_keys()
    assert wrapper.out_keys == ["a", "b"]
    assert wrapper.strict is False  # an attribute of the wrapped module


def test_as_tensordict_module_on_functions_and_methods():
    @as_tensordict_module(in_keys=["a", "b"], out_keys=["s", "d"])
    def sum_diff(a, b):
        return a + b, a - b

    td = sum_diff(TensorDict(a=torch.tensor(3.0), b=torch.tensor(1.0)))
    assert td["s"] == 4 and td["d"] == 2

    class Scaler:
        factor = 10

        @as_tensordict_module(in_keys="x", out_keys="y")
        def scale(self, x):
            return x * self.factor

    assert Scaler().scale(TensorDict(x=torch.tensor(2.0)))["y"] == 20
    with pytest.raises(TypeError, match="last positional argument"):
        sum_diff(torch.zeros(()))


def test_make_tensordict_is_cores():
    assert make_tensordict is tensordict.make_tensordict
    td = make_tensordict({"a": torch.zeros(3, 2)}, batch_size=[3])
    assert td.batch_size == (3,)


def test_deprecated_properties_warn_on_a_sequence():
    seq = TensorDictSequential(TensorDictModule(nn.Linear(3, 4), in_keys=["a"], out_keys=["b"]))
    with pytest.warns(DeprecationWarning, match="TensorDictSequential.device"):
        assert seq.device == torch.device("cpu")
    with pytest.warns(DeprecationWarning, match="is_functional"):
        assert seq.is_functional is False
    empty = TensorDictSequential(lambda td: td)
    with pytest.warns(DeprecationWarning):
        assert empty.device == torch.device("cpu")


def test_member_hooks_and_global_hooks_fire_inside_a_sequence():
    first = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
    second = TensorDictModule(lambda y: y * 2, in_keys=["y"], out_keys=["z"])
    seq = TensorDictSequential(first, second)
    calls = []
    handle = second.register_forward_hook(lambda mod, args, out: calls.append("member"))
    try:
        out = seq(TensorDict(x=torch.ones(2), batch_size=[2]))
    finally:
        handle.remove()
    assert calls == ["member"] and out["z"].tolist() == [4.0, 4.0]
    handle = nn.modules.module.register_module_forward_hook(
        lambda mod, args, out: calls.append(type(mod).__name__)
    )
    try:
        seq(TensorDict(x=torch.ones(2), batch_size=[2]))
    finally:
        handle.remove()
    # the sequence itself and both members went through nn.Module.__call__
    assert calls[1:] == ["TensorDictModule", "TensorDictModule", "TensorDictSequential"]
    seq(TensorDict(x=torch.ones(2), batch_size=[2]))
    assert len(calls) == 4  # removed hooks stay silent


def test_sequence_output_shape_and_lock_are_checked():
    seq = TensorDictSequential(
        TensorDictModule(lambda x: x.sum(), in_keys=["x"], out_keys=["y"]),
    )
    td = TensorDict(x=torch.ones(2), batch_size=[2])
    with pytest.raises(RuntimeError, match="batch"):
        seq(td)
    assert "y" not in td
    locked = TensorDict(x=torch.ones(2), batch_size=[2]).lock_()
    ok = TensorDictSequential(TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"]))
    with pytest.raises(RuntimeError, match="lock"):
        ok(locked)
    assert "y" not in locked
