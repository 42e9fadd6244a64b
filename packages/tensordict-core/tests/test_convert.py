"""Conversions: dicts, namedtuples, tuples, dataclasses, lists, tolist/numpy, make_tensordict,
and numpy structured arrays (zero-copy both ways where memory allows)."""

from __future__ import annotations

import dataclasses
import importlib.util
from collections import namedtuple

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tensordict
from tensordict import TensorDict, TensorDictBase

Point = namedtuple("Point", ["x", "y"])


@dataclasses.dataclass
class Obs:
    pixels: torch.Tensor
    label: str
    extra: tuple = ()


# ---------------------------------------------------------------------- from_dict / to_dict
def test_from_dict_batch_size_default_auto_and_dims():
    data = {"a": torch.zeros(3, 4), "b": {"c": torch.ones(3, 4, 5)}}
    assert TensorDict.from_dict(data).batch_size == torch.Size([])
    td = TensorDict.from_dict(data, auto_batch_size=True)
    assert td.batch_size == (3, 4) and td["b"].batch_size == (3, 4, 5)
    td = TensorDict.from_dict(data, batch_dims=1)
    assert td.batch_size == (3,) and td["b"].batch_size == (3,)
    td = TensorDict.from_dict(data, batch_size=[3], names=["t"])
    assert td.batch_size == (3,) and td["b"].batch_size == (3,) and td.names == ["t"]
    td = TensorDict.from_dict(data, auto_batch_size=True, names=["t", "u"])
    assert td.names == ["t", "u"]


def test_from_dict_converts_nested_collections():
    td = TensorDict.from_dict(
        {
            "p": Point(torch.zeros(2), 3),
            "t": (1, "x"),
            "o": Obs(torch.ones(2), "cat"),
            "s": np.zeros(2, dtype=[("f", "f4")]),
            "n": 1.5,
            "txt": "hello",
        }
    )
    assert td["p", "x"].tolist() == [0.0, 0.0] and td["p", "y"].item() == 3
    assert td["t", "0"].item() == 1 and td["t", "1"] == "x"
    assert td["o", "label"] == "cat" and td["o", "pixels"].tolist() == [1.0, 1.0]
    assert td["s"].batch_size == (2,) and td["s", "f"].dtype == torch.float32
    assert td["n"].dtype == torch.float32 and td["n"].item() == 1.5
    assert td["txt"] == "hello"


def test_from_dict_device_and_subclass():
    class MyTD(TensorDict):
        pass

    td = MyTD.from_dict({"a": torch.zeros(2), "b": {"c": torch.zeros(2)}}, device="cpu")
    assert type(td) is MyTD and td.device == torch.device("cpu")
    assert td["b"].device == torch.device("cpu")
    assert type(TensorDictBase.from_dict({"a": 1})) is TensorDict


def test_from_dict_does_not_mutate_input():
    inner = TensorDict({"c": torch.zeros(3, 4)}, [])
    data = {"a": torch.zeros(3, 4), "b": inner, "d": {"e": torch.zeros(3)}}
    td = TensorDict.from_dict(data, auto_batch_size=True)
    assert td["b"].batch_size == (3, 4)
    assert inner.batch_size == torch.Size([])  # the caller's tensordict is untouched
    assert list(data) == ["a", "b", "d"] and isinstance(data["d"], dict)


def test_from_dict_bad_input_names_key_and_path():
    with pytest.raises(TypeError, match="expects a mapping, got list"):
        TensorDict.from_dict([1, 2])
    with pytest.raises(RuntimeError, match=r"key 'c'.*\(3,\).*\('a', 'b'\)"):
        TensorDict.from_dict({"a": {"b": {"c": torch.zeros(2)}}}, batch_size=[3])
    # a given batch size wins over auto_batch_size; batch_dims with it is a ValueError
    data = {"a": torch.zeros(3, 4), "b": {"c": torch.zeros(3, 4, 5)}}
    out = TensorDict.from_dict(data, batch_size=[3], auto_batch_size=True)
    assert out.batch_size == out["b"].batch_size == torch.Size([3])
    with pytest.raises(ValueError, match="both batch_size and batch_dims"):
        TensorDict.from_dict({}, batch_size=[], batch_dims=1)
    with pytest.raises(TypeError, match=r"got 1 \(type int\).*'a'"):
        TensorDict.from_dict({"a": {1: torch.zeros(1)}})


