"""The public functions (``tensordict.memmap``/``save``/``load``/``load_memmap``/…) and the
``td_*`` hooks that core's ``TensorDict`` forwarders call (the tensordict comes first)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict._plugins.api import NON_TENSOR, NestedKey, is_tensorclass, unravel_key
from tensordict.base import TensorDictBase
from tensordict.memmap import _fs, _writer
from tensordict.memmap._gc import paused_gc
from tensordict.memmap._load_into import load_into
from tensordict.memmap._progress import Bar, wants_bar
from tensordict.memmap._reader import Loader
from tensordict.memmap._source import FolderSource
from tensordict.memmap._tensor import MemoryMappedTensor, check_not_sparse, write_tensor_file

TensorCollection = Any


# --------------------------------------------------------------------------- saving


def memmap(
    data: TensorCollection,
    prefix: str | Path | None = None,
    copy_existing: bool = False,
    *,
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
) -> TensorCollection:
    """Write ``data`` to ``prefix`` and return a memory-mapped copy (locked).

    Without ``prefix`` the copy lives in anonymous shared memory. With a prefix ending in
    ``.tdz`` (or ``archive=True``) the result is a single-file archive, and what is
    returned is what loading it gives: unlocked, its writes copy-on-write (in memory). The save is atomic
    and durable by default (``atomic=False`` writes in place, faster but not crash safe).
    Non-tensor values are stored as JSON; others are pickled (``allow_pickle=False``
    refuses them), and loading those needs ``allow_pickle=True``.
    ``num_threads`` writes files in parallel; ``return_early=True`` returns a
    :class:`~tensordict.utils.TensorDictFuture` at once; ``progress`` shows a tqdm bar
    (``None``: automatic for ~1 GiB and more on a terminal).

    >>> import tempfile, torch
    >>> import tensordict
    >>> from tensordict import TensorDict
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     td = tensordict.memmap(TensorDict({"a": torch.arange(3)}, [3]), tmp)
    ...     print(type(td["a"]).__name__, td.is_locked, td.saved_path == tmp)
    MemoryMappedTensor True True
    """
    return _writer.save(
        data,
        prefix,
        copy_existing=copy_existing,
        num_threads=num_threads,
        return_early=return_early,
        share_non_tensor=share_non_tensor,
        existsok=existsok,
        robust_key=robust_key,
        archive=archive,
        compression=compression,
        atomic=atomic,
        allow_pickle=allow_pickle,
        progress=progress,
    )


def save(
    data: TensorCollection,
    prefix: str | Path | None = None,
    copy_existing: bool = False,
    *,
    num_threads: int = 0,
    return_early: bool = False,
    share_non_tensor: bool = False,
    robust_key: bool | None = True,
    archive: bool | None = None,
    compression: str | int | None = None,
    atomic: bool = True,
    allow_pickle: bool | None = None,
    progress: bool | None = None,
) -> TensorCollection:
    """Save ``data`` to ``prefix`` (a folder, or a ``.tdz`` archive); same as :func:`memmap`
    with ``existsok=True``.

    >>> import os, tempfile, torch
    >>> import tensordict
    >>> from tensordict import TensorDict
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = tensordict.save(TensorDict({"a": torch.zeros(2), "b": "text"}, [2]), tmp)
    ...     print(sorted(os.listdir(tmp)))
    ['a.memmap', 'b', 'meta.json']
    """
    return memmap(
        data,
        prefix,
        copy_existing,
        num_threads=num_threads,
        return_early=return_early,
        share_non_tensor=share_non_tensor,
        existsok=True,
        robust_key=robust_key,
        archive=archive,
        compression=compression,
        atomic=atomic,
        allow_pickle=allow_pickle,
        progress=progress,
    )


# --------------------------------------------------------------------------- loading


def load_memmap(
    prefix: str | Path,
    device: torch.device | str | None = None,
    non_blocking: bool = False,
    *,
    out: TensorCollection | None = None,
    robust_key: bool | None = True,
    subpath: NestedKey | None = None,
    mode: str | None = None,
    num_threads: int = 0,
    allow_pickle: bool | None = None,
    classes: Iterable[type] = (),
    import_classes: bool = False,
    progress: bool | None = None,
) -> TensorCollection:
    """Load a saved folder or archive, mapping the tensor files (no data is read).

    ``device`` moves the leaves (``"meta"`` reads nothing at all); ``mode="r"`` maps
    read-only (in-place writes raise), ``"r+"`` shared (``None``: shared when the files
    are writable);
    ``subpath`` loads only the tensordict at that nested key (lazy-stack members are
    indices); ``out``, a tensordict of the saved structure (checked before it changes),
    gets the loaded leaves. Pickled non-tensor values need
    ``allow_pickle=True``. A class named in ``meta.json`` is used only if it is
    imported or registered, passed in ``classes``, or ``import_classes=True``.
    ``progress`` shows a tqdm bar (``None``: automatic when the load reads ~1 GiB or more
    — archive checksums, a copy to another device — on a terminal).

    >>> import tempfile, torch
    >>> import tensordict
    >>> from tensordict import TensorDict
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = TensorDict({"a": torch.arange(3), "b": {"c": torch.ones(3)}}, [3]).memmap(tmp)
    ...     print(tensordict.load_memmap(tmp)["a"], tensordict.load_memmap(tmp, subpath="b")["c"])
    MemoryMappedTensor([0, 1, 2]) MemoryMappedTensor([1., 1., 1.])
    """
    if num_threads < 0:
        raise ValueError(f"num_threads must be >= 0, got {num_threads}")
    loader = Loader(
        device=device,
        non_blocking=non_blocking,
        robust_key=robust_key,
        mode=mode,
        allow_pickle=allow_pickle,
        classes=classes,
        import_classes=import_classes,
    )
    path = Path(prefix).absolute()
    if path.is_file():
        from tensordict.memmap import _archive

        with _archive.ArchiveSource(path, mode=mode, num_threads=num_threads) as source:
            result = _load(loader, source, subpath, progress)
    else:
        result = _load(loader, FolderSource(path), subpath, progress)
    if out is not None:
        return load_into(out, result)
    return result


def _load(loader: Loader, source: Any, subpath: NestedKey | None, progress: bool | None) -> Any:
    """``loader.load`` with a progress bar over the bytes it reads (see :func:`wants_bar`)."""
    work = 0
    if progress or (progress is None and loader.reads_data(source)):
        work = source.data_bytes()
    with Bar(work, "loading", wants_bar(progress, work)) as bar, paused_gc():
        loader.bar = bar
        return loader.load(source, subpath)


def load(
    prefix: str | Path,
    device: torch.device | str | None = None,
    non_blocking: bool = False,
    *,
    out: TensorCollection | None = None,
    robust_key: bool | None = True,
    subpath: NestedKey | None = None,
    mode: str | None = None,
    num_threads: int = 0,
    allow_pickle: bool | None = None,
    classes: Iterable[type] = (),
    import_classes: bool = False,
    progress: bool | None = None,
) -> TensorCollection:
    """Load a saved folder or archive (same as :func:`load_memmap`).

    >>> import tempfile, torch
    >>> import tensordict
    >>> from tensordict import TensorDict
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = TensorDict({"a": torch.arange(3)}, [3]).save(tmp)
    ...     print(tensordict.load(tmp, device="meta")["a"].device)
    meta
    """
    return load_memmap(
        prefix,
        device,
        non_blocking,
        out=out,
        robust_key=robust_key,
        subpath=subpath,
        mode=mode,
        num_threads=num_threads,
        allow_pickle=allow_pickle,
        classes=classes,
        import_classes=import_classes,
        progress=progress,
    )


def is_memmap(obj: Any) -> bool:
    """Whether a tensor is a :class:`MemoryMappedTensor`, or every tensor of a collection is.

    >>> import torch
    >>> from tensordict import MemoryMappedTensor, TensorDict, is_memmap
    >>> is_memmap(MemoryMappedTensor.zeros(2)), is_memmap(torch.zeros(2))
    (True, False)
    >>> is_memmap(TensorDict({"a": torch.zeros(2)}, [2]).memmap_())
    True
    """
    if isinstance(obj, torch.Tensor):
        return isinstance(obj, MemoryMappedTensor)
    if isinstance(obj, TensorDictBase) or is_tensorclass(obj):
        return td_is_memmap(obj)
    return False


# --------------------------------------------------------------------------- hooks


#: ``TensorDict.memmap``/``save``/``dumps`` take the tensordict first, as these functions do
td_memmap = memmap
td_save = save


def td_memmap_(
    td: Any,
    prefix: str | Path | None = None,
    copy_existing: bool = False,
    *,
    num_threads: int = 0,
    return_early: bool = False,
    share_non_tensor: bool = False,
    existsok: bool = True,
    robust_key: bool | None = True,
    atomic: bool = True,
    allow_pickle: bool | None = None,
    progress: bool | None = None,
) -> Any:
    """``TensorDict.memmap_``: move ``td``'s tensors to memory-mapped storage in place.

    Without ``prefix``, a tensordict that is already memory-mapped is left as it is.
    """
    if not (is_tensorclass(td) or isinstance(td, (TensorDict, LazyStackedTensorDict, *NON_TENSOR))):
        raise RuntimeError(
            f"Cannot build a memmap TensorDict in-place from a {type(td).__name__}; use "
            "memmap() to get a memory-mapped copy."
        )
    if prefix is None and td_is_memmap(td):
        return td
    return _writer.save(
        td,
        prefix,
        inplace=True,
        copy_existing=copy_existing,
        num_threads=num_threads,
        return_early=return_early,
        share_non_tensor=share_non_tensor,
        existsok=existsok,
        robust_key=robust_key,
        archive=False,
        atomic=atomic,
        allow_pickle=allow_pickle,
        progress=progress,
    )


def td_memmap_like(
    td: Any,
    prefix: str | Path | None = None,
    copy_existing: bool = False,
    *,
    existsok: bool = True,
    num_threads: int = 0,
    return_early: bool = False,
    share_non_tensor: bool = False,
    robust_key: bool | None = True,
    archive: bool | None = None,
    atomic: bool = True,
    allow_pickle: bool | None = None,
    progress: bool | None = None,
) -> Any:
    """``TensorDict.memmap_like``: zero-filled memory-mapped storage of ``td``'s structure.

    Files are allocated (sparse where the filesystem allows) and no data is copied, so a
    large dataset can be pre-allocated and filled in place by other processes.
    """
    return _writer.save(
        td,
        prefix,
        like=True,
        copy_existing=copy_existing,
        num_threads=num_threads,
        return_early=return_early,
        share_non_tensor=share_non_tensor,
        existsok=existsok,
        robust_key=robust_key,
        archive=archive,
        atomic=atomic,
        allow_pickle=allow_pickle,
        progress=progress,
    )


def td_load_memmap_(
    td: Any,
    prefix: str | Path,
    robust_key: bool | None = True,
    *,
    allow_pickle: bool | None = None,
    mode: str | None = None,
) -> Any:
    """``TensorDict.load_memmap_``: replace ``td``'s leaves by the memory-mapped ones (``td``
    must have the saved structure: keys, batch sizes, shapes, dtypes)."""
    return load_memmap(prefix, robust_key=robust_key, allow_pickle=allow_pickle, mode=mode, out=td)


def td_load_(td: Any, prefix: str | Path, *args: Any, **kwargs: Any) -> Any:
    """``TensorDict.load_``: load ``prefix`` into ``td`` (as :func:`td_load_memmap_`)."""
    return load_memmap(prefix, *args, out=td, **kwargs)


def td_memmap_refresh_(td: Any, *, allow_pickle: bool | None = None) -> Any:
    """``TensorDict.memmap_refresh_``: re-read the saved folder of ``td`` (entries added or
    changed on disk by other processes appear; rows appended with ``append_memmap`` give
    ``td`` the grown batch size)."""
    path = td_saved_path(td)
    fresh = load_memmap(path, allow_pickle=allow_pickle)
    locked = td.is_locked
    if locked:
        td.unlock_()
    try:
        td.update(fresh, update_batch_size=fresh.batch_size != td.batch_size)
    finally:
        if locked:
            td.lock_()
    return td


def td_is_memmap(td: Any) -> bool:
    """``TensorDict.is_memmap``: every tensor is memory-mapped (an empty tensordict counts
    when it was memory-mapped itself)."""
    if isinstance(td, NON_TENSOR):  # no tensor: memory-mapped once written to a folder
        return _writer.saved_prefix(td) is not None
    found, ok = _memmap_state(td)
    return ok and (found or _writer.saved_prefix(td) is not None)


def _memmap_state(td: Any) -> tuple[bool, bool]:
    """(has a tensor, every tensor is memory-mapped), walking members and nested levels."""
    if is_tensorclass(td):
        td = td._tensordict
    levels = list(td.tensordicts) if isinstance(td, LazyStackedTensorDict) else [td]
    found = False
    for level in levels:
        if isinstance(level, LazyStackedTensorDict):
            sub_found, sub_ok = _memmap_state(level)
            if not sub_ok:
                return found, False
            found = found or sub_found
            continue
        for key in level.keys():
            value = level._get_str(key, None)
            if isinstance(value, torch.Tensor):
                if not isinstance(value, MemoryMappedTensor):
                    return found, False
                found = True
            elif isinstance(value, TensorDictBase) or is_tensorclass(value):
                sub_found, sub_ok = _memmap_state(value)
                if not sub_ok:
                    return found, False
                found = found or sub_found
    return found, True


def td_saved_path(td: Any) -> str | None:
    """``TensorDict.saved_path``: the folder a memory-mapped tensordict lives in;
    ``None`` when its memory maps have no folder (``memmap()`` / ``memmap_like()``
    without a prefix), as in the reference."""
    if is_tensorclass(td):
        td = td._tensordict
    if not td_is_memmap(td):
        raise AttributeError(
            "The tensordict has no saved path: it was not memory-mapped to a folder "
            "(see TensorDict.memmap / load_memmap)."
        )
    path = _writer.saved_prefix(td)
    return None if path is None else str(path)


# --------------------------------------------------------------------------- make_memmap*


def td_make_memmap(
    td: Any,
    key: NestedKey,
    shape: torch.Size | torch.Tensor | Iterable[int],
    *,
    dtype: torch.dtype | None = None,
    robust_key: bool | None = True,
) -> MemoryMappedTensor:
    """``TensorDict.make_memmap``: a new zero-filled memory-mapped entry at ``key``, with its
    file in ``td``'s folder (``meta.json`` updated)."""
    dtype = torch.get_default_dtype() if dtype is None else dtype

    def create(path: Path) -> MemoryMappedTensor:
        if isinstance(shape, torch.Tensor) and shape.ndim == 2:
            return MemoryMappedTensor.empty(shape, dtype=dtype, filename=path)
        return MemoryMappedTensor.zeros(torch.Size(shape), dtype=dtype, filename=path)

    return _add_entry(td, key, create, robust_key, shape)


