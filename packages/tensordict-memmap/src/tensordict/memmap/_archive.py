"""Single-file archives (``.tdz``): a zip holding the folder layout, mapped without copies.

Tensor members are stored uncompressed and 64-byte aligned, so loading maps the archive
once and views every tensor in place; CRC-32 checksums are verified on load. Writes
through ``mode="r+"`` (or into a ``memmap_like`` archive) make the checksums stale: the
archive is marked so, loads skip the check, and :func:`refresh_archive_checksums`
recomputes them. Compressed archives (``compression=``) are read into memory. Any zip of
a saved folder loads too (unaligned members are copied).
"""

from __future__ import annotations

import os
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tensordict.memmap import _fs, _zip
from tensordict.memmap._plan import META, Node, Planner
from tensordict.memmap._progress import Bar, wants_bar
from tensordict.memmap._source import Rel, parse_meta
from tensordict.memmap._tensor import (
    COPY_ON_WRITE,
    MemoryMappedTensor,
    _view_of_storage,
    tensor_buffer,
    view_of_bytes,
)
from tensordict.memmap._writer import build

_COMPRESSION = {
    "stored": zipfile.ZIP_STORED,
    "deflate": zipfile.ZIP_DEFLATED,
    "deflated": zipfile.ZIP_DEFLATED,
    "zlib": zipfile.ZIP_DEFLATED,
    "bzip2": zipfile.ZIP_BZIP2,
    "lzma": zipfile.ZIP_LZMA,
}


def _compression(value: str | int | None) -> int:
    if value is None:
        return zipfile.ZIP_STORED
    if isinstance(value, str) and value.lower() in _COMPRESSION:
        return _COMPRESSION[value.lower()]
    if isinstance(value, int) and value in _COMPRESSION.values():
        return value
    raise ValueError(
        f"unknown compression {value!r}: use one of {sorted(_COMPRESSION)} or a zipfile "
        "constant (ZIP_STORED, ZIP_DEFLATED, ZIP_BZIP2, ZIP_LZMA)."
    )


# --------------------------------------------------------------------------- writing


def write_archive(
    data: Any,
    target: Path,
    *,
    like: bool,
    copy_existing: bool,
    robust_key: bool,
    allow_pickle: bool,
    compression: str | int | None,
    num_threads: int,
    progress: bool | None,
    compresslevel: int | None = None,
) -> Any:
    """Write ``data`` as an archive at ``target`` (atomically) and return it loaded."""
    method = _compression(compression)
    planner = Planner(
        target, like=like, copy_existing=True, robust_key=robust_key, allow_pickle=allow_pickle
    )
    node = planner.collection(data, ())
    plan = planner.plan
    entries: list[tuple[str, Any, int]] = [
        ("/".join(rel), payload, len(payload)) for rel, payload in plan.small.items()
    ]
    for job in plan.jobs:
        entries.append(("/".join(job.rel), job.tensor, job.nbytes))
    offsets = _write_entries(
        target, entries, method, compresslevel, num_threads, progress, dirty=like
    )
    if offsets is not None:
        return _mapped_result(node, target, offsets, writable=like)
    from tensordict.memmap._reader import Loader

    loader = Loader(robust_key=robust_key, mode="r+" if like else "r", allow_pickle=allow_pickle)
    with ArchiveSource(target, mode=loader.mode) as source:
        source.verify = False  # the bytes were just written (and checksummed) by this call
        return loader.load(source)


def _mapped_result(node: Node, target: Path, offsets: dict[str, int], *, writable: bool) -> Any:
    """The archive just written, as the loader would return it, built from the save's plan:
    the file is mapped once and every leaf is a view at its known offset (nothing is read
    back or parsed again)."""
    size = target.stat().st_size
    storage = torch.UntypedStorage.from_file(str(target), shared=writable, nbytes=size)
    flat = torch.empty(0, dtype=torch.uint8).set_(storage)
    path = str(target)
    mode = "r+" if writable else COPY_ON_WRITE

    def leaf(leaf_node: Node) -> torch.Tensor:
        assert leaf_node.dtype is not None
        start = offsets["/".join(leaf_node.rel)]
        view = view_of_bytes(flat, leaf_node.dtype, leaf_node.shape, start)
        return MemoryMappedTensor._wrap(view, path, None, leaf_node.shape, mode)

    return build(node, None, leaf=leaf, marked=False, device="cpu")


