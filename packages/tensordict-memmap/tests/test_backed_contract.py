"""The storage-backed contract (``tensordict._plugins.api.backed_contract``) on the HDF5
and zarr backends: every call gives what the same call gives on the in-memory
``TensorDict`` the file was written from, every write leaves both holding the same
content, and no public ``TensorDictBase`` method is missing."""

from __future__ import annotations

import pytest
import torch

from tensordict import PersistentTensorDict, TensorDict
from tensordict._plugins.api import BackedTensorDict, backed_contract
from tensordict.memmap._zarr import ZarrTensorDict

READS = dict(backed_contract.READS)
WRITES = dict(backed_contract.WRITES)


def _h5(td: TensorDict, tmp_path) -> PersistentTensorDict:
    pytest.importorskip("h5py")
    return PersistentTensorDict.from_dict(td, filename=tmp_path / "data.h5")


def _zarr(td: TensorDict, tmp_path) -> ZarrTensorDict:
    pytest.importorskip("zarr")
    td.to_zarr(str(tmp_path / "data.zarr"))
    return TensorDict.from_zarr(str(tmp_path / "data.zarr"), mode="r+")


BACKENDS = {"h5": _h5, "zarr": _zarr}


@pytest.mark.parametrize("cls", [PersistentTensorDict, ZarrTensorDict])
def test_every_public_method_is_there(cls):
    assert issubclass(cls, BackedTensorDict)
    assert backed_contract.missing_methods(cls) == []


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("name", sorted(READS))
def test_reads_match_the_in_memory_tensordict(backend, name, tmp_path):
    oracle = backed_contract.sample()
    backed = BACKENDS[backend](oracle.clone(), tmp_path)
    expected = backed_contract.outcome(READS[name], oracle)
    got = backed_contract.outcome(READS[name], backed)
    assert got[0] == expected[0], (got, expected)
    assert backed_contract.same(got[1], expected[1]), (got, expected)
    assert backed_contract.same(backed.to_tensordict(), oracle)  # reads change nothing


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("name", sorted(WRITES))
def test_writes_match_the_in_memory_tensordict(backend, name, tmp_path):
    oracle = backed_contract.sample()
    backed = BACKENDS[backend](oracle.clone(), tmp_path)
    expected = backed_contract.outcome(WRITES[name], oracle)
    got = backed_contract.outcome(WRITES[name], backed)
    assert got[0] == expected[0], (got, expected)
    # after a write, or after a refused one, both hold the same content
    assert backed_contract.same(backed.to_tensordict(), oracle.unlock_())
    assert backed.names == oracle.names


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize(
    "name", ["view", "permute", "unsqueeze", "squeeze", "transpose", "movedim"]
)
def test_views_are_refused(backend, name, tmp_path):
    backed = BACKENDS[backend](backed_contract.sample(), tmp_path)
    args = {"view": (-1,), "permute": (1, 0), "unsqueeze": (0,), "squeeze": (),
            "transpose": (0, 1), "movedim": (0, 1)}[name]  # fmt: skip
    with pytest.raises(RuntimeError, match=rf"Cannot call `{name}` on a {type(backed).__name__}"):
        getattr(backed, name)(*args)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_handles_and_devices(backend, tmp_path):
    backed = BACKENDS[backend](backed_contract.sample(), tmp_path)
    for other in (backed.copy(), backed.to("cpu"), backed.cpu()):
        assert type(other) is type(backed)
        assert backed_contract.same(other.to_tensordict(), backed.to_tensordict())
    other = backed.copy()
    other.set("c", torch.ones(3, 4))  # the same data: seen through the first handle
    assert (backed["c"] == 1).all()
    with backed.lock_():
        with pytest.raises(RuntimeError, match="locked"):
            backed.set("d", torch.ones(3, 4))
    backed.set("d", torch.ones(3, 4))  # the block restored the lock state
    text = repr(backed)
    assert text.startswith(type(backed).__name__) and all(k in text for k in ("a", "n", "label"))
    assert str(tmp_path) in text  # where the data lives


def test_context_manager_closes_the_file(tmp_path):
    h5 = _h5(backed_contract.sample(), tmp_path)
    with h5:
        assert h5["a"].shape == (3, 4, 2)
    with pytest.raises(RuntimeError, match="closed"):
        h5.get("a")
    reopened = PersistentTensorDict.from_h5(tmp_path / "data.h5")
    assert backed_contract.same(reopened.to_tensordict(), backed_contract.sample())
    reopened.close()


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_contiguous_reads_into_memory(backend, tmp_path):
    backed = BACKENDS[backend](backed_contract.sample(), tmp_path)
    assert backed.is_contiguous() is False  # as the reference answers for HDF5
    out = backed.contiguous()
    assert type(out) is TensorDict and out.is_contiguous()
    with pytest.raises(RuntimeError, match=r"contiguous\(inplace=True\).*to_tensordict"):
        backed.contiguous(inplace=True)
    assert backed_contract.same(out, backed_contract.sample())


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_memmap_of_a_backed_tensordict(backend, tmp_path):
    backed = BACKENDS[backend](backed_contract.sample(), tmp_path)
    saved = backed.memmap(tmp_path / "mm")
    assert backed_contract.same(saved, backed_contract.sample())
    assert backed_contract.same(TensorDict.load_memmap(tmp_path / "mm"), backed_contract.sample())