def td_make_memmap_from_storage(
    td: Any,
    key: NestedKey,
    storage: torch.UntypedStorage,
    shape: torch.Size | torch.Tensor | Iterable[int],
    *,
    dtype: torch.dtype | None = None,
    robust_key: bool | None = True,
) -> MemoryMappedTensor:
    """``TensorDict.make_memmap_from_storage``: an entry at ``key`` viewing ``storage``.

    A storage mapped from a file must be mapped from the file the entry will use; other
    storages are copied into that file.
    """
    dtype = torch.get_default_dtype() if dtype is None else dtype

    def create(path: Path) -> MemoryMappedTensor:
        own = getattr(storage, "filename", None)
        if own is not None:
            if str(Path(own).absolute()) != str(path):
                raise RuntimeError(
                    f"Providing a storage with an associated filename ({own!r}) is only possible "
                    f"when it is the file of the new entry ({str(path)!r})."
                )
            return MemoryMappedTensor.from_storage(storage, shape=shape, dtype=dtype, filename=path)
        view = MemoryMappedTensor.from_storage(storage, shape=shape, dtype=dtype)
        return MemoryMappedTensor.from_tensor(
            view.as_subclass(torch.Tensor), filename=path, existsok=True
        )

    return _add_entry(td, key, create, robust_key, shape)


