"""Every public name that the reference API lists for tensordict-core exists in a core-only
install, on ``TensorDict`` and on ``LazyStackedTensorDict``, plus behaviour tests of the
small generic methods defined on ``TensorDictBase`` (``stack``/``cat`` classmethods,
``is_non_tensor``, ``filter_empty_``)."""

from __future__ import annotations

import importlib

import pytest
import torch

import tensordict
from tensordict import LazyStackedTensorDict, TensorDict, lazy_stack

# The TensorDictBase / TensorDict methods and properties owned by tensordict-core in the
# reference API's list of public names.
CORE_METHODS = """
    abs abs_ acos acos_ add add_ addcdiv addcdiv_ addcmul addcmul_ all amax amin any
    apply apply_ as_tensor asin asin_ atan atan_ atleast_1d atleast_2d atleast_3d attrs
    auto_batch_size_ auto_device_ backward batch_dims batch_size bfloat16 bitwise_and
    bool broadcast_to bytes cat cat_from_tensordict cat_tensors ceil ceil_ chunk clamp
    clamp_max clamp_max_ clamp_min clamp_min_ clear clear_device_ clone complex128
    complex32 complex64 consolidate contiguous copy copy_ copy_at_ cos cos_ cosh cosh_
    cpu create_nested cuda cummax cummin data data_ptr del_ densify depth detach detach_
    device dim div div_ double dtype empty entry_class erf erf_ erfc erfc_ exclude exp
    exp_ expand expand_as expm1 expm1_ fill_ filter_empty_ filter_non_tensor_data
    flatten flatten_keys flip fliplr flipud float float16 float32 float64 floor floor_
    frac frac_ from_any from_consolidated from_dataclass from_dict from_dict_instance
    from_list from_namedtuple from_pytree from_struct_array from_tuple fromkeys gather
    gather_and_stack get get_at get_item_shape get_non_tensor grad half int int16 int32
    int64 int8 is_consolidated is_contiguous is_cpu is_cuda is_empty is_floating_point
    is_locked is_non_tensor is_shared isfinite isnan isneginf isposinf isreal items keys
    lazy_stack lerp lerp_ lgamma lgamma_ load_state_dict lock_ log log10 log10_ log1p
    log1p_ log2 log2_ log_ logical_and logsumexp masked_fill masked_fill_ masked_select
    max maximum maximum_ maybe_dense_stack mean min minimum minimum_ mod movedim mul
    mul_ named_apply names nanmean nansum narrow ndim ndimension neg neg_ new_empty
    new_full new_ones new_tensor new_zeros non_tensor_items norm numel numpy pad
    param_count permute pin_memory pin_memory_ pop popitem pow pow_ prod qint32 qint8
    quantile quint4x2 quint8 reciprocal reciprocal_ refine_names rename rename_
    rename_key_ repeat repeat_interleave replace requires_grad requires_grad_ reshape
    roll rot90 round round_ rsub scatter select separates set set_ set_at_
    set_non_tensor setdefault shape share_memory_ sigmoid sigmoid_ sign sign_ sin sin_
    sinh sinh_ size softmax sorted_keys split split_keys sqrt sqrt_ squeeze stack
    stack_from_tensordict stack_tensors state_dict std sub sub_ sum swapaxes tan tan_
    tanh tanh_ tensor_split tile to to_dict to_lazystack to_namedtuple to_padded_tensor
    to_pytree to_struct_array to_tensordict tolist transpose trunc trunc_ type uint16
    uint32 uint64 uint8 unbind unflatten unflatten_keys unlock_ unsqueeze update update_
    update_at_ values var view where zero_ zero_grad
""".split()

# The top-level names owned by tensordict-core (``utils.x`` is ``tensordict.utils.x``).
CORE_TOP_LEVEL = """
    TensorDictBase TensorDict LazyStackedTensorDict NonTensorData NonTensorStack
    MetaData NestedKey stack cat lazy_stack maybe_dense_stack dense_stack_tds pad
    pad_sequence merge_tensordicts make_tensordict fromkeys from_dict from_any
    from_namedtuple from_tuple from_struct_array from_pytree from_consolidated
    is_tensor_collection is_batchedtensor is_non_tensor is_tensorclass unravel_key
    unravel_key_list get_defaults_to_none set_get_defaults_to_none lazy_legacy
    set_lazy_legacy assert_close assert_allclose_td set_printoptions get_printoptions
    utils.expand_as_right utils.expand_right utils.isin utils.remove_duplicates
""".split()


@pytest.mark.parametrize("cls", [TensorDict, LazyStackedTensorDict])
def test_every_core_method_exists(cls: type) -> None:
    missing = [name for name in CORE_METHODS if not hasattr(cls, name)]
    assert missing == [], f"{cls.__name__} lacks {missing}"