def test_from_dict_instance_keeps_nested_types():
    class Sub(TensorDict):
        pass

    template = TensorDict({"a": torch.zeros(2), "b": Sub({"c": torch.zeros(2)}, [2])}, [2])
    out = template.from_dict_instance(
        {"a": torch.ones(3), "b": {"c": torch.ones(3)}, "new": {"d": torch.ones(3)}},
        auto_batch_size=True,
    )
    assert type(out["b"]) is Sub and type(out["new"]) is TensorDict
    assert out.batch_size == (3,) and out["b", "c"].tolist() == [1.0, 1.0, 1.0]


def test_to_dict_plain_nested_values():
    td = TensorDict(
        {"a": torch.arange(2), "b": {"c": "text", "n": None}, "d": {"e": torch.ones(2, 1)}}, [2]
    )
    out = td.to_dict()
    assert type(out) is dict and type(out["b"]) is dict and type(out["d"]) is dict
    assert out["a"] is td["a"] and out["b"]["c"] == "text" and out["b"]["n"] is None
    assert td.to_dict(retain_none=False)["b"] == {"c": "text"}
    assert td.to_dict(convert_tensors=True) == {
        "a": [0, 1],
        "b": {"c": "text", "n": None},
        "d": {"e": [[1.0], [1.0]]},
    }


_leaf_tensors = st.builds(
    lambda shape, dtype: (torch.arange(int(np.prod(shape))) % 3).to(dtype).reshape(shape),
    st.lists(st.integers(1, 3), min_size=1, max_size=3).map(lambda s: [2, *s]),
    st.sampled_from([torch.float32, torch.int64, torch.bool]),
)
_keys = st.text("abcxyz._", min_size=1, max_size=4)
_dicts = st.recursive(
    st.dictionaries(_keys, st.one_of(_leaf_tensors, st.sampled_from(["s", "t"])), max_size=3),
    lambda children: st.dictionaries(_keys, children, min_size=1, max_size=3),
    max_leaves=8,
)


def _same_dict(a, b):
    assert type(a) is dict and type(b) is dict and list(a) == list(b)
    for key in a:
        if isinstance(a[key], dict):
            _same_dict(a[key], b[key])
        elif isinstance(a[key], torch.Tensor):
            assert torch.equal(a[key], b[key]) and a[key].dtype == b[key].dtype
        else:
            assert a[key] == b[key]


@settings(max_examples=60, deadline=None)
@given(_dicts)
def test_dict_round_trip_property(data):
    td = TensorDict.from_dict(data, batch_size=[2])
    _same_dict(td.to_dict(), data)
    assert td.batch_size == (2,)
    again = TensorDict.from_dict(td.to_dict(), auto_batch_size=True, batch_dims=1)
    _same_dict(again.to_dict(), data)
    assert len(again.batch_size) <= 1


# ---------------------------------------------------------------------- from_any
def test_from_any_dispatch():
    td = TensorDict({"a": torch.zeros(1)}, [1])
    assert TensorDict.from_any(td) is td
    t = torch.zeros(2)
    assert TensorDict.from_any(t) is t and TensorDict.from_any(3) == 3
    assert TensorDict.from_any({"a": 1})["a"].item() == 1
    assert TensorDict.from_any((1, 2))["1"].item() == 2
    assert TensorDict.from_any(Point(1, 2))["y"].item() == 2
    assert TensorDict.from_any(Obs(torch.zeros(2), "x"))["label"] == "x"
    s = TensorDict.from_any(np.zeros(3, dtype=[("f", "i4")]))
    assert s.batch_size == (3,) and s["f"].dtype == torch.int32
    out = TensorDict.from_any({"obs": (torch.zeros(3, 2), torch.ones(3))}, auto_batch_size=True)
    assert out.batch_size == (3,) and out["obs"].batch_size == (3,)
    assert tensordict.from_any({"x": (1,)}, batch_size=[])["x", "0"].item() == 1


def test_from_any_h5_goes_to_memmap_sibling():
    class FakeFile:  # an HDF5 file or group has keys (a dataset has none)
        def keys(self):
            return []

    FakeFile.__module__ = "h5py._hl.files"
    import importlib.util

    if importlib.util.find_spec("tensordict.memmap") is None:
        with pytest.raises(ModuleNotFoundError, match="tensordict-memmap"):
            TensorDict.from_any(FakeFile())
    else:  # the sibling got it and handed it to h5py, which refuses a fake file
        with pytest.raises(TypeError):
            TensorDict.from_any(FakeFile())


