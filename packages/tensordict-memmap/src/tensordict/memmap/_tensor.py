"""``MemoryMappedTensor``: a CPU tensor whose memory is a file or anonymous shared memory.

The data of a file-backed tensor lives in the page cache of its file, shared by every
process that maps it; pickling sends the file name and the view's geometry, never the
data. Without a file the memory is anonymous shared memory (a *handler*), which
``torch.multiprocessing`` passes to other processes by handle.

Indexing, ``split``, ``chunk``, ``unbind`` (and iterating) give views that keep the file;
in-place ops return the tensor itself; every other torch op returns a plain tensor.

A file mapped read-only (``mode="r"``, or a file the process cannot write) is mapped
copy-on-write, so a write would stay in this process's memory and never reach the file:
in-place ops on such a tensor (and on every view of it) raise instead. The one exception is
an archive (``.tdz``) loaded without a mode: its leaves are documented copy-on-write (as in
the reference), so writes are allowed and stay in memory. ``clone()`` gives
a writable copy in memory; ``mode="r+"`` maps the file so that writes reach it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from tensordict.memmap import _fs

_KEEP_MEMMAP = frozenset(
    {
        torch.Tensor.__getitem__,
        torch.Tensor.split,
        torch.Tensor.chunk,
        torch.Tensor.unbind,
        torch.split,
        torch.chunk,
        torch.unbind,
    }
)
_MODES = (None, "r", "r+")

#: The mode of an archive's leaves loaded without a mode: a private (copy-on-write) mapping
#: whose writes stay in this process's memory, as the reference documents for archives.
COPY_ON_WRITE = "c"
#: In-place ops (names ending with ``_``) that change a tensor's metadata, not its data
_METADATA_INPLACE = frozenset(
    {
        "requires_grad_",
        "share_memory_",
        "detach_",
        "rename_",
        "set_",
        "resize_",
        "resize_as_",
        "as_strided_",
        "squeeze_",
        "unsqueeze_",
        "transpose_",
        "t_",
        "swapdims_",
        "swapaxes_",
    }
)
#: Operators that write into their left operand (most reach ``__torch_function__`` as
#: their ``*_`` method, these under their own name)
_INPLACE_DUNDERS = frozenset(
    {
        "__setitem__",
        "__iadd__",
        "__isub__",
        "__imul__",
        "__itruediv__",
        "__ifloordiv__",
        "__imod__",
        "__ipow__",
        "__iand__",
        "__ior__",
        "__ixor__",
        "__ilshift__",
        "__irshift__",
        "__imatmul__",
    }
)
_SPARSE_LAYOUTS = frozenset(
    {torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc}
)


def check_not_sparse(tensor: torch.Tensor, what: str) -> None:
    """Refuse a sparse tensor (its values and indices are not one block of memory).

    >>> import torch
    >>> check_not_sparse(torch.eye(2).to_sparse(), "entry 'a'")
    Traceback (most recent call last):
    ...
    RuntimeError: entry 'a' is a sparse tensor (layout torch.sparse_coo), which cannot be memory-mapped; convert it with .to_dense() first.
    """
    if tensor.layout in _SPARSE_LAYOUTS:
        raise RuntimeError(
            f"{what} is a sparse tensor (layout {tensor.layout}), which cannot be "
            "memory-mapped; convert it with .to_dense() first."
        )


class _SharedMemoryHandler:
    """Anonymous shared memory holding the data of memory-mapped tensors without a file.

    Pickled by ``torch.multiprocessing`` as a handle to the same memory; a plain
    :mod:`pickle` copies the bytes.
    """

    __slots__ = ("storage",)

    def __init__(self, storage: torch.UntypedStorage) -> None:
        self.storage = storage

    @property
    def size(self) -> int:
        """Number of bytes."""
        return int(self.storage.nbytes())

    def __reduce__(self) -> tuple[Any, ...]:
        # a tensor over the memory: torch.multiprocessing shares it by handle, a plain
        # pickle copies its bytes
        return (_handler_from_bytes, (torch.empty(0, dtype=torch.uint8).set_(self.storage),))


def _handler_from_bytes(data: torch.Tensor) -> _SharedMemoryHandler:
    return _SharedMemoryHandler(data.untyped_storage())


def _new_shared_storage(nbytes: int) -> tuple[torch.UntypedStorage, bool]:
    """Anonymous shared memory of ``nbytes``, and whether it is known to be zero-filled."""
    new_shared = getattr(torch.UntypedStorage, "_new_shared", None)
    if new_shared is not None:
        return new_shared(nbytes), True  # fresh shared-memory pages are zero
    return torch.UntypedStorage(nbytes).share_memory_(), False


def parse_dtype(dtype: Any) -> torch.dtype:
    """A :class:`torch.dtype` from a dtype or its name (``"torch.float32"``, ``"float32"``).

    >>> parse_dtype("torch.bfloat16")
    torch.bfloat16
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        name = dtype[6:] if dtype.startswith("torch.") else dtype
        value = getattr(torch, name, None) if name.isidentifier() else None
        if isinstance(value, torch.dtype):
            return value
    raise ValueError(f"unknown dtype {dtype!r}: expected a torch dtype such as 'torch.float32'")


