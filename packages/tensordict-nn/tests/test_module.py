"""TensorDictModule and TensorDictModuleBase: keys, calls, outputs, selection, errors."""

from __future__ import annotations

import copy
import pickle
import warnings

import pytest
import torch
from torch import nn

from tensordict import NonTensorData, NonTensorStack, TensorDict
from tensordict.nn import (
    TensorDictModule,
    TensorDictModuleBase,
    dispatch,
    set_skip_existing,
    skip_existing,
)

# --------------------------------------------------------------------------- construction


def test_keys_are_unravelled_and_single_keys_wrapped():
    m = TensorDictModule(lambda x: x, in_keys=("a", ("b",)), out_keys="c")
    assert m.in_keys == [("a", "b")]
    assert m.out_keys == ["c"]
    m = TensorDictModule(lambda *x: x, in_keys=["a", ("b", ("c",)), ("d",)], out_keys=[("e",)])
    assert m.in_keys == ["a", ("b", "c"), "d"]
    assert m.out_keys == ["e"]


@pytest.mark.parametrize("bad", [None, 123, [123], ["a", 1.0], b"ab"])
def test_bad_keys_raise_value_error(bad):
    with pytest.raises(ValueError, match="in_keys must be of type list, str or tuples of str"):
        TensorDictModule(lambda x: x, in_keys=bad, out_keys=["y"])
    with pytest.raises(ValueError, match="out_keys must be of type list, str or tuples of str"):
        TensorDictModule(lambda x: x, in_keys=["x"], out_keys=bad)


@pytest.mark.parametrize("bad", [nn.Linear, int, [1], 1, torch.zeros(2)])
def test_non_callable_module_raises(bad):
    with pytest.raises(ValueError, match="is not callable"):
        TensorDictModule(bad, in_keys=["x"], out_keys=["y"])


def test_underscore_in_key_warns():
    with pytest.warns(UserWarning, match='key "_" is for ignoring output'):
        TensorDictModule(lambda x: x, in_keys=["_"], out_keys=["y"])


def test_out_to_in_map_without_dict_warns():
    with pytest.warns(UserWarning, match="only used when in_key is a dictionary"):
        TensorDictModule(lambda x: x, in_keys=["x"], out_keys=["y"], out_to_in_map=True)


def test_class_level_keys_become_instance_keys():
    class Add(TensorDictModuleBase):
        in_keys = ["a", ("b", ("c",))]
        out_keys = [("out",)]

        def forward(self, td):
            td["out"] = td["a"] + td["b", "c"]
            return td

    first, second = Add(), Add()
    assert first.in_keys == ["a", ("b", "c")] and first.out_keys == ["out"]
    first.in_keys = ["z"]
    assert second.in_keys == ["a", ("b", "c")], "instances must not share their keys"
    td = second(TensorDict(a=torch.ones(()), b={"c": torch.ones(())}))
    assert td["out"] == 2


def test_base_without_keys_has_no_in_keys():
    class NoKeys(TensorDictModuleBase):
        def forward(self, td):
            return td

    with pytest.raises(AttributeError, match="in_keys"):
        NoKeys().in_keys


# --------------------------------------------------------------------------- calls


def test_call_reads_nested_keys_and_writes_nested_outputs():
    lin = nn.Linear(3, 2)
    m = TensorDictModule(lin, in_keys=[("obs", "x")], out_keys=[("net", "y")])
    td = TensorDict({"obs": {"x": torch.randn(4, 3)}}, [4])
    out = m(td)
    assert out is td
    torch.testing.assert_close(td["net", "y"], lin(td["obs", "x"]))


def test_in_keys_dict_maps_keyword_arguments():
    def fn(x, y):
        return x - y

    td = TensorDict(a=torch.tensor(5.0), b=torch.tensor(2.0))
    # default (out_to_in_map=None, like True): {keyword: key}
    assert TensorDictModule(fn, in_keys={"x": "a", "y": "b"}, out_keys=["z"])(td)["z"] == 3
    assert TensorDictModule(fn, {"x": "b", "y": "a"}, ["z"], out_to_in_map=True)(td)["z"] == -3
    # out_to_in_map=False: {key: keyword}
    assert TensorDictModule(fn, {"a": "y", "b": "x"}, ["z"], out_to_in_map=False)(td)["z"] == -3


