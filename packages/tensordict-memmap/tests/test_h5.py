"""PersistentTensorDict (extra ``h5``): lazy reads, writes to the file, round trips."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from memmap_helpers import needs_h5py

from tensordict import NonTensorData, PersistentTensorDict, TensorDict

pytestmark = needs_h5py


def _td():
    return TensorDict(
        {
            "a": torch.arange(12).view(3, 4),
            "b": TensorDict({"c": torch.arange(60).view(3, 4, 5), "d": "inner"}, [3, 4, 5]),
            "e": "outer",
        },
        [3, 4],
        names=["x", "y"],
    )


def test_to_h5_from_h5_round_trip(tmp_path):
    td = _td()
    h5 = td.to_h5(tmp_path / "f.h5")
    assert isinstance(h5, PersistentTensorDict)
    h5.close()
    with TensorDict.from_h5(filename=tmp_path / "f.h5") as by_keyword:
        assert by_keyword.batch_size == (3, 4)
    with TensorDict.from_h5(tmp_path / "f.h5") as back:
        assert back.batch_size == (3, 4) and back["b"].batch_size == (3, 4, 5)
        assert back.names == ["x", "y"]
        assert back["e"] == "outer" and back["b", "d"] == "inner"
        mem = back.to_tensordict()
        assert type(mem) is TensorDict and (mem == td).all()
        assert type(back.clone()) is TensorDict


def test_indexing_reads_only_the_selected_rows(tmp_path, monkeypatch):
    import h5py

    td = TensorDict({"x": torch.arange(1000.0).view(100, 10)}, [100])
    h5 = PersistentTensorDict.from_dict(td, filename=tmp_path / "f.h5")
    reads = []
    original = h5py.Dataset.__getitem__

    def spy(self, index):
        out = original(self, index)
        reads.append(np.asarray(out).size)
        return out

    monkeypatch.setattr(h5py.Dataset, "__getitem__", spy)
    rows = h5[torch.tensor([5, 1, 5])]
    assert torch.equal(rows["x"], td["x"][torch.tensor([5, 1, 5])])
    assert max(reads) <= 20  # two distinct rows of 10 values, not 1000
    reads.clear()
    assert torch.equal(h5[10:12]["x"], td["x"][10:12]) and max(reads) == 20
    assert torch.equal(h5[torch.arange(100) % 7 == 0]["x"], td["x"][torch.arange(100) % 7 == 0])
    assert torch.equal(h5[-1]["x"], td["x"][-1])
    h5.close()


def test_writes_go_to_the_file(tmp_path):
    h5 = PersistentTensorDict.from_dict(
        TensorDict({"a": torch.zeros(3, 2)}, [3]), filename=tmp_path / "f.h5"
    )
    h5["b"] = torch.ones(3)
    h5[1] = TensorDict({"a": torch.full((2,), 5.0), "b": torch.tensor(7.0)}, [])
    h5.set(("g", "h"), NonTensorData([1, "x"], batch_size=[3]))
    h5.set_("a", torch.full((3, 2), 2.0))
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        h5["bad"] = torch.zeros(4)
    h5.close()
    with PersistentTensorDict(filename=tmp_path / "f.h5", mode="r") as again:
        assert again["b"].tolist() == [1.0, 7.0, 1.0] and (again["a"] == 2).all()
        assert again["g", "h"] == [1, "x"]
        with pytest.raises(RuntimeError, match="read-only"):
            again["c"] = torch.zeros(3)


def test_modes_and_batch_size(tmp_path):
    import h5py

    with h5py.File(tmp_path / "raw.h5", "w") as f:
        f.create_dataset("obs", data=np.zeros((8, 3)))
        f.create_group("g").create_dataset("r", data=np.ones(8))
    assert TensorDict.from_h5(tmp_path / "raw.h5").batch_size == ()
    assert TensorDict.from_h5(tmp_path / "raw.h5", auto_batch_size=True).batch_size == (8,)
    assert TensorDict.from_h5(tmp_path / "raw.h5", batch_size=[8]).batch_size == (8,)
    with pytest.raises(RuntimeError, match="batch size"):
        TensorDict.from_h5(tmp_path / "raw.h5", batch_size=[5])
    with PersistentTensorDict(filename=tmp_path / "raw.h5", batch_size=[8], mode="a") as h5:
        h5["new"] = torch.zeros(8)
    with PersistentTensorDict(filename=tmp_path / "w.h5", batch_size=[2], mode="w") as h5:
        h5["x"] = torch.ones(2)
    with PersistentTensorDict(filename=tmp_path / "w.h5", batch_size=[2], mode="r+") as h5:
        assert sorted(h5.keys()) == ["x"]
    with pytest.raises(NotImplementedError):
        PersistentTensorDict(filename=tmp_path / "w.h5", backend="zarr")


def test_dataset_kwargs_reach_nested_leaves(tmp_path):
    import h5py

    td = TensorDict({"a": torch.zeros(8, 3), "b": {"c": {"d": torch.zeros(8, 2)}}}, [8])
    td.to_h5(tmp_path / "c.h5", compression="gzip", compression_opts=4).close()
    with h5py.File(tmp_path / "c.h5", "r") as f:
        assert f["a"].compression == "gzip" and f["b/c/d"].compression_opts == 4


def _child(ptd, queue):
    queue.put((ptd.file.filename, ptd["sub", "v"].tolist()))


def test_pickles_by_file_name_for_other_processes(tmp_path):
    h5 = PersistentTensorDict.from_dict(
        TensorDict({"sub": {"v": torch.arange(3)}}, []), filename=tmp_path / "p.h5"
    )
    h5.close()
    ptd = PersistentTensorDict(filename=tmp_path / "p.h5", batch_size=[])
    assert pickle.loads(pickle.dumps(ptd))["sub", "v"].tolist() == [0, 1, 2]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(ptd, queue))
    proc.start()
    try:
        name, values = queue.get(timeout=120)
    finally:
        proc.join(timeout=120)
    assert name.endswith("p.h5") and values == [0, 1, 2]


def test_memmap_of_an_h5_file(tmp_path):
    h5 = _td().exclude("b").to_h5(tmp_path / "f.h5")
    out = h5.memmap(tmp_path / "mm")
    assert out.is_memmap() and torch.equal(out["a"], _td()["a"])
    with pytest.raises(RuntimeError, match="in-place"):
        h5.memmap_(tmp_path / "mm2")
    h5.close()
