"""Saving tensor collections to a folder: ``memmap``, ``memmap_``, ``memmap_like``, ``save``.

By default a save is atomic and durable: everything is written into a fresh staging
folder next to the target, flushed to disk (writeback starts as each file is written,
then all files are ``fsync``-ed in parallel threads, which the filesystem batches; from
256 files on, one ``syncfs`` of the filesystem replaces the per-file calls on Linux),
and the staging folder then replaces the target in one rename (an atomic
exchange on Linux). A process killed at any instant leaves either the previous complete
content or the new one — never a mix. The previous content is deleted before the call
returns, except the kernel's freeing of its large files, left to a background thread.
Entries of an existing target that the previous save did not write (a user's own files)
are carried over. ``atomic=False`` writes in place instead, as the reference library does
by default (faster, not crash safe).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import torch

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict._plugins.api import TensorDictFuture
from tensordict.base import TensorDictBase
from tensordict.memmap import _classes, _codec, _fs
from tensordict.memmap._gc import paused_gc
from tensordict.memmap._plan import META, Job, Node, Plan, Planner, Rel, member_batch
from tensordict.memmap._progress import Bar, wants_bar
from tensordict.memmap._tensor import MemoryMappedTensor, map_file, write_tensor_file

#: Threads that flush written files to disk (concurrent fsyncs share journal commits).
_FSYNC_THREADS = 16
#: From this many files on, one ``syncfs`` of the filesystem replaces the per-file fsyncs.
_SYNCFS_FILES = 256
PREFIX_ATTR = "_memmap_prefix"


def save(
    data: Any,
    prefix: str | Path | None,
    *,
    like: bool = False,
    inplace: bool = False,
    copy_existing: bool = False,
    num_threads: int = 0,
    return_early: bool = False,
    share_non_tensor: bool = False,
    existsok: bool = True,
    robust_key: bool | None = True,
    archive: bool | None = None,
    compression: str | int | None = None,
    atomic: bool = True,
    allow_pickle: bool | None = None,
    progress: bool | None = None,
) -> Any:
    """Write ``data`` under ``prefix`` and return the memory-mapped result (see module doc).

    ``inplace=True`` replaces ``data``'s leaves by the memory-mapped ones and returns
    ``data``; ``like=True`` allocates zero-filled files instead of copying the content.
    """
    if share_non_tensor:
        raise NotImplementedError(
            "share_non_tensor=True is not supported by tensordict-memmap: non-tensor values "
            "are stored in meta.json; re-read them with memmap_refresh_()."
        )
    if num_threads < 0:
        raise ValueError(f"num_threads must be >= 0, got {num_threads}")
    allow = _codec.save_allow_pickle(allow_pickle)
    robust = True if robust_key is None else bool(robust_key)
    target = None if prefix is None else _target(prefix)
    is_archive = target is not None and (
        archive is True or (archive is None and target.suffix == ".tdz")
    )
    if compression is not None and not is_archive:
        raise ValueError(
            "compression is only supported for archives (a prefix ending in .tdz, or archive=True)."
        )
    if target is None:
        if archive:
            raise ValueError("archive=True needs a prefix (the archive's file name).")
    elif not existsok and _exists(target):
        raise RuntimeError(f"The location {str(target)!r} already exists (existsok=False).")

    def work() -> Any:
        with paused_gc():
            return write()

    def write() -> Any:
        if is_archive:
            from tensordict.memmap import _archive

            assert target is not None
            return _archive.write_archive(
                data,
                target,
                like=like,
                copy_existing=copy_existing,
                robust_key=robust,
                allow_pickle=allow,
                compression=compression,
                num_threads=num_threads,
                progress=progress,
            )
        return _save_folder(
            data,
            target,
            like=like,
            inplace=inplace,
            copy_existing=copy_existing,
            robust_key=robust,
            allow_pickle=allow,
            atomic=atomic,
            num_threads=num_threads,
            progress=progress,
        )

    if return_early:
        if is_archive and like:
            raise NotImplementedError("return_early=True is not supported by memmap_like archives")
        return _start(work)
    return work()


def _start(work: Any) -> TensorDictFuture:
    """Run ``work`` in a daemon thread; its result (or error) comes out of ``result()``."""
    future: Future[Any] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(work())
        except BaseException as err:  # noqa: BLE001 - handed to the caller of result()
            future.set_exception(err)

    threading.Thread(target=run, name="tensordict-memmap-save", daemon=True).start()
    return TensorDictFuture([future], None)


def _target(prefix: str | Path) -> Path:
    path = Path(prefix).absolute()
    if path.is_symlink():
        path = path.resolve()
    return path


def _exists(target: Path) -> bool:
    if target.is_dir():
        return any(target.iterdir())
    return target.exists()


def _save_folder(
    data: Any,
    target: Path | None,
    *,
    like: bool,
    inplace: bool,
    copy_existing: bool,
    robust_key: bool,
    allow_pickle: bool,
    atomic: bool,
    num_threads: int,
    progress: bool | None,
) -> Any:
    planner = Planner(
        target,
        like=like,
        copy_existing=copy_existing,
        robust_key=robust_key,
        allow_pickle=allow_pickle,
    )
    node = planner.collection(data, ())
    if target is not None:
        plan = planner.plan
        if target.exists() and not target.is_dir():
            raise RuntimeError(f"Cannot save into {str(target)!r}: it exists and is not a folder.")
        _check_symlinks(target, plan)
        if atomic:
            _write_atomic(target, plan, num_threads, progress)
        else:
            _write_in_place(target, plan, num_threads, progress)
    if inplace:
        return apply_inplace(node, data, target)
    result = build(node, target)
    if isinstance(result, TensorDictBase):
        result.lock_()
    return result


# --------------------------------------------------------------------------- writing


def _check_symlinks(target: Path, plan: Plan) -> None:
    if not target.is_dir():
        return
    for rel in plan.dirs:
        if rel:
            _fs.reject_symlink(target.joinpath(*rel), "TensorDict")


def _write_atomic(target: Path, plan: Plan, num_threads: int, progress: bool | None) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = _fs.staging_path(target)
    try:
        for rel in plan.dirs:
            staging.joinpath(*rel).mkdir(parents=True, exist_ok=True)
        files = len(plan.jobs) + len(plan.small)
        # many files: one syncfs below flushes them all, starting writeback per file is waste
        _run_jobs(
            staging,
            plan.jobs,
            num_threads,
            exclusive=True,
            progress=progress,
            writeback=files < _SYNCFS_FILES,
        )
        for rel, payload in plan.small.items():
            _write_small(staging.joinpath(*rel), payload, fsync=False)
        if files < _SYNCFS_FILES or not _fs.sync_filesystem(staging):
            paths = [os.path.join(str(staging), *job.rel) for job in plan.jobs]
            paths += [os.path.join(str(staging), *rel) for rel in plan.small]
            if len(paths) > 1:
                with ThreadPoolExecutor(min(_FSYNC_THREADS, len(paths))) as pool:
                    list(pool.map(_fsync_path, paths))
            else:
                for path in paths:
                    _fsync_path(path)
        for rel in reversed(plan.dirs):
            _fs.fsync_dir(staging.joinpath(*rel))
        keep = _foreign_entries(target, plan)
        _fs.commit_directory(staging, target, keep)
    except BaseException:
        _fs.remove_tree(staging)
        raise


def _write_in_place(target: Path, plan: Plan, num_threads: int, progress: bool | None) -> None:
    for rel in plan.dirs:
        target.joinpath(*rel).mkdir(parents=True, exist_ok=True)
    jobs = [job for job in plan.jobs if job.link != str(target.joinpath(*job.rel))]
    _run_jobs(target, jobs, num_threads, exclusive=False, progress=progress)
    # meta.json files last, deepest first, each replaced atomically; stale pickles removed
    for rel, payload in sorted(plan.small.items(), key=lambda item: -len(item[0])):
        path = target.joinpath(*rel)
        tmp = path.with_name(f"{_fs.TMP_MARK}{path.name}")
        _write_small(tmp, payload, fsync=False)
        os.replace(tmp, path)
    for rel in plan.dirs:
        level = target.joinpath(*rel)
        for stale in ("pickle.pkl", "other.pickle"):
            if (*rel, stale) not in plan.small and (level / stale).exists():
                (level / stale).unlink()


def _run_jobs(
    root: Path,
    jobs: list[Job],
    num_threads: int,
    *,
    exclusive: bool,
    progress: bool | None,
    writeback: bool = False,
) -> None:
    total = sum(job.nbytes for job in jobs)
    with Bar(total, "saving", wants_bar(progress, total)) as bar:
        base = str(root)

        def run(job: Job) -> None:
            path = os.path.join(base, *job.rel)
            if job.link is not None:
                try:
                    os.link(job.link, path)
                    bar.update(job.nbytes)
                    return
                except OSError:
                    pass  # another filesystem, or no hard links: copy instead
            write_tensor_file(
                path, job.tensor, job.nbytes, exclusive=exclusive, fsync=False, writeback=writeback
            )
            bar.update(job.nbytes)

        if num_threads > 1 and len(jobs) > 1:
            with ThreadPoolExecutor(num_threads) as pool:
                list(pool.map(run, jobs))
        else:
            for job in jobs:
                run(job)


def _write_small(path: Path, payload: bytes, *, fsync: bool) -> None:
    fd = _fs.create_file(path, exclusive=False)
    try:
        os.ftruncate(fd, 0)
        _fs.write_all(fd, payload)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _foreign_entries(target: Path, plan: Plan) -> frozenset[str]:
    """Entries of an existing ``target`` that neither the previous save nor this one own."""
    if not target.is_dir():
        return frozenset()
    present = {name for name in os.listdir(target) if not name.startswith(_fs.TMP_MARK)}
    return frozenset(present - plan.top_names() - owned_entries(target))


def owned_entries(folder: Path) -> set[str]:
    """Names that the save recorded in ``folder/meta.json`` owns (best effort)."""
    owned = {META, "pickle.pkl", "other.pickle", "_tensordict"}
    try:
        meta = json.loads((folder / META).read_text("utf-8"))
    except (OSError, ValueError):
        return owned
    if not isinstance(meta, dict):
        return owned
    entries = dict(meta)
    reserved = meta.get("_entries_reserved")
    if isinstance(reserved, dict):
        entries.update(reserved)
    for key, entry in entries.items():
        if not isinstance(entry, dict) or not isinstance(key, str):
            continue
        for robust in (True, False):
            try:
                if "dtype" in entry:
                    name = _fs.encode_key(key, robust=robust)
                    owned |= {f"{name}.memmap", f"{name}.shape.memmap"}
                elif "type" in entry:
                    owned.add(_fs.encode_key(key, robust=robust, directory=True))
            except RuntimeError:
                pass
    count = meta.get("count")
    if isinstance(count, int) or "stack_dim" in meta:
        owned |= {name for name in os.listdir(folder) if name.isdigit()}
    return owned


# --------------------------------------------------------------------------- results


def build(
    node: Node,
    root: Path | None,
    *,
    leaf: Callable[[Node], torch.Tensor] | None = None,
    marked: bool = True,
    device: str | None = "cpu",
) -> Any:
    """The memory-mapped result described by ``node``: leaves are the files under
    ``root`` (anonymous shared memory when ``root`` is None) or what ``leaf`` makes of a
    leaf node; ``marked`` records ``root`` as the levels' saved path."""
    if node.kind == "leaf":
        return _leaf_tensor(node, root) if leaf is None else leaf(node)
    if node.kind == "nontensor":
        return node.source.clone()
    rebuild = partial(build, root=root, leaf=leaf, marked=marked, device=device)
    if node.kind == "tc":
        inner = rebuild(node.children["_tensordict"])
        return _classes.rebuild(type(node.source), inner)
    if node.kind == "lazy":
        src = node.source
        out: TensorDictBase = LazyStackedTensorDict(
            *[rebuild(m) for m in node.members],
            stack_dim=src.stack_dim,
            stack_dim_name=getattr(src, "_td_dim_name", None),
            batch_size=member_batch(src.batch_size, src.stack_dim) if not node.members else None,
        )
    else:
        src = node.source
        dev = None if device is None else torch.device(device)
        entries = {}
        for key, child in node.children.items():
            value = rebuild(child)
            if child.kind == "nontensor" and dev is not None:
                value = value.to(dev)
            entries[key] = value
        # the entries mirror a validated tensordict: no need to validate them again
        out = TensorDict._new_unsafe(entries, src.batch_size, dev)
        names = _level_names(src)
        if names is not None:
            out.names = names
    if marked:
        mark(out, root, node.rel)
    return out


