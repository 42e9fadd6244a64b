"""The names the reference keeps private that clients (TorchRL) import, with the
reference's meaning (docs: compatibility). Each expectation is hand-computed or is the
same operation done another way."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch

from tensordict import NonTensorData, NonTensorStack, TensorDict, lazy_stack
from tensordict.base import (
    _ACCEPTED_CLASSES,
    _NESTED_TENSORS_AS_LISTS,
    _NESTED_TENSORS_AS_LISTS_NONTENSOR,
    _default_is_leaf,
    _is_leaf_nontensor,
)
from tensordict.utils import (
    NUMPY_TO_TORCH_DTYPE_DICT,
    TORCH_TO_NUMPY_DTYPE_DICT,
    Buffer,
    _getitem_batch_size,
    _is_non_tensor,
    _is_tensorclass,
    _maybe_correct_neg_dim,
    _shape,
    _unravel_key_to_tuple,
    _zip_strict,
    expand_as_right,
    is_seq_of_nested_key,
    timeit,
)


# ------------------------------------------------------------------ tensordict.utils
def test_zip_strict_refuses_unequal_lengths():
    assert list(_zip_strict([1, 2], "ab")) == [(1, "a"), (2, "b")]
    with pytest.raises(ValueError):
        list(_zip_strict([1, 2], "abc"))


@pytest.mark.parametrize(
    "index, expected",
    [
        (0, [4]),
        ((slice(None), 0), [3]),
        (slice(1, 3), [2, 4]),
        (torch.tensor([0, 2, 2]), [3, 4]),
        (torch.tensor([True, False, True]), [2, 4]),
        ((None, 1), [1, 4]),
        ((..., 1), [3]),
    ],
)
def test_getitem_batch_size_is_the_indexed_tensors_batch(index, expected):
    assert _getitem_batch_size(torch.Size([3, 4]), index) == torch.Size(expected)
    # the same as indexing a tensordict of that batch size
    assert TensorDict(batch_size=[3, 4])[index].batch_size == torch.Size(expected)


def test_maybe_correct_neg_dim():
    assert _maybe_correct_neg_dim(-1, torch.Size([3, 4])) == 1
    assert _maybe_correct_neg_dim(0, None, ndim=2) == 0
    with pytest.raises(IndexError, match="dim 2 is out of range"):
        _maybe_correct_neg_dim(2, torch.Size([3, 4]))
    with pytest.raises(IndexError, match="dim -3"):
        _maybe_correct_neg_dim(-3, None, ndim=2)


def test_shape_of_nested_and_plain_tensors():
    assert _shape(torch.zeros(2, 3)) == torch.Size([2, 3])
    nt = torch.nested.nested_tensor([torch.zeros(2, 5), torch.zeros(3, 5)])
    assert _shape(nt) == torch.Size([2, -1, 5])
    assert _shape(nt, nested_shape=True).tolist() == [[2, 5], [3, 5]]


def test_class_predicates():
    assert _is_non_tensor(NonTensorData) and _is_non_tensor(NonTensorStack)
    assert not _is_non_tensor(TensorDict) and not _is_non_tensor(int)
    assert not _is_tensorclass(TensorDict)
    assert _is_tensorclass(type("Marked", (), {"_is_tensorclass": True}))
    assert _default_is_leaf(torch.Tensor) and not _default_is_leaf(TensorDict)
    assert _is_leaf_nontensor(NonTensorData) and not _default_is_leaf(NonTensorData)
    assert _ACCEPTED_CLASSES[0] is torch.Tensor
    assert isinstance(TensorDict(), _ACCEPTED_CLASSES)


def test_unravel_key_to_tuple_alias():
    assert _unravel_key_to_tuple(("a", ("b",))) == ("a", "b")
    assert _unravel_key_to_tuple(("a", 1)) == ()


@pytest.mark.parametrize(
    "seq, expected",
    [(["a", ("b", "c")], True), ([], True), ("a", True), ([["a", "b"]], True), ([0], False),
     ([("a", 0)], False), (3, False)],
)  # fmt: skip
def test_is_seq_of_nested_key(seq, expected):
    assert is_seq_of_nested_key(seq) is expected


def test_buffer_is_torchs():
    assert Buffer is torch.nn.Buffer


def test_dtype_tables_round_trip():
    import numpy as np

    for np_dtype, torch_dtype in NUMPY_TO_TORCH_DTYPE_DICT.items():
        assert torch.from_numpy(np.zeros(1, dtype=np_dtype)).dtype == torch_dtype
        assert TORCH_TO_NUMPY_DTYPE_DICT[torch_dtype] == np_dtype
    assert NUMPY_TO_TORCH_DTYPE_DICT[np.dtype("float32")] is torch.float32


def test_timeit_records_calls_and_totals(caplog):
    timeit.erase()

    @timeit("compat-test")
    def f(x):
        return x + 1

    assert f(1) == 2 and f(2) == 3
    with timeit("compat-test"):
        pass
    count = timeit._REG["compat-test"][2]
    assert count == 3
    total = timeit.todict(percall=False)["compat-test"]
    mean = timeit.todict()["compat-test"]
    assert total == pytest.approx(mean * 3)
    logger = logging.getLogger("tensordict")
    logger.propagate = True  # let caplog see the library logger
    try:
        with caplog.at_level(logging.INFO, logger="tensordict"):
            text = timeit.print(prefix="p")
    finally:
        logger.propagate = False
    assert "p -- compat-test took" in text and "compat-test took" in caplog.text
    timeit.erase()
    assert timeit._REG["compat-test"] == [0.0, 0.0, 0]


def test_expand_as_right_broadcasts_size_one_dims():
    out = expand_as_right(torch.tensor([[1], [2]]), torch.zeros(2, 3, 4))
    assert out.shape == (2, 3, 4) and torch.equal(out[1], torch.full((3, 4), 2))
    assert expand_as_right(torch.ones(1), torch.zeros(5, 3)).shape == (5, 3)
    with pytest.raises(RuntimeError, match="leading dimensions"):
        expand_as_right(torch.ones(3), torch.zeros(5, 3))


# ------------------------------------------------------------------ _NESTED_TENSORS_AS_LISTS
def _ragged():
    a = TensorDict(
        x=torch.zeros(2), y=TensorDict(z=torch.ones(2, 3), batch_size=[2]), batch_size=[2]
    )
    b = TensorDict(
        x=torch.zeros(2), y=TensorDict(z=torch.ones(2, 4), batch_size=[2]), w=torch.zeros(2),
        batch_size=[2],
    )  # fmt: skip
    stack = lazy_stack([a, b])
    return TensorDict(n=stack, q=torch.zeros(2), batch_size=[2]), stack


def test_nested_tensors_as_lists_walks_members_one_by_one():
    td, stack = _ragged()
    got = [(k, tuple(v.shape)) for k, v in td.items(True, True, is_leaf=_NESTED_TENSORS_AS_LISTS)]
    assert got == [
        (("n", "0", "x"), (2,)),
        (("n", "0", "y", "z"), (2, 3)),
        (("n", "1", "x"), (2,)),
        (("n", "1", "y", "z"), (2, 4)),
        (("n", "1", "w"), (2,)),
        ("q", (2,)),
    ]
    # values: the same leaves; from the stack itself, under the members' indices
    assert [v.shape for v in td.values(True, True, is_leaf=_NESTED_TENSORS_AS_LISTS)] == [
        v.shape for _, v in td.items(True, True, is_leaf=_NESTED_TENSORS_AS_LISTS)
    ]
    keys = [k for k, _ in stack.items(True, False, is_leaf=_NESTED_TENSORS_AS_LISTS)]
    assert keys == [("0", "x"), ("0", "y"), ("0", "y", "z"), ("1", "x"), ("1", "y"),
                    ("1", "y", "z"), ("1", "w")]  # fmt: skip
    # keys() still lists the stack's common keys (the reference does the same)
    assert set(td.keys(True, True, is_leaf=_NESTED_TENSORS_AS_LISTS)) == {
        ("n", "x"),
        ("n", "y", "z"),
        "q",
    }


def test_nested_tensors_as_lists_is_falsy_and_a_leaf_rule():
    assert not _NESTED_TENSORS_AS_LISTS and not _NESTED_TENSORS_AS_LISTS_NONTENSOR
    assert _NESTED_TENSORS_AS_LISTS(torch.Tensor) and not _NESTED_TENSORS_AS_LISTS(TensorDict)
    assert not _NESTED_TENSORS_AS_LISTS(NonTensorData)
    assert _NESTED_TENSORS_AS_LISTS_NONTENSOR(NonTensorData)
    td = TensorDict(a=torch.zeros(1), s="text", batch_size=[1])
    assert [k for k, _ in td.items(True, True, is_leaf=_NESTED_TENSORS_AS_LISTS_NONTENSOR)] == [
        "a",
        "s",
    ]


# ------------------------------------------------------------------ private methods
def test_apply_nest_takes_the_references_keywords():
    td = TensorDict(a=TensorDict(b=torch.zeros(1), batch_size=[]), c=torch.ones(1))
    named = td._apply_nest(lambda k, v: v + len(k), named=True, nested_keys=True)
    assert named["a", "b"].item() == 2.0 and named["c"].item() == 2.0  # 0 + 2, 1 + 1
    # call_on_nested: the function sees the nested tensordict itself
    seen = []
    td._apply_nest(lambda v: seen.append(type(v).__name__) or v, call_on_nested=True)
    assert sorted(seen) == ["Tensor", "TensorDict"]
    # filter_empty drops a nested result without entries
    out = td._apply_nest(lambda v: None if v.sum() == 0 else v, filter_empty=True)
    assert list(out.keys()) == ["c"]
    # batch_size for a function that changes the leaves' leading dims
    out = td._apply_nest(lambda v: v.expand(3, *v.shape), batch_size=[3])
    assert out.batch_size == (3,) and out["a", "b"].shape == (3, 1)


def test_fast_apply_keeps_empty_results_and_propagates_the_lock():
    td = TensorDict(a=TensorDict(b=torch.zeros(1)), c=torch.ones(1)).lock_()
    out = td._fast_apply(lambda v: None if v.sum() == 0 else v * 2, propagate_lock=True)
    assert "a" in out.keys() and list(out["a"].keys()) == []  # filter_empty=False
    assert out["c"].item() == 2.0 and out.is_locked
    is_leaf_calls = td._fast_apply(
        lambda k, v: v, named=True, nested_keys=True, is_leaf=_is_leaf_nontensor, default=None,
    )  # fmt: skip
    assert set(is_leaf_calls.keys(True, True)) == {("a", "b"), "c"}


def test_apply_accepts_named_and_nested_keys():
    td = TensorDict(a=TensorDict(b=torch.zeros(1)), c=torch.zeros(1))
    keys = []
    td.apply(lambda k, v: keys.append(k) or v, named=True, nested_keys=True)
    assert sorted(map(str, keys)) == ["('a', 'b')", "c"]


def test_has_exclusive_keys():
    a, b = TensorDict(x=torch.zeros(())), TensorDict(x=torch.zeros(()), y=torch.zeros(()))
    assert lazy_stack([a, b])._has_exclusive_keys
    assert not lazy_stack([a, a.clone()])._has_exclusive_keys
    nested_a = TensorDict(n=TensorDict(x=torch.zeros(())))
    nested_b = TensorDict(n=TensorDict(x=torch.zeros(()), z=torch.zeros(())))
    assert lazy_stack([nested_a, nested_b])._has_exclusive_keys  # at any depth


# ------------------------------------------------------------------ NonTensorData
def test_non_tensor_data_get_and_dtype():
    data = NonTensorData("a", batch_size=[2])
    assert data.get("data") == "a" and data.get("other") is None and data.get("other", 3) == 3
    assert data.dtype is None and NonTensorStack("a", "b").dtype is None


# ------------------------------------------------------------------ module paths
def test_tensorcollection_and_c_paths():
    import warnings

    from tensordict import TensorCollection
    from tensordict._tensorcollection import TensorCollection as private

    assert private is TensorCollection
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        from tensordict._C import _unravel_key_to_tuple as c_tuple
        from tensordict._C import unravel_keys

    assert unravel_keys(("a", ("b",))) == ("a", "b") and c_tuple("a") == ("a",)


def test_functional_module():
    from tensordict import functional

    td = TensorDict(x=torch.ones(2), batch_size=[2])
    assert torch.equal(functional.pad(td, [0, 1])["x"], torch.tensor([1.0, 1.0, 0.0]))
    merged = functional.merge_tensordicts(TensorDict(a=torch.zeros(1)), TensorDict(b=torch.ones(1)))
    assert set(merged.keys()) == {"a", "b"}


# ------------------------------------------------------------------ lazy stacks written from lazy stacks
def test_update_at_of_a_ragged_lazy_stack_from_a_lazy_stack_writes_member_by_member():
    # members of different feature shapes cannot be stacked: each is written as it is
    dest = lazy_stack([TensorDict(a=torch.zeros(6, 4), batch_size=[6]),
                       TensorDict(a=torch.zeros(6, 3), batch_size=[6])], 1)  # fmt: skip
    src = lazy_stack([TensorDict(a=torch.ones(2, 4), batch_size=[2]),
                      TensorDict(a=torch.full((2, 3), 2.0), batch_size=[2])], 1)  # fmt: skip
    dest.update_at_(src, torch.tensor([1, 4]))
    first, second = dest.tensordicts
    assert torch.equal(first["a"][[1, 4]], torch.ones(2, 4)) and first["a"].sum() == 8
    assert torch.equal(second["a"][[1, 4]], torch.full((2, 3), 2.0)) and second["a"].sum() == 12


def test_update_at_member_by_member_changes_nothing_when_one_member_is_refused():
    dest = lazy_stack([TensorDict(a=torch.zeros(3, 4), batch_size=[3]),
                       TensorDict(a=torch.zeros(3, 3), batch_size=[3])], 1)  # fmt: skip
    src = lazy_stack([TensorDict(a=torch.ones(1, 4), batch_size=[1]),
                      TensorDict(a=torch.ones(1, 5), batch_size=[1])], 1)  # fmt: skip
    with pytest.raises(RuntimeError):
        dest.update_at_(src, torch.tensor([0]))
    assert all(m["a"].sum() == 0 for m in dest.tensordicts)  # the first member too


def test_writing_the_value_a_non_tensor_entry_holds_keeps_it_one_value():
    td = TensorDict({"s": "a", "x": torch.zeros(3)}, [3])
    td.update_at_({"s": "a", "x": torch.ones(())}, 1)
    assert type(td.get("s")) is NonTensorData and td["s"] == "a"
    td.update_at_({"s": "b", "x": torch.ones(())}, 1)
    assert td["s"] == ["a", "b", "a"]


def test_update_in_place_skips_a_non_tensor_value_a_shared_tensordict_cannot_hold():
    # TorchRL's parallel workers update a shared-memory tensordict that has no entry for
    # the env's strings; the reference skips them there
    src = TensorDict(a=torch.ones(2), s=NonTensorData("x", batch_size=[2]), batch_size=[2])
    shared = TensorDict(a=torch.zeros(2), batch_size=[2]).share_memory_()
    shared.update_(src)
    assert list(shared.keys()) == ["a"] and torch.equal(shared["a"], torch.ones(2))
    # in ordinary memory the missing key is still refused, and nothing is written
    plain = TensorDict(a=torch.zeros(2), batch_size=[2])
    with pytest.raises(KeyError, match="'s' was not found"):
        plain.update_(src)
    assert torch.equal(plain["a"], torch.zeros(2))
    # a missing tensor is refused in shared memory too
    with pytest.raises(KeyError, match="'b' was not found"):
        shared.update_(TensorDict(b=torch.ones(2), batch_size=[2]))


# ------------------------------------------------------------------ ragged lazy stacks
def _ragged_nested():
    a = TensorDict(sub=TensorDict(x=torch.arange(3.0), batch_size=[3]), y=torch.zeros(()))
    b = TensorDict(sub=TensorDict(x=torch.arange(5.0), batch_size=[5]), y=torch.ones(()))
    return lazy_stack([a, b])


def test_a_nested_entry_of_members_of_other_batch_sizes_reads_as_a_ragged_stack():
    stack = _ragged_nested()
    sub = stack.get("sub")
    assert sub.batch_size == (2, -1)  # -1: the size differs across members, as the reference
    assert [t.batch_size for t in sub.tensordicts] == [(3,), (5,)]
    assert stack.apply(lambda v: v + 1).get("sub").batch_size == (2, -1)
    assert stack.clone().get("sub").batch_size == (2, -1)


def test_an_int_index_into_a_ragged_dim_is_checked_by_each_member():
    sub = _ragged_nested().get("sub")
    assert torch.equal(sub[..., 0]["x"], torch.tensor([0.0, 0.0]))
    assert torch.equal(sub[:, -1]["x"], torch.tensor([2.0, 4.0]))
    with pytest.raises(IndexError, match="index 4 is out of bounds"):
        sub[:, 4]  # the first member has 3 elements


# ------------------------------------------------------------------ heterogeneous lazy stacks nested in dense ones
def _hetero_step(t: float) -> TensorDict:
    members = [
        TensorDict(**{f"tensor_{i}": torch.full((i + 1,), t)}, camera=torch.full((), t))
        for i in range(3)
    ]
    return TensorDict(lazy=lazy_stack(members, 0), state=torch.full((1,), t))


def test_maybe_dense_stack_keeps_a_nested_heterogeneous_lazy_stack_lazy():
    from tensordict import LazyStackedTensorDict
    from tensordict.functional import dense_stack_tds

    out = LazyStackedTensorDict.maybe_dense_stack([_hetero_step(0.0), _hetero_step(1.0)], 0)
    assert type(out) is TensorDict and out.batch_size == (2,)
    nested = out.get("lazy")
    assert isinstance(nested, LazyStackedTensorDict) and nested.stack_dim == 1
    assert nested.batch_size == (2, 3)
    # every member keeps its own key, stacked along the new dim
    assert torch.equal(nested.tensordicts[2]["tensor_2"], torch.tensor([[0.0] * 3, [1.0] * 3]))
    assert dense_stack_tds(out) is out  # already dense: as it is


def test_values_read_a_nested_lazy_stack_only_when_iteration_reaches_it():
    ragged = lazy_stack([TensorDict(camera=torch.zeros(())), TensorDict(camera=torch.zeros(2))])
    step = TensorDict(lazy=ragged, state=torch.zeros(1))
    # any() stops at the lazy stack itself, before its ragged entries would be stacked
    assert any(type(v).__name__ == "LazyStackedTensorDict" for v in step.values(True))
    with pytest.raises(RuntimeError, match="shape differs"):
        list(step.values(True))
    import itertools

    assert [k for k, _ in itertools.islice(step.items(True), 1)] == ["lazy"]


def test_update_merges_into_a_nested_lazy_stack():
    step = _hetero_step(0.0)
    done = TensorDict(done=torch.zeros(3, 1, dtype=torch.bool), batch_size=[3])
    step.update(TensorDict(lazy=done))
    nested = step.get("lazy")
    assert type(nested).__name__ == "LazyStackedTensorDict"
    assert [sorted(m.keys()) for m in nested.tensordicts] == [
        ["camera", "done", "tensor_0"], ["camera", "done", "tensor_1"], ["camera", "done", "tensor_2"],
    ]  # fmt: skip


def test_stacking_errors_start_with_the_references_words():
    a = TensorDict(a=torch.zeros(()), x=torch.zeros(1))
    b = TensorDict(a=torch.ones(()), y=torch.zeros(1))
    for kind in (KeyError, RuntimeError):  # clients catch either
        with pytest.raises(kind) as info:
            torch.stack([a, b])
        assert str(info.value).startswith(
            "The sets of keys in the tensordicts to stack are exclusive"
        )
        assert "only in 0: ['x'], only in 1: ['y']" in str(info.value)
    c = TensorDict(x=torch.zeros(1))
    with pytest.raises(RuntimeError) as info:
        torch.stack([c, TensorDict(x=torch.zeros(2))])
    assert str(info.value).startswith("The shapes of the tensors to stack is incompatible")


def test_filter_non_tensor_data_of_a_ragged_nested_lazy_stack():
    ragged = lazy_stack(
        [TensorDict(camera=torch.zeros(()), s="a"), TensorDict(camera=torch.zeros(2), s="b")]
    )
    td = TensorDict(lazy=ragged, state=torch.zeros(1), n="x", m=TensorDict(q="z", r=torch.ones(1)))
    out = td.filter_non_tensor_data()
    assert set(out.keys(True, True)) == {"state", ("m", "r"), ("lazy", "camera")}
    assert [sorted(m.keys()) for m in out.get("lazy").tensordicts] == [["camera"], ["camera"]]
    assert td["n"] == "x"  # the input keeps its entries


def test_empty_of_a_lazy_stack_with_its_own_batch_size_stays_lazy():
    stack = lazy_stack([TensorDict(a=torch.zeros(2, 3), batch_size=[2]),
                        TensorDict(b=torch.zeros(2), batch_size=[2])], 1)  # fmt: skip
    for out in (stack.empty(), stack.empty(batch_size=stack.batch_size)):
        assert type(out).__name__ == "LazyStackedTensorDict" and out.stack_dim == 1
        assert out.batch_size == (2, 2) and all(m.is_empty() for m in out.tensordicts)
    other = stack.empty(batch_size=[4])
    assert type(other) is TensorDict and other.batch_size == (4,)


# ------------------------------------------------------------------ indexed writes into lazy stacks
def test_an_indexed_write_into_a_lazy_stack_writes_only_the_selected_members():
    # TorchRL's MCTSForest fills `value.empty()` with a mask and its complement: each member
    # keeps the shape written into it (a key is new to the members the index does not select)
    stack = TensorDict.lazy_stack([TensorDict() for _ in range(4)])
    mask = torch.tensor([True, False, False, True])
    stack[mask] = TensorDict(a=torch.tensor([[1, 2], [3, 4]]), batch_size=[2])
    assert [list(m.keys()) for m in stack.tensordicts] == [["a"], [], [], ["a"]]
    stack[~mask] = TensorDict(a=torch.tensor([[5], [6]]), batch_size=[2])
    got = [m["a"].tolist() for m in stack.tensordicts]
    assert got == [[1, 2], [5], [6], [3, 4]]


@pytest.mark.parametrize(
    "index, written",
    [
        (1, [1]),
        (torch.tensor(2), [2]),
        (torch.tensor([0, 2]), [0, 2]),
        (slice(0, 2), [0, 1]),
        (torch.tensor([False, True, True]), [1, 2]),
    ],
)
def test_a_new_key_written_at_an_index_goes_into_the_selected_members_only(index, written):
    stack = TensorDict.lazy_stack([TensorDict(x=torch.zeros(())) for _ in range(3)])
    values = torch.tensor([7.0, 8.0][: len(written)])
    one = isinstance(index, int) or (isinstance(index, torch.Tensor) and index.ndim == 0)
    stack[index] = TensorDict(b=values[0]) if one else TensorDict(b=values, batch_size=values.shape)
    assert [j for j, m in enumerate(stack.tensordicts) if "b" in m.keys()] == written
    assert [stack.tensordicts[j]["b"].item() for j in written] == values.tolist()
    assert all(m["x"].item() == 0 for m in stack.tensordicts)  # the shared key is kept


def test_new_zeros_empty_lazy_gives_each_member_the_structure_of_the_first():
    first = TensorDict(x=torch.ones(2), s="a", n=TensorDict(y=torch.ones(()), t="b"))
    stack = TensorDict.lazy_stack([first, first.clone()])
    out = stack.new_zeros((3,), empty_lazy=True)
    assert type(out).__name__ == "LazyStackedTensorDict" and out.batch_size == (3,)
    for member in out.tensordicts:  # no tensor; the nested tensordicts and non-tensor values
        assert set(member.keys(True)) == {"s", "n", ("n", "t")}
        assert member["s"] == "a" and member["n", "t"] == "b"
    assert out.tensordicts[0] is not out.tensordicts[1]
    out.tensordicts[0]["s"] = "changed"  # each member is a container of its own
    assert out.tensordicts[1]["s"] == "a" and stack.tensordicts[0]["s"] == "a"


# ------------------------------------------------------------------ ragged non-tensor stacks
def _ragged_members() -> Any:
    first = TensorDict(x=torch.zeros(2), s=NonTensorStack("a", "b"), batch_size=[2])
    second = TensorDict(x=torch.ones(3), s=NonTensorStack("c", "d", "e"), batch_size=[3])
    return lazy_stack([first, second])


def test_a_non_tensor_entry_of_members_of_other_batch_sizes_reads_as_a_ragged_stack():
    lazy = _ragged_members()
    s = lazy.get("s")
    assert isinstance(s, NonTensorStack) and s.batch_size == (2, -1)
    assert lazy.entry_class("s") is NonTensorStack
    assert s.tolist() == [["a", "b"], ["c", "d", "e"]]
    assert lazy["s"] == [["a", "b"], ["c", "d", "e"]]  # a LinkedList of LinkedLists
    assert len(s) == 2 and s.ndim == 2 and s.numel() == 5
    assert [m.tolist() for m in s.tensordicts] == [["a", "b"], ["c", "d", "e"]]
    assert [m.tolist() for m in s] == [["a", "b"], ["c", "d", "e"]]
    one_value = lazy_stack([TensorDict(s="u", batch_size=[2]), TensorDict(s="u", batch_size=[3])])
    assert one_value.get("s").tolist() == [["u", "u"], ["u", "u", "u"]]
    assert one_value.get("s").data == "u"
    with pytest.raises(AttributeError, match="different values"):
        s.data


@pytest.mark.parametrize(
    "index, expected, batch_size",
    [
        (1, ["c", "d", "e"], (3,)),
        (-2, ["a", "b"], (2,)),
        ((1, 2), "e", ()),
        ((slice(None), 0), ["a", "c"], (2,)),  # the parts agree: a regular stack again
        (slice(0, 1), [["a", "b"]], (1, 2)),
        (torch.tensor([1, 0]), [["c", "d", "e"], ["a", "b"]], (2, -1)),
        (torch.tensor([False, True]), [["c", "d", "e"]], (1, 3)),
        ((slice(None), slice(1, None)), [["b"], ["d", "e"]], (2, -1)),
        (Ellipsis, [["a", "b"], ["c", "d", "e"]], (2, -1)),
        (torch.tensor([], dtype=torch.long), [], (0, 3)),  # no member: the largest sizes
    ],
)
def test_indexing_a_ragged_non_tensor_stack(index, expected, batch_size):
    s = _ragged_members().get("s")
    out = s[index]
    assert out.batch_size == batch_size
    got = out.data if not batch_size else out.tolist()
    assert got == expected


def test_a_ragged_stack_is_what_stacking_leaves_of_other_batch_sizes_gives():
    a, b = NonTensorStack("a", "b"), NonTensorStack("c")
    for out in (torch.stack([a, b]), lazy_stack([a, b])):
        assert out.batch_size == (2, -1) and out.tolist() == [["a", "b"], ["c"]]
    twice = torch.stack([torch.stack([a, b]), torch.stack([a, b])])
    assert twice.batch_size == (2, 2, -1) and twice[1, 0].tolist() == ["a", "b"]
    assert torch.stack([a, NonTensorStack("c", "d")]).batch_size == (2, 2)  # regular


def test_a_ragged_stack_round_trips_and_writes_back_member_by_member():
    import pickle

    lazy = _ragged_members()
    s = lazy.get("s")
    for copy in (s.clone(), pickle.loads(pickle.dumps(s))):
        assert copy.batch_size == (2, -1) and copy.tolist() == s.tolist()
    other = lazy.clone()
    other.set("s", s)  # split into the members again
    assert [m["s"] for m in other.tensordicts] == [["a", "b"], ["c", "d", "e"]]
    other.tensordicts[1]["s"] = ["c", "z", "e"]
    eq = lazy == other  # non-tensor entries compared member by member
    assert [m["s"].tolist() for m in eq.tensordicts] == [[True, True], [True, False, True]]


def test_a_ragged_stack_refuses_what_needs_one_size_per_dim():
    lazy = _ragged_members()
    s = lazy.get("s")
    before = s.tolist()
    refusals = [
        lambda: s.reshape(-1),
        lambda: s.unsqueeze(0),
        lambda: s == s,
        lambda: torch.cat([s, s]),
        lambda: s.unbind(1),
        lambda: s.flatten(),
    ]
    for call in refusals:
        with pytest.raises(RuntimeError, match=r"ragged NonTensorStack \(batch_size=\(2, -1\)"):
            call()
    with pytest.raises(RuntimeError, match="cannot write into a ragged NonTensorStack"):
        s[0] = "z"
    with pytest.raises(IndexError, match="None"):
        s[None]
    with pytest.raises(IndexError, match="out of bounds"):
        s[2]
    with pytest.raises(IndexError, match="cannot index the stack dim"):
        s[1.0]
    with pytest.raises(RuntimeError, match="number of batch dims differs"):
        torch.stack([NonTensorStack("a"), NonTensorStack.from_list([["b"]])])
    assert s.tolist() == before and lazy.get("s").tolist() == before  # nothing changed