def test_multiple_outputs_and_ignored_output():
    m = TensorDictModule(lambda x: (x + 1, x + 2, x + 3), in_keys=["x"], out_keys=["a", "_", "c"])
    td = m(TensorDict(x=torch.zeros(())))
    assert set(td.keys()) == {"x", "a", "c"}
    assert td["a"] == 1 and td["c"] == 3


@pytest.mark.parametrize("container", [dict, TensorDict])
def test_mapping_output_is_read_by_out_keys(container):
    m = TensorDictModule(
        lambda x: container({"b": x + 1, "c": x + 2}), in_keys=["x"], out_keys=["c", "b"]
    )
    td = m(TensorDict(x=torch.zeros(())))
    assert td["b"] == 1 and td["c"] == 2


def test_non_tensor_outputs_are_stored():
    m = TensorDictModule(lambda s: s + "!", in_keys=["s"], out_keys=["t"])
    td = TensorDict(s=NonTensorData("hi"))
    assert m(td)["t"] == "hi!"


def test_non_tensor_inputs_arrive_as_values():
    seen = []
    m = TensorDictModule(
        lambda s, n: seen.append((s, n)) or torch.zeros(2),
        in_keys=["s", ("n", "t")],
        out_keys=["y"],
    )
    td = TensorDict(s=NonTensorStack("a", "b"), n={"t": NonTensorData(3)}, batch_size=[2])
    m(td)
    assert seen[-1] == (["a", "b"], 3) and type(seen[-1][1]) is int
    strict = TensorDictModule(lambda s: s.upper(), in_keys=["s"], out_keys=["t"], strict=True)
    assert strict(TensorDict(s=NonTensorData("hi")))["t"] == "HI"


def test_method_and_method_kwargs():
    class Net(nn.Module):
        def scaled(self, x, *, factor):
            return x * factor

    m = TensorDictModule(
        Net(), in_keys=["x"], out_keys=["y"], method="scaled", method_kwargs={"factor": 3}
    )
    assert m(TensorDict(x=torch.ones(())))["y"] == 3


def test_extra_call_arguments_reach_the_module():
    class Net(nn.Module):
        def forward(self, x, shift=0):
            return x + shift

    m = TensorDictModule(Net(), in_keys=["x"], out_keys=["y"])
    assert m(TensorDict(x=torch.ones(())), shift=2)["y"] == 3
    assert m(x=torch.ones(()), shift=5) == 6


@pytest.mark.parametrize("inplace", [True, False, "empty"])
def test_inplace_modes(inplace):
    m = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"], inplace=inplace)
    td = TensorDict(x=torch.zeros(2), batch_size=[2], device="cpu")
    out = m(td)
    assert out["y"].tolist() == [1.0, 1.0]
    if inplace is True:
        assert out is td
    elif inplace is False:
        assert out is not td and "x" not in out and out.batch_size == () and out.device is None
        assert "y" not in td
    else:
        assert out is not td and "x" not in out
        assert out.batch_size == (2,) and out.device == torch.device("cpu")


def test_inplace_tensordict_and_tensordict_out():
    dest = TensorDict()
    m = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"], inplace=dest)
    td = TensorDict(x=torch.zeros(()))
    assert m(td) is dest and dest["y"] == 1 and "y" not in td
    other = TensorDict()
    assert m(td, tensordict_out=other) is other and other["y"] == 1


def test_bad_inplace_value():
    with pytest.raises(ValueError, match="inplace must be"):
        TensorDictModule(lambda x: x, in_keys=["x"], out_keys=["y"], inplace="yes")


# --------------------------------------------------------------------------- errors


def test_missing_key_error_names_key_and_module():
    m = TensorDictModule(nn.Linear(2, 3), in_keys=["a"], out_keys=["b"])
    td = TensorDict(c=torch.zeros(2))
    with pytest.raises(KeyError, match=r"'a'.*Linear") as info:
        m(td)
    assert "may not have not been found" in str(info.value)
    assert set(td.keys()) == {"c"}, "a failed call leaves the tensordict unchanged"


def test_strict_missing_key_raises_before_the_call():
    calls = []

    def fn(a, b):
        calls.append(1)
        return a

    m = TensorDictModule(fn, in_keys=["a", "b"], out_keys=["c"], strict=True)
    with pytest.raises(KeyError, match=r"'b'.*strict=True"):
        m(TensorDict(a=torch.zeros(())))
    assert not calls


def test_non_strict_missing_key_passes_none():
    m = TensorDictModule(lambda a, b: a if b is None else b, in_keys=["a", "b"], out_keys=["c"])
    assert m(TensorDict(a=torch.ones(())))["c"] == 1