def _leaf_tensor(node: Node, root: Path | None) -> torch.Tensor:
    if node.keep is not None:
        return node.keep
    assert node.dtype is not None
    if root is None:
        src = node.source
        if isinstance(src, MemoryMappedTensor) and src._filename is None:
            return src
        if not node.like:
            return MemoryMappedTensor.from_tensor(src.detach())
        return MemoryMappedTensor.zeros_like(src)
    return map_file(os.path.join(str(root), *node.rel), node.dtype, node.shape, "r+", checked=True)


def apply_inplace(node: Node, obj: Any, root: Path | None) -> Any:
    """Replace ``obj``'s leaves by the memory-mapped tensors of ``node``; lock it."""
    if node.kind == "tc":
        apply_inplace(node.children["_tensordict"], obj._tensordict, root)
        return obj
    if node.kind == "lazy":
        for member_node, member in zip(node.members, obj.tensordicts):
            apply_inplace(member_node, member, root)
        mark(obj, root, node.rel)
        obj.lock_()
        return obj
    if node.kind == "nontensor":  # saved on its own (stack.memmap_(prefix))
        mark(obj, root, node.rel)
        return obj
    if node.kind != "td":
        return obj
    for key, child in node.children.items():
        if child.kind == "leaf":
            if key in obj.keys():
                _set_leaf(obj, key, _leaf_tensor(child, root))
        elif child.kind != "nontensor":
            apply_inplace(child, obj._get_str(key, None), root)
    mark(obj, root, node.rel)
    obj.lock_()
    return obj


