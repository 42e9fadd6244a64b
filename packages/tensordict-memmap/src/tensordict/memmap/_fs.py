"""Filesystem primitives: key encoding, safe file creation, durability and atomic commits.

* :func:`encode_key` turns any key string into one path component, compatible with the
  reference library's "robust" encoding (percent-encoding of the characters that are
  special on common filesystems) and extended so that no key ever reaches outside its
  folder: overlong names are shortened with a hash, and reserved names are escaped.
* :func:`create_file` opens a file for writing without following symlinks.
* :func:`commit_directory` replaces a folder with a fully written staging folder in one
  atomic step where the kernel allows it (``renameat2(RENAME_EXCHANGE)`` on Linux). The
  previous content is then deleted by :func:`discard_tree`: its names at once, the
  freeing of its large files (as long as a third of writing them) in a background thread.
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import errno
import hashlib
import os
import re
import shutil
import stat
import sys
import threading
import uuid
from pathlib import Path

#: Characters the reference library escapes in file names (besides controls and DEL).
_SPECIAL = frozenset('"%*/:<>?\\|')
#: Any character that :func:`encode_key` escapes (a key without one is its own name).
_ESCAPED = re.compile(r'[\x00-\x20\x7f"%*/:<>?\\|]')
#: Longest encoded name (bytes) used as is: room is left for ".memmap", ".shape.memmap"
#: and temporary suffixes under the usual 255-byte limit of a path component.
MAX_NAME_BYTES = 200
#: Names a folder entry may not take, because the format uses them at every level.
RESERVED_DIR_NAMES = frozenset({"meta.json", "pickle.pkl", "other.pickle"})
#: Prefix of the temporary names this package creates; encoded keys never start with it
#: (a ``%`` from a key is always written ``%25``).
TMP_MARK = "%tmp-"
#: Prefix of a target's previous content once a commit has moved it aside: nothing reads
#: such a folder, so any one found (left by a process killed while deleting it) is removed.
OLD_MARK = "%old-"


def _escape_char(char: str) -> str:
    return "".join(f"%{b:02X}" for b in char.encode("utf-8"))


def encode_key(key: str, *, robust: bool = True, directory: bool = False) -> str:
    """The file-name component that stores ``key``.

    With ``robust=True`` (the default) the result is a single safe path component: control
    characters, spaces and ``"%*/:<>?\\|`` are percent-encoded, ``""``, ``"."`` and ``".."``
    are escaped, overlong names are shortened with a hash of the key, and a folder name
    that could clash with the files of the format is escaped. ``robust=False`` returns the
    key unchanged (legacy layout) and raises :class:`RuntimeError` for keys that are not a
    plain file name.

    >>> encode_key("a/b"), encode_key(".."), encode_key("sp ace"), encode_key("ünï")
    ('a%2Fb', '%2E%2E', 'sp%20ace', 'ünï')
    >>> encode_key("meta.json", directory=True)
    'meta.jso%6E'
    """
    if not robust:
        if not is_plain_name(key):
            raise RuntimeError(
                f"The key {key!r} is not a plain file name (it is empty, '.', '..', holds a "
                "path separator or a NUL byte), so it cannot be stored with robust_key=False "
                "(No such file or directory). Use robust_key=True."
            )
        return key
    if key == "":
        return "%"
    if key in (".", ".."):
        return "%2E" * len(key)
    if _ESCAPED.search(key) is None:
        out = key
    else:
        out = "".join(
            _escape_char(c) if (ord(c) <= 0x20 or ord(c) == 0x7F or c in _SPECIAL) else c
            for c in key
        )
    if directory and (out in RESERVED_DIR_NAMES or out.endswith(".memmap")):
        out = out[:-1] + _escape_char(out[-1])
    if len(out) * 4 > MAX_NAME_BYTES and len(out.encode("utf-8")) > MAX_NAME_BYTES:
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        head = out.encode("utf-8")[:120].decode("utf-8", "ignore")
        cut = head.rfind("%", len(head) - 2)  # never split a %XX escape
        if cut != -1:
            head = head[:cut]
        out = f"{head}%~{digest}"
    return out


def decode_key(name: str) -> str:
    """Invert :func:`encode_key` for names that were not shortened.

    >>> decode_key("a%2Fb"), decode_key("%"), decode_key("%2E%2E")
    ('a/b', '', '..')
    """
    if name == "%":
        return ""
    raw = bytearray()
    i = 0
    while i < len(name):
        if name[i] == "%" and _is_hex(name[i + 1 : i + 3]):
            raw.append(int(name[i + 1 : i + 3], 16))
            i += 3
        else:
            raw += name[i].encode("utf-8")
            i += 1
    return raw.decode("utf-8")


def _is_hex(text: str) -> bool:
    return len(text) == 2 and all(c in "0123456789abcdefABCDEF" for c in text)


def is_plain_name(name: str) -> bool:
    """Whether ``name`` is usable as one path component as it is.

    >>> is_plain_name("a"), is_plain_name("a/b"), is_plain_name("..")
    (True, False, False)
    """
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name


def child(parent: Path, name: str) -> Path:
    """``parent / name``, refusing names that would leave ``parent``.

    >>> child(Path("/data"), "a%2Fb").as_posix()
    '/data/a%2Fb'
    """
    if not is_plain_name(name):
        raise ValueError(f"refusing the path component {name!r} under {str(parent)!r}")
    return parent / name


def reject_symlink(path: Path, what: str) -> None:
    """Raise :class:`RuntimeError` if ``path`` is a symbolic link (never write through one)."""
    if path.is_symlink():
        raise RuntimeError(
            f"Refusing to write the {what} through symlink {str(path)!r}: remove the link or "
            "choose another location."
        )


def create_file(path: str | Path, *, exclusive: bool) -> int:
    """Open ``path`` for writing, creating it (never through a symlink); returns the fd.

    With ``exclusive=True`` an existing file raises :class:`RuntimeError` ("already exists").
    """
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    if exclusive:
        flags |= os.O_EXCL
    elif hasattr(os, "O_NOFOLLOW"):
        flags |= os.O_NOFOLLOW
    else:  # pragma: no cover - platforms without O_NOFOLLOW
        reject_symlink(Path(path), "tensor")
    try:
        return os.open(path, flags, 0o666)
    except FileExistsError:
        if os.path.islink(path):
            reject_symlink(Path(path), "tensor")
        raise RuntimeError(f"The file {str(path)!r} already exists (existsok=False).") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            reject_symlink(Path(path), "tensor")
        raise


def write_all(fd: int, data: memoryview | bytes, offset: int = 0) -> None:
    """Write every byte of ``data`` at ``offset`` (looping over short writes)."""
    view = memoryview(data).cast("B")
    total = len(view)
    done = 0
    chunk = 1 << 30
    while done < total:
        done += os.pwrite(fd, view[done : done + chunk], offset + done)


def fsync_dir(path: Path) -> None:
    """Make the entries of folder ``path`` durable (no-op where folders cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


_LIBC = _libc()
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


_SYNC_FILE_RANGE_WRITE = 2


def start_writeback(fd: int) -> None:
    """Ask the kernel to start writing ``fd``'s dirty pages now, without waiting (Linux
    ``sync_file_range``), so that a later ``fsync`` has less left to do."""
    if _LIBC is not None and hasattr(_LIBC, "sync_file_range"):
        _LIBC.sync_file_range(
            ctypes.c_int(fd),
            ctypes.c_longlong(0),
            ctypes.c_longlong(0),
            ctypes.c_uint(_SYNC_FILE_RANGE_WRITE),
        )


def sync_filesystem(path: Path) -> bool:
    """Flush every dirty file of the filesystem holding ``path`` to disk with one call
    (Linux ``syncfs``); False where it is unavailable (the caller then fsyncs each file).

    One ``syncfs`` makes 10,000 freshly written files durable in tens of milliseconds,
    where 10,000 ``fsync`` calls take about a second. Since Linux 5.8 it also reports
    writeback errors, which are raised here as :class:`OSError`.
    """
    if _LIBC is None or not hasattr(_LIBC, "syncfs"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        if _LIBC.syncfs(ctypes.c_int(fd)) == 0:
            return True
        err = ctypes.get_errno()
    finally:
        os.close(fd)
    if err == errno.ENOSYS:
        return False
    raise OSError(err, f"syncfs({str(path)!r}) failed: {os.strerror(err)}")


def exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths (Linux ``renameat2``); False if unsupported."""
    if _LIBC is None or not hasattr(_LIBC, "renameat2"):
        return False
    res = _LIBC.renameat2(
        _AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), ctypes.c_uint(_RENAME_EXCHANGE)
    )
    if res == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV, errno.EPERM):
        return False
    raise OSError(err, f"renameat2({str(a)!r}, {str(b)!r}) failed: {os.strerror(err)}")


def staging_path(target: Path) -> Path:
    """A fresh temporary sibling of ``target`` (same filesystem, so renames are atomic)."""
    return target.parent / f"{TMP_MARK}{target.name[:60]}-{uuid.uuid4().hex[:12]}"


def commit_directory(staging: Path, target: Path, keep: frozenset[str] = frozenset()) -> None:
    """Make the fully written folder ``staging`` appear at ``target`` atomically.

    A reader of ``target`` sees either its previous content or the new one, never a mix.
    When ``target`` already exists, its entries named in ``keep`` (a user's own files) are
    moved into the new folder afterwards; the rest of the old content is moved aside under
    an ``%old-`` name and deleted (see :func:`discard_tree`).
    """
    parent = target.parent
    if not target.exists() and not target.is_symlink():
        os.rename(staging, target)
        fsync_dir(parent)
        return
    if target.is_dir() and not target.is_symlink() and not any(target.iterdir()):
        os.rename(staging, target)  # an empty folder is replaced atomically
        fsync_dir(parent)
        return
    old = old_path(target)
    if exchange(staging, target):
        os.rename(staging, old)  # the old content, under a name no save or load uses
    else:
        os.rename(target, old)
        os.rename(staging, target)
    fsync_dir(parent)
    for name in keep:
        src = old / name
        dst = target / name
        if (src.exists() or src.is_symlink()) and not (dst.exists() or dst.is_symlink()):
            os.rename(src, dst)
    discard_tree(old)
    for stale in _leftovers(parent, target.name):
        discard_tree(stale)


def old_path(target: Path) -> Path:
    """A fresh sibling name for ``target``'s previous content (see :data:`OLD_MARK`)."""
    return target.parent / f"{OLD_MARK}{target.name[:60]}-{uuid.uuid4().hex[:12]}"


def _leftovers(parent: Path, name: str) -> list[Path]:
    """Previous contents of ``parent / name`` that a killed process did not finish deleting."""
    head = f"{OLD_MARK}{name[:60]}-"
    try:
        with os.scandir(parent) as entries:
            found = [
                Path(entry.path)
                for entry in entries
                if entry.name.startswith(head) and len(entry.name) == len(head) + 12
            ]
    except OSError:
        return []
    return found


#: The removals in flight: each thread and the descriptors it has still to close.
_removals: dict[threading.Thread, list[int]] = {}
_removals_lock = threading.Lock()
#: Files at least this large are unlinked while held open, and closed in the background.
_HOLD_BYTES = 1 << 20
#: At most this many files per removal are held open (the rest are deleted at once).
_HOLD_FILES = 256


def discard_tree(path: Path) -> None:
    """Delete the folder (or file) ``path``, which nothing reads any more, leaving the
    kernel's freeing of its large files to a background thread.

    Every name under ``path`` is gone when this returns (best effort, as ``rmtree`` with
    ``ignore_errors``: what cannot be deleted stays, under its ``%old-`` name, for the
    next save to remove), so nothing a caller lists or deletes afterwards can meet a
    half-deleted folder. Large files are opened before they are unlinked; closing them
    (which frees their pages and blocks, as long as a third of the time it took to write
    them) happens in a daemon thread that :func:`wait_for_removals` joins, and that the
    interpreter joins at exit. A process forked meanwhile closes its copies at once, so
    that it does not keep the old files alive; a process that dies has the kernel close
    them.
    """
    held: list[int] = []
    try:
        if path.is_dir() and not path.is_symlink():
            for root, dirs, files in os.walk(path, topdown=False):
                for name in files:
                    _unlink_holding(os.path.join(root, name), held)
                for name in dirs:
                    _remove_dir(os.path.join(root, name))
            _remove_dir(str(path))
        else:
            _unlink_holding(str(path), held)
    except BaseException:
        _close_all(held)
        raise
    if not held:
        return

    def close() -> None:
        try:
            while True:
                with _removals_lock:  # (a fork waits for this: see _after_fork_in_child)
                    if not held:
                        break
                    fd = held.pop()
                try:
                    os.close(fd)
                except OSError:
                    pass
        finally:
            with _removals_lock:
                _removals.pop(thread, None)

    thread = threading.Thread(target=close, name="tensordict-memmap-free", daemon=True)
    with _removals_lock:
        _removals[thread] = held
    thread.start()


def _unlink_holding(path: str, held: list[int]) -> None:
    """Unlink ``path``; a large regular file is first opened and its fd added to ``held``."""
    try:
        if len(held) < _HOLD_FILES:
            info = os.lstat(path)
            if info.st_size >= _HOLD_BYTES and stat.S_ISREG(info.st_mode):
                held.append(os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)))
        os.unlink(path)
    except OSError:
        pass  # gone already, or not ours to delete: left for the next save


def _remove_dir(path: str) -> None:
    try:
        if os.path.islink(path):
            os.unlink(path)
        else:
            os.rmdir(path)
    except OSError:
        pass  # gone already, or not empty (a file could not be deleted)


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    fds.clear()


def _after_fork_in_child() -> None:
    """A forked child got copies of the descriptors still to close: close them now
    (their threads do not exist in the child)."""
    for held in _removals.values():
        _close_all(held)
    _removals.clear()
    _removals_lock.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_removals_lock.acquire,
        after_in_parent=_removals_lock.release,
        after_in_child=_after_fork_in_child,
    )


def wait_for_removals() -> None:
    """Wait until the kernel has freed the files that saves deleted (see
    :func:`discard_tree`).

    >>> wait_for_removals()  # nothing pending: returns at once
    """
    with _removals_lock:
        threads = list(_removals)
    for thread in threads:
        thread.join()


atexit.register(wait_for_removals)


def remove_tree(path: Path) -> None:
    """Delete a file or folder if it exists (ignoring races with other deleters)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