def test_output_count_mismatch():
    too_many = TensorDictModule(lambda x: (x, x), in_keys=["x"], out_keys=["y"])
    td = TensorDict(x=torch.zeros(()))
    with pytest.raises(RuntimeError, match=r"more tensors \(len\(tensors\)=2\) than out_keys"):
        too_many(td)
    too_few = TensorDictModule(lambda x: (x,), in_keys=["x"], out_keys=["y", "z"])
    with pytest.raises(RuntimeError, match="more out_keys than tensors"):
        too_few(td)
    assert set(td.keys()) == {"x"}


def test_duplicate_out_keys_are_refused_at_construction():
    with pytest.raises(ValueError, match=r"out_keys=\['y', 'z', 'y'\] names 'y' more than once"):
        TensorDictModule(lambda x: (x, x + 1, x + 2), in_keys=["x"], out_keys=["y", "z", "y"])
    with pytest.raises(ValueError, match=r"names \('a', 'b'\) more than once"):
        TensorDictModule(lambda x: (x, x), in_keys=["x"], out_keys=[("a", "b"), ("a", ("b",))])
    # several dropped outputs are fine
    m = TensorDictModule(lambda x: (x, x + 1, x + 2), in_keys=["x"], out_keys=["_", "y", "_"])
    assert m(TensorDict(x=torch.zeros(())))["y"] == 1


@pytest.mark.parametrize("fast_path", [True, False])
def test_module_returning_none_for_an_out_key_raises(fast_path):
    m = TensorDictModule(lambda x: None, in_keys=["x"], out_keys=["y"])
    td = TensorDict(x=torch.zeros(3), batch_size=[3])
    if not fast_path:  # inplace=False: through the body of forward, not the direct call
        m.inplace = False
    with pytest.raises(
        RuntimeError, match=r"more out_keys than tensors: .* returned None.*\['y'\]"
    ):
        m(td)
    assert set(td.keys()) == {"x"} and (td["x"] == 0).all()
    # no out_keys: nothing to write, None is fine
    assert set(TensorDictModule(lambda x: None, ["x"], [])(td).keys()) == {"x"}


def test_signature_errors_are_not_disguised_as_missing_keys():
    # {keyword: key}: the function receives a keyword "1" it does not take
    m = TensorDictModule(lambda x: x, in_keys={"1": "x"}, out_keys=["y"], out_to_in_map=True)
    with pytest.raises(TypeError, match="unexpected keyword argument '1'"):
        m(TensorDict(x=torch.zeros(())))


# --------------------------------------------------------------------------- dispatch


def test_dispatch_positional_and_keyword_tensors():
    m = TensorDictModule(
        lambda x, y: (x + y, x - y), in_keys=["a", ("b", "c")], out_keys=["s", "d"]
    )
    s, d = m(torch.tensor(3.0), torch.tensor(1.0))
    assert (s, d) == (4, 2)
    s, d = m(a=torch.tensor(3.0), b_c=torch.tensor(1.0))
    assert (s, d) == (4, 2)
    single = TensorDictModule(lambda x: x * 2, in_keys=["a"], out_keys=["y"])
    assert single(a=torch.tensor(2.0)) == 4  # one output: a tensor, not a tuple


def test_dispatch_decorates_user_methods():
    class Net(nn.Module):
        in_keys = [("a", "b"), "c"]
        out_keys = ["sum", "prod"]

        @dispatch(separator="__", auto_batch_size=True)
        def forward(self, td, scale=1):
            assert td.batch_size == (2,)
            td["sum"] = (td["a", "b"] + td["c"]) * scale
            td["prod"] = td["a", "b"] * td["c"]
            return td

    net = Net()
    s, p = net(a__b=torch.full((2,), 2.0), c=torch.full((2,), 3.0), scale=10)
    assert s.tolist() == [50.0, 50.0] and p.tolist() == [6.0, 6.0]
    td = net(TensorDict({("a", "b"): torch.ones(2), "c": torch.ones(2)}, [2]))
    assert isinstance(td, TensorDict) and td["sum"].tolist() == [2.0, 2.0]
    with pytest.raises(RuntimeError, match="Duplicated argument"):
        net(torch.ones(2), a__b=torch.ones(2))


