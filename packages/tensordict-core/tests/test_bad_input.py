"""Bad input: the right exception type, a message that names the key / shape / what was
expected, and a tensordict left exactly as it was (compared against a clone taken before)."""

from __future__ import annotations

import copy
import re

import pytest
import torch

from tensordict import TensorDict, cat, from_consolidated, stack
from tensordict._kinds.nesting import MAX_NESTING_DEPTH


def make_td():
    return TensorDict(
        {
            "a": torch.arange(6.0).reshape(2, 3),
            "n": {"b": torch.arange(24).reshape(2, 3, 4), "m": {"c": torch.ones(2, 3)}},
            "s": "text",
        },
        [2, 3],
        names=["x", "y"],
    )


@pytest.fixture
def td():
    return make_td()


@pytest.fixture
def unchanged(td, assert_td_equal):
    """Yield; afterwards check ``td`` equals a clone taken before the test body ran."""
    before = td.clone()
    keys = list(td.keys(include_nested=True))
    names, locked = td.names, td.is_locked
    leaves = {k: v for k, v in td.items(True, True)}
    yield
    assert_td_equal(td, before)
    assert list(td.keys(include_nested=True)) == keys
    assert td.names == names and td.is_locked == locked
    for key, value in leaves.items():  # the very same objects are still stored
        assert dict(td.items(True, True))[key] is value


# ---------------------------------------------------------------- batch-size mismatch
def test_constructor_batch_mismatch_names_key_and_shapes():
    with pytest.raises(RuntimeError) as info:
        TensorDict({"good": torch.zeros(4), "bad_key": torch.zeros(3, 5)}, [4])
    msg = str(info.value)
    assert "'bad_key'" in msg
    assert "(3, 5)" in msg
    assert "(4,)" in msg


def test_constructor_nested_batch_mismatch():
    with pytest.raises(RuntimeError, match="'inner'"):
        TensorDict({"n": {"inner": torch.zeros(3)}}, [4])


def test_set_batch_mismatch(td, unchanged):
    with pytest.raises(RuntimeError) as info:
        td.set("new", torch.zeros(3, 2))
    msg = str(info.value)
    assert "'new'" in msg and "(3, 2)" in msg and "(2, 3)" in msg


def test_setitem_batch_mismatch_on_existing_key(td, unchanged):
    with pytest.raises(RuntimeError, match=r"'a'.*\(2,\).*\(2, 3\)"):
        td["a"] = torch.zeros(2)


def test_set_nested_batch_mismatch_creates_nothing(td, unchanged):
    with pytest.raises(RuntimeError, match="'leaf'"):
        td["p", "q", "leaf"] = torch.zeros(5)


def test_set_inplace_batch_mismatch(td, unchanged):
    with pytest.raises(RuntimeError, match="'a'"):
        td.set("a", torch.zeros(3), inplace=True)


def test_set__batch_mismatch(td, unchanged):
    with pytest.raises(RuntimeError, match=r"'a'.*\(4,\)"):
        td.set_("a", torch.zeros(4))


def test_set_nested_tensordict_batch_mismatch(td, unchanged):
    with pytest.raises(RuntimeError, match=r"'sub'.*\(3,\).*\(2, 3\)"):
        td["sub"] = TensorDict({"x": torch.zeros(3)}, [3])


def test_update_validates_everything_before_writing(td, unchanged):
    with pytest.raises(RuntimeError, match="'bad'"):
        td.update(
            {"a": torch.full((2, 3), 9.0), "n": {"b": torch.zeros(2, 3, 4)}, "bad": torch.zeros(7)}
        )


def test_update_nested_bad_value(td, unchanged):
    with pytest.raises(RuntimeError, match=r"\('n', 'bad'\)"):
        td.update({"n": {"b": torch.zeros(2, 3, 4, dtype=torch.int64), "bad": torch.zeros(5)}})


def test_update__shape_mismatch(td, unchanged):
    with pytest.raises(RuntimeError, match=r"\('n', 'b'\).*\(2, 3, 5\).*\(2, 3, 4\)"):
        td.update_({"a": torch.zeros(2, 3), "n": {"b": torch.zeros(2, 3, 5)}})


