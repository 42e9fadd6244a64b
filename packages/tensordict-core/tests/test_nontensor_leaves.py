"""NonTensorData / MetaData / NonTensorStack as tensors of their batch shape.

Oracles: the same operation on a tensor of the batch shape (for shapes), a numpy object
array of the values (for where the values go), Python's comparison of the values.
"""

from __future__ import annotations

import dataclasses
import operator
import pickle
import warnings

import numpy as np
import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    MetaData,
    NonTensorData,
    NonTensorDataBase,
    NonTensorStack,
    TensorDict,
    default_is_leaf,
    is_leaf_nontensor,
)


def objects(values, shape):
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


# ---------------------------------------------------------------- one value
@pytest.mark.parametrize(
    "op",
    [
        lambda t: t.reshape(3, 2),
        lambda t: t.view(6),
        lambda t: t.flatten(),
        lambda t: t.flatten(0, 1),
        lambda t: t.permute(1, 0),
        lambda t: t.transpose(0, 1),
        lambda t: t[0],
        lambda t: t[:, 1:],
        lambda t: t[None],
        lambda t: t[torch.tensor([True, False])],
        lambda t: t.squeeze(),
        lambda t: t.repeat(2, 1),
        lambda t: t.unflatten(1, (3, 1)),
    ],
)
def test_shape_methods_give_the_shape_of_the_tensor_op(op):
    d = NonTensorData("v", batch_size=[2, 3])
    out = op(d)
    assert type(out) is NonTensorData and out.data == "v"
    assert out.batch_size == op(torch.zeros(2, 3)).shape


def test_split_methods():
    d = NonTensorData("v", batch_size=[3])
    assert [p.batch_size for p in d.split(2)] == [(2,), (1,)]
    assert [p.data for p in d.unbind(0)] == ["v"] * 3
    assert [p.batch_size for p in d.chunk(3)] == [(1,)] * 3


@pytest.mark.parametrize("start, end", [(None, None), (0, -1), (None, 0), (0, None), (0, 0)])
def test_flatten_takes_none_for_the_ends(start, end):
    assert NonTensorData(0).flatten(start, end).tolist() == [0]
    for shape in ((), (2, 3)):
        want = torch.zeros(shape).flatten(0 if start is None else start, -1 if end is None else end)
        assert NonTensorData(0, batch_size=shape).flatten(start, end).batch_size == want.shape
        stack = NonTensorStack.from_list(objects(list(range(6)), (2, 3)).tolist())
        assert (
            stack.flatten(start, end).batch_size
            == torch.zeros(2, 3)
            .flatten(0 if start is None else start, -1 if end is None else end)
            .shape
        )


def test_expand_and_unsqueeze_give_a_stack_of_the_value():
    for d in (NonTensorData(0, batch_size=(3,)), NonTensorData(0, batch_size=(1,))):
        out = d.expand((2, 3))
        assert type(out) is NonTensorStack and out.tolist() == [[0] * 3] * 2
    assert type(NonTensorData(1).unsqueeze(0)) is NonTensorStack
    assert type(NonTensorData(1).unsqueeze(0).squeeze(0)) is NonTensorData
    td = TensorDict(foo=NonTensorData(3))
    assert type(td.unsqueeze(0).get("foo")) is NonTensorStack and td.unsqueeze(0)["foo"] == [3]
    assert type(td.unsqueeze(0).squeeze().get("foo")) is NonTensorData
    assert type(td.reshape(1).get("foo")) is NonTensorData  # other shape ops keep one value


def test_metadata_stays_one_value():
    d = MetaData(0, batch_size=(3,))
    for out in (d.expand(2, 3), d.unsqueeze(0), d.reshape(3, 1), d[0]):
        assert type(out) is MetaData and out.data == 0
    td = TensorDict(foo=MetaData(0, batch_size=(1,)), batch_size=(1,))
    assert type(td.expand(2, 3).get("foo")) is MetaData and td.expand(2, 3)["foo"] == 0


def test_comparisons_are_tensors_of_the_batch_shape():
    a = NonTensorData("x", batch_size=[2])
    assert torch.equal(a == NonTensorData("x", batch_size=[2]), torch.tensor([True, True]))
    assert torch.equal(a != NonTensorData("y", batch_size=[2]), torch.tensor([True, True]))
    assert torch.equal(a == NonTensorStack("x", "z"), torch.tensor([True, False]))
    assert torch.equal(NonTensorData(True) | NonTensorData(False), torch.tensor(True))
    assert torch.equal(NonTensorData(True) ^ NonTensorData(True), torch.tensor(False))
    assert torch.equal(NonTensorData(True) & NonTensorData(False), torch.tensor(False))
    assert torch.equal(
        torch.tensor([3, 4]) == NonTensorData(3, batch_size=[2]), torch.tensor([True, False])
    )
    with pytest.raises(TypeError):
        hash(a)