def td_make_memmap_from_tensor(
    td: Any,
    key: NestedKey,
    tensor: torch.Tensor,
    *,
    copy_data: bool = True,
    existsok: bool = True,
    robust_key: bool | None = True,
) -> MemoryMappedTensor:
    """``TensorDict.make_memmap_from_tensor``: a memory-mapped copy of ``tensor`` at ``key``."""
    check_not_sparse(tensor, f"make_memmap_from_tensor: the tensor for {key!r}")

    def create(path: Path) -> MemoryMappedTensor:
        source = (
            tensor.as_subclass(torch.Tensor) if isinstance(tensor, MemoryMappedTensor) else tensor
        )
        return MemoryMappedTensor.from_tensor(
            source.detach(), filename=path, existsok=existsok, copy_data=copy_data
        )

    shape = tensor._nested_tensor_size() if tensor.is_nested else tensor.shape
    return _add_entry(td, key, create, robust_key, shape)


def _add_entry(
    td: Any, key: NestedKey, create: Any, robust_key: bool | None, shape: Any
) -> MemoryMappedTensor:
    robust = True if robust_key is None else bool(robust_key)
    parts = unravel_key(key)
    parts = (parts,) if isinstance(parts, str) else tuple(parts)
    prefix = td.__dict__.get(_writer.PREFIX_ATTR)
    if prefix is None:
        raise RuntimeError(
            "make_memmap* needs a tensordict memory-mapped to a folder: call "
            "td.memmap_(prefix) first."
        )
    if parts in td.keys(True):
        raise RuntimeError(f"The key {key!r} already exists within the target tensordict.")
    _check_leading_dims(td, parts, shape)
    if td.is_locked:  # a memory-mapped tensordict is locked: unlocked (whole tree) while
        td.unlock_()  # the entry is added, locked again after
    try:
        tensor = _create_entry(td, Path(prefix), parts, create, robust)
        _rewrite_meta(td, Path(prefix), robust)  # the meta.json of every level on the way
    finally:
        td.lock_()
    return tensor


