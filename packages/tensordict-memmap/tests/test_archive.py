"""Single-file archives: layout, zero-copy loads, checksums, r+, pack/unpack, errors."""

from __future__ import annotations

import os
import pickle
import struct
import zipfile

import pytest
import torch
from memmap_helpers import assert_same, sample_lazy, sample_td

from tensordict import (
    NonTensorData,
    TensorDict,
    is_memmap_archive,
    pack_memmap,
    refresh_archive_checksums,
    unpack_memmap,
)


def _payload_offsets(path):
    out = {}
    with zipfile.ZipFile(path) as zf, open(path, "rb") as fp:
        for info in zf.infolist():
            fp.seek(info.header_offset + 26)
            name_len, extra_len = struct.unpack("<2H", fp.read(4))
            out[info.filename] = info.header_offset + 30 + name_len + extra_len
    return out


def test_save_to_tdz_is_one_aligned_zip(tmp_path):
    td = sample_td()
    archive = tmp_path / "data.tdz"
    loaded = td.save(archive)
    assert archive.is_file() and is_memmap_archive(archive) and not is_memmap_archive(tmp_path)
    assert_same(loaded, td)
    with zipfile.ZipFile(archive) as zf:
        assert zf.testzip() is None  # every CRC is right
        names = set(zf.namelist())
        assert {"meta.json", "float.memmap", "nested/meta.json", "nested/deeper/y.memmap"} <= names
        assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())
    for name, offset in _payload_offsets(archive).items():
        if name.endswith(".memmap"):
            assert offset % 64 == 0, name


def test_archive_loads_without_copy_and_writes_stay_in_memory(tmp_path):
    archive = tmp_path / "data.tdz"
    sample_td().save(archive)
    loaded = TensorDict.load_memmap(archive)
    pointers = {
        v.untyped_storage().data_ptr()
        for v in loaded.values(True, True)
        if isinstance(v, torch.Tensor)
    }
    assert len(pointers) == 1  # every leaf views one mapping of the file
    before = archive.read_bytes()
    # loaded without a mode: copy-on-write, as the reference documents for archives
    loaded["float"] += 1
    assert archive.read_bytes() == before
    assert torch.equal(loaded["float"], sample_td()["float"] + 1)
    assert torch.equal(TensorDict.load_memmap(archive)["float"], sample_td()["float"])
    # asked for read-only: a write would not reach the file either, and is refused
    read_only = TensorDict.load_memmap(archive, mode="r")
    with pytest.raises(RuntimeError, match="read-only.*data.tdz"):
        read_only["float"] += 1
    assert torch.equal(read_only["float"], sample_td()["float"])
    assert archive.read_bytes() == before
    unpickled = pickle.loads(pickle.dumps(TensorDict.load_memmap(archive)))
    assert torch.equal(unpickled["float"], TensorDict.load_memmap(archive)["float"])


def test_archive_round_trips_lazy_stacks_and_subpath(tmp_path):
    lazy = sample_lazy()
    lazy.save(tmp_path / "l.tdz")
    loaded = TensorDict.load_memmap(tmp_path / "l.tdz")
    for a, b in zip(loaded.tensordicts, lazy.tensordicts):
        assert_same(a, b)
    assert_same(TensorDict.load_memmap(tmp_path / "l.tdz", subpath="1"), lazy.tensordicts[1])


def test_corrupted_archive_is_reported(tmp_path):
    archive = tmp_path / "data.tdz"
    TensorDict({"a": torch.arange(100.0)}, [100]).save(archive)
    data = bytearray(archive.read_bytes())
    data[_payload_offsets(archive)["a.memmap"] + 7] ^= 0xFF
    bad = tmp_path / "bad.tdz"
    bad.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="a.memmap' fails its CRC-32 check"):
        TensorDict.load_memmap(bad)
    (tmp_path / "junk.tdz").write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="not a memory-mapped tensordict"):
        TensorDict.load_memmap(tmp_path / "junk.tdz")
    truncated = tmp_path / "trunc.tdz"
    truncated.write_bytes(archive.read_bytes()[:-40])
    with pytest.raises(ValueError):
        TensorDict.load_memmap(truncated)


def test_member_names_cannot_escape_on_unpack(tmp_path):
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("meta.json", '{"shape": [], "device": "cpu"}')
        zf.writestr("../outside.memmap", b"x")
    with pytest.raises(ValueError, match="not a safe relative path"):
        unpack_memmap(evil, tmp_path / "out")
    assert not (tmp_path / "outside.memmap").exists()


def test_mode_r_plus_writes_through_and_refresh(tmp_path):
    archive = tmp_path / "data.tdz"
    td = TensorDict({"a": torch.arange(4.0), "b": {"c": torch.zeros(2, 2)}}, [])
    td.save(archive)
    loaded = TensorDict.load_memmap(archive, mode="r+")
    loaded["a"].add_(1)
    assert torch.equal(TensorDict.load_memmap(archive)["a"], td["a"] + 1)  # stale CRCs tolerated
    with pytest.raises(zipfile.BadZipFile), zipfile.ZipFile(archive) as zf:
        zf.read("a.memmap")
    refresh_archive_checksums(archive)
    with zipfile.ZipFile(archive) as zf:
        assert zf.testzip() is None
    unpack_memmap(archive, tmp_path / "unpacked")
    assert torch.equal(TensorDict.load_memmap(tmp_path / "unpacked")["a"], td["a"] + 1)