# ---------------------------------------------------------------------- namedtuples, tuples
def test_namedtuple_round_trip_generic_dict():
    data = TensorDict(
        {"a_tensor": torch.zeros(3), "nested": {"a_tensor": torch.zeros(3), "a_string": "zero!"}},
        [3],
    )
    nt = data.to_namedtuple()
    assert type(nt).__name__ == "GenericDict" and type(nt.nested).__name__ == "GenericDict"
    assert nt.nested.a_string == "zero!" and nt.a_tensor is data["a_tensor"]
    assert type(nt) is type(TensorDict({"a_tensor": 1, "nested": {}}).to_namedtuple())
    back = TensorDict.from_namedtuple(nt, auto_batch_size=True)
    assert back.batch_size == (3,) and back["nested"].batch_size == (3,)
    assert back["nested", "a_string"] == "zero!"
    assert torch.equal(back["nested", "a_tensor"], data["nested", "a_tensor"])


def test_to_namedtuple_dest_cls_and_bad_keys():
    td = TensorDict({"x": torch.zeros(1), "y": torch.ones(1)}, [1])
    p = td.to_namedtuple(dest_cls=Point)
    assert type(p) is Point and p.y.item() == 1.0
    for bad in ("0", "_x", "class", "a.b"):
        with pytest.raises(ValueError, match=repr(bad)):
            TensorDict({bad: torch.zeros(1)}).to_namedtuple()


def test_from_namedtuple_and_tuple_bad_input():
    with pytest.raises(TypeError, match="expects a namedtuple, got tuple"):
        TensorDict.from_namedtuple((1, 2))
    with pytest.raises(TypeError, match="expects a tuple, got list"):
        TensorDict.from_tuple([1, 2])


def test_from_tuple_keys_and_nesting():
    td = TensorDict.from_tuple((torch.zeros(2, 3), (torch.ones(2), "s")), auto_batch_size=True)
    assert list(td.keys()) == ["0", "1"] and td.batch_size == (2,)
    assert td["1", "1"] == "s" and td["1"].batch_size == (2,)


# ---------------------------------------------------------------------- dataclasses
def test_from_dataclass():
    obs = Obs(torch.zeros(4, 3), "cat", (torch.ones(4),))
    td = TensorDict.from_dataclass(obs, auto_batch_size=True)
    assert type(td) is TensorDict and td.batch_size == (4,)
    assert td["label"] == "cat" and td["extra", "0"].tolist() == [1.0] * 4
    assert td["pixels"] is obs.pixels


def test_from_dataclass_bad_input_and_tensorclass_forwarder():
    with pytest.raises(TypeError, match="dataclass instance, got Obs .a class"):
        TensorDict.from_dataclass(Obs)
    with pytest.raises(TypeError, match="dataclass instance, got dict"):
        TensorDict.from_dataclass({"a": 1})
    obs = Obs(torch.zeros(1), "x")
    if importlib.util.find_spec("tensordict.tensorclass") is None:
        with pytest.raises(ModuleNotFoundError, match="pip install tensorclass"):
            TensorDict.from_dataclass(obs, as_tensorclass=True)
    else:  # the forwarder reaches the tensorclass distribution
        tc = TensorDict.from_dataclass(obs, as_tensorclass=True)
        assert tensordict.is_tensorclass(tc) and tc.label == "x" and tc.pixels is obs.pixels


# ---------------------------------------------------------------------- from_list
def test_from_list_stacks_nested_lists():
    td = TensorDict.from_list([{"a": torch.zeros(3)}, TensorDict({"a": torch.ones(3)})])
    assert td.batch_size == (2,) and td["a"][:, 0].tolist() == [0.0, 1.0]
    td = TensorDict.from_list([[{"a": 0}, {"a": 1}], [{"a": 2}, {"a": 3}]])
    assert td.batch_size == (2, 2) and td["a"].tolist() == [[0, 1], [2, 3]]
    td = TensorDict.from_list([{"a": torch.zeros(3)}] * 2, auto_batch_size=True, names=["b", "f"])
    assert td.batch_size == (2, 3) and td.names == ["b", "f"]
    td = TensorDict.from_list([{"a": torch.zeros(3)}] * 2, batch_size=[2, 3])
    assert td.batch_size == (2, 3)
    assert TensorDict.from_list([]).batch_size == (0,)


