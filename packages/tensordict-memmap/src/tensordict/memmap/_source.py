"""Where a load reads from: a folder, or a single-file archive holding the same layout.

Both expose the same small interface over *relative* paths (tuples of names), so the
loader (:mod:`~tensordict.memmap._reader`) is written once.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import torch

from tensordict.memmap import _fs
from tensordict.memmap._tensor import map_file

Rel = tuple[str, ...]


def parse_meta(raw: bytes, where: str) -> dict[str, Any]:
    """The JSON object in ``raw`` (read from ``where``); ValueError for anything else."""
    try:
        meta = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"{where} is not valid JSON ({err}); the save is corrupted.") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{where} must hold a JSON object, got {type(meta).__name__}.")
    return meta


class FolderSource:
    """A saved folder on disk."""

    mapped = True

    def __init__(self, root: Path) -> None:
        self.root = root
        self._root = str(root)

    def path(self, rel: Rel) -> Path:
        out = self.root
        for name in rel:
            out = _fs.child(out, name)
        return out

    def _str(self, rel: Rel) -> str:
        for name in rel:
            if not _fs.is_plain_name(name):
                raise ValueError(f"refusing the path component {name!r} under {str(self.root)!r}")
        return os.path.join(self._root, *rel)

    def describe(self, rel: Rel) -> str:
        return repr(str(self.path(rel)))

    def exists(self, rel: Rel) -> bool:
        return os.path.lexists(self._str(rel))

    def is_dir(self, rel: Rel) -> bool:
        path = self.path(rel)
        return path.is_dir() and not path.is_symlink()

    def is_file(self, rel: Rel) -> bool:
        return os.path.isfile(self._str(rel))

    def read_bytes(self, rel: Rel) -> bytes:
        path = self.path(rel)
        if path.is_symlink():
            raise ValueError(f"{str(path)!r} is a symlink; refusing to follow it.")
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise FileNotFoundError(f"No such file or directory: {str(path)!r}") from None

    def file_size(self, rel: Rel) -> int:
        """Size of a regular file; FileNotFoundError/ValueError for missing, links, others."""
        path = self._str(rel)
        info = os.lstat(path)  # FileNotFoundError when missing
        if stat.S_ISLNK(info.st_mode):
            raise ValueError(f"{path!r} is a symlink; refusing to follow it.")
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path!r} is not a regular file.")
        return info.st_size

    def data_bytes(self) -> int:
        """Bytes of every tensor file (what a load that reads the data goes through)."""
        total = 0
        for folder, _, files in os.walk(self.root):
            total += sum(
                os.path.getsize(os.path.join(folder, f)) for f in files if f.endswith(".memmap")
            )
        return total

    def tensor(self, rel: Rel, dtype: torch.dtype, shape: Any, mode: str | None) -> torch.Tensor:
        """Map a file whose size :meth:`file_size` has checked."""
        return map_file(self._str(rel), dtype, shape, mode, checked=True)

    def folder(self, rel: Rel) -> Path:
        """Where a loaded level lives (recorded as its ``saved_path``)."""
        return self.path(rel)

    def read_meta(self, rel: Rel) -> dict[str, Any]:
        return parse_meta(self.read_bytes(rel), self.describe(rel))