def test_compressed_and_foreign_archives(tmp_path):
    td = TensorDict({"a": torch.zeros(1000, dtype=torch.uint8), "b": {"c": torch.arange(10.0)}}, [])
    td.save(tmp_path / "stored.tdz")
    td.save(tmp_path / "deflate.tdz", compression="deflate")
    assert (tmp_path / "deflate.tdz").stat().st_size < (tmp_path / "stored.tdz").stat().st_size
    assert_same(TensorDict.load_memmap(tmp_path / "deflate.tdz", num_threads=2), td)
    with pytest.raises(RuntimeError, match="is compressed"):
        TensorDict.load_memmap(tmp_path / "deflate.tdz", mode="r+")
    with pytest.raises(ValueError, match="unknown compression"):
        td.save(tmp_path / "x.tdz", compression="rar")
    td.memmap(tmp_path / "plain")
    foreign = tmp_path / "foreign.zip"  # `zip -r` of a folder: unaligned, still loadable
    with zipfile.ZipFile(foreign, "w") as zf:
        for path in sorted((tmp_path / "plain").rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(tmp_path / "plain").as_posix())
    assert_same(TensorDict.load_memmap(foreign), td)


def test_pack_unpack(tmp_path):
    td = sample_td()
    td.memmap(tmp_path / "plain")
    archive = pack_memmap(tmp_path / "plain", tmp_path / "packed.tdz")
    assert archive == tmp_path / "packed.tdz" and is_memmap_archive(archive)
    assert_same(TensorDict.load_memmap(archive), td)
    out = unpack_memmap(archive, tmp_path / "unpacked")
    assert_same(TensorDict.load_memmap(out), td)
    with pytest.raises(ValueError, match="not a memory-mapped tensordict folder"):
        pack_memmap(tmp_path / "nothing", tmp_path / "x.tdz")
    small = pack_memmap(
        tmp_path / "plain", tmp_path / "small.tdz", compression="lzma", compresslevel=1
    )
    assert_same(TensorDict.load_memmap(small), td)


def test_memmap_like_archive_is_a_writable_buffer(tmp_path):
    td = TensorDict({"img": torch.zeros(3, 4, dtype=torch.uint8)}, []).expand(100)
    buf = td.memmap_like(tmp_path / "ds.tdz")
    assert is_memmap_archive(tmp_path / "ds.tdz") and not buf["img"].any()
    buf[7] = TensorDict({"img": torch.full((3, 4), 9, dtype=torch.uint8)}, [])
    again = TensorDict.load_memmap(tmp_path / "ds.tdz")
    assert (again["img"][7] == 9).all() and not again["img"][6].any()
    refresh_archive_checksums(tmp_path / "ds.tdz")
    with zipfile.ZipFile(tmp_path / "ds.tdz") as zf:
        assert zf.testzip() is None
    with pytest.raises(RuntimeError, match="already exists"):
        td.memmap_like(tmp_path / "ds.tdz", existsok=False)


def test_archive_options(tmp_path):
    td = TensorDict({"a": torch.arange(3.0), "s": NonTensorData(1j)}, [3])
    td.save(tmp_path / "weights.bin", archive=True, allow_pickle=True, num_threads=2)
    assert is_memmap_archive(tmp_path / "weights.bin")
    with pytest.raises(RuntimeError, match="allow_pickle"):
        TensorDict.load_memmap(tmp_path / "weights.bin")
    assert TensorDict.load_memmap(tmp_path / "weights.bin", allow_pickle=True)["s"] == 1j
    meta = TensorDict.load_memmap(tmp_path / "weights.bin", device="meta", allow_pickle=True)
    assert meta["a"].device.type == "meta"
    dest = TensorDict({"a": torch.zeros(3), "s": NonTensorData(0)}, [3])
    dest.load_memmap_(tmp_path / "weights.bin", allow_pickle=True)
    assert torch.equal(dest["a"], td["a"]) and dest["s"] == 1j
    assert not os.path.exists(tmp_path / "weights.bin.tmp")


def test_archive_nested_tensor_components_keep_their_values(tmp_path):
    # the nested leaf's bytes lie after other members: its components' offsets count from there
    parts = [torch.arange(2.0), torch.arange(3.0) + 10, torch.full((1,), 7.0)]
    td = TensorDict({"a": torch.arange(3), "n": torch.nested.nested_tensor(parts)}, [3])
    saved = td.save(tmp_path / "x.tdz")
    loaded = TensorDict.load_memmap(tmp_path / "x.tdz")
    for result in (saved, loaded):
        got = [t.as_subclass(torch.Tensor) for t in result["n"].unbind()]
        assert len(got) == 3 and all(torch.equal(g, p) for g, p in zip(got, parts))


def test_archive_save_returns_what_a_load_returns(tmp_path):
    archive = tmp_path / "data.tdz"
    saved = sample_td().save(archive)
    loaded = TensorDict.load_memmap(archive)
    assert_same(saved, loaded)
    for key in loaded.keys(True, True):
        a, b = saved.get(key), loaded.get(key)
        assert type(a) is type(b), key
        if isinstance(b, torch.Tensor):
            assert a.filename == b.filename == str(archive), key
    assert (saved.device, saved.is_locked) == (loaded.device, loaded.is_locked)
    pointers = {v.untyped_storage().data_ptr() for v in saved.values(True, True)}
    assert len(pointers) == 1  # one mapping of the file
    before = archive.read_bytes()
    saved["float"] += 1  # copy-on-write, as a load without a mode
    assert archive.read_bytes() == before
    assert torch.equal(saved["float"], sample_td()["float"] + 1)
