"""Keys: nested key forms, keys/values/items views, select/exclude/rename_key_, flatten/unflatten."""

from __future__ import annotations

import pytest
import torch

from tensordict import NonTensorData, TensorDict, is_leaf_nontensor, unravel_key, unravel_key_list


@pytest.fixture
def td():
    return TensorDict(
        {
            "z": torch.zeros(2),
            "a": {"y": torch.ones(2), "b": {"c": torch.full((2, 3), 2.0)}},
            "s": "text",
        },
        [2],
    )


# ---------------------------------------------------------------- unravel_key
@pytest.mark.parametrize(
    "key, expected",
    [
        ("a", "a"),
        (("a",), "a"),
        ((("a",),), "a"),
        (("a", "b"), ("a", "b")),
        (("a", ("b", ("c",))), ("a", "b", "c")),
        ((("a",), "b", (("c",),)), ("a", "b", "c")),
    ],
)
def test_unravel_key(key, expected):
    assert unravel_key(key) == expected


def test_unravel_key_list():
    assert unravel_key_list(["a", ("b", ("c",)), ("d",)]) == ["a", ("b", "c"), "d"]


@pytest.mark.parametrize("bad", [1, None, ["a"]])
def test_unravel_key_rejects_what_is_not_a_string_or_tuple(bad):
    # the reference raises RuntimeError; ours is also a TypeError
    with pytest.raises(
        RuntimeError, match="key should be a Sequence<NestedKey>.*string or a tuple"
    ):
        unravel_key(bad)
    with pytest.raises(TypeError):
        unravel_key(bad)


@pytest.mark.parametrize("bad", [("a", 1), (0,), (), ("a", None), ("a", ())])
def test_unravel_key_of_an_invalid_tuple_is_empty(bad):
    # as the reference: a tuple that is not a key unravels to ()
    assert unravel_key(bad) == ()


@pytest.mark.parametrize("bad", [["a", (0,)], ["a", 0], [()]])
def test_unravel_key_list_rejects_an_invalid_entry(bad):
    with pytest.raises(RuntimeError, match="is not a key"):
        unravel_key_list(bad)


@pytest.mark.parametrize("bad", ["abc", {"a": 1}, None])
def test_unravel_key_list_takes_a_list_or_a_tuple(bad):
    # the reference's wording, which TorchRL's tests match
    with pytest.raises(TypeError, match="incompatible function arguments"):
        unravel_key_list(bad)
    assert unravel_key_list(("a", ("b", ("c",)))) == ["a", ("b", "c")]


@pytest.mark.parametrize("op", ["get", "set", "del"])
@pytest.mark.parametrize("bad", [(0,), ("a", 1), 0])
def test_an_invalid_key_raises_key_error_and_changes_nothing(td, op, bad):
    before = td.clone()
    with pytest.raises(KeyError, match="strings"):
        if op == "get":
            td.get(bad)
        elif op == "set":
            td.set(bad, torch.zeros(2, 3))
        else:
            del td[bad]
    assert (td == before).all()
    assert set(td.keys(True)) == set(before.keys(True))


@pytest.mark.parametrize(
    "key, expected",
    [("a", True), (("a", "b"), True), (("a", ("b",)), True), (["a"], False), (0, False),
     ((), False), ((0,), False), (("a", 0), False)],
)  # fmt: skip
def test_isinstance_nested_key(key, expected):
    from tensordict import NestedKey

    assert isinstance(key, NestedKey) is expected


# ---------------------------------------------------------------- nested key access
def test_nested_tuple_key_unravels_on_read(td):
    expected = torch.full((2, 3), 2.0)
    assert torch.equal(td["a", "b", "c"], expected)
    assert torch.equal(td["a", ("b", ("c",))], expected)
    assert torch.equal(td[("a", ("b", "c"))], expected)
    assert torch.equal(td.get(("a", ("b",), "c")), expected)


def test_nested_tuple_key_unravels_on_write(td):
    td["a", ("b", ("new",))] = torch.arange(2)
    assert torch.equal(td["a", "b", "new"], torch.arange(2))
    assert ("a", "b", "new") in td.keys(include_nested=True)


def test_readme_nested_key_example():
    data = TensorDict({"key 1": torch.ones(3, 4, 5)}, batch_size=[3, 4])
    data["nested", "key"] = torch.zeros(3, 4)
    data["nested", ("supernested", ("key",))] = torch.zeros(3, 4)
    assert (data["nested", "supernested", "key"] == 0).all()
    assert (("nested",), "supernested", (("key",),)) in data.keys(include_nested=True)