def test_update__missing_key(td, unchanged):
    with pytest.raises(KeyError, match="zz"):
        td.update_({"a": torch.zeros(2, 3), "zz": torch.zeros(2, 3)})


def test_batch_size_setter_mismatch(td, unchanged):
    with pytest.raises(RuntimeError) as info:
        td.batch_size = [3]
    msg = str(info.value)
    assert "'a'" in msg and "[3]" in msg
    assert td.batch_size == torch.Size([2, 3])


def test_negative_and_bad_batch_size():
    with pytest.raises(ValueError, match="-2"):
        TensorDict(batch_size=[2, -2])
    with pytest.raises(TypeError, match="batch_size"):
        TensorDict(batch_size="abc")


# ---------------------------------------------------------------- missing keys
def test_missing_key_names_key_and_lists_keys(td, unchanged):
    with pytest.raises(KeyError) as info:
        td["missing"]
    msg = str(info.value)
    assert "'missing'" in msg
    assert "'a'" in msg and "'n'" in msg


def test_missing_nested_key_names_the_missing_part(td, unchanged):
    with pytest.raises(KeyError) as info:
        td["n", "m", "zz"]
    msg = str(info.value)
    assert "'zz'" in msg
    assert "'c'" in msg  # what is there instead


def test_nested_key_through_a_leaf(td, unchanged):
    with pytest.raises(KeyError, match="'a'"):
        td.get(("a", "x"))
    with pytest.raises(KeyError, match="'a'"):
        td.set(("a", "x"), torch.zeros(2, 3))


def test_delete_missing(td, unchanged):
    with pytest.raises(KeyError, match="'missing'"):
        del td["missing"]
    with pytest.raises(KeyError, match="'zz'"):
        td.pop(("n", "zz"))


def test_set__missing(td, unchanged):
    with pytest.raises(KeyError, match="'missing'"):
        td.set_("missing", torch.zeros(2, 3))


def test_select_missing(td, unchanged):
    with pytest.raises(KeyError, match="'missing'"):
        td.select("a", "missing")


def test_rename_key_missing(td, unchanged):
    with pytest.raises(KeyError, match="'missing'"):
        td.rename_key_("missing", "x")


def test_invalid_key_type(td, unchanged):
    with pytest.raises(TypeError, match="1"):
        td.set(("n", 1), torch.zeros(2, 3))


# ---------------------------------------------------------------- wrong index
def test_int_index_out_of_range(td, unchanged):
    with pytest.raises(IndexError) as info:
        td[5]
    msg = str(info.value)
    assert "5" in msg and "size 2" in msg


def test_second_dim_out_of_range(td, unchanged):
    with pytest.raises(IndexError, match=r"index -4 .*dimension 1 with size 3"):
        td[0, -4]


def test_too_many_indices(td, unchanged):
    with pytest.raises(IndexError, match="too many indices"):
        td[0, 0, 0]


def test_bool_mask_wrong_shape(td, unchanged):
    with pytest.raises(IndexError) as info:
        td[torch.tensor([True, False, True])]
    msg = str(info.value)
    assert "[3]" in msg and "[2]" in msg


def test_float_tensor_index(td, unchanged):
    with pytest.raises(IndexError, match="float"):
        td[torch.tensor([0.0, 1.0])]


def test_unsupported_index_type(td, unchanged):
    with pytest.raises(IndexError, match="unsupported index"):
        td[1.5]


def test_two_ellipses(td, unchanged):
    with pytest.raises(IndexError, match="ellipsis"):
        td[..., 0, ...]


def test_slice_of_zero_dim_batch():
    td = TensorDict({"a": torch.zeros(3)})
    with pytest.raises(IndexError, match="no batch dimension"):
        td[1:]


def test_long_tensor_index_out_of_range(td, unchanged):
    with pytest.raises(IndexError):
        td[torch.tensor([0, 7])]


def test_setitem_index_value_wrong_feature_shape(td, unchanged):
    value = {"a": torch.tensor([1.0, 2.0, 3.0]), "n": {"b": torch.zeros(3, 5)}}
    with pytest.raises(RuntimeError) as info:
        td[0] = value
    msg = str(info.value)
    assert "('n', 'b')" in msg and "(5,)" in msg and "(4,)" in msg