def test_tensordict_comparisons_compare_the_values():
    def td(v):
        return TensorDict(
            {
                "x": torch.ones(2, dtype=torch.bool),
                "s": NonTensorData(v),
                "n": {"b": NonTensorData(True)},
            },
            [2],
        )

    same, other = td("a"), td("b")
    assert (same == td("a")).all() and not (same == other).all()
    assert torch.equal((same != other)["s"], torch.tensor([True, True]))
    assert not (same ^ same)["n", "b"].any() and (same | same)["n", "b"].all()
    assert (same | same)["s"] == "a"  # no "|" between strings: carried over


def test_call_calls_the_value():
    td0 = TensorDict({"a": 0, "b": 0})
    td1 = TensorDict({"a": 1, "b": 1})
    funcs = TensorDict({"a": lambda x, y: x - y, "b": lambda x, y: x + y})
    out = td0.apply(lambda x, y, f: f(x, y), td1, funcs)
    assert out["a"] == -1 and out["b"] == 1


def test_torch_stack_and_cat_of_leaves():
    t1, t2 = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0, 3.0])
    stack = torch.stack([NonTensorData(t1), NonTensorData(t2)])
    assert type(stack) is NonTensorStack and stack.tolist()[1] is t2
    assert (
        torch.cat([NonTensorData("a", batch_size=[2]), NonTensorData("a", batch_size=[1])]).tolist()
        == ["a"] * 3
    )
    both = torch.stack([NonTensorStack("a", "b"), NonTensorStack("c", "d")])
    assert both.tolist() == [["a", "b"], ["c", "d"]]
    assert [x.data for x in torch.unbind(NonTensorStack("a", "b"))] == ["a", "b"]


def test_get_returns_the_stored_leaf_and_update_writes_it():
    td = TensorDict({"val": NonTensorData("a")})
    leaf = td.get("val")
    assert leaf is dict(td.items())["val"] and "data" not in leaf.__dict__
    leaf.update(NonTensorData("b"))
    assert td["val"] == "b"
    leaf.update_({"data": "c"})
    assert td["val"] == "c"
    leaf.lock_()
    with pytest.raises(RuntimeError, match="locked"):
        leaf.update(NonTensorData("d"))
    leaf.update(NonTensorData("d"), inplace=True)
    assert td["val"] == "d"
    with pytest.raises(ValueError, match="maybe_to_stack"):
        NonTensorData(1, batch_size=[2]).update(NonTensorStack(1, 2))
    assert td["val"] == "d"


def test_setitem_on_one_value():
    d = NonTensorData("a", batch_size=[2])
    d[:] = "b"
    assert d.data == "b"
    with pytest.raises(ValueError, match="maybe_to_stack"):
        d[0] = "c"
    assert d.data == "b"
    s = NonTensorStack("a string")
    s[0][True] = NonTensorStack("another string")  # an element read from a stack writes back
    assert s[0].data == "another string"


def test_maybe_to_stack_fields_from_tensordict_extend():
    d = NonTensorData("a", batch_size=[2])
    stack = d.maybe_to_stack()
    assert type(stack) is NonTensorStack and stack.tolist() == ["a", "a"]
    assert stack.maybe_to_stack() is stack and NonTensorData(0).maybe_to_stack().data == 0
    assert [f.name for f in NonTensorData.fields()] == ["data", "_metadata", "_is_non_tensor"]
    assert all(isinstance(f, dataclasses.Field) for f in MetaData.fields())
    made = NonTensorData.from_tensordict(TensorDict(batch_size=[2]), {"data": "x"})
    assert made.data == "x" and made.batch_size == (2,)
    d.extend(NonTensorData("a", batch_size=[3]))
    assert d.batch_size == (5,)
    with pytest.raises(ValueError, match="torch.cat"):
        d.extend(NonTensorData("z", batch_size=[1]))
    assert d.batch_size == (5,)


def test_typed_metadata():
    d = MetaData[int](0, batch_size=(3,))
    assert d.data == 0 and isinstance(d, MetaData[int]) and isinstance(d, MetaData)
    assert MetaData[int] is MetaData[int] and MetaData[int].__name__ == "MetaData[int]"
    with pytest.raises(TypeError, match="Expected data of type int, got str"):
        MetaData[int]("a string")
    with pytest.raises(TypeError, match="Expected data of type float, got int"):
        MetaData[float](1)
    td = TensorDict(m=MetaData[int](4))
    assert td["m"] == 4 and type(td.get("m")) is MetaData[int]
    back = pickle.loads(pickle.dumps(td.get("m")))
    assert type(back) is MetaData[int] and back.data == 4
    assert isinstance(MetaData(1), NonTensorDataBase) and isinstance(
        NonTensorData(1), NonTensorDataBase
    )


# ---------------------------------------------------------------- stacks
def test_stack_constructor_keywords():
    s = NonTensorStack(NonTensorData("a"), NonTensorData("b"), batch_size=(2,))
    assert s.tolist() == ["a", "b"]
    with pytest.raises(RuntimeError, match=r"batch_size=\(3,\)"):
        NonTensorStack("a", "b", batch_size=[3])
    with pytest.raises(TypeError, match="unexpected keyword"):
        NonTensorStack("a", bogus=1)
    s = NonTensorStack(
        NonTensorData("a", batch_size=(3,)), NonTensorData("b", batch_size=(3,)), stack_dim=1
    )
    assert s.batch_size == (3, 2) and s[0].tolist() == ["a", "b"]
    assert NonTensorStack().batch_size == (0,)


