"""Building a TensorDict: source, batch_size, device, names, lock, kwargs, auto batch size."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from tensordict import NonTensorData, TensorDict, TensorDictBase

cuda = pytest.mark.cuda
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_signature_matches_reference():
    params = inspect.signature(TensorDict.__init__).parameters
    names = [p for p in params if p != "self"]
    assert names[:6] == ["source", "batch_size", "device", "names", "non_blocking", "lock"]
    assert params["source"].default is None
    assert params["batch_size"].default is None
    assert params["device"].default is None
    assert params["names"].default is None
    assert params["non_blocking"].default is None
    assert params["lock"].default is False
    assert params[names[-1]].kind is inspect.Parameter.VAR_KEYWORD


def test_empty_defaults():
    td = TensorDict()
    assert td.batch_size == torch.Size([])
    assert td.device is None
    assert td.names == []
    assert not td.is_locked
    assert list(td.keys()) == []
    assert isinstance(td, TensorDictBase)


def test_batch_size_none_is_empty_size():
    td = TensorDict({"a": torch.zeros(3, 4)}, batch_size=None)
    assert td.batch_size == torch.Size([])
    assert td["a"].shape == (3, 4)


@pytest.mark.parametrize(
    "batch_size, expected",
    [(3, [3]), ([3], [3]), ((3, 4), [3, 4]), (torch.Size([3, 4]), [3, 4]), ([], [])],
)
def test_batch_size_forms(batch_size, expected):
    td = TensorDict({"a": torch.zeros(3, 4, 5)}, batch_size=batch_size)
    assert td.batch_size == torch.Size(expected)
    assert type(td.batch_size) is torch.Size


def test_positional_arguments():
    a = torch.zeros(2, 3)
    td = TensorDict({"a": a}, [2], "cpu")
    assert td.batch_size == torch.Size([2])
    assert td.device == torch.device("cpu")
    assert td["a"] is a  # same device: no copy


def test_values_are_stored_without_copy():
    a = torch.randn(4, 2)
    td = TensorDict({"a": a}, [4])
    assert td["a"] is a
    assert td.get("a") is a


def test_nested_dicts_become_nested_tensordicts():
    td = TensorDict({"a": {"b": {"c": torch.ones(2, 5)}}, "x": torch.zeros(2)}, [2])
    assert isinstance(td["a"], TensorDict)
    assert isinstance(td["a", "b"], TensorDict)
    assert td["a"].batch_size == torch.Size([2])
    assert td["a", "b"].batch_size == torch.Size([2])
    assert torch.equal(td["a", "b", "c"], torch.ones(2, 5))


def test_nested_tensordict_keeps_longer_batch_size():
    inner = TensorDict({"c": torch.zeros(2, 3, 4)}, [2, 3])
    td = TensorDict({"inner": inner}, [2])
    assert td["inner"].batch_size == torch.Size([2, 3])
    assert td["inner", "c"].shape == (2, 3, 4)


def test_kwargs_are_entries():
    td = TensorDict(a=torch.zeros(3), b={"c": torch.ones(3)}, batch_size=[3])
    assert set(td.keys(include_nested=True)) == {"a", "b", ("b", "c")}
    assert torch.equal(td["b", "c"], torch.ones(3))


def test_kwargs_and_source_together_raise():
    # as the reference: entries come from one place
    with pytest.raises(ValueError, match="not both"):
        TensorDict({"a": torch.zeros(3)}, [3], b=torch.ones(3))


def test_tuple_keys_in_source_build_nested_entries():
    td = TensorDict({("x", "y"): torch.arange(2), ("x", ("z",)): torch.ones(2)}, [2])
    assert isinstance(td["x"], TensorDict)
    assert torch.equal(td["x", "y"], torch.arange(2))
    assert torch.equal(td["x", "z"], torch.ones(2))


def test_from_another_tensordict_shares_leaves():
    src = TensorDict({"a": torch.arange(3), "b": {"c": torch.zeros(3)}}, [3])
    td = TensorDict(src, batch_size=[3])
    assert td is not src
    assert td["a"] is src["a"]
    assert torch.equal(td["b", "c"], src["b", "c"])


def test_python_numbers_become_tensors():
    td = TensorDict({"f": 1.5, "i": 3, "b": True})
    assert torch.equal(td["f"], torch.tensor(1.5))
    assert td["i"].dtype == torch.int64 and td["i"].item() == 3
    assert td["b"].dtype == torch.bool and td["b"].item() is True


def test_numpy_arrays_become_tensors():
    arr = np.arange(6, dtype=np.float64).reshape(2, 3)
    td = TensorDict({"a": arr}, [2])
    assert isinstance(td["a"], torch.Tensor)
    assert td["a"].dtype == torch.float64
    assert torch.equal(td["a"], torch.from_numpy(arr))


def test_non_tensor_string_reads_back():
    td = TensorDict({"s": "a string", "a": torch.zeros(2)}, [2])
    assert td["s"] == "a string"
    assert td.get("s").data == "a string"  # get() gives the stored wrapper
    assert isinstance(td.get("s"), NonTensorData) and td.get("s") is dict(td.items())["s"]


def test_non_tensor_set_after_construction():
    # reference readme example
    data = TensorDict({"a-tensor": torch.randn(1, 2)}, batch_size=[1, 2])
    data["non-tensor"] = "a string!"
    assert data["non-tensor"] == "a string!"


def test_arbitrary_object_is_stored_as_non_tensor():
    obj = object()
    td = TensorDict({"o": obj}, [3])
    assert td["o"] is obj


def test_device_casts_values_on_construction():
    td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.ones(2)}}, [2], device="meta")
    assert td.device == torch.device("meta")
    assert td["a"].device.type == "meta"
    assert td["b"].device == torch.device("meta")
    assert td["b", "c"].device.type == "meta"


def test_device_casts_values_on_every_write():
    td = TensorDict(batch_size=[2], device="meta")
    td["a"] = torch.zeros(2)
    td.set("b", torch.zeros(2, 3))
    td["n", "x"] = torch.ones(2)
    td["d"] = {"y": torch.ones(2)}
    td.set("t", TensorDict({"z": torch.ones(2)}, [2]))
    td.update({"u": torch.ones(2)})
    for key, value in td.items(include_nested=True, leaves_only=True):
        assert value.device.type == "meta", key
    for key in ("n", "d", "t"):
        assert td[key].device == torch.device("meta"), key


def test_device_string_and_int_forms():
    assert TensorDict(device="cpu").device == torch.device("cpu")
    assert TensorDict(device=torch.device("cpu")).device == torch.device("cpu")


def test_names_at_construction():
    td = TensorDict({"a": torch.zeros(2, 3)}, [2, 3], names=["x", "y"])
    assert td.names == ["x", "y"]


def test_lock_at_construction():
    td = TensorDict({"a": torch.zeros(2)}, [2], lock=True)
    assert td.is_locked
    with pytest.raises(RuntimeError, match="locked"):
        td["b"] = torch.zeros(2)
    assert list(td.keys()) == ["a"]


def test_non_blocking_accepted():
    a = torch.arange(3)
    td = TensorDict({"a": a}, [3], device="cpu", non_blocking=True)
    assert torch.equal(td["a"], a)


def test_source_must_be_a_mapping():
    with pytest.raises(TypeError, match="mapping"):
        TensorDict([torch.zeros(2)], [2])


def test_negative_batch_size_rejected():
    with pytest.raises(ValueError, match="non-negative"):
        TensorDict(batch_size=[-2])


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_ragged_batch_dim_of_nested_tensors():
    # -1 stands for a ragged dim: a strided nested tensor has no size there
    nt = torch.nested.nested_tensor([torch.ones(3, 4), torch.ones(3, 6)])
    td = TensorDict({"nt": nt}, batch_size=[2, 3, -1])
    assert td.batch_size == torch.Size([2, 3, -1])
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        TensorDict({"nt": nt}, batch_size=[2, 4])
    padded = td.to_padded_tensor()
    assert padded.batch_size == torch.Size([2, 3, 6])
    assert padded["nt"].shape == (2, 3, 6)


def test_auto_batch_size_():
    td = TensorDict({"a": torch.zeros(3, 4, 5), "b": torch.zeros(3, 4)})
    out = td.auto_batch_size_()
    assert out is td
    assert td.batch_size == torch.Size([3, 4])


def test_auto_batch_size_with_batch_dims():
    td = TensorDict({"a": torch.zeros(3, 4, 5), "b": torch.zeros(3, 4)})
    td.auto_batch_size_(batch_dims=1)
    assert td.batch_size == torch.Size([3])


def test_auto_batch_size_nested_gets_its_own():
    td = TensorDict({"a": torch.zeros(3, 4), "n": {"c": torch.zeros(3, 4, 5, 6)}})
    td.auto_batch_size_()
    assert td.batch_size == torch.Size([3, 4])
    assert td["n"].batch_size == torch.Size([3, 4, 5, 6])


def test_auto_batch_size_disjoint_shapes_is_empty():
    td = TensorDict({"a": torch.zeros(3), "b": torch.zeros(4)})
    td.auto_batch_size_()
    assert td.batch_size == torch.Size([])


def test_auto_batch_size_ignores_non_tensor():
    td = TensorDict({"a": torch.zeros(3, 2), "s": "hello"})
    td.auto_batch_size_()
    assert td.batch_size == torch.Size([3, 2])
    assert td["s"] == "hello"
    assert td[0]["s"] == "hello"


def test_batch_size_setter():
    td = TensorDict({"a": torch.zeros(2, 3, 4), "b": {"c": torch.zeros(2, 3)}}, [2, 3])
    td.batch_size = [2]
    assert td.batch_size == torch.Size([2])
    assert td["a"].shape == (2, 3, 4)
    # nested tensordicts keep their own (longer) batch size
    assert td["b"].batch_size == torch.Size([2, 3])


def test_fromkeys_classmethod():
    td = TensorDict.fromkeys(["a", "b", ("c", "d")], 0)
    assert td.batch_size == torch.Size([])
    assert set(td.keys(True, True)) == {"a", "b", ("c", "d")}
    for key in ("a", "b", ("c", "d")):
        assert torch.equal(td[key], torch.tensor(0))


def test_fromkeys_default_value_and_arithmetic():
    # reference readme example
    td = TensorDict.fromkeys(["a", "b", "c"])
    td += 1
    assert (td == 1).all()


@cuda
@needs_cuda
def test_cuda_device_casts_on_write():
    td = TensorDict({"a": torch.zeros(2)}, [2], device="cuda")
    assert td["a"].is_cuda
    td["b"] = torch.randn(2, 4, device="cpu")
    assert td["b"].device == torch.device("cuda", torch.cuda.current_device())
    td["n", "c"] = torch.zeros(2)
    assert td["n", "c"].is_cuda
    assert td["n"].device == td.device