def test_single_element_tuple_key_is_the_string(td):
    assert td[("z",)] is td["z"]
    assert ("z",) in td.keys()


# ---------------------------------------------------------------- keys()
def test_keys_default_is_top_level_in_insertion_order(td):
    assert list(td.keys()) == ["z", "a", "s"]
    assert len(td.keys()) == 3


def test_keys_include_nested(td):
    # the traversal order of nested keys is not part of the contract: compare as a set,
    # and check there are no duplicates
    keys = list(td.keys(include_nested=True))
    assert set(keys) == {"z", "a", ("a", "y"), ("a", "b"), ("a", "b", "c"), "s"}
    assert len(keys) == 6 == len(td.keys(include_nested=True))


def test_keys_leaves_only(td):
    # as the reference: non-tensor entries are not leaves by default
    assert list(td.keys(leaves_only=True)) == ["z"]
    assert list(td.keys(leaves_only=True, is_leaf=is_leaf_nontensor)) == ["z", "s"]
    keys = list(td.keys(include_nested=True, leaves_only=True))
    assert set(keys) == {"z", ("a", "y"), ("a", "b", "c")}
    assert len(keys) == 3


def test_keys_sort(td):
    assert list(td.keys(include_nested=True, leaves_only=True, sort=True)) == [
        ("a", "b", "c"),
        ("a", "y"),
        "z",
    ]
    assert list(td.keys(sort=True)) == ["a", "s", "z"]


def test_keys_is_leaf_treats_tensordicts_as_leaves(td):
    keys = list(td.keys(include_nested=True, leaves_only=True, is_leaf=lambda cls: True))
    assert keys == ["z", "a", "s"]


def test_keys_is_leaf_custom(td):
    # only tensors are leaves: non-tensor data has nothing to descend into and is not a
    # leaf, so leaves_only drops it
    keys = list(
        td.keys(
            include_nested=True,
            leaves_only=True,
            is_leaf=lambda cls: issubclass(cls, torch.Tensor),
        )
    )
    assert sorted(map(str, keys)) == sorted(map(str, ["z", ("a", "y"), ("a", "b", "c")]))


def test_keys_view_is_live(td):
    view = td.keys()
    td["new"] = torch.zeros(2)
    assert "new" in view
    assert list(view)[-1] == "new"


@pytest.mark.parametrize("bad", [42, ("a", 42), (), None, 1.5])
def test_contains_a_non_key_is_a_type_error(td, bad):
    for view in (td.keys(), td.keys(include_nested=True)):
        with pytest.raises(TypeError, match="always strings"):
            bad in view  # noqa: B015


def test_contains_checks(td):
    assert "z" in td.keys()
    assert ("a", "b") not in td.keys()
    assert ("a", "b") in td.keys(include_nested=True)
    assert ("a", "b", "c") in td.keys(include_nested=True)
    assert ("a", "missing") not in td.keys(include_nested=True)
    assert ("z", "under-a-tensor") not in td.keys(include_nested=True)
    assert ("a", "b") not in td.keys(include_nested=True, leaves_only=True)
    assert ("a", "b", "c") in td.keys(include_nested=True, leaves_only=True)
    # `in` on the tensordict itself looks at nested keys too
    assert ("a", "y") in td
    assert "missing" not in td


def test_keys_equal_to_a_set(td):
    assert td.keys() == {"z", "a", "s"}


# ---------------------------------------------------------------- values() / items()
def test_values_order_matches_keys(td):
    keys = list(td.keys(include_nested=True, leaves_only=True))
    vals = list(td.values(include_nested=True, leaves_only=True))
    assert len(vals) == len(keys)
    for key, value in zip(keys, vals):
        assert value is td.get(key)  # non-tensor entries too: both give the stored wrapper


def test_items_nested(td):
    items = dict(td.items(include_nested=True))
    assert items["z"] is td["z"]
    assert isinstance(items["a"], TensorDict)
    assert items[("a", "b", "c")] is td["a", "b", "c"]
    # non-tensor values come back wrapped, with the tensordict's batch size
    assert isinstance(items["s"], NonTensorData)
    assert items["s"].data == "text"
    assert items["s"].batch_size == td.batch_size