def test_from_list_non_tensor_values_are_kept_in_order():
    td = TensorDict.from_list([{"s": "a"}, {"s": "b"}, {"s": "c"}])
    assert td["s"] == ["a", "b", "c"] and td[1]["s"] == "b"


def test_from_list_bad_input():
    with pytest.raises(TypeError, match=r"element \[1, 0\] is a int"):
        TensorDict.from_list([[{"a": 0}], [3]])
    with pytest.raises(TypeError, match="expects a list, got dict"):
        TensorDict.from_list({"a": 1})
    with pytest.raises(RuntimeError, match="'a'"):
        TensorDict.from_list([{"a": torch.zeros(2)}, {"a": torch.zeros(3)}], lazy=False)
    ragged = TensorDict.from_list([{"a": torch.zeros(2)}, {"a": torch.zeros(3)}])
    assert type(ragged).__name__ == "LazyStackedTensorDict"  # lazy=None: lazy when needed
    assert type(TensorDict.from_list([{"a": 0}, {"a": 1}], lazy=True)).__name__ == (
        "LazyStackedTensorDict"
    )


# ---------------------------------------------------------------------- tolist / numpy
def test_tolist_matches_indexing():
    td = TensorDict(
        {
            "a": torch.arange(24).view(2, 3, 4),
            "b": TensorDict({"c": torch.arange(12).view(2, 3, 2)}, [2, 3, 2]),
            "s": "x",
        },
        [2, 3],
    )
    out = td.tolist()
    assert len(out) == 2 and len(out[0]) == 3
    for i in range(2):
        for j in range(3):
            elem = out[i][j]
            assert torch.equal(elem["a"], td["a"][i, j]) and elem["s"] == "x"
            # the nested tensordict's extra batch dim stays in its tensors by default...
            assert torch.equal(elem["b"]["c"], td["b", "c"][i, j])
            # ... and becomes a list with tolist_first=True
            first = td.tolist(tolist_first=True)[i][j]["b"]
            assert [e["c"].item() for e in first] == td["b", "c"][i, j].tolist()
    assert td.tolist(convert_tensors=True)[1][2]["a"] == [20, 21, 22, 23]
    assert td.tolist(convert_tensors=True)[1][2]["b"] == {"c": [10, 11]}
    assert td.tolist(convert_tensors=True, tolist_first=True)[1][2]["b"] == [{"c": 10}, {"c": 11}]
    with pytest.raises(TypeError, match="convert_nodes"):
        td.tolist(convert_nodes=False, convert_tensors=True)
    nodes = td.tolist(convert_nodes=False)
    assert isinstance(nodes[1][2], TensorDict) and nodes[1][2]["a"].tolist() == [20, 21, 22, 23]
    flat = TensorDict({"a": torch.tensor(1)}).tolist()
    assert type(flat) is dict and flat["a"].item() == 1


def test_tolist_with_non_tensor_stack():
    td = TensorDict.from_list([{"s": "a", "v": 1}, {"s": "b", "v": 2}])
    assert td.tolist(convert_tensors=True) == [{"s": "a", "v": 1}, {"s": "b", "v": 2}]


def test_numpy_shares_memory_and_nests():
    t = torch.zeros(2)
    arrays = TensorDict({"a": t, "b": {"c": torch.ones(2, 1)}, "s": "txt"}, [2]).numpy()
    assert isinstance(arrays["a"], np.ndarray) and isinstance(arrays["b"]["c"], np.ndarray)
    assert arrays["s"] == "txt"
    arrays["a"][1] = 5.0
    assert t.tolist() == [0.0, 5.0]
    g = TensorDict({"g": torch.ones(1, requires_grad=True)}).numpy()
    assert g["g"].tolist() == [1.0]
    with pytest.raises(TypeError, match=r"\('b', 'h'\).*bfloat16"):
        TensorDict({"b": {"h": torch.ones(1, dtype=torch.bfloat16)}}).numpy()