def test_setitem_index_value_wrong_batch(td, unchanged):
    with pytest.raises(RuntimeError, match=r"\(4,\).*\(3,\)"):
        td[0] = TensorDict({"a": torch.zeros(4)}, [4])


def test_setitem_index_bad_value_type(td, unchanged):
    with pytest.raises(TypeError, match="object"):
        td[0] = object()


def test_setitem_index_tensor_wrong_shape(td, unchanged):
    with pytest.raises(RuntimeError, match=r"\(5,\)"):
        td[0] = torch.zeros(5)


# ---------------------------------------------------------------- shape ops
def test_view_wrong_numel(td, unchanged):
    with pytest.raises(RuntimeError, match="6"):
        td.view(4)


def test_reshape_two_inferred(td, unchanged):
    with pytest.raises(RuntimeError, match="one dimension"):
        td.reshape(-1, -1)


def test_expand_incompatible(td, unchanged):
    with pytest.raises(RuntimeError, match=r"\(2, 3\)"):
        td.expand(4, 3)


def test_expand_fewer_dims(td, unchanged):
    with pytest.raises(RuntimeError, match="fewer dimensions"):
        td.expand(3)


def test_permute_not_a_permutation(td, unchanged):
    with pytest.raises(RuntimeError, match="permutation"):
        td.permute(0, 0)


def test_dim_out_of_range(td, unchanged):
    with pytest.raises(IndexError, match=re.escape("dim=2")):
        td.unbind(2)
    with pytest.raises(IndexError, match=re.escape("dim=-3")):
        td.transpose(0, -3)


def test_split_sizes_do_not_sum(td, unchanged):
    with pytest.raises(RuntimeError, match=r"\[1, 1\].*3"):
        td.split([1, 1], 1)


def test_names_wrong_length(td, unchanged):
    with pytest.raises(ValueError, match="2 batch"):
        td.names = ["only_one"]


# ---------------------------------------------------------------- apply
def test_apply_wrong_batch(td, unchanged):
    with pytest.raises(RuntimeError, match="'a'"):
        td.apply(lambda x: x[0])


def test_apply__bad_shape_names_key(td, unchanged):
    with pytest.raises(RuntimeError, match="'a'"):
        td.apply_(lambda x: torch.zeros(7))


# ---------------------------------------------------------------- stack / cat
def test_stack_different_keys_names_them():
    t1 = TensorDict({"a": torch.zeros(2), "only1": torch.zeros(2)}, [2])
    t2 = TensorDict({"a": torch.zeros(2), "only2": torch.zeros(2)}, [2])
    c1, c2 = t1.clone(), t2.clone()
    with pytest.raises(KeyError) as info:
        torch.stack([t1, t2])
    msg = str(info.value)
    assert "only1" in msg and "only2" in msg
    for td, cl in ((t1, c1), (t2, c2)):
        assert set(td.keys()) == set(cl.keys())


def test_stack_different_nested_keys():
    t1 = TensorDict({"n": {"x": torch.zeros(2)}}, [2])
    t2 = TensorDict({"n": {"y": torch.zeros(2)}}, [2])
    with pytest.raises(KeyError, match="'n'"):
        stack([t1, t2])


def test_stack_batch_size_mismatch():
    with pytest.raises(RuntimeError) as info:
        torch.stack(
            [TensorDict({"a": torch.zeros(2)}, [2]), TensorDict({"a": torch.zeros(3)}, [3])]
        )
    msg = str(info.value)
    assert "(2,)" in msg and "(3,)" in msg


def test_stack_leaf_shape_mismatch_names_key():
    t1 = TensorDict({"feat": torch.zeros(2, 4)}, [2])
    t2 = TensorDict({"feat": torch.zeros(2, 5)}, [2])
    with pytest.raises(RuntimeError) as info:
        torch.stack([t1, t2])
    msg = str(info.value)
    assert "feat" in msg and "(2, 4)" in msg and "(2, 5)" in msg


def test_stack_empty_list():
    with pytest.raises(RuntimeError, match="non-empty"):
        stack([])


def test_stack_non_tensordict():
    with pytest.raises(TypeError, match="Tensor"):
        stack([TensorDict({"a": torch.zeros(2)}, [2]), torch.zeros(2)])