def test_items_sorted(td):
    keys = [k for k, _ in td.items(include_nested=True, leaves_only=True, sort=True)]
    assert keys == [("a", "b", "c"), ("a", "y"), "z"]


# ---------------------------------------------------------------- select / exclude
def test_select(td):
    out = td.select("z", ("a", "b", "c"))
    assert set(out.keys(True, True)) == {"z", ("a", "b", "c")}
    assert out["z"] is td["z"]
    assert out["a", "b", "c"] is td["a", "b", "c"]
    assert out.batch_size == td.batch_size
    # original untouched
    assert set(td.keys(True)) == {"z", "a", ("a", "y"), ("a", "b"), ("a", "b", "c"), "s"}


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        # a path then its whole level, and the reverse: the whole level wins either way
        ((("a", "y"), "a"), {"a": "whole"}),
        (("a", ("a", "y")), {"a": "whole"}),
        # two paths through one level share one copied container, in key order
        ((("a", "b", "c"), ("a", "y"), "z"), {"a": ["b", "y"], "z": "leaf"}),
        ((("a", "b"), ("a", "b", "c")), {"a": ["b"]}),
    ],
)
def test_select_paths_through_shared_levels(td, keys, expected):
    out = td.select(*keys)
    assert list(out.keys()) == list(expected)
    for key, what in expected.items():
        if what == "whole":
            assert out[key] is td[key]
        elif what == "leaf":
            assert out[key] is td[key]
        else:
            assert out[key] is not td[key]  # a new container, the original untouched
            assert list(out[key].keys()) == what
            assert out[key].batch_size == td[key].batch_size
    if ("a", "b", "c") in keys:
        assert out["a", "b", "c"] is td["a", "b", "c"]
    assert set(td.keys(True)) == {"z", "a", ("a", "y"), ("a", "b"), ("a", "b", "c"), "s"}


@pytest.mark.parametrize("key", [("a", "missing"), ("missing", "x"), ("z", "x"), ("a", "b", "q")])
def test_select_missing_paths(td, key):
    with pytest.raises(KeyError):
        td.select("z", key)
    out = td.select("z", key, strict=False)
    assert out["z"] is td["z"]
    assert key not in out.keys(True)


def test_select_missing_strict_raises(td):
    with pytest.raises(KeyError, match="missing"):
        td.select("missing")


def test_select_missing_not_strict(td):
    out = td.select("z", "missing", strict=False)
    assert list(out.keys()) == ["z"]


def test_select_inplace(td):
    z = td["z"]
    out = td.select("z", inplace=True)
    assert out is td
    assert list(td.keys()) == ["z"]
    assert td["z"] is z


def test_exclude(td):
    out = td.exclude("z", ("a", "b", "c"), "missing")
    assert set(out.keys(True)) == {"a", ("a", "y"), ("a", "b"), "s"}
    assert ("a", "b") in out.keys(True)  # now-empty nested tensordict stays
    assert out["a", "y"] is td["a", "y"]
    assert set(td.keys(True)) == {"z", "a", ("a", "y"), ("a", "b"), ("a", "b", "c"), "s"}


def test_exclude_inplace(td):
    out = td.exclude("z", inplace=True)
    assert out is td
    assert "z" not in td.keys()


def test_exclude_copies_only_the_levels_it_reaches_into():
    # as the reference: a nested tensordict no excluded key reaches into is shared
    inner = TensorDict({"u": torch.zeros(2)}, [2])
    untouched = TensorDict({"v": torch.zeros(2)}, [2])
    td = TensorDict(
        {"a": {"b": {"c": torch.ones(2), "d": torch.ones(2)}}, "n": inner, "m": untouched}, [2]
    )
    out = td.exclude(("a", "b", "c"), ("a", "b", "missing"), ("n", "missing", "deeper"))
    assert out["m"] is untouched
    # a level an excluded key goes through is copied, even when the key is missing below
    assert out["n"] is not inner and out["n", "u"] is inner["u"]
    assert out["a"] is not td["a"] and out["a", "b"] is not td["a", "b"]
    assert list(out["a", "b"].keys()) == ["d"] and out["a", "b", "d"] is td["a", "b", "d"]
    assert set(td.keys(True, True)) == {("a", "b", "c"), ("a", "b", "d"), ("n", "u"), ("m", "v")}
    # in place: the input's own levels lose the key
    level = td["a", "b"]
    assert td.exclude(("a", "b", "c"), inplace=True) is td
    assert td["a", "b"] is level and list(level.keys()) == ["d"]