# ---------------------------------------------------------------------- make_tensordict, fromkeys
def test_make_tensordict():
    inner = TensorDict({"c": torch.zeros(3, 4, 5)})
    td = tensordict.make_tensordict(a=torch.zeros(3, 4), b=inner)
    assert td.batch_size == (3, 4) and td["b"].batch_size == (3, 4, 5)
    assert inner.batch_size == ()
    td = tensordict.make_tensordict({"a": torch.zeros(3, 4)}, batch_size=[3], x=torch.zeros(3))
    assert td.batch_size == (3,) and set(td.keys()) == {"a", "x"}
    assert tensordict.make_tensordict({"a": torch.zeros(3)}, auto_batch_size=False).batch_size == ()
    assert tensordict.make_tensordict(TensorDict({"a": torch.zeros(2)})).batch_size == (2,)
    with pytest.raises(TypeError, match="mapping as input_dict, got int"):
        tensordict.make_tensordict(3)


def test_top_level_names():
    td = tensordict.fromkeys(["a", ("b", "c")], 1)
    assert td["b", "c"].item() == 1 and type(td) is TensorDict
    for name in (
        "from_dict",
        "from_any",
        "from_namedtuple",
        "from_tuple",
        "from_struct_array",
        "from_pytree",
        "make_tensordict",
        "fromkeys",
    ):
        assert name in tensordict.__all__ and callable(getattr(tensordict, name))
    assert tensordict.from_tuple((1,))["0"].item() == 1
    assert tensordict.from_namedtuple(Point(1, 2))["x"].item() == 1


# ---------------------------------------------------------------------- structured arrays
def _pets():
    return np.array(
        [("Rex", 9, 81.0), ("Fido", 3, 27.0)],
        dtype=[("name", "U10"), ("age", "i4"), ("weight", "f4")],
    )


def test_from_struct_array_reference_example():
    x = _pets()
    td = TensorDict.from_struct_array(x)
    assert td.batch_size == (2,) and td["age"].dtype == torch.int32
    assert td["name"] == ["Rex", "Fido"] and td[1]["name"] == "Fido"
    x_recon = td.to_struct_array()
    assert (x_recon == x).all() and x_recon.shape == x.shape
    x["age"] += 1  # numpy side -> tensordict
    assert td["age"].tolist() == [10, 4]
    td["weight"][0] = 1.5  # tensordict side -> numpy
    assert x["weight"][0] == 1.5


def test_struct_array_zero_copy_both_ways():
    dtype = np.dtype([("a", "i4"), ("b", "f8"), ("c", [("d", "f4", (2,))])], align=True)
    x = np.zeros(4, dtype=dtype)
    td = TensorDict.from_struct_array(x)
    assert td["c"].batch_size == (4,) and td["c", "d"].shape == (4, 2)
    back = td.to_struct_array()
    assert back.dtype == x.dtype
    back["a"][1] = 7
    assert x["a"][1] == 7 and td["a"][1].item() == 7
    td["b"][3] = 5.0
    assert back["b"][3] == 5.0
    part = td[1:].to_struct_array()  # indexing keeps the view
    part["c"]["d"][0] = 3.0
    assert x["c"]["d"][1].tolist() == [3.0, 3.0]
    sub = td.exclude("a").to_struct_array()
    sub["b"][0] = -1.0
    assert x["b"][0] == -1.0 and sub.dtype.names == ("b", "c")


def test_to_struct_array_copies_independent_tensors():
    td = TensorDict({"a": torch.arange(3), "b": {"c": torch.ones(3, 2)}, "s": "x"}, [3])
    arr = td.to_struct_array()
    assert arr.dtype.names == ("a", "b", "s") and arr["s"].tolist() == ["x"] * 3
    assert arr["b"]["c"].shape == (3, 2)
    arr["a"][0] = 100
    assert td["a"][0].item() == 0  # a new array: no shared memory