def test_stack_dim_out_of_range():
    tds = [TensorDict({"a": torch.zeros(2)}, [2])] * 2
    with pytest.raises(IndexError, match="dim=3"):
        stack(tds, 3)


def test_cat_batch_mismatch_outside_dim():
    t1 = TensorDict({"a": torch.zeros(2, 3)}, [2, 3])
    t2 = TensorDict({"a": torch.zeros(2, 4)}, [2, 4])
    with pytest.raises(RuntimeError) as info:
        torch.cat([t1, t2], 0)
    msg = str(info.value)
    assert "(2, 3)" in msg and "(2, 4)" in msg and "dim 0" in msg


def test_cat_different_keys():
    t1 = TensorDict({"a": torch.zeros(2)}, [2])
    t2 = TensorDict({"b": torch.zeros(2)}, [2])
    with pytest.raises(KeyError, match="'a'"):
        cat([t1, t2])


def test_cat_zero_dim_batch():
    with pytest.raises(RuntimeError, match="no batch dimension"):
        torch.cat([TensorDict({"a": torch.zeros(())}), TensorDict({"a": torch.zeros(())})])


def test_cat_empty_list():
    with pytest.raises(RuntimeError, match="non-empty"):
        cat([])


def test_stack_out_leaves_out_unchanged_on_error():
    out = TensorDict({"a": torch.zeros(2, 2)}, [2, 2])
    before = out.clone()
    with pytest.raises(KeyError):
        stack(
            [TensorDict({"a": torch.ones(2)}, [2]), TensorDict({"b": torch.ones(2)}, [2])], out=out
        )
    assert torch.equal(out["a"], before["a"])


# ---------------------------------------------------------------- misc
def test_non_mapping_source():
    with pytest.raises(TypeError, match="list"):
        TensorDict([1, 2, 3])


def test_fill__on_non_tensor(td, unchanged):
    with pytest.raises(TypeError, match="'s'"):
        td.fill_("s", 1)


def test_binary_op_key_mismatch(td, unchanged):
    other = td.exclude(("n", "m", "c"))
    with pytest.raises(KeyError, match="'c'"):
        td + other


def test_apply__bad_result_for_later_leaf_leaves_td_unchanged(td, assert_td_equal):
    before = td.clone()
    with pytest.raises(RuntimeError, match="'b'"):
        td.apply_(lambda x: torch.zeros(7) if x.ndim == 3 else x + 1)
    assert_td_equal(td, before)


def test_binary_op_leaf_shape_mismatch_names_key(td):
    other = td.clone()
    other["n", "b"] = torch.zeros(2, 3, 5, dtype=torch.int64)
    with pytest.raises(RuntimeError, match=r"'b'|\('n', 'b'\)"):
        td + other


def test_stack_nested_batch_size_mismatch_raises():
    t1 = TensorDict({"n": TensorDict({"x": torch.zeros(2, 3)}, [2, 3])}, [2])
    t2 = TensorDict({"n": TensorDict({"x": torch.zeros(2, 3)}, [2])}, [2])
    with pytest.raises(RuntimeError, match="'n'|\\('n'"):
        torch.stack([t1, t2])


# ---------------------------------------------------------------- issue 8, section 4
def test_rename_key_into_its_own_subtree_moves_it(td):
    leaves = {k: v for k, v in td["n"].items(True, True)}
    td.rename_key_("n", ("n", "moved"))
    assert set(td["n"].keys()) == {"moved"}
    for key, value in leaves.items():
        assert td.get(("n", "moved") + (key if isinstance(key, tuple) else (key,))) is value


def test_nested_tensordict_of_a_locked_one_cannot_be_unlocked(td):
    td.lock_()
    with pytest.raises(RuntimeError, match="Unlock the root"):
        td["n"].unlock_()
    assert td["n"].is_locked and td["n", "m"].is_locked
    with pytest.raises(RuntimeError, match="locked"):
        td["n", "new"] = torch.zeros(2, 3)
    assert "new" not in td["n"].keys()
    with td.unlock_():  # the root can, and its context re-locks everything
        assert not td["n"].is_locked
        td["n", "new"] = torch.zeros(2, 3)
    assert td["n"].is_locked and td["n"]["new"].shape == (2, 3)