def test_dispatch_with_a_required_extra_argument():
    """forward(self, td, other): the extra argument comes after the tensors, positionally
    (the shown signature may not put a default before a required argument)."""

    class Net(nn.Module):
        in_keys = [("a", "c"), "d"]
        out_keys = ["b"]

        @dispatch(separator="_")
        def forward(self, td, other):
            td["b"] = td["a", "c"] + td["d"] + other
            return td

    net = Net()
    b = net(torch.zeros(1, 2), torch.ones(1, 2), 5)  # one out_key: the tensor itself
    assert b.tolist() == [[6.0, 6.0]]
    td = net(TensorDict({("a", "c"): torch.ones(2), "d": torch.ones(2)}, [2]), 1)
    assert td["b"].tolist() == [3.0, 3.0]


def test_dispatch_without_parentheses_uses_the_defaults():
    class Net(nn.Module):
        in_keys = [("a", "b")]
        out_keys = ["y"]

        @dispatch
        def forward(self, td):
            td["y"] = td["a", "b"] * 3
            return td

    assert Net()(a_b=torch.full((2,), 2.0)).tolist() == [6.0, 6.0]
    # the decorator takes the reference's parameters, by keyword or position
    assert isinstance(dispatch("__", "in_keys", "out_keys", False), dispatch)


def test_dispatch_source_and_dest_lists():
    class Net(nn.Module):
        @dispatch(source=["x"], dest=["y"])
        def forward(self, td):
            td["y"] = td["x"] + 1
            return td

    assert Net()(x=torch.zeros(())) == 1


def test_dispatch_to_missing_attribute_is_clear():
    class Net(nn.Module):
        @dispatch(source="nope")
        def forward(self, td):
            return td

    with pytest.raises(AttributeError, match="'nope'"):
        Net()(x=torch.zeros(()))


# --------------------------------------------------------------------------- selection


def test_select_and_reset_out_keys():
    m = TensorDictModule(lambda x: (x + 1, x + 2), in_keys=["x"], out_keys=["a", "b"])
    assert m.select_out_keys("b") is m
    assert m.out_keys == ["b"] and m.out_keys_source == ["a", "b"]
    td = m(TensorDict(x=torch.zeros(())))
    assert set(td.keys()) == {"x", "b"}
    assert m(x=torch.zeros(())) == 2
    assert m.reset_out_keys() is m
    assert set(m(TensorDict(x=torch.zeros(()))).keys()) == {"x", "a", "b"}


def test_select_unknown_or_malformed_key():
    m = TensorDictModule(lambda x: x, in_keys=["x"], out_keys=["a"])
    with pytest.raises(ValueError, match="Can't select non existent key: 'z'"):
        m.select_out_keys("z")
    with pytest.raises(ValueError, match="key should be a"):
        m.select_out_keys(["a"])


def test_select_out_keys_on_a_custom_base_module():
    class Three(TensorDictModuleBase):
        in_keys = ["x"]
        out_keys = ["a", "b", "c"]

        def forward(self, td):
            for i, key in enumerate(self.out_keys_source):
                td[key] = td["x"] + i
            return td

    m = Three().select_out_keys("c", "a")
    assert set(m(TensorDict(x=torch.zeros(()))).keys()) == {"x", "a", "c"}
    m.reset_out_keys()
    assert set(m(TensorDict(x=torch.zeros(()))).keys()) == {"x", "a", "b", "c"}


def test_forward_hooks_see_the_output_tensordict():
    m = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
    seen = []

    def hook(module, args, output):
        seen.append(output["y"].item())
        output["z"] = output["y"] * 10
        return output

    handle = m.register_forward_hook(hook)
    td = m(TensorDict(x=torch.zeros(())))
    assert seen == [1.0] and td["z"] == 10
    handle.remove()
    assert "z" not in m(TensorDict(x=torch.zeros(())))


# --------------------------------------------------------------------------- skip existing


def test_skip_existing_global_and_decorator():
    assert skip_existing() is False
    m = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
    td = TensorDict(x=torch.zeros(()), y=torch.zeros(()))
    with set_skip_existing(True):
        assert skip_existing() is True
        assert m(td)["y"] == 0
    assert skip_existing() is False
    assert m(td)["y"] == 1
    with pytest.raises(RuntimeError, match="It seems"):
        with set_skip_existing(None):
            pass

    class Always(TensorDictModuleBase):
        in_keys = []
        out_keys = ["out"]

        @set_skip_existing()
        def forward(self, td):
            td["out"] = torch.ones(())
            return td

    assert Always()(TensorDict(out=torch.zeros(())))["out"] == 0
    assert Always()(TensorDict())["out"] == 1