def _is_nested_shape(shape: Any) -> bool:
    return isinstance(shape, torch.Tensor) and shape.ndim == 2


def _as_size(shape: Any) -> torch.Size:
    if type(shape) is torch.Size:
        return shape
    if isinstance(shape, torch.Tensor):
        return torch.Size(shape.tolist())
    if isinstance(shape, int):
        return torch.Size([shape])
    return torch.Size(shape)


def shape_numel(shape: Any) -> int:
    """Number of elements of a shape (a nested shape counts every element of every row)."""
    if type(shape) is not torch.Size and _is_nested_shape(shape):
        return int(shape.prod(-1).sum()) if shape.numel() else 0
    n = 1
    for s in _as_size(shape):
        n *= s
    return n


def _view_of_storage(
    storage: torch.UntypedStorage, dtype: torch.dtype, shape: Any, byte_offset: int = 0
) -> torch.Tensor:
    """A tensor of ``dtype``/``shape`` over ``storage`` starting at ``byte_offset``."""
    return view_of_bytes(torch.empty(0, dtype=torch.uint8).set_(storage), dtype, shape, byte_offset)


def view_of_bytes(
    flat: torch.Tensor, dtype: torch.dtype, shape: Any, byte_offset: int
) -> torch.Tensor:
    """A tensor of ``dtype``/``shape`` over the ``uint8`` tensor ``flat`` (a whole storage)
    starting at ``byte_offset``."""
    numel = shape_numel(shape)
    nbytes = numel * dtype.itemsize
    raw = flat[byte_offset : byte_offset + nbytes]
    values = (
        raw.view(dtype)
        if nbytes
        else torch.empty(0, dtype=dtype).set_(flat.untyped_storage(), 0, (0,))
    )
    if _is_nested_shape(shape):
        sizes = shape.to(torch.int64)
        strides, offsets = torch._nested_compute_contiguous_strides_offsets(sizes)
        # the components' offsets count from the start of the storage, not of ``values``
        offsets = offsets + values.storage_offset()
        return torch._nested_view_from_buffer(values, sizes, strides, offsets)
    size = _as_size(shape)
    return values.view(*size) if size else values.view(size)  # unpacked: faster for torch


def _map_file(path: str, nbytes: int, mode: str | None) -> tuple[torch.UntypedStorage, str]:
    """Map the first ``nbytes`` of ``path``; returns the storage and the effective mode."""
    if mode not in _MODES and mode != COPY_ON_WRITE:  # "c": an archive's leaves, unpickled
        raise ValueError(f"mode must be None, 'r' or 'r+', got {mode!r}")
    writable = os.access(path, os.W_OK)
    if mode == "r+" and not writable:
        raise PermissionError(f"mode='r+': the file {path!r} is not writable")
    effective = mode or ("r+" if writable else "r")
    size = os.path.getsize(path)
    if size < nbytes:
        raise RuntimeError(
            f"The file {path!r} holds {size} bytes but {nbytes} are needed for the requested "
            "dtype and shape: the file is truncated or the shape is wrong."
        )
    if nbytes == 0:
        return torch.UntypedStorage(0), effective
    return torch.UntypedStorage.from_file(path, shared=effective == "r+", nbytes=nbytes), effective


