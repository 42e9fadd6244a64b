"""Pytrees: from_pytree/to_pytree as a bijection, and TensorDict as a torch pytree node
(tree_map, flatten/unflatten, torch.func.grad/jacrev/vmap)."""

from __future__ import annotations

import collections
from collections import namedtuple

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils import _pytree as pytree

import tensordict
from tensordict import TensorDict

Pair = namedtuple("Pair", ["left", "right"])


def _same_tree(a, b):
    """Exactly the same structure (types, keys and their order), identical tensor leaves."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, TensorDict):
        assert a is b
    elif isinstance(a, dict):
        assert list(a) == list(b)
        if isinstance(a, collections.defaultdict):
            assert a.default_factory is b.default_factory
        for key in a:
            _same_tree(a[key], b[key])
    elif isinstance(a, (list, tuple, collections.deque)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same_tree(x, y)
    elif isinstance(a, torch.Tensor):
        assert a is b
    else:
        assert a == b


class Weird:
    pass


# ---------------------------------------------------------------------- from/to pytree
def test_reference_example_round_trip():
    weird_key = Weird()
    tree = (
        [torch.randint(10, (3,)), torch.zeros(2)],
        {
            "tensor": torch.randn(2),
            "td": TensorDict({"one": 1}),
            weird_key: torch.randint(10, (2,)),
            "list": [1, 2, 3],
        },
        {"named_tuple": TensorDict({"two": torch.ones(1) * 2}).to_namedtuple()},
    )
    td = TensorDict.from_pytree(tree)
    recon = td.to_pytree()

    def check(v1, v2):
        assert (v1 == v2).all()

    pytree.tree_map(check, tree, recon)
    assert weird_key in recon[1] and recon[1]["td"] is tree[1]["td"]
    assert type(recon[2]["named_tuple"]) is type(tree[2]["named_tuple"])
    assert recon[1]["list"] == [torch.tensor(1), torch.tensor(2), torch.tensor(3)]


def test_layout_is_readable():
    tree = {"x": [torch.zeros(2), (torch.ones(2), "label")], 3: torch.ones(1)}
    td = TensorDict.from_pytree(tree)
    assert td["0", "1", "1"] == "label" and td["1"].tolist() == [1.0]  # odd keys: by position
    assert set(td.keys()) == {"0", "1", "_pytree_type"}
    plain = TensorDict.from_pytree({"a": torch.zeros(1), "b.c": [torch.ones(1)]})
    assert plain["b.c", "0"].tolist() == [1.0]  # plain string keys are kept
    assert TensorDict({"a": torch.zeros(1), "b": {"c": "x"}}).to_pytree() == {
        "a": torch.zeros(1),
        "b": {"c": "x"},
    }


def test_odd_keys_round_trip():
    tree = {
        1: torch.zeros(1),
        (1, "a"): torch.ones(1),
        "a.b": torch.ones(2),
        "": torch.zeros(3),
        "_pytree_type": torch.ones(3),
        None: [torch.zeros(1)],
    }
    back = TensorDict.from_pytree(tree).to_pytree()
    _same_tree(tree, back)


def test_containers_round_trip():
    tree = collections.OrderedDict(
        b=collections.deque([torch.zeros(1), torch.ones(1)], maxlen=5),
        a=collections.defaultdict(list, {"k": torch.ones(2)}),
        c=Pair(torch.zeros(1), [Pair(torch.ones(1), ())]),
        d=[],
        e={},
    )
    back = TensorDict.from_pytree(tree).to_pytree()
    _same_tree(tree, back)
    assert back["b"].maxlen == 5


def test_from_pytree_batch_size():
    tree = {"a": torch.zeros(3, 4), "b": [torch.zeros(3, 4, 5)]}
    td = TensorDict.from_pytree(tree, batch_size=[3])
    assert td.batch_size == (3,) and td["b"].batch_size == (3,)
    td = TensorDict.from_pytree(tree, auto_batch_size=True)
    assert td.batch_size == (3, 4) and td["b"].batch_size == (3, 4, 5)
    _same_tree(tree, td.to_pytree())
    assert td[1]["b", "0"].shape == (4, 5)
    assert type(td[1].to_pytree()["b"]) is list


def test_from_pytree_does_not_touch_nested_tensordicts():
    inner = TensorDict({"c": torch.zeros(3, 4)})
    td = TensorDict.from_pytree([inner], auto_batch_size=True)
    assert td["0", "0"].batch_size == (3, 4) and inner.batch_size == ()
    assert td.to_pytree()[0] is not inner and td.to_pytree()[0]["c"] is inner["c"]


def test_from_pytree_bad_input():
    with pytest.raises(TypeError, match="top level, got Tensor"):
        TensorDict.from_pytree(torch.zeros(1))
    with pytest.raises(RuntimeError, match=r"key '0'.*batch_size=\(3,\).*\('a',\)"):
        TensorDict.from_pytree({"a": [torch.zeros(2)]}, batch_size=[3])
    with pytest.raises(ValueError, match="both batch_size and batch_dims"):
        TensorDict.from_pytree([], batch_size=[], batch_dims=1)


_tensors = st.builds(lambda n: torch.arange(float(n)), st.integers(0, 3))
_odd_keys = st.one_of(
    st.text("ab._", max_size=3),
    st.integers(-2, 2),
    st.tuples(st.integers(0, 2), st.text("ab", max_size=2)),
    st.just("_pytree_type"),
)


def _containers(children):
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.builds(Pair, children, children),
        st.dictionaries(_odd_keys, children, max_size=3),
        st.dictionaries(st.text("xyz", min_size=1, max_size=2), children, max_size=3),
    )


_trees = st.recursive(_tensors, _containers, max_leaves=10).filter(
    lambda t: not isinstance(t, torch.Tensor)
)


@settings(max_examples=80, deadline=None)
@given(_trees)
def test_pytree_bijection_property(tree):
    td = TensorDict.from_pytree(tree)
    back = td.to_pytree()
    _same_tree(tree, back)
    # and the tensordict itself survives a torch pytree round trip
    leaves, spec = pytree.tree_flatten(td)
    _same_tree(pytree.tree_unflatten(leaves, spec).to_pytree(), tree)


# ---------------------------------------------------------------------- the pytree node
def _td():
    return TensorDict(
        {"a": torch.arange(6.0).view(2, 3), "b": {"c": torch.ones(2, 4)}, "s": "text"},
        [2],
        names=["batch"],
    )


def test_tree_map_returns_tensordict():
    td = _td()
    out = pytree.tree_map(lambda x: x * 2, td)
    assert type(out) is TensorDict and type(out["b"]) is TensorDict
    assert out.batch_size == (2,) and out.names == ["batch"] and out["s"] == "text"
    assert out["a"].tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    assert td["a"][0, 1].item() == 1.0  # input untouched
    reduced = pytree.tree_map(lambda x: x.sum(-1), td)
    assert reduced.batch_size == (2,) and reduced["b", "c"].tolist() == [4.0, 4.0]
    summed = pytree.tree_map(lambda x: x.sum(), td)  # leaves lost the batch dim
    assert summed.batch_size == () and summed["a"].item() == 15.0


def test_tree_map_to_python_numbers_gives_0_dim_tensors():
    # vmap rebuilds trees of in_dims this way; each number is stored as torch.as_tensor
    # stores it, so the levels lose their batch dims
    td = TensorDict({"a": torch.zeros(3, 2), "b": {"c": torch.ones(3), "d": torch.ones(3)}}, [3])
    for number in (0, -7, 2**62, -(2**63), True, 1.5, 2j):
        out = pytree.tree_map(lambda x, number=number: number, td)
        expected = torch.as_tensor(number)
        assert out.batch_size == () and out["b"].batch_size == ()
        for key in ("a", ("b", "c"), ("b", "d")):
            assert out[key].dtype == expected.dtype and out[key].shape == ()
            assert out[key].item() == number
    mixed = pytree.tree_map(lambda x: 1 if x.ndim == 1 else x, td)  # numbers beside tensors
    assert mixed.batch_size == () and mixed["a"].shape == (3, 2) and mixed["b", "c"].item() == 1


def test_vmap_levels_keep_non_tensor_entries_and_drop_the_device():
    td = TensorDict(
        {"a": torch.arange(6.0).view(3, 2), "n": {"b": torch.ones(3), "s": "text"}},
        [3],
        device="cpu",
    )
    plain = TensorDict({"a": torch.arange(6.0).view(3, 2), "n": {"b": torch.ones(3)}}, [3], "cpu")
    seen = []

    def f(t):
        n = t["n"]
        seen.append((t.batch_size, n.batch_size, t.device, n.device, n["s"] if "s" in n else None))
        return t["a"].sum() + n["b"]

    assert torch.vmap(f)(td).tolist() == [2.0, 6.0, 10.0]
    assert seen[-1] == ((), (), None, None, "text")
    assert torch.vmap(f)(plain).tolist() == [2.0, 6.0, 10.0]
    assert seen[-1] == ((), (), None, None, None)  # as the reference: no device inside vmap


def test_flatten_unflatten_round_trip():
    td = _td()
    leaves, spec = pytree.tree_flatten(td)
    assert [leaf is ref for leaf, ref in zip(leaves, [td["a"], td["b", "c"]], strict=True)]
    assert len(leaves) == 2  # the non-tensor entry travels in the spec
    back = pytree.tree_unflatten(leaves, spec)
    assert back is not td and back["a"] is td["a"] and back["s"] == "text"
    assert back.batch_size == td.batch_size and back["b"].batch_size == (2,)
    assert back.names == ["batch"] and list(back.keys()) == list(td.keys())
    paths = [pytree.keystr(p) for p, _ in pytree.tree_flatten_with_path(td)[0]]
    assert paths == ["['a']", "['b']['c']"]
    assert pytree.tree_structure(td) == pytree.tree_structure(_td())
    hash(spec)


def test_tree_spec_serialization():
    td = TensorDict(
        {"a": torch.zeros(2), "n": {"m": torch.ones(2, 3)}, "s": "x"}, [2], device="cpu"
    )
    _, spec = pytree.tree_flatten(td)
    loaded = pytree.treespec_loads(pytree.treespec_dumps(spec))
    back = pytree.tree_unflatten([torch.ones(2), torch.ones(2)], loaded)
    assert back["s"] == "x" and back.device == torch.device("cpu") and back.batch_size == (2,)


def test_torch_func_grad_and_jacrev():
    params = TensorDict({"w": torch.tensor([1.0, 2.0, 3.0]), "n": {"b": torch.tensor(0.5)}})
    x = torch.tensor([4.0, 5.0, 6.0])

    def f(p, x):
        return (p["w"] * x).sum() + p["n", "b"] ** 2

    grads = torch.func.grad(f)(params, x)
    assert type(grads) is TensorDict and type(grads["n"]) is TensorDict
    assert grads["w"].tolist() == [4.0, 5.0, 6.0] and grads["n", "b"].item() == 1.0
    jac = torch.func.jacrev(lambda p: p["w"] * 2 + p["n", "b"])(params)
    assert jac["w"].tolist() == [[2.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0]]
    assert jac["n", "b"].tolist() == [1.0, 1.0, 1.0]
    g, value = torch.func.grad_and_value(f)(params, x)
    assert value.item() == 32.25 and g["w"].tolist() == [4.0, 5.0, 6.0]


def test_torch_func_functional_call_with_tensordict_params():
    module = torch.nn.Linear(3, 2)
    params = TensorDict(dict(module.named_parameters())).apply(torch.zeros_like)
    out = torch.func.functional_call(module, dict(params.items()), (torch.ones(1, 3),))
    assert out.tolist() == [[0.0, 0.0]]


def test_vmap_in_and_out_dims():
    td = TensorDict(
        {"a": torch.arange(12.0).view(3, 4), "b": TensorDict({"c": torch.ones(3, 4, 5)}, [3, 4])},
        [3],
    )
    seen = []

    def f(t):
        seen.append((t.batch_size, t["b"].batch_size))
        return t.apply(lambda x: x + 1)

    out = torch.vmap(f)(td)
    assert seen[-1] == (torch.Size([]), torch.Size([4]))
    assert out.batch_size == (3,) and out["b"].batch_size == (3, 4)
    assert torch.equal(out["a"], td["a"] + 1)
    td2 = TensorDict({"a": torch.arange(12.0).view(3, 4)}, [3, 4])
    out = torch.vmap(f, in_dims=1)(td2.set("b", TensorDict({"c": torch.ones(3, 4)}, [3, 4])))
    assert seen[-1][0] == (3,) and out.batch_size == (4, 3)
    assert torch.equal(out["a"], td2["a"].T + 1)
    total = torch.vmap(lambda t: t["a"].sum() + t["b", "c"].sum())(td)
    assert total.tolist() == [26.0, 42.0, 58.0]


def test_top_level_from_pytree():
    assert tensordict.from_pytree([torch.zeros(1)]).to_pytree()[0].tolist() == [0.0]


# ---------------------------------------------------------------------- lazy stacks
def _lazy(stack_dim=0):
    a = TensorDict({"a": torch.zeros(3), "n": {"b": torch.zeros(3, 2)}, "s": "x"}, [3])
    b = TensorDict({"a": torch.ones(3), "n": {"b": torch.ones(3, 2)}, "s": "y"}, [3])
    return tensordict.lazy_stack([a, b], stack_dim)


def test_lazy_stack_tree_map_and_round_trip():
    lazy = _lazy(stack_dim=1)
    out = pytree.tree_map(lambda x: x + 1, lazy)
    assert type(out) is type(lazy) and out.stack_dim == 1 and out.batch_size == (3, 2)
    assert out["a"].tolist() == [[1.0, 2.0]] * 3 and out.tensordicts[1]["s"] == "y"
    leaves, spec = pytree.tree_flatten(lazy)
    assert len(leaves) == 4 and leaves[0] is lazy.tensordicts[0]["a"]
    back = pytree.tree_unflatten(leaves, spec)
    assert back.batch_size == (3, 2) and back.tensordicts[0]["a"] is leaves[0]
    nested = TensorDict({"l": lazy, "x": torch.zeros(3)}, [3])
    assert pytree.tree_map(lambda x: x * 2, nested)["l"].batch_size == (3, 2)


def test_lazy_stack_torch_func():
    lazy = _lazy().exclude("s")
    grads = torch.func.grad(lambda t: (t["a"] ** 2).sum() + t["n", "b"].sum())(lazy)
    assert type(grads) is type(lazy)
    assert grads["a"].tolist() == [[0.0] * 3, [2.0] * 3]
    assert grads["n", "b"].tolist() == [[[1.0, 1.0]] * 3] * 2
    # vmap along the stack dim sees one member at a time (test_vmap: every other dim)
    out = torch.vmap(lambda t: t["a"] + t["n", "b"].sum(-1))(lazy)
    assert out.tolist() == [[0.0] * 3, [3.0] * 3]
    row = TensorDict({"a": torch.arange(3.0)}, [3])
    out = torch.vmap(lambda t: tensordict.lazy_stack([t, t.apply(lambda x: -x)]))(row)
    assert out.batch_size == (3, 2) and out["a"].tolist() == [[0.0, 0.0], [1.0, -1.0], [2.0, -2.0]]


def test_non_tensor_stacks_and_metadata_travel_in_the_spec():
    rows = [
        TensorDict({"x": torch.ones(()), "s": "a", "m": tensordict.MetaData("run")}),
        TensorDict({"x": torch.ones(()), "s": "b", "m": tensordict.MetaData("run")}),
    ]
    td = torch.stack(rows)
    leaves, spec = pytree.tree_flatten(td)
    assert len(leaves) == 1  # only the tensor
    out = pytree.tree_map(lambda x: x * 2, td)
    assert out["x"].tolist() == [2.0, 2.0] and out["s"] == ["a", "b"] and out["m"] == "run"
    assert type(out._tensordict["m"]) is tensordict.MetaData
    loaded = pytree.treespec_loads(pytree.treespec_dumps(spec))
    assert loaded == spec
    back = pytree.tree_unflatten([torch.zeros(2)], loaded)
    assert back["s"] == ["a", "b"] and type(back._tensordict["m"]) is tensordict.MetaData
    assert td.to_dict() == {"x": td["x"], "s": ["a", "b"], "m": "run"}


def test_nested_tensordicts_are_one_node():
    """A tensordict and the plain tensordicts nested in it are one pytree node whose
    children are all their tensors (depth first, in key order); other collections nested
    in it stay nodes of their own."""
    td = TensorDict(
        a=torch.zeros(2, 1),
        n={"b": torch.ones(2), "m": {"c": torch.full((2, 3), 2.0)}, "d": torch.ones(2, 4)},
        lazy=tensordict.lazy_stack([TensorDict(e=torch.zeros(3)), TensorDict(e=torch.ones(3))]),
        batch_size=[2],
    )
    leaves, spec = pytree.tree_flatten(td)
    order = [("a",), ("n", "b"), ("n", "m", "c"), ("n", "d"), ("lazy", 0, "e"), ("lazy", 1, "e")]
    assert len(leaves) == len(order)
    for leaf, key in zip(leaves[:4], order[:4], strict=True):
        assert leaf is td[key]
    assert spec.type is TensorDict and spec.num_children == 5  # 4 tensors + the lazy stack
    assert spec.num_leaves == 6
    paths = [pytree.keystr(p) for p, _ in pytree.tree_flatten_with_path(td)[0]]
    assert paths[:4] == ["['a']", "['n']['b']", "['n']['m']['c']", "['n']['d']"]
    for path, leaf in pytree.tree_flatten_with_path(td)[0]:
        assert pytree.key_get(td, path) is leaf
    out = pytree.tree_map(lambda x: x + 1, td)
    assert type(out["lazy"]) is type(td["lazy"]) and out["lazy", "e"].tolist() == [
        [1.0] * 3,
        [2.0] * 3,
    ]
    assert out["n", "m"].batch_size == (2,) and out["n", "m", "c"].tolist() == [[3.0] * 3] * 2
    back = pytree.tree_unflatten(leaves, spec)
    assert back["n", "m", "c"] is td["n", "m", "c"] and list(back["n"].keys()) == ["b", "m", "d"]


def test_nested_spec_serialization_and_equality():
    def make():
        return TensorDict(
            a=torch.zeros(2), n={"b": torch.ones(2, 3), "s": "x", "m": {}}, batch_size=[2]
        )

    leaves, spec = pytree.tree_flatten(make())
    assert spec == pytree.tree_structure(make()) and hash(spec) == hash(
        pytree.tree_structure(make())
    )
    other = make()
    other["n", "b2"] = torch.ones(2)
    assert spec != pytree.tree_structure(other)
    loaded = pytree.treespec_loads(pytree.treespec_dumps(spec))
    assert loaded == spec
    back = pytree.tree_unflatten([torch.full((2,), 5.0), torch.zeros(2, 3)], loaded)
    assert back["a"].tolist() == [5.0, 5.0] and back["n", "s"] == "x"
    assert back["n"].batch_size == (2,) and back["n", "m"].batch_size == (2,)
    assert list(back["n"].keys()) == ["b", "s", "m"]