def _check_leading_dims(td: Any, parts: tuple[str, ...], shape: Any) -> None:
    """Refuse (before anything is created) a new entry at ``parts`` whose leading
    dimensions are not the batch size of the tensordict that will hold it."""
    level = td
    for part in parts[:-1]:  # a level created on the way takes its parent's batch size
        sub = level._get_str(part, None)
        if not isinstance(sub, TensorDictBase):
            break
        level = sub
    batch = tuple(level.batch_size)
    if not batch:
        return
    if isinstance(shape, torch.Tensor) and shape.ndim == 2:  # nested: one row of sizes each
        ok = tuple(shape.shape[:1]) == batch[:1] and shape.shape[1] >= len(batch) - 1
        ok = ok and bool((shape[:, : len(batch) - 1] == torch.tensor(batch[1:])).all())
        shown: Any = f"nested, {shape.shape[0]} rows of sizes {shape.tolist()}"
    else:
        size = tuple(torch.Size(shape))
        ok = size[: len(batch)] == batch
        shown = list(size)
    if not ok:
        raise RuntimeError(
            f"batch dimension mismatch: the new entry {unravel_key(parts)!r} would have shape "
            f"{shown}, whose leading dimensions must be the batch size {list(batch)} of the "
            "tensordict that holds it. Nothing was created."
        )


