"""zarr as the reference library has it: stores it wrote load here, the ``from_zarr``
keywords, the public dtype tables zarr code imports, and the group attributes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import tensordict
from tensordict import NonTensorStack, TensorDict
from tensordict.utils import NUMPY_TO_TORCH_DTYPE_DICT, TORCH_TO_NUMPY_DTYPE_DICT

zarr = pytest.importorskip("zarr")

#: written by tensordict 0.15.3's ``to_zarr`` (obs arange(12) as [3, 4], done, nested
#: reward = [0, 10, 20], label "cat", names a/b/c)
REFERENCE = Path(__file__).parent / "data" / "reference_0_15_3.zarr"


def test_a_store_written_by_the_reference_loads(tmp_path):
    z = TensorDict.from_zarr(str(REFERENCE))
    assert z.batch_size == torch.Size([3])
    assert sorted(map(str, z.keys(True, True))) == ["('nested', 'reward')", "done", "obs"]
    assert torch.equal(z["obs"], torch.arange(12, dtype=torch.float32).reshape(3, 4))
    assert torch.equal(z["done"], torch.tensor([False, True, False]))
    assert torch.equal(z["nested", "reward"], torch.tensor([0, 10, 20]))
    assert z["label"] == "cat"
    assert list(z["names"]) == ["a", "b", "c"]
    # rows, get_at and the in-memory copy agree with the values written
    assert torch.equal(z[1:]["obs"], torch.arange(4, 12, dtype=torch.float32).reshape(2, 4))
    assert torch.equal(z.get_at(("nested", "reward"), 2), torch.tensor(20))
    local = z.to_tensordict()
    assert isinstance(local.get("names"), NonTensorStack) and local[2]["names"] == "c"


def test_a_store_written_by_the_reference_is_read_only_by_default():
    z = tensordict.from_zarr(str(REFERENCE))
    with pytest.raises(RuntimeError, match="read-only"):
        z.set("new", torch.zeros(3))
    assert "new" not in z.keys()


def _plain_store(path: Path) -> None:
    """A store written by zarr itself: no tensordict attribute, arrays of shape
    [4, 3, 2] and [4, 3], one group."""
    root = zarr.open_group(str(path), mode="w")
    root.create_array("x", data=np.arange(24, dtype=np.float32).reshape(4, 3, 2))
    root.create_array("y", data=np.ones((4, 3), dtype=np.int64))
    root.create_group("g").create_array("z", data=np.zeros((4, 3, 5), dtype=np.int16))
    root.create_array("s", data=np.array(["p", "q", "r", "s"]))


@pytest.mark.parametrize(
    "kwargs, batch",
    [
        ({}, [4, 3]),  # nothing recorded: the tensors' common leading dims (strings aside)
        ({"auto_batch_size": True}, [4, 3]),
        ({"auto_batch_size": True, "batch_dims": 1}, [4]),
        ({"batch_size": [4]}, [4]),
    ],
)
def test_from_zarr_batch_keywords(tmp_path, kwargs, batch):
    _plain_store(tmp_path / "p.zarr")
    z = TensorDict.from_zarr(str(tmp_path / "p.zarr"), **kwargs)
    assert z.batch_size == torch.Size(batch)
    assert torch.equal(z["g", "z"], torch.zeros(4, 3, 5, dtype=torch.int16))


def test_from_zarr_batch_dims_limits_the_inferred_batch(tmp_path):
    root = zarr.open_group(str(tmp_path / "p.zarr"), mode="w")
    root.create_array("x", data=np.zeros((4, 3, 2), dtype=np.float32))
    root.create_array("y", data=np.zeros((4, 3), dtype=np.float32))
    assert TensorDict.from_zarr(str(tmp_path / "p.zarr"), auto_batch_size=True).batch_size == (4, 3)
    z = TensorDict.from_zarr(str(tmp_path / "p.zarr"), auto_batch_size=True, batch_dims=1)
    assert z.batch_size == torch.Size([4])


def test_from_zarr_a_batch_size_that_does_not_fit_is_refused(tmp_path):
    _plain_store(tmp_path / "p.zarr")
    with pytest.raises(RuntimeError, match=r"batch size \[5\] does not match"):
        TensorDict.from_zarr(str(tmp_path / "p.zarr"), batch_size=[5])


def test_non_tensor_as_stack_reads_string_arrays_as_stacks(tmp_path):
    _plain_store(tmp_path / "p.zarr")
    z = TensorDict.from_zarr(str(tmp_path / "p.zarr"), batch_size=[4], non_tensor_as_stack=True)
    value = z.get("s")
    assert isinstance(value, NonTensorStack) and value.tolist() == ["p", "q", "r", "s"]
    assert z[2]["s"] == "r"


def test_groups_are_nested_tensordicts_and_attributes_record_the_batch(tmp_path):
    td = TensorDict({"a": {"b": {"c": torch.arange(6).reshape(2, 3)}}}, [2, 3], names=["t", "e"])
    td.to_zarr(str(tmp_path / "n.zarr"))
    root = zarr.open_group(str(tmp_path / "n.zarr"), mode="r")
    assert isinstance(root["a"], zarr.Group) and isinstance(root["a/b"], zarr.Group)
    assert isinstance(root["a/b/c"], zarr.Array) and root["a/b/c"].shape == (2, 3)
    assert root.attrs["__tensordict__"]["batch_size"] == [2, 3]
    z = TensorDict.from_zarr(str(tmp_path / "n.zarr"))
    assert z.names == ["t", "e"] and type(z["a", "b"]) is type(z)
    assert torch.equal(z["a", "b", "c"], torch.arange(6).reshape(2, 3))


def test_chunked_writes_keep_the_chunks_asked_for(tmp_path):
    td = TensorDict({"x": torch.arange(40.0).reshape(10, 4)}, [10])
    z = td.to_zarr(str(tmp_path / "c.zarr"), chunks=(3,))
    array = zarr.open_group(str(tmp_path / "c.zarr"), mode="r")["x"]
    assert array.chunks[0] == 3
    z[4:7] = TensorDict({"x": torch.zeros(3, 4)}, [3])  # rows across two chunks
    expected = td["x"].clone()
    expected[4:7] = 0
    assert torch.equal(torch.from_numpy(np.asarray(array[...])), expected)


@pytest.mark.parametrize("np_dtype, torch_dtype", sorted(
    ((np.dtype(k), v) for k, v in NUMPY_TO_TORCH_DTYPE_DICT.items()), key=str
))  # fmt: skip
def test_dtype_tables_agree_with_torch_from_numpy(np_dtype, torch_dtype):
    # torch's own conversion is the independent expectation
    assert torch.from_numpy(np.zeros(1, dtype=np_dtype)).dtype is torch_dtype
    assert TORCH_TO_NUMPY_DTYPE_DICT[torch_dtype] == np_dtype
    assert torch.zeros(1, dtype=torch_dtype).numpy().dtype == np_dtype


def test_dtype_tables_cover_what_zarr_stores():
    assert set(NUMPY_TO_TORCH_DTYPE_DICT) >= {
        np.dtype(n) for n in ("bool", "int8", "int16", "int32", "int64", "uint8", "float16",
                              "float32", "float64", "complex64", "complex128")
    }  # fmt: skip


@pytest.mark.parametrize("reader", ["from_zarr", "from_h5"])
def test_batch_size_with_auto_batch_size_is_refused(tmp_path, reader):
    td = TensorDict(a=torch.zeros(3, 2), batch_size=[3])
    path = str(tmp_path / ("a.zarr" if reader == "from_zarr" else "a.h5"))
    if reader == "from_h5":
        pytest.importorskip("h5py")
        td.to_h5(path).close()
    else:
        td.to_zarr(path)
    with pytest.raises(TypeError, match=f"Conflicting batch sizes in {reader}"):
        getattr(TensorDict, reader)(path, auto_batch_size=True, batch_size=[3])
    assert getattr(TensorDict, reader)(path, batch_size=[3]).batch_size == (3,)