def test_struct_array_nested_with_extra_dims_and_batch_size():
    inner = np.dtype([("p", "f4"), ("q", "i8")])
    x = np.zeros((2, 3), dtype=[("n", inner, (4,)), ("v", "f4", (5,))])
    x["n"]["q"] = np.arange(24).reshape(2, 3, 4)
    td = TensorDict.from_struct_array(x)
    assert td.batch_size == (2, 3) and td["n"].batch_size == (2, 3, 4)
    assert td["n", "q"][1, 2].tolist() == [20, 21, 22, 23]
    assert (td.to_struct_array() == x).all()
    assert TensorDict.from_struct_array(x, batch_size=[2]).batch_size == (2,)
    assert TensorDict.from_struct_array(x, auto_batch_size=True).batch_size == (2, 3)
    with pytest.raises(RuntimeError, match=r"batch_size=torch.Size\(\[3\]\): entry 'n'"):
        TensorDict.from_struct_array(x, batch_size=[3])


def test_struct_array_packed_and_byteswapped_fields_are_copied():
    x = np.zeros(3, dtype=[("a", "i1"), ("b", "f8"), ("c", ">i4")])
    x["b"] = [1.0, 2.0, 3.0]
    x["c"] = [4, 5, 6]
    td = TensorDict.from_struct_array(x)
    assert td["b"].tolist() == [1.0, 2.0, 3.0] and td["c"].tolist() == [4, 5, 6]
    assert (td.to_struct_array() == x).all()


def test_struct_array_bad_input():
    with pytest.raises(TypeError, match="structured array.*got an array of dtype float64"):
        TensorDict.from_struct_array(np.zeros(3))
    with pytest.raises(TypeError, match="structured array.*got list"):
        TensorDict.from_struct_array([1])
    td = TensorDict({"n": {"h": torch.zeros(2, dtype=torch.bfloat16)}}, [2])
    with pytest.raises(TypeError, match=r"\('n', 'h'\).*bfloat16"):
        td.to_struct_array()


_np_fields = st.lists(
    st.tuples(
        st.sampled_from(["i1", "i4", "i8", "u1", "f4", "f8", "?", "c8"]),
        st.sampled_from([(), (2,), (1, 3)]),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=50, deadline=None)
@given(_np_fields, st.sampled_from([(3,), (2, 2), (1,), ()]), st.booleans())
def test_struct_array_round_trip_property(fields, shape, align):
    dtype = np.dtype([(f"f{i}", fmt, sub) for i, (fmt, sub) in enumerate(fields)], align=align)
    rng = np.random.default_rng(0)
    x = np.zeros(shape, dtype=dtype)
    for name in dtype.names:
        x[name] = rng.integers(0, 2, size=x[name].shape).astype(x[name].dtype)
    td = TensorDict.from_struct_array(x)
    assert td.batch_size == shape
    for name in dtype.names:
        assert np.array_equal(td[name].numpy(), x[name])
    back = td.to_struct_array()
    assert back.shape == x.shape and back.dtype.names == dtype.names
    for name in dtype.names:
        assert np.array_equal(back[name], x[name])
    if align and all(fmt != "c8" for fmt, _ in fields):  # every field is a view of x
        assert all(np.shares_memory(td[name].numpy(), x) for name in dtype.names)
        if x.size > 1:  # (one element with padding: the padding bytes are not known to be x's)
            assert np.shares_memory(back, x)


def test_to_struct_array_never_aliases_unrelated_tensors():
    td = TensorDict({"a": torch.zeros(()), "b": torch.zeros(())})
    arr = td.to_struct_array()
    arr["a"] = 1.0
    assert td["a"].item() == 0.0 and arr["b"] == 0.0


def test_conversions_of_a_lazy_stack():
    a = TensorDict({"a": torch.zeros(3), "n": {"b": torch.zeros(3, 2)}, "s": "x"}, [3])
    b = TensorDict({"a": torch.ones(3), "n": {"b": torch.ones(3, 2)}, "s": "y"}, [3])
    lazy = tensordict.lazy_stack([a, b])
    as_dict = lazy.to_dict()
    assert as_dict["a"].tolist() == [[0.0] * 3, [1.0] * 3] and as_dict["s"] == [
        ["x"] * 3,
        ["y"] * 3,
    ]
    assert lazy.tolist(convert_tensors=True)[1][0] == {"a": 1.0, "n": {"b": [1.0, 1.0]}, "s": "y"}
    arr = lazy.to_struct_array()
    assert arr.shape == (2, 3) and arr["s"][1, 2] == "y" and arr["n"]["b"][1, 0].tolist() == [1, 1]
    assert TensorDict.from_any(lazy) is lazy
    assert TensorDict.from_list([lazy, lazy]).batch_size == (2, 2, 3)