def _set_leaf(td: Any, key: str, value: torch.Tensor) -> None:
    store = getattr(td, "_tensordict", None)
    if isinstance(td, TensorDict) and isinstance(store, dict):
        store[key] = value
        return
    locked = td.is_locked
    if locked:
        td.unlock_()
    try:
        td.set(key, value)
    finally:
        if locked:
            td.lock_()


def mark(td: Any, root: Path | None, rel: Rel) -> None:
    """Record where ``td`` lives (read by ``saved_path``, ``make_memmap`` and the repr)."""
    where = None if root is None else str(root.joinpath(*rel))
    try:
        td.__dict__[PREFIX_ATTR] = where
    except AttributeError:  # a class with slots (NonTensorStack has one for it)
        try:
            object.__setattr__(td, PREFIX_ATTR, where)
        except AttributeError:
            pass


def saved_prefix(td: Any) -> str | None:
    """The folder :func:`mark` recorded for ``td`` (None: not written to a folder)."""
    own = getattr(td, "__dict__", None)
    return own.get(PREFIX_ATTR) if own is not None else getattr(td, PREFIX_ATTR, None)


def _level_names(td: Any) -> list[str | None] | None:
    try:
        names = list(td.names)
    except (AttributeError, RuntimeError):
        return None
    return names if any(n is not None for n in names) else None