def test_unlock_of_a_tensordict_shared_with_another_locked_one_is_refused():
    shared = TensorDict(x=torch.zeros(2), batch_size=[2])
    a = TensorDict(s=shared, batch_size=[2]).lock_()
    b = TensorDict(s=shared, batch_size=[2]).lock_()
    with pytest.raises(RuntimeError, match="another locked"):
        a.unlock_()
    assert a.is_locked and b.is_locked and shared.is_locked


def test_members_of_a_locked_lazy_stack_cannot_be_unlocked():
    lazy = torch.stack([TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(2))]).to_lazystack(0)
    lazy.lock_()
    with pytest.raises(RuntimeError, match="Unlock the root"):
        lazy.tensordicts[1].unlock_()
    assert lazy.is_locked
    lazy.unlock_()
    assert not any(m.is_locked for m in lazy.tensordicts)


def test_locked_update_with_a_new_batch_size_changes_nothing(td, assert_td_equal):
    td.lock_()
    before = td.clone()
    smaller = td[:1].clone()
    with pytest.raises(RuntimeError, match="locked"):
        td.update(smaller, update_batch_size=True)
    assert td.batch_size == (2, 3)
    assert_td_equal(td, before)


def test_update__checks_every_key_before_writing(td, unchanged):
    with pytest.raises(RuntimeError, match=r"\('n', 'b'\)"):  # "a" comes first, stays
        td.update_({"a": torch.ones(2, 3), "n": {"b": torch.ones(2, 3, 5)}})
    grad = TensorDict(a=torch.zeros(2), g=torch.zeros(2, requires_grad=True), batch_size=[2])
    with pytest.raises(RuntimeError, match="'g'.*requires grad"):
        grad.update_({"a": torch.ones(2), "g": torch.ones(2)})
    assert torch.equal(grad["a"], torch.zeros(2)) and torch.equal(grad["g"], torch.zeros(2))


@pytest.mark.parametrize("op", ["div_", "add_", "mul_", "sub_"])
def test_in_place_op_over_float_and_int_leaves_writes_nothing(td, unchanged, op):
    with pytest.raises(RuntimeError, match=r"\('n', 'b'\)|'b'"):
        getattr(td, op)(2.5)


def test_names_at_construction_that_contradict_the_nested_ones():
    nested = TensorDict(x=torch.zeros(3, 4), batch_size=[3, 4], names=["a", "b"])
    with pytest.raises(RuntimeError, match="'n'"):
        TensorDict(n=nested, batch_size=[3, 4], names=["c", "d"])
    assert nested.names == ["a", "b"]
    assert TensorDict(n=nested, batch_size=[3, 4], names=["a", "b"]).names == ["a", "b"]


@pytest.mark.parametrize(
    "key,value,where",
    [("a", "text", "'a'"), ("n", torch.zeros(2, 3), "'n'"), ("s", torch.zeros(2, 3), "'s'")],
)
def test_set__of_another_kind_names_the_key(td, unchanged, key, value, where):
    with pytest.raises(ValueError, match=where) as info:
        td.set_(key, value)
    assert isinstance(info.value, RuntimeError)  # both, as the reference


def test_update_through_a_leaf_is_a_key_error(td, unchanged):
    with pytest.raises(KeyError, match="'a'"):
        td.update({("a", "x"): torch.zeros(2, 3)})
    with pytest.raises(KeyError, match="'a'"):
        td.update_({("a", "x"): torch.zeros(2, 3)})


@pytest.mark.parametrize("shape", [2.5, (2.0, 3), "6"])
def test_reshape_with_a_non_int_size(td, unchanged, shape):
    with pytest.raises(TypeError, match="shape") as info:
        td.reshape(shape)
    assert isinstance(info.value, RuntimeError)


@pytest.mark.parametrize(
    "args,error", [((0, 5, 1), IndexError), ((1, -4, 1), IndexError), ((1, 2, 2), RuntimeError)]
)
def test_narrow_out_of_range_raises_as_torch(td, unchanged, args, error):
    with pytest.raises(error, match="narrow"):
        td.narrow(*args)
    with pytest.raises(error):
        torch.zeros(td.batch_size).narrow(*args)  # the same error type as torch's
    assert torch.equal(td.narrow(1, -1, 1)["a"], td["a"][:, -1:])