def map_file(
    path: str, dtype: torch.dtype, shape: Any, mode: str | None, *, checked: bool = False
) -> MemoryMappedTensor:
    """Map an existing file holding a tensor of ``dtype``/``shape`` (no creation, no growth).

    ``checked=True``: the caller already verified the file's size (and wants it shared
    when ``mode`` is None and the file is writable).
    """
    nbytes = shape_numel(shape) * dtype.itemsize
    if checked:
        effective = mode or ("r+" if os.access(path, os.W_OK) else "r")
        storage = (
            torch.UntypedStorage.from_file(path, shared=effective == "r+", nbytes=nbytes)
            if nbytes
            else torch.UntypedStorage(0)
        )
    else:
        storage, effective = _map_file(path, nbytes, mode)
    return MemoryMappedTensor._wrap(
        _view_of_storage(storage, dtype, shape), path, None, shape, effective
    )


def _tensor_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """The data of ``tensor`` as a contiguous 1-D ``uint8`` CPU tensor (nested: the buffer)."""
    t = tensor.detach()
    if t.is_nested:
        parts = [x.reshape(-1) for x in t.unbind()]
        t = torch.cat(parts) if parts else torch.empty(0, dtype=t.dtype)
    elif t.is_contiguous() and t.device.type == "cpu" and not (t.is_conj() or t.is_neg()):
        return t.view(-1).view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8)
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    if t.device.type != "cpu":
        t = t.to("cpu")
    t = t.contiguous().reshape(-1)
    return t.view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8)


def tensor_buffer(tensor: torch.Tensor) -> memoryview:
    """The bytes of ``tensor``'s data (as :func:`_tensor_bytes`) as a flat ``memoryview``;
    a contiguous CPU tensor of a NumPy dtype is viewed in place without torch ops."""
    if tensor.is_cpu and not tensor.requires_grad and tensor.is_contiguous():
        try:
            return memoryview(tensor.numpy()).cast("B")
        except (TypeError, RuntimeError):  # bfloat16, conj/neg bits, nested, 0-d...
            pass
    return memoryview(_tensor_bytes(tensor).numpy())