def test_data_of_a_stack():
    assert NonTensorStack("a", "a").data == "a"
    with pytest.raises(AttributeError, match="different values"):
        NonTensorStack("a", "b").data


def test_from_nontensordata_is_deprecated():
    with pytest.warns(DeprecationWarning, match="maybe_to_stack"):
        s = NonTensorStack.from_nontensordata(NonTensorData("a", batch_size=[2, 3]))
    assert s.batch_size == (2, 3) and s.tolist() == [["a"] * 3] * 2


def test_from_list_unwraps_leaves():
    nd = NonTensorStack.from_list([[True, "b"], ["another", NonTensorData("final")]])
    assert nd.batch_size == (2, 2) and nd[1, 1].data == "final" and nd[0, 0].data is True


def test_where_picks_per_element():
    cond = torch.tensor([True, False, True])
    a, b = NonTensorStack("a0", "a1", "a2"), NonTensorStack("b0", "b1", "b2")
    want = np.where(cond.numpy(), objects(a.tolist(), 3), objects(b.tolist(), 3)).tolist()
    assert a.where(cond, b).tolist() == want
    out = NonTensorStack("x", "x", "x")
    assert a.where(condition=cond, other=b, out=out, pad=0) is out and out.tolist() == want
    assert a.where(cond, "z").tolist() == ["a0", "z", "a2"]


def test_contiguous_is_the_stack_itself():
    s = NonTensorStack("a", "b")
    assert s.contiguous() is s and s.contiguous(canonical=True) is s
    lazy = (
        TensorDict(q=NonTensorData("x"), v=torch.zeros(())),
        TensorDict(q=NonTensorData("y"), v=torch.zeros(())),
    )
    dense = LazyStackedTensorDict(*lazy).contiguous()
    assert type(dense) is TensorDict and dense["q"] == ["x", "y"] and dense[1]["q"] == "y"


def test_list_written_into_a_stack_goes_element_wise():
    s = NonTensorStack("a", "b", "c")
    s[0:2] = ["x", "y"]
    assert s.tolist() == ["x", "y", "c"]
    grid = NonTensorStack.from_list([["a", "b"], ["c", "d"]])
    grid[0] = ["p", "q"]
    assert grid.tolist() == [["p", "q"], ["c", "d"]]
    s[2] = ["one", "value"]  # a single element takes the list as its value
    assert s[2].data == ["one", "value"]


def test_setitem_with_none_and_true_indices():
    for i in (None, True):
        s = NonTensorStack("0", "1")
        s[:, i] = NonTensorStack(NonTensorStack("2", "3"), stack_dim=1)
        assert s.tolist() == ["2", "3"]


def test_new_empty_keeps_stacks_of_the_new_shape():
    td = TensorDict(a=NonTensorStack("a", "b").unsqueeze(-1), batch_size=(2,))
    for size in (4, 1):
        out = td.new_empty((size,), empty_lazy=True).get("a")
        assert type(out) is NonTensorStack and out.batch_size == (size, 1)


def test_indexed_write_into_new_zeros_empty_lazy_keeps_the_keys_of_every_member():
    # new_zeros(empty_lazy=True) gives each member the first member's structure (its
    # non-tensor values included); the write replaces the selected members' values only
    src = TensorDict(
        a=TensorDict(b=NonTensorStack("a", "b", "c").unsqueeze(-1), batch_size=(3,)),
        batch_size=(3,),
    ).to_lazystack()
    dest = src.new_zeros((4,), empty_lazy=True)
    dest[torch.tensor([True, True, False, True])] = src
    got = dest.get(("a", "b")).tolist()
    assert got == [["a"], ["b"], ["a"], ["c"]]  # the unselected one: the first member's value
    assert all(("a", "b") in m.keys(True) for m in dest.tensordicts)


def test_leaf_predicates():
    assert default_is_leaf(torch.Tensor) and not default_is_leaf(NonTensorData)
    assert not default_is_leaf(TensorDict) and not default_is_leaf(NonTensorStack)
    assert is_leaf_nontensor(torch.Tensor) and is_leaf_nontensor(NonTensorStack)
    assert not is_leaf_nontensor(TensorDict) and not is_leaf_nontensor(int)
    td = TensorDict(a={}, b="a string!", c=torch.zeros(()))
    assert sorted(td.keys(leaves_only=True, is_leaf=is_leaf_nontensor)) == ["b", "c"]


def test_deprecation_free_defaults():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.stack([TensorDict(s="a"), TensorDict(s="a")])
        TensorDict(x=["a", "b"], batch_size=[2])


def test_element_read_from_a_stack_compares_like_a_value():
    s = NonTensorStack("a", "b")
    assert operator.eq(s[0].data, "a") and torch.equal(s == s, torch.tensor([True, True]))