def test_exclude_reaches_into_a_lazy_stack_without_changing_it():
    from tensordict import LazyStackedTensorDict

    members = [TensorDict({"x": torch.zeros(2), "y": torch.ones(2)}, [2]) for _ in range(3)]
    td = TensorDict({"s": LazyStackedTensorDict(*members, stack_dim=0)}, [3])
    out = td.exclude(("s", "x"))
    assert set(out["s"].keys()) == {"y"}
    assert all(set(m.keys()) == {"x", "y"} for m in members)
    assert set(td["s"].keys()) == {"x", "y"}


# ---------------------------------------------------------------- rename_key_
def test_rename_key_(td):
    c = td["a", "b", "c"]
    out = td.rename_key_(("a", "b", "c"), "top")
    assert out is td
    assert td["top"] is c
    assert ("a", "b", "c") not in td.keys(True)


def test_rename_key_into_new_nested(td):
    z = td["z"]
    td.rename_key_("z", ("new", "deep"))
    assert td["new", "deep"] is z
    assert "z" not in td.keys()


def test_rename_key_safe_refuses_overwrite(td):
    with pytest.raises(KeyError, match=r"\(.a., .y.\) is already present"):
        td.rename_key_("z", ("a", "y"), safe=True)
    assert torch.equal(td["z"], torch.zeros(2))
    assert torch.equal(td["a", "y"], torch.ones(2))


def test_rename_key_missing_raises(td):
    with pytest.raises(KeyError, match="missing"):
        td.rename_key_("missing", "x")


# ---------------------------------------------------------------- flatten / unflatten keys
def test_flatten_keys(td):
    flat = td.flatten_keys()
    assert set(flat.keys()) == {"z", "a.y", "a.b.c", "s"}
    assert len(flat.keys()) == 4
    assert flat["a.b.c"] is td["a", "b", "c"]
    assert flat["s"] == "text"
    assert flat.batch_size == td.batch_size


def test_flatten_keys_separator(td):
    assert set(td.flatten_keys("/").keys()) == {"z", "a/y", "a/b/c", "s"}


def test_flatten_keys_inplace(td):
    c = td["a", "b", "c"]
    out = td.flatten_keys(inplace=True)
    assert out is td
    assert td["a.b.c"] is c
    assert "a" not in td.keys()


def test_unflatten_keys():
    flat = TensorDict({"a.b": torch.zeros(2), "a.c.d": torch.ones(2), "e": torch.arange(2)}, [2])
    td = flat.unflatten_keys()
    assert set(td.keys(True, True)) == {("a", "b"), ("a", "c", "d"), "e"}
    assert td["a", "c", "d"] is flat["a.c.d"]
    assert td["a"].batch_size == torch.Size([2])


def test_unflatten_keys_separator_and_inplace():
    td = TensorDict({"a/b": torch.zeros(2), "c": torch.ones(2)}, [2])
    out = td.unflatten_keys("/", inplace=True)
    assert out is td
    assert set(td.keys(True, True)) == {("a", "b"), "c"}


@pytest.mark.parametrize(
    "entries",
    [
        {"a.b": 0, "a": {"b": 1}},  # the same leaf twice
        {"a.b": 0, "a": {"b": {"c": 1}}},  # a leaf where a nested tensordict goes
        {"a.b.c.d": 0, "a": {"b": {"c": 1}}},  # through a leaf
        {"a.b.c": 0, "a": {"b": {"c": 1, "d": 2}}},
    ],
    ids=["same", "leaf-over-nested", "through-leaf", "partial"],
)
def test_unflatten_keys_refuses_collisions_and_changes_nothing(entries):
    def build(d):
        return {
            k: build(v) if isinstance(v, dict) else torch.full((2,), float(v)) for k, v in d.items()
        }

    td = TensorDict(build(entries), [2])
    before = {k: v.clone() for k, v in td.items(True, True)}
    with pytest.raises(KeyError, match="Unflattening key"):
        td.unflatten_keys(inplace=True)
    assert {k: v for k, v in td.items(True, True)}.keys() == before.keys()
    assert all(torch.equal(td[k], v) for k, v in before.items())
    # keys side by side are merged
    merged = TensorDict({"a.b": torch.zeros(2), "a": {"c": torch.ones(2)}}, [2]).unflatten_keys()
    assert set(merged.keys(True, True)) == {("a", "b"), ("a", "c")}


