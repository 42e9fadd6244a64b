"""TensorAttrs, TensorDictBase.attrs and TensorDict.to(attrs)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tensordict import NonTensorData, TensorAttrs, TensorDict, lazy_stack

CPU = torch.device("cpu")
META = torch.device("meta")


def _td() -> TensorDict:
    return TensorDict(
        {
            "a": torch.zeros(3),
            "b": torch.zeros(3, 2, dtype=torch.int32),
            "n": {
                "c": torch.ones(3, dtype=torch.float64),
                "label": "x",
                "m": {"d": torch.zeros(3, 1, 1, dtype=torch.bool)},
            },
            "s": "text",
        },
        batch_size=[3],
    )


# ---------------------------------------------------------------------- TensorAttrs
def test_tensor_attrs_value_class():
    spec = TensorAttrs(CPU, torch.float16, torch.Size([2]))
    assert (spec.tgt_device, spec.tgt_dtype, spec.tgt_shape) == (
        CPU,
        torch.float16,
        torch.Size([2]),
    )
    assert spec == TensorAttrs(
        tgt_device=torch.device("cpu"), tgt_dtype=torch.float16, tgt_shape=torch.Size([2])
    )
    assert spec != TensorAttrs(CPU, torch.float32, torch.Size([2]))
    assert len({spec, TensorAttrs(CPU, torch.float16, torch.Size([2])), TensorAttrs()}) == 2
    assert repr(spec) == (
        "TensorAttrs(tgt_device=device(type='cpu'), tgt_dtype=torch.float16, tgt_shape=torch.Size([2]))"
    )
    assert TensorAttrs() == TensorAttrs(None, None, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.tgt_dtype = torch.float32  # type: ignore[misc]
    assert not hasattr(spec, "__dict__")
    assert not getattr(TensorAttrs, "_is_tensorclass", False)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"tgt_device": "cpu"}, "tgt_device"),
        ({"tgt_dtype": "float32"}, "tgt_dtype"),
        ({"tgt_shape": (2,)}, "tgt_shape"),
    ],
)
def test_tensor_attrs_checks_types(kwargs, name):
    with pytest.raises(TypeError, match=f"TensorAttrs.{name} must be"):
        TensorAttrs(**kwargs)


def test_tensor_attrs_of_and_apply_to():
    x = torch.arange(4, dtype=torch.int16).reshape(2, 2)
    assert TensorAttrs.of(x) == TensorAttrs(CPU, torch.int16, torch.Size([2, 2]))
    assert TensorAttrs.of(x, ("shape",)) == TensorAttrs(None, None, torch.Size([2, 2]))
    y = TensorAttrs(tgt_dtype=torch.float32).apply_to(x)
    assert y.dtype == torch.float32 and y.tolist() == [[0.0, 1.0], [2.0, 3.0]]
    assert TensorAttrs().apply_to(x) is x
    assert TensorAttrs(tgt_shape=torch.Size([4])).apply_to(x).shape == (2, 2)  # shape ignored


# ---------------------------------------------------------------------- attrs()
def test_attrs_default_fields_nested_structure():
    td = _td()
    attrs = td.attrs()
    assert attrs.batch_size == torch.Size([]) and attrs.device is None
    assert list(attrs.keys(True)) == ["a", "b", "n", ("n", "c"), ("n", "m"), ("n", "m", "d")]
    assert attrs["a"] == TensorAttrs(CPU, torch.float32, torch.Size([3]))
    assert attrs["b"] == TensorAttrs(CPU, torch.int32, torch.Size([3, 2]))
    assert attrs["n", "c"] == TensorAttrs(CPU, torch.float64, torch.Size([3]))
    assert attrs["n", "m", "d"] == TensorAttrs(CPU, torch.bool, torch.Size([3, 1, 1]))
    assert attrs["n"].batch_size == torch.Size([]) and attrs["n", "m"].batch_size == torch.Size([])


def test_attrs_values_are_tensor_attrs_stored_as_non_tensor_data():
    attrs = _td().attrs()
    assert type(attrs["a"]) is TensorAttrs
    assert attrs.get(("n", "c")).data is attrs["n", "c"]
    assert attrs.entry_class("a") is NonTensorData
    assert attrs.is_non_tensor("a")


def test_attrs_reference_example():
    td = TensorDict({"a": torch.zeros(3), "b": torch.zeros(3, dtype=torch.int32)}, batch_size=[3])
    attrs = td.attrs(fields=("device", "dtype"))
    assert (attrs["a"].tgt_device, attrs["a"].tgt_dtype) == (CPU, torch.float32)
    assert attrs["a"].tgt_shape is None
    target = TensorDict(a=torch.zeros(3), b=torch.zeros(3), batch_size=[3])
    out = target.to(attrs)
    assert out["b"].dtype == torch.int32 and out["a"].dtype == torch.float32
    assert out["b"].tolist() == [0, 0, 0]


@pytest.mark.parametrize(
    "fields, expected",
    [
        (("dtype",), TensorAttrs(None, torch.int32, None)),
        (["shape", "device"], TensorAttrs(CPU, None, torch.Size([3, 2]))),
        ("shape", TensorAttrs(None, None, torch.Size([3, 2]))),
        ((), TensorAttrs()),
    ],
)
def test_attrs_fields(fields, expected):
    assert _td().attrs(fields=fields)["b"] == expected


def test_attrs_unknown_field_is_a_value_error():
    td = _td()
    before = td.clone()
    with pytest.raises(
        ValueError, match=r"unknown field\(s\) \['names', 'ndim'\].*\['device', 'dtype', 'shape'\]"
    ):
        td.attrs(fields=("dtype", "names", "ndim"))
    with pytest.raises(ValueError, match=r"\['devices'\]"):
        td.attrs(fields="devices")
    assert list(td.keys(True)) == list(before.keys(True))


def test_attrs_num_threads_accepted():
    with_threads, without = _td().attrs(num_threads=4), _td().attrs(num_threads=None)
    assert list(with_threads.keys(True)) == list(without.keys(True))
    assert all(with_threads[k] == without[k] for k in without.keys(True, True))


def test_attrs_of_empty_and_non_tensor_only():
    assert list(TensorDict().attrs().keys()) == []
    assert list(TensorDict({"s": "x", "n": {"t": "y"}}).attrs().keys(True)) == ["n"]


def test_attrs_lazy_stack():
    members = [_td(), _td()]
    attrs = lazy_stack(members, dim=1).attrs()
    assert attrs["b"] == TensorAttrs(CPU, torch.int32, torch.Size([3, 2, 2]))
    assert attrs["n", "m", "d"] == TensorAttrs(CPU, torch.bool, torch.Size([3, 2, 1, 1]))
    assert "s" not in attrs.keys()


# ---------------------------------------------------------------------- to(attrs)
def test_to_attrs_restores_dtypes_after_a_global_cast(assert_td_equal):
    td = _td()
    attrs = td.attrs()
    as_float = td.float()
    assert as_float["b"].dtype == torch.float32
    back = as_float.to(attrs)
    assert_td_equal(back, td)  # same keys, values and dtypes (non-tensors included)
    assert back["n", "label"] == "x" and back["s"] == "text"
    assert back.device is None and back.batch_size == td.batch_size


def test_to_attrs_none_fields_and_unmatched_leaves_are_unchanged():
    td = TensorDict(
        a=torch.zeros(2),
        b=torch.ones(2, dtype=torch.int64),
        n={"c": torch.zeros(2)},
        batch_size=[2],
    )
    spec = TensorDict(
        a=TensorAttrs(tgt_dtype=torch.float16),
        b=TensorAttrs(),
        n={"zz": TensorAttrs(tgt_dtype=torch.int8)},
    )
    out = td.to(spec)
    assert out["a"].dtype == torch.float16
    assert out["b"] is td["b"]
    assert out["n", "c"] is td["n", "c"]
    assert td["a"].dtype == torch.float32  # self untouched


def test_to_attrs_returns_self_when_nothing_changes():
    td = _td()
    assert td.to(td.attrs()) is td
    assert td.to(td.attrs(fields=("shape",))) is td


def test_to_attrs_device_kept_or_dropped():
    td = TensorDict(
        a=torch.zeros(2), b=torch.zeros(2), n={"c": torch.zeros(2)}, batch_size=[2], device="cpu"
    )
    cast = td.to(
        TensorDict(a=TensorAttrs(tgt_dtype=torch.int8), n={"c": TensorAttrs(CPU, torch.float64)})
    )
    assert cast.device == CPU and cast["n"].device == CPU
    assert (cast["a"].dtype, cast["n", "c"].dtype) == (torch.int8, torch.float64)
    moved = td.to(TensorDict(n={"c": TensorAttrs(tgt_device=META)}))
    assert moved["n", "c"].device == META and moved["a"].device == CPU
    assert moved.device is None and moved["n"].device is None


def test_to_attrs_moves_every_leaf_keeps_new_common_device():
    td = TensorDict(a=torch.zeros(2), n={"c": torch.zeros(2), "s": "x"}, batch_size=[2])
    meta = TensorDict(
        a=torch.zeros(2, device=META), n={"c": torch.zeros(2, device=META)}, batch_size=[2]
    ).attrs()
    out = td.to(meta)
    assert out["a"].device == META and out["n", "c"].device == META
    assert out.device is None  # td had no device to keep
    assert out["n", "s"] == "x"


def test_to_attrs_lazy_stack():
    lazy = lazy_stack([_td().float(), _td().float()])
    out = lazy.to(_td().attrs())
    assert type(out).__name__ == "LazyStackedTensorDict"
    assert (out["b"].dtype, out["n", "c"].dtype, out["n", "m", "d"].dtype) == (
        torch.int32,
        torch.float64,
        torch.bool,
    )
    assert out["b"].shape == (2, 3, 2)
    assert all(m["b"].dtype == torch.int32 for m in out.tensordicts)
    assert lazy["b"].dtype == torch.float32


def test_to_attrs_with_batch_size_keyword():
    td = _td().float()
    out = td.to(_td().attrs(), batch_size=[])
    assert out.batch_size == torch.Size([]) and out["b"].dtype == torch.int32


def test_to_attrs_takes_no_further_arguments():
    with pytest.raises(TypeError, match="does not accept additional"):
        _td().to(_td().attrs(), torch.float64)


def test_to_plain_tensordict_uses_its_device_and_dtype():
    # as the reference: the other tensordict's device, and its dtype when it has one
    td = _td()
    other = TensorDict(x=torch.zeros(1, dtype=torch.int8), device="cpu")
    out = td.to(other)
    assert out.device == CPU and out["b"].dtype == torch.int8
    assert td.to(other=other)["b"].dtype == torch.int8
    mixed = TensorDict(x=torch.zeros(1, dtype=torch.int8), y=torch.zeros(1), device="cpu")
    assert td.to(mixed)["b"].dtype == torch.int32  # no common dtype: kept


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_to_attrs_cuda_round_trip(assert_td_equal):
    td = TensorDict(a=torch.zeros(2), n={"c": torch.ones(2)}, batch_size=[2], device="cpu")
    mixed = td.to(TensorDict(n={"c": TensorAttrs(tgt_device=torch.device("cuda", 0))}))
    assert mixed["n", "c"].is_cuda and mixed.device is None and mixed["a"].device == CPU
    back = mixed.to(td.attrs())
    assert back.device == CPU and back["n", "c"].device == CPU
    assert_td_equal(back, td)


def test_to_attrs_refuses_non_blocking_pin():
    td = TensorDict({"a": torch.zeros(3)}, batch_size=[3])
    spec = td.to(torch.int32).attrs()
    with pytest.raises(NotImplementedError, match="non_blocking_pin"):
        td.to(spec, non_blocking_pin=True)
    assert td["a"].dtype == torch.float32
