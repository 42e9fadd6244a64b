"""Forwarders: ``TensorDict`` methods whose implementation lives in a sibling distribution.

Each row of :data:`FORWARDERS` becomes a short method on ``TensorDictBase`` that imports
the owning subpackage on first call and calls its hook, passing the tensordict first
(for instance methods). A missing sibling raises :class:`ModuleNotFoundError` naming
the ``pip install`` that fixes it::

    >>> from tensordict import TensorDict
    >>> try:
    ...     TensorDict().memmap("/tmp/x")
    ... except ModuleNotFoundError as err:
    ...     assert "pip install tensordict-memmap" in str(err)
    ... except NotImplementedError:
    ...     pass  # the sibling is installed but does not provide it yet
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensordict._plugins import siblings as _siblings

# (method name, subpackage, hook in the subpackage, kind, summary)
# kind: "method" passes the tensordict as first argument, "classmethod" does not,
# "property" is a read-only property whose getter is the hook.
FORWARDERS: tuple[tuple[str, str, str, str, str], ...] = (
    (
        "memmap",
        "memmap",
        "td_memmap",
        "method",
        "Write the tensordict to memory-mapped storage and return the memory-mapped copy.",
    ),
    (
        "memmap_",
        "memmap",
        "td_memmap_",
        "method",
        "Move the tensordict to memory-mapped storage in place.",
    ),
    (
        "memmap_like",
        "memmap",
        "td_memmap_like",
        "method",
        "A memory-mapped tensordict of the same structure; contents are not copied.",
    ),
    (
        "memmap_refresh_",
        "memmap",
        "td_memmap_refresh_",
        "method",
        "Re-read memory-mapped metadata from disk.",
    ),
    (
        "make_memmap",
        "memmap",
        "td_make_memmap",
        "method",
        "Create an empty memory-mapped tensor at a key.",
    ),
    (
        "make_memmap_from_storage",
        "memmap",
        "td_make_memmap_from_storage",
        "method",
        "Create a memory-mapped tensor at a key from an existing storage.",
    ),
    (
        "make_memmap_from_tensor",
        "memmap",
        "td_make_memmap_from_tensor",
        "method",
        "Create a memory-mapped copy of a tensor at a key.",
    ),
    ("save", "memmap", "td_save", "method", "Save the tensordict to disk."),
    ("dumps", "memmap", "td_save", "method", "Save the tensordict to disk (alias of save)."),
    ("load_", "memmap", "td_load_", "method", "Load saved content into this tensordict, in place."),
    (
        "load_memmap_",
        "memmap",
        "td_load_memmap_",
        "method",
        "Load memory-mapped content into this tensordict, in place.",
    ),
    (
        "saved_path",
        "memmap",
        "td_saved_path",
        "property",
        "The folder a memory-mapped tensordict lives in.",
    ),
    ("to_h5", "memmap", "td_to_h5", "method", "Write the tensordict to an HDF5 file."),
    ("load", "memmap", "load", "classmethod", "Load a saved tensordict from disk."),
    (
        "load_memmap",
        "memmap",
        "load_memmap",
        "classmethod",
        "Load a memory-mapped tensordict from disk.",
    ),
    ("from_h5", "memmap", "td_from_h5", "classmethod", "Open an HDF5 file as a tensordict."),
    (
        "to_parquet",
        "memmap",
        "td_to_parquet",
        "method",
        "Write the tensordict to a Parquet file, one column per leaf (extra parquet).",
    ),
    (
        "from_parquet",
        "memmap",
        "from_parquet",
        "classmethod",
        "Read a Parquet file (only the requested columns) into a tensordict (extra parquet).",
    ),
    (
        "to_csv",
        "memmap",
        "td_to_csv",
        "method",
        "Write the tensordict to a CSV file, one column per leaf (extra csv).",
    ),
    ("from_csv", "memmap", "from_csv", "classmethod", "Read a CSV file into a tensordict."),
    (
        "to_json",
        "memmap",
        "td_to_json",
        "method",
        "Write the tensordict to a JSON (or JSON lines) file, one record per row.",
    ),
    ("from_json", "memmap", "from_json", "classmethod", "Read a JSON file into a tensordict."),
    (
        "to_zarr",
        "memmap",
        "td_to_zarr",
        "method",
        "Write the tensordict to a zarr store as chunked arrays (extra zarr).",
    ),
    (
        "from_zarr",
        "memmap",
        "td_from_zarr",
        "classmethod",
        "Open a zarr store as a lazily read tensordict (extra zarr).",
    ),
    (
        "to_mds",
        "memmap",
        "td_to_mds",
        "method",
        "Write each row as one sample of a MosaicML Streaming (MDS) dataset (extra mds).",
    ),
    (
        "to_module",
        "nn",
        "td_to_module",
        "method",
        "Write parameters and buffers into a module (also a context manager).",
    ),
    (
        "from_module",
        "nn",
        "td_from_module",
        "classmethod",
        "Collect the parameters and buffers of a module.",
    ),
    (
        "from_modules",
        "nn",
        "from_modules",
        "classmethod",
        "Stack the parameters and buffers of several modules.",
    ),
    ("send", "distributed", "td_send", "method", "Send the tensordict to a distributed peer."),
    (
        "isend",
        "distributed",
        "td_isend",
        "method",
        "Send the tensordict to a peer without blocking.",
    ),
    ("recv", "distributed", "td_recv", "method", "Receive into this tensordict from a peer."),
    (
        "irecv",
        "distributed",
        "td_irecv",
        "method",
        "Receive into this tensordict without blocking.",
    ),
    ("asend", "distributed", "td_asend", "method", "Send asynchronously."),
    ("arecv", "distributed", "td_arecv", "method", "Receive asynchronously."),
    (
        "init_remote",
        "distributed",
        "td_init_remote",
        "method",
        "Send the structure to a peer so it can allocate a matching tensordict.",
    ),
    (
        "from_remote_init",
        "distributed",
        "from_remote_init",
        "classmethod",
        "Allocate a tensordict from a peer's init_remote message.",
    ),
    ("broadcast", "distributed", "td_broadcast", "method", "Broadcast over a process group."),
    ("reduce", "distributed", "td_reduce", "method", "Reduce onto one rank."),
    ("all_reduce", "distributed", "td_all_reduce", "method", "All-reduce over a process group."),
    ("all_gather", "distributed", "td_all_gather", "method", "All-gather over a process group."),
    (
        "to_store",
        "distributed",
        "td_to_store",
        "method",
        "Upload the tensordict to a Redis server; returns a TensorDictStore backed by it.",
    ),
    (
        "map",
        "distributed",
        "td_map",
        "method",
        "Apply a function to chunks of the tensordict in worker processes.",
    ),
    (
        "map_iter",
        "distributed",
        "td_map_iter",
        "method",
        "Iterate over a function applied to chunks in worker processes.",
    ),
)


def _make(
    name: str, subpackage: str, hook: str, kind: str, summary: str
) -> Callable[..., Any] | classmethod[Any, ..., Any] | property:
    what = f"TensorDict.{name}"
    dist = _siblings.DISTRIBUTIONS[subpackage]
    doc = f"{summary}\n\nProvided by ``{dist}`` (``pip install {dist}``); forwards to ``tensordict.{subpackage}.{hook}``."
    method: Callable[..., Any]
    if kind in ("method", "property"):

        def instance_method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return _siblings.forward(subpackage, hook, what, self, *args, **kwargs)

        method = instance_method
    else:

        def class_method(cls: Any, *args: Any, **kwargs: Any) -> Any:
            return _siblings.forward(subpackage, hook, what, *args, **kwargs)

        method = class_method
    method.__name__ = method.__qualname__ = name
    method.__doc__ = doc
    if kind == "property":
        return property(method, doc=doc)
    return classmethod(method) if kind == "classmethod" else method


#: the forwarders a non-tensor leaf (``NonTensorData``, ``NonTensorStack``) gets: saving
#: and loading one on its own, as the reference allows
NON_TENSOR_FORWARDERS = frozenset(
    {"memmap", "memmap_", "memmap_like", "save", "dumps", "load_memmap", "load", "saved_path"}
)


def is_memmap(td: Any) -> bool:
    """Whether every leaf of ``td`` is memory-mapped (``TensorDict.is_memmap``); ``False``
    when ``tensordict-memmap`` is absent.

    >>> import torch
    >>> from tensordict import NonTensorData, TensorDict
    >>> TensorDict({"a": torch.zeros(2)}, [2]).is_memmap(), NonTensorData("x").is_memmap()
    (False, False)
    """
    try:
        hook = _siblings.sibling_attr("memmap", "td_is_memmap", "TensorDict.is_memmap")
    except (ModuleNotFoundError, NotImplementedError):
        return False
    return bool(hook(td))


def install(cls: type, names: frozenset[str] | None = None) -> None:
    """Add the forwarders of :data:`FORWARDERS` to ``cls`` (those in ``names``, or all)."""
    for row in FORWARDERS:
        if names is None or row[0] in names:
            setattr(cls, row[0], _make(*row))