def test_flip_with_a_repeated_dim(td, unchanged):
    with pytest.raises(TypeError, match="repeat") as info:
        td.flip(0, 0)
    assert isinstance(info.value, RuntimeError)


def test_consolidated_metadata_with_a_negative_batch_size():
    cons = TensorDict(n=TensorDict(batch_size=[3]), batch_size=[3]).consolidate(metadata=True)
    bad = copy.deepcopy(cons._consolidated["metadata"])
    bad["td"]["entries"]["n"]["batch_size"] = [-3]
    with pytest.raises(ValueError, match=r"batch_size \[-3\] at 'n'"):
        from_consolidated(cons._consolidated["storage"], bad)


def test_nesting_deeper_than_the_limit_is_refused_when_built():
    top = TensorDict()
    cur = top
    for _ in range(MAX_NESTING_DEPTH):  # top-down, one level at a time
        cur["a"] = TensorDict()
        cur = cur["a"]
    with pytest.raises(RecursionError, match="MAX_NESTING_DEPTH"):
        cur["a"] = TensorDict()
    assert "a" not in cur.keys()
    for op in (TensorDict.clone, TensorDict.to_dict, TensorDict.consolidate, repr):
        op(top)  # every level reachable by the recursive walks
    chain = TensorDict(x=torch.zeros(1))
    for _ in range(MAX_NESTING_DEPTH):  # bottom-up
        chain = TensorDict(a=chain)
    with pytest.raises(RecursionError, match="'b'"):
        TensorDict(b=chain)
    with pytest.raises(RecursionError, match="MAX_NESTING_DEPTH"):
        TensorDict().set(("a",) * (MAX_NESTING_DEPTH + 2), torch.zeros(1))


# ---------------------------------------------------------------- issue 17
@pytest.mark.parametrize("key", [(), ((),), ("n", ()), ("n", (), "b"), ((), "a"), ("zz", ())])
def test_get_with_an_empty_tuple_in_the_key_raises_key_error(td, unchanged, key):
    # whatever the default: an invalid key is not a missing key
    for call in (lambda: td.get(key), lambda: td.get(key, 0), lambda: td.get(key, default=0)):
        with pytest.raises(KeyError, match=r"get\(\): .* is not a valid key.*no empty tuple"):
            call()
    assert td.get(("n",)) is td.get("n") and td.get(("n", ("b",))) is td["n", "b"]


@pytest.mark.parametrize("bad", ["s", TensorDict(), object()])
def test_apply__result_that_is_not_a_tensor_names_key(td, unchanged, bad):
    # the first leaves get a valid result, the nested one the bad one: nothing is written
    with pytest.raises(
        ValueError,
        match=r"apply_: the function returned a .* for the tensor entry \('n', 'b'\).*unchanged",
    ):
        td.apply_(lambda x: bad if x.ndim == 3 else x + 1)
    with pytest.raises(RuntimeError, match="apply_ writes its results in place"):  # also one
        td.apply_(lambda x: bad)


def test_apply__numbers_and_lists_become_tensors(td):
    td = td.exclude("n", "s")
    td.apply_(lambda x: [[1.0, 2.0, 3.0]] * 2)
    assert td["a"].tolist() == [[1.0, 2.0, 3.0]] * 2
    td.apply_(lambda x: 7)
    assert (td["a"] == 7).all()


def test_stack_of_a_tensordict_stacks_its_rows(td):
    for out in (torch.stack(td), stack(td), TensorDict.stack(td)):
        expected = torch.stack(list(td.unbind(0)))  # the rows, as iterating gives them
        assert out.batch_size == td.batch_size and out.names == expected.names
        assert (out == expected).all() and (out == td).all()
    assert torch.stack(td, 1).batch_size == (3, 2)  # rows [3] stacked along dim 1
    flat = TensorDict(a=torch.zeros(2))
    with pytest.raises(RuntimeError, match="no batch dimension instead of a sequence"):
        torch.stack(flat)