def test_every_core_top_level_name_exists() -> None:
    missing = []
    for name in CORE_TOP_LEVEL:
        obj = tensordict
        for part in name.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                try:
                    obj = importlib.import_module(f"{obj.__name__}.{part}")
                except ImportError:
                    missing.append(name)
                    break
    assert missing == []


# ---------------------------------------------------------------- stack / cat classmethods


def _pair() -> list[TensorDict]:
    return [
        TensorDict({"x": torch.arange(3.0) + i, "n": {"y": torch.ones(3, 2) * i}}, [3])
        for i in range(2)
    ]


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_stack_classmethod_matches_torch_stack_leaf_by_leaf(dim: int) -> None:
    tds = _pair()
    out = TensorDict.stack(tds, dim)
    leaf_dim = dim % 2  # a negative dim counts in the batch dims of the result (2)
    assert out.batch_size == torch.Size([3, 2] if leaf_dim else [2, 3])
    assert torch.equal(out["x"], torch.stack([td["x"] for td in tds], leaf_dim))
    assert torch.equal(out["n", "y"], torch.stack([td["n", "y"] for td in tds], leaf_dim))


def test_cat_classmethod_matches_torch_cat_and_writes_out() -> None:
    tds = _pair()
    out = TensorDict.cat(tds)
    assert out.batch_size == torch.Size([6])
    assert torch.equal(out["n", "y"], torch.cat([td["n", "y"] for td in tds]))
    target = out.clone().zero_()
    result = TensorDict.cat(tds, 0, out=target)
    assert result is target
    assert torch.equal(target["x"], torch.tensor([0.0, 1, 2, 1, 2, 3]))


def test_stack_classmethod_rejects_different_keys() -> None:
    a, b = (
        TensorDict(x=torch.zeros(2), batch_size=[2]),
        TensorDict(z=torch.zeros(2), batch_size=[2]),
    )
    with pytest.raises((KeyError, RuntimeError), match="x|z"):
        TensorDict.stack([a, b])


# ---------------------------------------------------------------- is_non_tensor


@pytest.mark.parametrize("lazy", [False, True])
def test_is_non_tensor_looks_at_the_stored_entry(lazy: bool) -> None:
    def make(i: int) -> TensorDict:
        return TensorDict({"obs": torch.zeros(4), "label": f"c{i}", "n": {"t": "x"}}, [4])

    td = lazy_stack([make(0), make(1)]) if lazy else make(0)
    assert td.is_non_tensor("label") is True
    assert td.is_non_tensor(("n", "t")) is True
    assert td.is_non_tensor("obs") is False
    assert td.is_non_tensor("n") is False
    with pytest.raises(KeyError, match="missing"):
        td.is_non_tensor("missing")


# ---------------------------------------------------------------- filter_empty_


def test_filter_empty_removes_every_leafless_subtree() -> None:
    td = TensorDict(
        a=torch.zeros(3),
        b={},
        c={"d": {}, "e": torch.ones(3), "f": {"g": {}}},
        h={"i": {"j": {}}},
        s="text",
        batch_size=[3],
    )
    assert td.filter_empty_() is td
    assert set(td.keys(include_nested=True)) == {"a", "c", ("c", "e"), "s"}
    assert torch.equal(td["c", "e"], torch.ones(3))


def test_filter_empty_keeps_a_tensordict_with_leaves_untouched() -> None:
    td = TensorDict(a=torch.zeros(3), c={"e": torch.ones(3)}, batch_size=[3])
    before = td["c"]
    td.filter_empty_()
    assert td["c"] is before
    assert set(td.keys(include_nested=True)) == {"a", "c", ("c", "e")}


def test_filter_empty_on_a_locked_tensordict_raises_and_changes_nothing() -> None:
    td = TensorDict(a=torch.zeros(3), b={}, c={"d": {}}, batch_size=[3]).lock_()
    keys = set(td.keys(include_nested=True))
    with pytest.raises(RuntimeError, match="locked"):
        td.filter_empty_()
    assert set(td.keys(include_nested=True)) == keys
    td.unlock_()
    assert set(td.filter_empty_().keys()) == {"a"}


def test_filter_empty_on_a_locked_tensordict_with_nothing_to_remove_is_fine() -> None:
    td = TensorDict(a=torch.zeros(3), batch_size=[3]).lock_()
    assert td.filter_empty_() is td


def test_filter_empty_on_a_lazy_stack_goes_through_to_the_members() -> None:
    members = [TensorDict(a=torch.zeros(3), b={"c": {}}, batch_size=[3]) for _ in range(2)]
    lazy = lazy_stack(members)
    lazy.filter_empty_()
    assert list(lazy.keys()) == ["a"]
    assert all(list(m.keys()) == ["a"] for m in members)