def test_flatten_unflatten_round_trip(td, assert_td_equal):
    assert_td_equal(td.flatten_keys().unflatten_keys(), td)
    assert_td_equal(td.flatten_keys("|").unflatten_keys("|"), td)


def test_reference_state_dict_example():
    layer = torch.nn.Linear(3, 4)
    td = TensorDict({"0." + k: v for k, v in layer.state_dict().items()}, []).unflatten_keys(".")
    assert set(td.keys(True, True)) == {("0", "weight"), ("0", "bias")}
    assert torch.equal(td["0", "weight"], layer.weight.detach())


# ---------------------------------------------------------------------- iteration fast paths
def _with_lazy() -> TensorDict:
    import torch

    from tensordict import lazy_stack

    inner = lazy_stack([TensorDict({"x": torch.zeros(2), "s": f"v{i}"}, [2]) for i in range(3)], 1)
    return TensorDict({"a": torch.ones(2), "n": {"b": torch.ones(2, 4)}, "lazy": inner}, [2])


@pytest.mark.parametrize("leaves_only", [False, True])
def test_items_and_values_match_keys_and_get(leaves_only):
    td = _with_lazy()
    keys = list(td.keys(True, leaves_only))
    items = list(td.items(True, leaves_only))
    assert [k for k, _ in items] == keys
    for (key, value), other in zip(items, td.values(True, leaves_only)):
        stored = td._get_tuple(key if isinstance(key, tuple) else (key,), None)
        if isinstance(stored, torch.Tensor):
            assert torch.equal(value, stored) and torch.equal(other, stored)
        else:
            assert type(value) is type(stored) and type(other) is type(stored)
    assert ("lazy", "x") in keys and (("lazy", "s") in keys) is not leaves_only


def test_len_of_a_nested_keys_view_follows_the_tensordict():
    td = _with_lazy()
    view = td.keys(True, True)
    assert len(view) == len(list(view)) == 3  # the tensors: the non-tensor entry is no leaf
    it = iter(view)
    next(it)  # a consumed iterator: len() walks the tensordict again
    td["c"] = torch.zeros(2)
    assert len(view) == 4
    assert len(list(view)) == 4


def test_update_with_itself_is_a_no_op():
    a = torch.zeros(2)
    td = TensorDict({"a": a, "n": {"b": torch.ones(2)}}, [2])
    assert td.update(td) is td and td.update_(td) is td
    assert td["a"] is a and list(td.keys(True)) == ["a", "n", ("n", "b")]


def test_update_from_a_dense_source_still_refuses_new_keys_when_locked():
    td = TensorDict({"a": torch.zeros(2)}, [2]).lock_()
    with pytest.raises(RuntimeError, match="locked"):
        td.update(TensorDict({"b": torch.zeros(2)}, [2]))
    assert list(td.keys()) == ["a"]


@pytest.mark.parametrize(
    ("index", "same_as"),
    [
        ((), ()),
        ((0,), (0,)),
        ((0, 1), (0, 1)),
        ((slice(None), 2), (slice(None), 2)),
        ((Ellipsis, 0), (slice(None), 0)),  # "..." spans the batch dims only
        ((None, 0), (None, 0)),
        ((torch.tensor([1, 0]),), (torch.tensor([1, 0]),)),
    ],
)
def test_a_tuple_that_names_no_key_indexes_the_batch_dims(index, same_as):
    x = torch.arange(24.0).reshape(2, 3, 4)
    td = TensorDict({"x": x, "n": {"y": x + 1}}, [2, 3])
    out = td[index]
    assert torch.equal(out["x"], x[same_as])
    assert torch.equal(out["n", "y"], (x + 1)[same_as])


def test_tuple_keys_read_entries_and_unwrap_non_tensor_values(td):
    assert td[("z",)] is td["z"]
    assert td["a", "b", "c"] is td["a"]["b"]["c"]
    assert td[("a", ("b", "c"))] is td["a"]["b"]["c"]
    assert td[("s",)] == "text"
    with pytest.raises(KeyError):
        td["a", "missing"]
    with pytest.raises(KeyError):
        td["z", "below_a_tensor"]