def _create_entry(
    td: Any, root: Path, parts: tuple[str, ...], create: Any, robust: bool
) -> MemoryMappedTensor:
    """Create the file of the new entry at ``parts`` (and nested levels on the way) under
    ``root`` and put the tensor in the (unlocked) tensordict ``td``."""
    level, folder = td, root
    for part in parts[:-1]:
        sub = level._get_str(part, None)
        if sub is None:
            sub = TensorDict({}, batch_size=level.batch_size, device="cpu")
            _writer.mark(sub, folder, (_fs.encode_key(part, robust=robust, directory=True),))
            level.set(part, sub)
            sub = level._get_str(part, None)
        elif not isinstance(sub, TensorDictBase):
            raise RuntimeError(f"make_memmap: {part!r} in {parts!r} is not a tensordict")
        level = sub
        folder = Path(
            level.__dict__.get(_writer.PREFIX_ATTR)
            or folder / _fs.encode_key(part, robust=robust, directory=True)
        )
        folder.mkdir(parents=True, exist_ok=True)
    name = _fs.encode_key(parts[-1], robust=robust)
    tensor = create(folder / f"{name}.memmap")
    if tensor.is_nested:
        sizes = tensor._nested_tensor_size()
        write_tensor_file(
            folder / f"{name}.shape.memmap",
            sizes.to(torch.int64),
            sizes.numel() * 8,
            exclusive=False,
            fsync=False,
        )
    if isinstance(level, TensorDict):
        level._tensordict[parts[-1]] = tensor
    else:
        level.set(parts[-1], tensor)
    return tensor  # type: ignore[no-any-return]


def _rewrite_meta(td: Any, root: Path, robust: bool) -> None:
    """Write the meta.json files describing ``td`` (whose files are in ``root``)."""
    from tensordict.memmap._plan import Planner

    planner = Planner(root, like=True, copy_existing=True, robust_key=robust, allow_pickle=True)
    planner.collection(td, ())
    for rel, payload in sorted(planner.plan.small.items(), key=lambda item: -len(item[0])):
        path = root.joinpath(*rel)
        if path.name != "meta.json" and path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{_fs.TMP_MARK}{path.name}")
        tmp.write_bytes(payload)
        tmp.replace(path)
