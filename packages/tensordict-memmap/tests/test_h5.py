"""PersistentTensorDict (extra ``h5``): lazy reads, writes to the file, round trips."""

from __future__ import annotations

import pickle
from pathlib import Path

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
    raw = TensorDict.from_h5(tmp_path / "raw.h5")  # no recorded batch size: the shared dims
    assert raw.batch_size == (8,) and raw["g"].batch_size == (8,)
    raw.close()
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


# --------------------------------------------------------------------------- bad input


def _h5_file(tmp_path):
    td = TensorDict(
        {"a": torch.arange(6.0).view(3, 2), "n": {"b": torch.zeros(3, 2), "c": torch.ones(3)}},
        [3],
    )
    h5 = PersistentTensorDict.from_dict(td, filename=tmp_path / "f.h5", mode="w")
    h5.close()
    return tmp_path / "f.h5", td


IN_PLACE_MISMATCHES = {  # how: (write, the key and shapes the message names)
    "set_": (lambda h5: h5.set_("a", torch.ones(3, 4)), r"\(3, 4\) .*'a' of shape \(3, 2\)"),
    "set_ nested": (
        lambda h5: h5.set_(("n", "b"), torch.ones(3, 5)),
        r"\(3, 5\) .*'b' of shape \(3, 2\) in '.*f.h5' \(group '/n'\)",
    ),
    "set(inplace=True)": (
        lambda h5: h5.set("a", torch.ones(3, 1, 2), inplace=True),
        r"\(3, 1, 2\) .*'a' of shape \(3, 2\)",
    ),
    "set_ a tensordict": (
        lambda h5: h5.set_("n", TensorDict({"b": torch.ones(3, 7)}, [3])),
        r"\(3, 7\) into entry 'b' .*shape \(3, 2\)",
    ),
    "update_": (
        lambda h5: h5.update_({"a": torch.ones(3, 2), ("n", "b"): torch.ones(3, 4)}),
        r"\(3, 4\) into entry \('n', 'b'\) .*shape \(3, 2\)",
    ),
    "update(inplace=True)": (
        lambda h5: h5.update(
            {"a": torch.ones(3, 2), "n": {"c": torch.ones(3), "b": torch.ones(3, 9)}}, inplace=True
        ),
        r"\('n', 'b'\) has shape \[3, 9\].*shape \[3, 2\]",
    ),
    "set_at_": (
        lambda h5: h5.set_at_(("n", "b"), torch.ones(4), 1),
        r"\(4,\) into entry \('n', 'b'\) at index 1, which selects shape \(2,\)",
    ),
    "index assignment": (
        lambda h5: h5.__setitem__(
            slice(0, 2), TensorDict({"a": torch.ones(2, 2), "n": {"b": torch.ones(2, 3)}}, [2])
        ),
        r"\(2, 3\) into entry \('n', 'b'\) .*selects shape \(2, 2\)",
    ),
}


@pytest.mark.parametrize("how", list(IN_PLACE_MISMATCHES))
def test_in_place_writes_of_another_shape_raise_and_leave_the_file(tmp_path, how):
    path, td = _h5_file(tmp_path)
    before = path.read_bytes()
    write, message = IN_PLACE_MISMATCHES[how]
    with PersistentTensorDict.from_h5(path, mode="r+") as h5:
        # RuntimeError, as for an in-memory tensordict (set_: a ValueError that is also a
        # RuntimeError, as the reference's); the dataset used to be replaced
        with pytest.raises(RuntimeError, match=message):
            write(h5)
        assert h5["a"].shape == (3, 2) and h5["n", "b"].shape == (3, 2)
        assert (h5.to_tensordict() == td).all()
    assert path.read_bytes() == before


def test_set_in_place_error_type_matches_an_in_memory_tensordict(tmp_path):
    path, td = _h5_file(tmp_path)
    with PersistentTensorDict.from_h5(path, mode="r+") as h5:
        for target in (td, h5):
            with pytest.raises(ValueError, match="'a' of shape \\(3, 2\\)"):
                target.set_("a", torch.ones(3, 4))
            with pytest.raises(ValueError, match="in place into entry 'n'"):
                target.set_("n", torch.ones(3))
        h5.set_("a", torch.full((2,), 7.0))  # a value that broadcasts is written
        assert (h5["a"] == 7).all() and h5["a"].shape == (3, 2)


def test_a_file_written_by_the_reference_library_loads_with_its_batch_size():
    # data/reference_0_15_3.h5 was written by tensordict 0.15.3 (/tmp/venv-ref):
    #   td = TensorDict(obs=torch.arange(6, dtype=torch.float32).reshape(3, 2),
    #                   nested=TensorDict(r=torch.tensor([1, 2, 3]), batch_size=[3]),
    #                   batch_size=[3])
    #   td.to_h5("reference_0_15_3.h5").close()
    # It records no batch size: the reference gives each group the dims its datasets share.
    path = Path(__file__).parent / "data" / "reference_0_15_3.h5"
    before = path.read_bytes()
    with PersistentTensorDict.from_h5(path) as h5:
        assert h5.batch_size == (3,) and h5["nested"].batch_size == (3,)
        assert h5["obs"].tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
        assert h5["nested", "r"].tolist() == [1, 2, 3] and h5["nested", "r"].dtype == torch.int64
        assert h5[1:]["obs"].tolist() == [[2.0, 3.0], [4.0, 5.0]]
        assert h5.to_tensordict().batch_size == (3,)
    assert path.read_bytes() == before


def test_a_nested_group_without_a_batch_size_gets_its_own(tmp_path):
    import h5py

    with h5py.File(tmp_path / "raw.h5", "w") as f:
        f.create_dataset("obs", data=np.zeros((4, 3)))
        f.create_group("g").create_dataset("r", data=np.ones((4, 5, 2)))
        f.create_group("empty")
    with TensorDict.from_h5(tmp_path / "raw.h5") as h5:
        assert h5.batch_size == (4,) and h5["g"].batch_size == (4, 5, 2)
        assert h5["empty"].batch_size == (4,)
    with TensorDict.from_h5(tmp_path / "raw.h5", batch_dims=1) as h5:
        assert h5.batch_size == (4,)


@pytest.mark.parametrize(
    "access",
    [
        lambda h5: h5["a"],
        lambda h5: h5.get("a", None),
        lambda h5: h5["n", "c"],
        lambda h5: list(h5.keys()),
        lambda h5: h5[0],
        lambda h5: h5.to_tensordict(),
        lambda h5: h5.set("z", torch.zeros(3)),
        lambda h5: h5.__setitem__(0, TensorDict({"a": torch.ones(2)})),
        lambda h5: h5.update_({"a": torch.ones(3, 2)}),
    ],
    ids=[
        "get",
        "get-default",
        "nested",
        "keys",
        "index",
        "to_tensordict",
        "set",
        "rows",
        "update_",
    ],
)
def test_a_closed_file_says_so(tmp_path, access):
    path, td = _h5_file(tmp_path)
    before = path.read_bytes()
    h5 = PersistentTensorDict.from_h5(path, mode="r+")
    nested = h5["n"]
    h5.close()
    with pytest.raises(RuntimeError, match=f"HDF5 file '{path}' .* is closed"):
        access(h5)
    with pytest.raises(RuntimeError, match="is closed"):
        nested["b"]  # a group of the closed file too
    assert repr(h5) == f"PersistentTensorDict(closed file '{path}')"
    assert path.read_bytes() == before