def write_tensor_file(
    path: str | Path,
    tensor: torch.Tensor | None,
    nbytes: int,
    *,
    exclusive: bool,
    fsync: bool,
    writeback: bool = False,
) -> None:
    """Write ``tensor``'s bytes to ``path`` (or ``nbytes`` zero bytes if ``tensor`` is None).

    Zero bytes are a sparse extension of the file (no data written); an existing file is
    overwritten in place and cut to ``nbytes``.
    """
    fd = _fs.create_file(path, exclusive=exclusive)
    try:
        if tensor is not None and nbytes:
            _fs.write_all(fd, tensor_buffer(tensor))
            if not exclusive:
                os.ftruncate(fd, nbytes)
            if writeback:
                _fs.start_writeback(fd)
        else:
            os.ftruncate(fd, nbytes)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _size_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The shape from ``(3, 4)``, ``((3, 4),)``, ``(torch.Size,)``, a nested-shape tensor
    or ``shape=``; :class:`TypeError` when none is given."""
    if "shape" in kwargs:
        if args:
            raise TypeError("give the shape either positionally or as shape=, not both")
        shape = kwargs.pop("shape")
    elif len(args) == 1 and isinstance(args[0], (Sequence, torch.Size, torch.Tensor)):
        shape = args[0]
    elif args and all(isinstance(a, int) for a in args):
        shape = args
    else:
        raise TypeError(
            f"expected a shape (ints, a sequence of ints or a nested-shape tensor), got {args!r}"
        )
    if _is_nested_shape(shape):
        return shape
    return _as_size(shape)


class MemoryMappedTensor(torch.Tensor):
    """A CPU tensor backed by a memory-mapped file or by anonymous shared memory.

    Build one with :meth:`from_tensor`, :meth:`from_filename`, :meth:`empty`,
    :meth:`zeros`, :meth:`ones`, :meth:`full` (and their ``*_like`` forms),
    :meth:`from_storage` or :meth:`from_handler`. Calling the class on a tensor or a list
    copies it into anonymous shared memory.

    >>> import os, pickle, tempfile, torch
    >>> from tensordict import MemoryMappedTensor
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     t = MemoryMappedTensor.from_tensor(torch.arange(4.0), filename=os.path.join(tmp, "x.memmap"))
    ...     view = t[1:3]                       # a view that still knows its file
    ...     _ = view.fill_(7.0)                 # writes reach the file
    ...     again = pickle.loads(pickle.dumps(t))  # the file name travels, not the data
    ...     print(again, view.filename == t.filename, type(t + 1).__name__)
    MemoryMappedTensor([0., 7., 7., 3.]) True Tensor
    """

    #: read by core, which does not import this class (first-class-dim indexing refuses
    #: memory-mapped entries)
    _is_memmap_tensor = True

    _filename: str | None
    _handler: _SharedMemoryHandler | None
    _parent_shape: Any
    _mode: str | None

    @staticmethod
    def __new__(
        cls,
        source: Any,
        *,
        dtype: torch.dtype | None = None,
        shape: Any = None,
        index: Any = None,
        device: Any = None,
        handler: _SharedMemoryHandler | None = None,
        filename: str | Path | None = None,
    ) -> MemoryMappedTensor:
        if device is not None and torch.device(device).type != "cpu":
            raise ValueError(
                f"MemoryMappedTensor lives on the CPU; device={device!r} is not supported "
                "(move the result with .to(device), which gives a plain tensor)."
            )
        if isinstance(source, torch.Tensor) and (filename is not None or handler is not None):
            out = cls._wrap(
                source, str(Path(filename).absolute()) if filename else None, handler, None, "r+"
            )
        else:
            tensor = source if isinstance(source, torch.Tensor) else torch.as_tensor(source)
            if dtype is not None:
                tensor = tensor.to(dtype)
            if shape is not None:
                tensor = tensor.reshape(_as_size(shape))
            out = cls.from_tensor(tensor)
        return out[index] if index is not None else out

    def __init__(
        self,
        source: Any,
        *,
        handler: _SharedMemoryHandler | None = None,
        dtype: torch.dtype | None = None,
        shape: Any = None,
        index: Any = None,
        device: Any = None,
        filename: str | Path | None = None,
    ) -> None:
        pass  # everything happens in __new__

    # ------------------------------------------------------------------ construction
    @classmethod
    def _wrap(
        cls,
        base: torch.Tensor,
        filename: str | None,
        handler: _SharedMemoryHandler | None,
        parent_shape: Any,
        mode: str | None,
    ) -> MemoryMappedTensor:
        out = torch.Tensor._make_subclass(cls, base)
        out._filename = filename
        out._handler = handler
        out._parent_shape = base.shape if parent_shape is None else parent_shape
        out._mode = mode
        return out

    def _rewrap(self, base: torch.Tensor) -> MemoryMappedTensor:
        return MemoryMappedTensor._wrap(
            base, self._filename, self._handler, self._parent_shape, self._mode
        )

    @classmethod
    def _allocate(
        cls,
        shape: Any,
        dtype: torch.dtype,
        filename: str | Path | None,
        existsok: bool,
        source: torch.Tensor | None = None,
        fill: Any = None,
    ) -> MemoryMappedTensor:
        """A new tensor of ``shape``/``dtype``: ``source``'s bytes, ``fill`` or zeros
        (a fresh file is zero-filled; fresh anonymous memory is filled explicitly)."""
        numel = shape_numel(shape)
        nbytes = numel * dtype.itemsize
        if filename is None:
            storage, zeroed = _new_shared_storage(nbytes)
            handler: _SharedMemoryHandler | None = _SharedMemoryHandler(storage)
            name = None
            mode = "r+"
            if source is not None:
                _view_of_storage(storage, dtype, [numel]).copy_(_flat(source, dtype))
            elif fill is not None and not (zeroed and fill == 0):
                _view_of_storage(storage, dtype, [numel]).fill_(fill)
        else:
            path = Path(filename).absolute()
            write_tensor_file(path, source, nbytes, exclusive=not existsok, fsync=False)
            storage, mode = _map_file(str(path), nbytes, "r+")
            handler, name = None, str(path)
            if fill is not None and fill != 0:
                _view_of_storage(storage, dtype, [numel]).fill_(fill)
        return cls._wrap(_view_of_storage(storage, dtype, shape), name, handler, shape, mode)

    @classmethod
    def from_tensor(
        cls,
        input: torch.Tensor,
        *,
        filename: Path | str | None = None,
        existsok: bool = False,
        copy_existing: bool = False,
        copy_data: bool = True,
        shape: torch.Size | torch.Tensor | None = None,
    ) -> MemoryMappedTensor:
        """A memory-mapped copy of ``input`` (in ``filename``, or in shared memory).

        A ``MemoryMappedTensor`` is returned as it is when ``filename`` is None and it has
        no file, or when ``filename`` is its own file. Copying a file-backed tensor to
        another file needs ``copy_existing=True``. ``copy_data=False`` allocates without
        copying; ``shape`` broadcasts ``input`` to another shape (or gives the per-row
        shapes of a nested result).

        >>> import torch
        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.from_tensor(torch.ones(2, dtype=torch.int8))
        MemoryMappedTensor([1, 1], dtype=torch.int8)
        """
        if isinstance(input, MemoryMappedTensor):
            if filename is None and input._filename is None:
                return input
            if filename is not None and input._filename is not None:
                if str(Path(filename).absolute()) == input._filename and input._mode == "r+":
                    return input
                if not copy_existing:
                    raise RuntimeError(
                        f"A filename was provided but the tensor already has a file associated "
                        f"({input._filename!r}); pass copy_existing=True to copy it to "
                        f"{str(filename)!r}."
                    )
        elif not isinstance(input, torch.Tensor):
            raise TypeError(
                f"MemoryMappedTensor.from_tensor expects a torch.Tensor, got {type(input).__name__}"
                " (convert NumPy arrays with torch.from_numpy first)."
            )
        check_not_sparse(input, "MemoryMappedTensor.from_tensor: the input")
        if input.requires_grad:
            raise RuntimeError(
                "MemoryMappedTensor.from_tensor: the input requires gradients; pass "
                "tensor.detach() (memory-mapped tensors do not track gradients)."
            )
        target_shape: Any
        if shape is not None:
            target_shape = shape if _is_nested_shape(shape) else _as_size(shape)
        elif input.is_nested:
            target_shape = input._nested_tensor_size()
        else:
            target_shape = input.shape
        source: torch.Tensor | None = None
        if copy_data:
            source = input
            if not _is_nested_shape(target_shape) and input.shape != target_shape:
                source = input.expand(target_shape)
        return cls._allocate(target_shape, input.dtype, filename, existsok, source=source)

    @classmethod
    def from_filename(
        cls,
        filename: str | Path,
        dtype: torch.dtype,
        shape: Any,
        index: Any = None,
        mode: str | None = None,
    ) -> MemoryMappedTensor:
        """Map an existing file of raw data; a missing file raises ``FileNotFoundError``
        (``empty``/``zeros``/``from_tensor`` with ``filename=`` create files).

        ``mode="r+"`` maps the file shared (writes reach it); ``"r"`` maps it read-only:
        in-place writes raise ``RuntimeError`` (``clone()`` gives a writable copy).
        ``None`` picks ``"r+"`` when the file is writable, else ``"r"``.

        >>> import os, tempfile, torch
        >>> from tensordict import MemoryMappedTensor
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     name = os.path.join(tmp, "x.memmap")
        ...     _ = MemoryMappedTensor.from_tensor(torch.arange(6), filename=name)
        ...     print(MemoryMappedTensor.from_filename(name, torch.int64, (2, 3), index=1))
        MemoryMappedTensor([3, 4, 5])
        """
        dtype = parse_dtype(dtype)
        path = Path(filename).absolute()
        if not _is_nested_shape(shape):
            shape = _as_size(shape)
        nbytes = shape_numel(shape) * dtype.itemsize
        if not path.exists():
            raise FileNotFoundError(
                f"from_filename maps an existing file, and {str(path)!r} does not exist; create "
                "one with MemoryMappedTensor.empty/zeros(..., filename=...) or from_tensor(..., "
                "filename=...)."
            )
        storage, effective = _map_file(str(path), nbytes, mode)
        out = cls._wrap(_view_of_storage(storage, dtype, shape), str(path), None, shape, effective)
        return out[index] if index is not None else out

    @classmethod
    def from_handler(
        cls,
        handler: _SharedMemoryHandler,
        dtype: torch.dtype,
        shape: Any,
        index: Any = None,
    ) -> MemoryMappedTensor:
        """A tensor over the anonymous shared memory ``handler`` (see :attr:`_handler`).

        >>> import torch
        >>> from tensordict import MemoryMappedTensor
        >>> t = MemoryMappedTensor.from_tensor(torch.arange(4))
        >>> MemoryMappedTensor.from_handler(t._handler, torch.int64, [2, 2], index=0)
        MemoryMappedTensor([0, 1])
        """
        dtype = parse_dtype(dtype)
        if not _is_nested_shape(shape):
            shape = _as_size(shape)
        needed = shape_numel(shape) * dtype.itemsize
        if handler.size < needed:
            raise RuntimeError(
                f"from_handler: the shared memory holds {handler.size} bytes but dtype "
                f"{dtype} and shape {shape} need {needed}."
            )
        out = cls._wrap(_view_of_storage(handler.storage, dtype, shape), None, handler, shape, "r+")
        return out[index] if index is not None else out

    @classmethod
    def from_storage(
        cls,
        storage: torch.UntypedStorage | torch.TypedStorage,
        *,
        shape: Any = None,
        dtype: torch.dtype | None = None,
        device: Any = None,
        index: Any = None,
        filename: Path | str | None = None,
        handler: _SharedMemoryHandler | None = None,
    ) -> MemoryMappedTensor:
        """A tensor viewing ``storage`` without copying (keeps the storage's file, if any).

        >>> import torch
        >>> from tensordict import MemoryMappedTensor
        >>> base = MemoryMappedTensor.from_tensor(torch.arange(6.0))
        >>> MemoryMappedTensor.from_storage(base.untyped_storage(), dtype=torch.float32, shape=(2, 3))[1]
        MemoryMappedTensor([3., 4., 5.])
        """
        if device is not None and torch.device(device).type != "cpu":
            raise ValueError(f"MemoryMappedTensor lives on the CPU; got device={device!r}")
        if isinstance(storage, torch.TypedStorage):
            if dtype is None:
                dtype = storage.dtype
            storage = storage.untyped_storage()
        dtype = torch.int64 if dtype is None else parse_dtype(dtype)
        own = getattr(storage, "filename", None)
        if filename is not None and own is not None:
            if str(Path(filename).absolute()) != str(Path(own).absolute()):
                raise RuntimeError(
                    f"from_storage: the storage is mapped from {own!r} but filename={str(filename)!r}"
                )
        name = own if own is not None else filename
        if shape is None:
            shape = torch.Size([storage.nbytes() // dtype.itemsize])
        elif not _is_nested_shape(shape):
            shape = _as_size(shape)
        out = cls._wrap(
            _view_of_storage(storage, dtype, shape),
            str(Path(name).absolute()) if name is not None else None,
            handler,
            shape,
            "r+",
        )
        return out[index] if index is not None else out

    @classmethod
    def empty(cls, *args: Any, **kwargs: Any) -> MemoryMappedTensor:
        """A new tensor with unspecified (in practice zero) content.

        Accepts ``empty(3, 4)``, ``empty((3, 4))`` or ``empty(shape=...)`` with keyword
        arguments ``dtype``, ``device`` (CPU only), ``filename`` and ``existsok``.

        >>> import torch
        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.empty(2, 3, dtype=torch.int32).shape
        torch.Size([2, 3])
        """
        return cls._constant(args, kwargs, None, "empty")

    @classmethod
    def zeros(cls, *args: Any, **kwargs: Any) -> MemoryMappedTensor:
        """A new zero-filled tensor (same arguments as :meth:`empty`).

        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.zeros(2)
        MemoryMappedTensor([0., 0.])
        """
        return cls._constant(args, kwargs, 0, "zeros")

    @classmethod
    def ones(cls, *args: Any, **kwargs: Any) -> MemoryMappedTensor:
        """A new tensor filled with ones (same arguments as :meth:`empty`).

        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.ones((2,))
        MemoryMappedTensor([1., 1.])
        """
        return cls._constant(args, kwargs, 1, "ones")

    @classmethod
    def full(cls, *args: Any, **kwargs: Any) -> MemoryMappedTensor:
        """A new tensor filled with ``fill_value`` (same arguments as :meth:`empty`).

        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.full((2,), fill_value=3.5)
        MemoryMappedTensor([3.5000, 3.5000])
        """
        if "fill_value" not in kwargs:
            if len(args) == 2 and isinstance(args[0], (Sequence, torch.Size)):
                args, kwargs = (args[0],), {**kwargs, "fill_value": args[1]}
            else:
                raise TypeError("MemoryMappedTensor.full needs fill_value=")
        fill = kwargs.pop("fill_value")
        return cls._constant(args, kwargs, fill, "full")

    @classmethod
    def _constant(
        cls, args: tuple[Any, ...], kwargs: dict[str, Any], fill: Any, name: str
    ) -> MemoryMappedTensor:
        kwargs = dict(kwargs)
        shape = _size_args(args, kwargs)
        dtype = kwargs.pop("dtype", None) or torch.get_default_dtype()
        device = kwargs.pop("device", None)
        filename = kwargs.pop("filename", None)
        existsok = kwargs.pop("existsok", False)
        if kwargs:
            raise TypeError(f"MemoryMappedTensor.{name} got unexpected arguments {sorted(kwargs)}")
        if device is not None and torch.device(device).type != "cpu":
            raise RuntimeError(
                f"MemoryMappedTensor.{name}: memory-mapped tensors live on the CPU, "
                f"got device={device!r}."
            )
        return cls._allocate(shape, parse_dtype(dtype), filename, existsok, fill=fill)

    @classmethod
    def empty_like(
        cls, input: torch.Tensor, *, filename: Path | str | None = None
    ) -> MemoryMappedTensor:
        """A new tensor of ``input``'s shape and dtype.

        >>> import torch
        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.empty_like(torch.ones(2, 2)).shape
        torch.Size([2, 2])
        """
        return cls.from_tensor(input, filename=filename, copy_data=False, copy_existing=True)

    @classmethod
    def zeros_like(
        cls, input: torch.Tensor, *, filename: Path | str | None = None
    ) -> MemoryMappedTensor:
        """A new zero-filled tensor of ``input``'s shape and dtype.

        >>> import torch
        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.zeros_like(torch.ones(2))
        MemoryMappedTensor([0., 0.])
        """
        return cls._like(input, filename, 0)

    @classmethod
    def ones_like(
        cls, input: torch.Tensor, *, filename: Path | str | None = None
    ) -> MemoryMappedTensor:
        """A new tensor of ones of ``input``'s shape and dtype.

        >>> import torch
        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.ones_like(torch.zeros(2, dtype=torch.int64))
        MemoryMappedTensor([1, 1])
        """
        return cls._like(input, filename, 1)

    @classmethod
    def full_like(
        cls, input: torch.Tensor, fill_value: Any, *, filename: Path | str | None = None
    ) -> MemoryMappedTensor:
        """A new tensor of ``input``'s shape and dtype filled with ``fill_value``.

        >>> import torch
        >>> from tensordict import MemoryMappedTensor
        >>> MemoryMappedTensor.full_like(torch.zeros(2), 2.0)
        MemoryMappedTensor([2., 2.])
        """
        return cls._like(input, filename, fill_value)

    @classmethod
    def _like(
        cls, input: torch.Tensor, filename: Path | str | None, fill: Any
    ) -> MemoryMappedTensor:
        shape = input._nested_tensor_size() if input.is_nested else input.shape
        return cls._allocate(shape, input.dtype, filename, False, fill=fill)

    # ------------------------------------------------------------------ attributes
    @property
    def filename(self) -> str:
        """The absolute path of the file; :class:`RuntimeError` for shared-memory tensors."""
        if self._filename is None:
            raise RuntimeError("The MemoryMappedTensor has no file associated.")
        return self._filename

    @filename.setter
    def filename(self, value: str | Path) -> None:
        if self._filename is not None:
            raise RuntimeError(
                f"the MemoryMappedTensor already has a file associated ({self._filename!r})."
            )
        self._filename = str(Path(value).absolute())

    @property
    def parent_shape(self) -> Any:
        """The shape of the whole mapped tensor this one is a view of."""
        return self._parent_shape

    # ------------------------------------------------------------------ torch protocol
    @classmethod
    def __torch_function__(
        cls,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        name = getattr(func, "__name__", "")
        if _writes(name) or (kwargs and "out" in kwargs):
            _refuse_read_only_write(name, args, kwargs)
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **(kwargs or {}))
        src = args[0] if args and isinstance(args[0], MemoryMappedTensor) else None
        if src is not None and (func in _KEEP_MEMMAP or src._mode in ("r", COPY_ON_WRITE)):
            # a view keeps the file; any view of a read-only mapping stays read-only
            strict = func not in _KEEP_MEMMAP
            if isinstance(out, torch.Tensor):
                return _keep(src, out, strict)
            if isinstance(out, (tuple, list)):
                return type(out)(
                    _keep(src, o, strict) if isinstance(o, torch.Tensor) else o for o in out
                )
        return out

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        nested = None
        if self.is_nested:
            nested = (
                self._nested_tensor_size(),
                self._nested_tensor_strides(),
                self._nested_tensor_storage_offsets(),
            )
            geometry: tuple[Any, ...] = ()
        else:
            geometry = (tuple(self.shape), tuple(self.stride()), self.storage_offset())
        if self._filename is not None:
            nbytes = self.untyped_storage().nbytes()
            return (
                _rebuild_from_file,
                (
                    self._filename,
                    self._mode,
                    self.dtype,
                    nbytes,
                    geometry,
                    nested,
                    self._parent_shape,
                ),
            )
        if self._handler is not None:
            return (
                _rebuild_from_handler,
                (self._handler, self.dtype, geometry, nested, self._parent_shape),
            )
        plain = self.as_subclass(torch.Tensor).clone()
        return (_rebuild_copy, (plain,))

    def __deepcopy__(self, memo: dict[int, Any]) -> torch.Tensor:
        return self.as_subclass(torch.Tensor).clone()


def _keep(src: MemoryMappedTensor, out: torch.Tensor, strict: bool = False) -> torch.Tensor:
    """``out`` as a MemoryMappedTensor of ``src``'s file when it views ``src``'s memory
    (``strict``: not when that memory is empty, which any new empty tensor shares)."""
    if isinstance(out, MemoryMappedTensor):
        return out
    try:
        ptr = src.untyped_storage().data_ptr()
        same = out.untyped_storage().data_ptr() == ptr and not (strict and ptr == 0)
    except (RuntimeError, NotImplementedError):
        same = False
    return src._rewrap(out) if same else out


def _writes(name: str) -> bool:
    """Whether the torch op ``name`` writes into its first argument (``add_``,
    ``__setitem__``, ``_foreach_mul_``…; not ``__repr__`` or ``requires_grad_``)."""
    if name[-1:] != "_":
        return False
    if name[-2:] == "__":
        return name in _INPLACE_DUNDERS
    return name not in _METADATA_INPLACE


def _refuse_read_only_write(name: str, args: tuple[Any, ...], kwargs: Any) -> None:
    """Raise if the op ``name`` writes into a tensor mapped read-only (copy-on-write: the
    write would never reach the file)."""
    targets: list[Any] = []
    if kwargs and "out" in kwargs:
        out = kwargs["out"]
        targets.extend(out if isinstance(out, (tuple, list)) else [out])
    if args and _writes(name):
        first = args[0]
        targets.extend(first if isinstance(first, (tuple, list)) else [first])
    for target in targets:
        if isinstance(target, MemoryMappedTensor) and target._mode == "r":
            raise RuntimeError(
                f"{name}: cannot write into a tensor mapped read-only from "
                f"{target._filename!r} (mode='r', or a file this process cannot write): the "
                "mapping is copy-on-write, so the write would never reach the file. Map it "
                "with mode='r+' to write to the file, or write into a copy (.clone())."
            )


def _flat(source: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``source``'s elements, flattened in order (a nested tensor's components joined)."""
    return _tensor_bytes(source).view(dtype)


def _restore(
    storage: torch.UntypedStorage, dtype: torch.dtype, geometry: tuple[Any, ...], nested: Any
) -> torch.Tensor:
    if nested is not None:
        sizes, strides, offsets = nested
        flat = torch.empty(0, dtype=torch.uint8).set_(storage)
        buffer = flat[: flat.numel() - flat.numel() % dtype.itemsize].view(dtype)
        return torch._nested_view_from_buffer(buffer, sizes, strides, offsets)
    size, stride, offset = geometry
    return torch.empty(0, dtype=dtype).set_(storage, offset, size, stride)


def _rebuild_from_file(
    filename: str,
    mode: str | None,
    dtype: torch.dtype,
    nbytes: int,
    geometry: tuple[Any, ...],
    nested: Any,
    parent_shape: Any,
) -> MemoryMappedTensor:
    storage, effective = _map_file(filename, nbytes, mode)
    return MemoryMappedTensor._wrap(
        _restore(storage, dtype, geometry, nested), filename, None, parent_shape, effective
    )


def _rebuild_from_handler(
    handler: _SharedMemoryHandler,
    dtype: torch.dtype,
    geometry: tuple[Any, ...],
    nested: Any,
    parent_shape: Any,
) -> MemoryMappedTensor:
    return MemoryMappedTensor._wrap(
        _restore(handler.storage, dtype, geometry, nested), None, handler, parent_shape, "r+"
    )


def _rebuild_copy(plain: torch.Tensor) -> MemoryMappedTensor:
    return MemoryMappedTensor.from_tensor(plain)