def test_skip_existing_never_skips_a_module_updating_its_input():
    m = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["x"])
    with set_skip_existing(True):
        assert m(TensorDict(x=torch.zeros(())))["x"] == 1


def test_skip_existing_with_a_key_list():
    m = TensorDictModule(lambda x: (x + 1, x + 2), in_keys=["x"], out_keys=["y", "z"])
    with set_skip_existing(["y"]):
        td = m(TensorDict(x=torch.zeros(()), y=torch.zeros(())))
    assert "z" not in td


# --------------------------------------------------------------------------- module protocol


def test_attribute_forwarding_and_dunders():
    class Lin(nn.Linear):
        flavour = "plain"

    m = TensorDictModule(Lin(2, 3), in_keys=["x"], out_keys=["y"])
    assert m.flavour == "plain" and m.weight.shape == (3, 2)
    with pytest.raises(AttributeError):
        m.__deepcopy__
    clone = copy.deepcopy(m)
    assert isinstance(clone, TensorDictModule) and clone.module is not m.module
    torch.testing.assert_close(clone.module.weight, m.module.weight)


def test_repr_lists_module_and_keys():
    m = TensorDictModule(nn.Linear(3, 4), in_keys=["a"], out_keys=["b"])
    text = repr(m)
    assert text.count("module=Linear(in_features=3, out_features=4") == 1
    assert "in_keys=['a']" in text and "out_keys=['b']" in text
    assert "module" not in m.__dict__
    fn = TensorDictModule(lambda x: x, in_keys=["a"], out_keys=["b"])
    assert "module=<function" in repr(fn) and dict(fn.named_children()) == {}


def test_pickle_round_trip():
    m = TensorDictModule(nn.Linear(3, 3), in_keys=["x"], out_keys=["y"])
    restored = pickle.loads(pickle.dumps(m))
    x = torch.randn(3)
    torch.testing.assert_close(restored(x=x), m(x=x))


def test_pickle_round_trip_of_a_lambda_with_a_closure():
    offset = torch.tensor([1.0, 2.0])
    m = TensorDictModule(lambda x: x + offset, in_keys=["x"], out_keys=["y"])
    restored = pickle.loads(pickle.dumps(m))
    assert restored(x=torch.zeros(2)).tolist() == [1.0, 2.0]
    assert restored.in_keys == ["x"] and restored.out_keys == ["y"]


def test_deprecated_properties_warn():
    m = TensorDictModule(nn.Linear(3, 4), in_keys=["a"], out_keys=["b"])
    with pytest.warns(DeprecationWarning, match="0.17"):
        assert m.device == torch.device("cpu")
    with pytest.warns(DeprecationWarning):
        assert m.is_functional is False


def test_reset_parameters_recursive():
    torch.manual_seed(0)
    m = TensorDictModule(nn.Sequential(nn.Linear(2, 2), nn.Tanh()), in_keys=["x"], out_keys=["y"])
    before = m.module[0].weight.detach().clone()
    m.reset_parameters_recursive()
    assert not torch.equal(before, m.module[0].weight)
    with pytest.warns(UserWarning, match="did not find any parameters"):
        TensorDictModule(nn.Tanh(), in_keys=["x"], out_keys=["y"]).reset_parameters_recursive()


def test_reset_parameters_recursive_into_given_parameters():
    m = TensorDictModule(nn.Linear(2, 2), in_keys=["x"], out_keys=["y"])
    own = TensorDict.from_module(m).detach().clone()
    given = own.clone()
    out = m.reset_parameters_recursive(given)
    assert out is given
    assert not torch.equal(given["module", "weight"], own["module", "weight"])
    torch.testing.assert_close(m.module.weight.detach(), own["module", "weight"])
    with pytest.raises(RuntimeError, match="batch dimensions"):
        m.reset_parameters_recursive(own.expand(2).clone())


def test_vmap_over_a_module():
    m = TensorDictModule(lambda x, y: x * y, in_keys=["x", "y"], out_keys=["z"])
    td = TensorDict(x=torch.arange(4.0), y=torch.full((4,), 2.0), batch_size=[4])
    out = torch.vmap(m)(td)
    assert out["z"].tolist() == [0.0, 2.0, 4.0, 6.0]


def test_no_warning_on_plain_use():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = TensorDictModule(nn.Linear(2, 2), in_keys=["x"], out_keys=["y"])
        m(TensorDict(x=torch.zeros(2)))
        m(x=torch.zeros(2))
