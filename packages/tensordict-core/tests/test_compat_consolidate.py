"""Consolidation as in the reference 0.15: jagged nested tensors share the buffer, a file's
result is on the CPU, and ``return_early=True`` gives a ``TensorDictFuture``."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, from_consolidated
from tensordict.utils import TensorDictFuture


def _njt_td() -> TensorDict:
    offsets = torch.tensor([0, 2, 5, 8, 10])
    return TensorDict(
        a=torch.arange(12).reshape(4, 3),
        njt=torch.nested.nested_tensor_from_jagged(torch.arange(10.0), offsets=offsets),
        njt_lengths=torch.nested.nested_tensor_from_jagged(
            torch.arange(10), offsets=offsets, lengths=torch.tensor([2, 3, 3, 2])
        ),
        s="text",
        batch_size=[4],
    )


def _rows(nt: torch.Tensor) -> list:
    return [t.tolist() for t in nt.unbind()]


def test_jagged_nested_tensors_live_in_the_buffer() -> None:
    td = _njt_td()
    out = td.consolidate()
    assert out.is_consolidated()
    assert out.device is None  # in memory, the device stays what it was
    buffer = out._consolidated["storage"]
    for key in ("njt", "njt_lengths"):
        assert out[key].is_nested
        assert out[key].values().untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr()
        assert _rows(out[key]) == _rows(td[key])
    assert out["njt_lengths"].lengths().tolist() == [2, 3, 3, 2]
    back = pickle.loads(pickle.dumps(out))
    assert back.is_consolidated()
    assert _rows(back["njt_lengths"]) == _rows(td["njt_lengths"])


def test_ragged_dim_is_kept() -> None:
    ragged = torch.nested.as_nested_tensor(
        [torch.randn(2, 3, i) for i in range(1, 4)], layout=torch.jagged
    )
    out = TensorDict(r=ragged, batch_size=[3]).consolidate()
    back = pickle.loads(pickle.dumps(out))
    assert back["r"]._ragged_idx == ragged._ragged_idx
    assert all(torch.equal(a, b) for a, b in zip(back["r"].unbind(), ragged.unbind()))


def test_file_result_is_on_the_cpu(tmp_path: Path) -> None:
    td = _njt_td()
    out = td.consolidate(filename=tmp_path / "td.bin")
    assert out.device == torch.device("cpu")
    loaded = from_consolidated(tmp_path / "td.bin")
    assert loaded.device == torch.device("cpu")
    assert _rows(loaded["njt"]) == _rows(td["njt"])


@pytest.mark.parametrize("use_file", [False, True])
def test_return_early(tmp_path: Path, use_file: bool) -> None:
    td = TensorDict({f"k{i}": torch.full((i % 5 + 1,), float(i)) for i in range(20)})
    td["s"] = "a string"
    kwargs = {"filename": tmp_path / "f.bin"} if use_file else {}
    future = td.consolidate(num_threads=4, return_early=True, **kwargs)
    assert isinstance(future, TensorDictFuture)
    out = future.result()
    assert out.is_consolidated()
    assert (out == td).all()
    assert out["s"] == "a string"
    with pytest.raises(NotImplementedError, match="use_buffer"):
        td.consolidate(return_early=True, use_buffer=True)
    with pytest.raises(NotImplementedError, match="non_blocking"):
        td.consolidate(return_early=True, non_blocking=True)


@pytest.mark.parametrize("lazy", [False, True])
def test_torch_load_with_weights_only(tmp_path: Path, lazy: bool) -> None:
    # torch.load's default (weights_only=True) rebuilds a consolidated tensordict
    td = _njt_td().exclude("njt", "njt_lengths")
    if lazy:
        td = LazyStackedTensorDict(*td.unbind(0), stack_dim=0)
    torch.save(td.consolidate(), tmp_path / "td.pt")
    loaded = torch.load(tmp_path / "td.pt")
    assert type(loaded) is type(td) and loaded.is_consolidated()
    assert torch.equal(loaded["a"], td["a"])
    assert loaded[0]["s"] == "text"


def test_torch_load_with_weights_only_refuses_pickled_objects(tmp_path: Path) -> None:
    td = TensorDict(a=torch.zeros(2), o=Path("x"), batch_size=[2])  # not JSON data
    torch.save(td.consolidate(allow_pickle=True), tmp_path / "td.pt")
    with pytest.raises(pickle.UnpicklingError):
        torch.load(tmp_path / "td.pt")
    assert torch.load(tmp_path / "td.pt", weights_only=False)["o"] == Path("x")


def test_empty_lazy_stack_round_trip() -> None:
    empty = LazyStackedTensorDict(stack_dim=1, batch_size=[2, 3])
    out = empty.consolidate()
    assert out.batch_size == empty.batch_size == torch.Size([2, 0, 3])
    assert pickle.loads(pickle.dumps(out)).batch_size == empty.batch_size