def _payload_view(payload: Any) -> memoryview | None:
    if payload is None:
        return None
    if isinstance(payload, bytes):
        return memoryview(payload)
    if isinstance(payload, np.ndarray):
        return memoryview(payload).cast("B")
    return tensor_buffer(payload)


def _write_entries(
    target: Path,
    entries: list[tuple[str, Any, int]],
    method: int,
    compresslevel: int | None,
    num_threads: int,
    progress: bool | None,
    *,
    dirty: bool = False,
) -> dict[str, int] | None:
    """Write the archive atomically; returns where each member's data starts (None for a
    compressed archive, whose members are not stored as they are)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    _fs.reject_symlink(target, "archive")
    tmp = _fs.staging_path(target)
    total = sum(n for _, _, n in entries)
    offsets: dict[str, int] | None = None
    try:
        with Bar(total, "archiving", wants_bar(progress, total)) as bar:
            if method == zipfile.ZIP_STORED:
                members = [
                    _zip.Member(name, nbytes, name.endswith(".memmap"), _payload_view(payload))
                    for name, payload, nbytes in entries
                ]
                fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
                try:
                    end = _zip.write_members(fd, members, num_threads, bar.update)
                    _zip.write_central(fd, members, end, _zip.DIRTY if dirty else _zip.CLEAN)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                offsets = {m.name: m.data_offset for m in members}
            else:
                with zipfile.ZipFile(
                    tmp, "x", compression=method, compresslevel=compresslevel
                ) as zf:
                    for name, payload, nbytes in entries:
                        view = _payload_view(payload)
                        zf.writestr(name, bytes(view) if view is not None else bytes(nbytes))
                        bar.update(nbytes)
                    zf.comment = _zip.CLEAN
                with open(tmp, "rb+") as fp:
                    os.fsync(fp.fileno())
        os.replace(tmp, target)
        _fs.fsync_dir(target.parent)
    except BaseException:
        _fs.remove_tree(tmp)
        raise
    return offsets


def pack_memmap(
    prefix: str | Path,
    archive_path: str | Path,
    *,
    compression: str | int | None = None,
    compresslevel: int | None = None,
) -> Path:
    """Pack a saved folder into a single-file archive; returns the archive's path.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict, pack_memmap, is_memmap_archive
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = TensorDict({"a": torch.arange(3)}, [3]).memmap(tmp + "/folder")
    ...     archive = pack_memmap(tmp + "/folder", tmp + "/data.tdz")
    ...     print(is_memmap_archive(archive), TensorDict.load_memmap(archive)["a"])
    True MemoryMappedTensor([0, 1, 2])
    """
    root = Path(prefix).absolute()
    if not (root / META).is_file():
        raise ValueError(f"{str(root)!r} is not a memory-mapped tensordict folder (no meta.json).")
    entries: list[tuple[str, Any, int]] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(_fs.TMP_MARK))
        for name in sorted(files):
            if name.startswith(_fs.TMP_MARK):
                continue
            path = Path(folder) / name
            if path.is_symlink():
                raise ValueError(f"{str(path)!r} is a symlink; refusing to pack it.")
            rel = path.relative_to(root).as_posix()
            size = path.stat().st_size
            payload = np.memmap(path, dtype=np.uint8, mode="r") if size else b""
            entries.append((rel, payload, size))
    target = Path(archive_path).absolute()
    _write_entries(target, entries, _compression(compression), compresslevel, 0, None)
    return target


def unpack_memmap(archive_path: str | Path, prefix: str | Path) -> Path:
    """Extract an archive into a folder (atomically); member names that would leave the
    folder are refused. Returns the folder's path.

    >>> import os, tempfile, torch
    >>> from tensordict import TensorDict, unpack_memmap
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = TensorDict({"a": torch.arange(3)}, [3]).save(tmp + "/data.tdz")
    ...     print(sorted(os.listdir(unpack_memmap(tmp + "/data.tdz", tmp + "/out"))))
    ['a.memmap', 'meta.json']
    """
    source = Path(archive_path).absolute()
    target = Path(prefix).absolute()
    with ArchiveSource(source, mode="r") as archive:
        staging = _fs.staging_path(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            staging.mkdir()
            for name in archive.members:
                rel = _member_rel(name)
                path = staging.joinpath(*rel)
                path.parent.mkdir(parents=True, exist_ok=True)
                data = archive.read_bytes(rel)
                fd = _fs.create_file(path, exclusive=True)
                try:
                    _fs.write_all(fd, data)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            _fs.commit_directory(staging, target)
        except BaseException:
            _fs.remove_tree(staging)
            raise
    return target


def is_memmap_archive(path: str | Path) -> bool:
    """Whether ``path`` is an archive of a saved tensordict (a zip with a top meta.json).

    >>> is_memmap_archive("/no/such/file.tdz")
    False
    """
    path = Path(path)
    if not path.is_file() or not zipfile.is_zipfile(path):
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            return META in zf.namelist()
    except (zipfile.BadZipFile, OSError):
        return False


def refresh_archive_checksums(archive_path: str | Path) -> Path:
    """Recompute the CRC-32 of every stored member after in-place writes (``mode="r+"``,
    ``memmap_like``), so zip tools and checked loads accept the archive again.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict, refresh_archive_checksums
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     buf = TensorDict({"a": torch.zeros(3)}, [3]).memmap_like(tmp + "/buf.tdz")
    ...     _ = buf["a"].fill_(2.0)
    ...     _ = refresh_archive_checksums(tmp + "/buf.tdz")
    ...     print(TensorDict.load_memmap(tmp + "/buf.tdz")["a"])
    MemoryMappedTensor([2., 2., 2.])
    """
    path = Path(archive_path).absolute()
    crcs = {}
    size = path.stat().st_size
    with zipfile.ZipFile(path) as zf, open(path, "rb") as fp:
        mapped = np.memmap(path, dtype=np.uint8, mode="r") if size else np.zeros(0, np.uint8)
        for info in zf.infolist():
            if info.compress_type != zipfile.ZIP_STORED:
                continue
            start = _zip.data_offset(fp, info, size)
            crcs[info.filename] = zlib.crc32(memoryview(mapped[start : start + info.file_size]))
        del mapped
    _zip.patch_crcs(str(path), crcs)
    _zip.set_comment(str(path), _zip.CLEAN)
    return path


# --------------------------------------------------------------------------- reading


def _member_rel(name: str) -> Rel:
    parts = tuple(name.split("/"))
    if (
        not name
        or name.startswith("/")
        or "\\" in name
        or any(not _fs.is_plain_name(part) for part in parts)
    ):
        raise ValueError(f"archive member {name!r} is not a safe relative path; refusing it.")
    return parts


class ArchiveSource:
    """A saved tensordict inside an archive (see :mod:`~tensordict.memmap._source`)."""

    mapped = False

    def __init__(self, path: Path, *, mode: str | None = None, num_threads: int = 0) -> None:
        self.path = path
        try:
            self.zf = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as err:
            raise ValueError(
                f"{str(path)!r} is not a memory-mapped tensordict: it is neither a folder nor a "
                f"valid archive ({err})."
            ) from None
        self.size = path.stat().st_size
        self.members: dict[str, tuple[zipfile.ZipInfo, int]] = {}
        self.dirs: set[str] = {""}
        with open(path, "rb") as fp:
            for info in self.zf.infolist():
                if info.is_dir():
                    continue
                _member_rel(info.filename)
                try:
                    start = _zip.data_offset(fp, info, self.size)
                except (ValueError, OSError) as err:
                    raise ValueError(f"{str(path)!r} is corrupted: {err}") from None
                self.members[info.filename] = (info, start)
                parts = info.filename.split("/")
                for i in range(1, len(parts)):
                    self.dirs.add("/".join(parts[:i]))
        if META not in self.members:
            raise ValueError(
                f"{str(path)!r} is not a memory-mapped tensordict archive: it has no meta.json."
            )
        self.writable = mode == "r+"
        # what the leaves are mapped as: the file ("r+"), read-only ("r": writes refused),
        # or, by default, copy-on-write (writes stay in memory, as the reference documents)
        self.leaf_mode = mode if mode in ("r", "r+") else COPY_ON_WRITE
        if self.writable:
            if not os.access(path, os.W_OK):
                raise PermissionError(f"mode='r+': the archive {str(path)!r} is not writable")
            _zip.set_comment(str(path), _zip.DIRTY)
        self.verify = self.zf.comment != _zip.DIRTY and not self.writable
        self.storage = (
            torch.UntypedStorage.from_file(str(path), shared=self.writable, nbytes=self.size)
            if self.size
            else torch.UntypedStorage(0)
        )
        self.num_threads = num_threads

    def __enter__(self) -> ArchiveSource:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.zf.close()

    def _name(self, rel: Rel) -> str:
        return "/".join(rel)

    def describe(self, rel: Rel) -> str:
        return repr(f"{self.path}:{self._name(rel)}") if rel else repr(str(self.path))

    def exists(self, rel: Rel) -> bool:
        return self.is_file(rel) or self.is_dir(rel)

    def is_dir(self, rel: Rel) -> bool:
        return self._name(rel) in self.dirs

    def is_file(self, rel: Rel) -> bool:
        return self._name(rel) in self.members

    def file_size(self, rel: Rel) -> int:
        try:
            return int(self.members[self._name(rel)][0].file_size)
        except KeyError:
            raise FileNotFoundError(self.describe(rel)) from None

    def folder(self, rel: Rel) -> Path:
        return self.path

    def read_bytes(self, rel: Rel) -> bytes:
        name = self._name(rel)
        if name not in self.members:
            raise FileNotFoundError(f"No such member: {self.describe(rel)}")
        try:
            return self.zf.read(name)
        except (zipfile.BadZipFile, zlib.error, OSError) as err:
            raise ValueError(
                f"{self.describe(rel)} is corrupted ({err}); if the archive was written in place "
                "(mode='r+'), call refresh_archive_checksums() on it."
            ) from None

    def read_meta(self, rel: Rel) -> dict[str, Any]:
        return parse_meta(self.read_bytes(rel), self.describe(rel))

    def data_bytes(self) -> int:
        """Bytes of every tensor member (what a load that reads the data goes through)."""
        return sum(i.file_size for n, (i, _) in self.members.items() if n.endswith(".memmap"))

    def tensor(self, rel: Rel, dtype: torch.dtype, shape: Any, mode: str | None) -> torch.Tensor:
        info, start = self.members[self._name(rel)]
        stored = info.compress_type == zipfile.ZIP_STORED
        aligned = stored and start % max(dtype.itemsize, 1) == 0
        nbytes = info.file_size
        if not aligned:
            if self.writable:
                why = "is compressed" if not stored else "is not aligned"
                raise RuntimeError(
                    f"mode='r+': the member {self.describe(rel)} {why}, so writes cannot reach "
                    "the archive; load it with mode='r' (or repack it with pack_memmap)."
                )
            raw = bytearray(self.read_bytes(rel))
            flat = (
                torch.frombuffer(raw, dtype=torch.uint8)
                if raw
                else torch.empty(0, dtype=torch.uint8)
            )
            return _view_of_storage(flat.untyped_storage(), dtype, shape)
        if self.verify and nbytes:
            region = torch.empty(0, dtype=torch.uint8).set_(self.storage)[start : start + nbytes]
            if zlib.crc32(memoryview(region.numpy())) != info.CRC:
                raise ValueError(
                    f"{self.describe(rel)} fails its CRC-32 check: the archive is corrupted. (If "
                    "it was written in place, call refresh_archive_checksums() on it.)"
                )
        view = _view_of_storage(self.storage, dtype, shape, byte_offset=start)
        return MemoryMappedTensor._wrap(view, str(self.path), None, shape, self.leaf_mode)
