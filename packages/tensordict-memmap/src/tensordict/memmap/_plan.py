"""What a save writes, computed before anything touches the disk.

:func:`plan` walks a tensor collection (dense, nested, lazy stacks, non-tensor values,
tensorclass instances) once and returns

* the tree of :class:`Node` objects that rebuilds the result afterwards (mapping the
  written files), and
* a :class:`Plan`: folders to create, tensor files to write (:class:`Job`) and small
  files (``meta.json``, pickles) — relative paths only, so the same plan feeds a
  staging folder, the target folder itself or a single-file archive.

The layout is the reference library's: one ``meta.json`` per level, one
``<encoded key>.memmap`` file per tensor (plus ``<key>.shape.memmap`` for nested
tensors), a sub-folder per nested tensordict, non-tensor value, lazy-stack member
(``0``, ``1``, …) and tensorclass (``_tensordict``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict
from tensordict._plugins.api import is_tensorclass
from tensordict.base import NO_DEFAULT, TensorDictBase
from tensordict.memmap import _classes, _codec, _fs
from tensordict.memmap._tensor import MemoryMappedTensor, check_not_sparse

Rel = tuple[str, ...]
#: Fields of a tensordict level's meta.json that are not entries. User keys with these
#: names are stored under ``RESERVED_ENTRIES`` instead (the reference drops them).
META_FIELDS = frozenset(
    {"shape", "device", "_type", "_format_version", "_class", "_names", "_entries_reserved"}
)
RESERVED_ENTRIES = "_entries_reserved"
META = "meta.json"
TC_INNER = "_tensordict"


@dataclass
class Job:
    """One tensor file: ``tensor``'s bytes (zeros when None), or a hard link to ``link``."""

    rel: Rel
    tensor: torch.Tensor | None
    nbytes: int
    link: str | None = None


@dataclass
class Plan:
    """Everything a save writes, as paths relative to the target."""

    dirs: list[Rel] = field(default_factory=lambda: [()])
    jobs: list[Job] = field(default_factory=list)
    small: dict[Rel, bytes] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return sum(job.nbytes for job in self.jobs)

    def top_names(self) -> set[str]:
        """Names of the entries the save creates directly in the target folder."""
        names = {rel[0] for rel in self.dirs if rel}
        names |= {job.rel[0] for job in self.jobs}
        names |= {rel[0] for rel in self.small}
        return names


@dataclass
class Node:
    """How to rebuild one level (or leaf) of the result from the written files."""

    kind: str  # "leaf", "td", "lazy", "nontensor", "tc"
    source: Any
    rel: Rel = ()
    children: dict[str, Node] = field(default_factory=dict)
    members: list[Node] = field(default_factory=list)
    dtype: torch.dtype | None = None
    shape: Any = None
    keep: torch.Tensor | None = None
    like: bool = False


def _json(meta: dict[str, Any]) -> bytes:
    return json.dumps(meta).encode("utf-8")


class Planner:
    """Walks a collection and fills a :class:`Plan`.

    Args:
        final_root: where the files will live once committed (None: no files, the result
            lives in anonymous shared memory).
        like: allocate zero-filled tensors instead of copying data.
        copy_existing: allow copying tensors that already have another file.
        robust_key: encode keys into safe file names (see :func:`~._fs.encode_key`).
        allow_pickle: store non-JSON values with pickle instead of raising.
    """

    def __init__(
        self,
        final_root: Path | None,
        *,
        like: bool,
        copy_existing: bool,
        robust_key: bool,
        allow_pickle: bool,
    ) -> None:
        self.final_root = final_root
        self.like = like
        self.copy_existing = copy_existing
        self.robust = robust_key
        self.allow_pickle = allow_pickle
        self.plan = Plan()

    # ------------------------------------------------------------------ collections
    def collection(self, obj: Any, rel: Rel) -> Node:
        """Plan ``obj`` (any tensor collection) into folder ``rel``."""
        if is_tensorclass(obj):
            return self._tensorclass(obj, rel)
        if isinstance(obj, (NonTensorData, NonTensorStack)):
            return self._non_tensor(obj, rel)
        if isinstance(obj, LazyStackedTensorDict):
            return self._lazy(obj, rel)
        if isinstance(obj, TensorDictBase):
            return self._dense(obj, rel)
        raise TypeError(
            f"cannot save an object of type {type(obj).__name__}: expected a tensordict, a "
            "lazy stack, a tensorclass instance or a non-tensor value."
        )

    def _dense(self, td: TensorDictBase, rel: Rel) -> Node:
        node = Node("td", td, rel)
        meta: dict[str, Any] = {}
        reserved: dict[str, Any] = {}
        used: dict[str, str] = {}
        for key in list(td.keys()):
            value = td._get_str(key, NO_DEFAULT)
            entries = reserved if key in META_FIELDS else meta
            if isinstance(value, torch.Tensor):
                node.children[key] = self._leaf(key, value, rel, entries, used)
            else:
                if not (
                    isinstance(value, (TensorDictBase, NonTensorData, NonTensorStack))
                    or is_tensorclass(value)
                ):
                    raise TypeError(f"cannot save the entry {key!r} of type {type(value).__name__}")
                name = _fs.encode_key(key, robust=self.robust, directory=True)
                self._claim(used, name, key, rel)
                entries[key] = {"type": _classes.short_name(type(value))}
                node.children[key] = self.collection(value, (*rel, name))
        meta["shape"] = list(td.batch_size)
        meta["device"] = "cpu"
        cls = type(td) if not _is_view_class(td) else TensorDict
        meta.update(_classes.type_fields(cls))
        names = _names(td)
        if names is not None:
            meta["_names"] = names
        if reserved:
            meta[RESERVED_ENTRIES] = reserved
        self._level(rel, meta)
        return node

    def _lazy(self, td: LazyStackedTensorDict, rel: Rel) -> Node:
        node = Node("lazy", td, rel)
        meta = dict(_classes.type_fields(LazyStackedTensorDict))
        meta["stack_dim"] = td.stack_dim
        meta["stack_dim_name"] = getattr(td, "_td_dim_name", None)
        meta["shape"] = list(td.batch_size)
        meta["count"] = len(td.tensordicts)
        self._level(rel, meta)
        for i, member in enumerate(td.tensordicts):
            node.members.append(self.collection(member, (*rel, str(i))))
        return node

    def _tensorclass(self, obj: Any, rel: Rel) -> Node:
        node = Node("tc", obj, rel)
        inner = obj._tensordict
        extra = getattr(obj, "_non_tensordict", None) or {}
        if extra:
            merged = (
                dict(inner._tensordict) if isinstance(inner, TensorDict) else dict(inner.items())
            )
            for name, value in extra.items():
                merged.setdefault(name, NonTensorData(value, batch_size=inner.batch_size))
            inner = TensorDict(merged, batch_size=inner.batch_size, names=_names(inner))
        self._level(rel, _classes.type_fields(type(obj)))
        node.children[TC_INNER] = self.collection(inner, (*rel, TC_INNER))
        return node

    def _non_tensor(self, obj: NonTensorData | NonTensorStack, rel: Rel) -> Node:
        if self.final_root is None:
            return Node("nontensor", obj, rel)
        where = "/".join(rel) or "the non-tensor value"
        meta = dict(_classes.type_fields(type(obj)))
        if isinstance(obj, NonTensorStack):
            values = obj.tolist()
            meta["stack_dim"] = obj.stack_dim
            meta["device"] = None if obj.device is None else str(obj.device)
            if _codec.is_json_exact(values):
                meta["data"] = values
            else:
                self.plan.small[(*rel, "pickle.pkl")] = _codec.pickle_or_refuse(
                    values, self.allow_pickle, where
                )
                meta["data"] = "pickle.pkl"
            meta["shape"] = list(obj.batch_size)
        else:
            if _codec.is_json_exact(obj.data):
                meta["data"] = obj.data
            else:
                self.plan.small[(*rel, "other.pickle")] = _codec.pickle_or_refuse(
                    {"data": obj.data}, self.allow_pickle, where, shown=obj.data
                )
            meta["_metadata"] = None
            meta["_is_non_tensor"] = True
            if not rel:  # saved on its own: no parent gives the batch size
                meta["shape"] = list(obj.batch_size)
        self._level(rel, meta)
        return Node("nontensor", obj, rel)

    # ------------------------------------------------------------------ leaves
    def _leaf(
        self, key: str, tensor: torch.Tensor, rel: Rel, meta: dict[str, Any], used: dict[str, str]
    ) -> Node:
        where = "/".join((*rel, key)) if rel else key
        check_not_sparse(tensor, f"the entry {where!r}")
        name = _fs.encode_key(key, robust=self.robust)
        self._claim(used, f"{name}.memmap", key, rel)
        nested = tensor.is_nested
        if nested:
            sizes = tensor._nested_tensor_size()
            self._claim(used, f"{name}.shape.memmap", key, rel)
            numel = int(sizes.prod(-1).sum()) if sizes.numel() else 0
            shape: Any = sizes
            meta_shape = list(sizes.shape)
        else:
            numel = tensor.numel()
            shape = tensor.shape
            meta_shape = list(tensor.shape)
        meta[key] = {
            "device": "cpu" if tensor.is_cpu else str(tensor.device),
            "shape": meta_shape,
            "dtype": str(tensor.dtype),
            "is_nested": nested,
        }
        file_rel = (*rel, f"{name}.memmap")
        nbytes = numel * tensor.dtype.itemsize
        node = Node("leaf", tensor, file_rel, dtype=tensor.dtype, shape=shape, like=self.like)
        if self.final_root is None:
            return node
        link = None
        source: torch.Tensor | None = None if self.like else tensor.detach()
        if (
            isinstance(tensor, MemoryMappedTensor)
            and tensor._filename is not None
            and not self.like
            and self.final_root is not None
        ):
            final = str(self.final_root.joinpath(*file_rel))
            if tensor._filename == final:
                if _whole_file(tensor, nbytes):
                    link, node.keep = final, tensor
            elif not self.copy_existing:
                raise RuntimeError(
                    f"A filename was provided but the tensor already has a file associated: "
                    f"the entry {key!r} is mapped from {tensor._filename!r}. Pass "
                    "copy_existing=True to copy it to the new location."
                )
        self.plan.jobs.append(Job(file_rel, source, nbytes, link))
        if nested:
            self.plan.jobs.append(
                Job((*rel, f"{name}.shape.memmap"), sizes.to(torch.int64), sizes.numel() * 8)
            )
        return node

    # ------------------------------------------------------------------ helpers
    def _level(self, rel: Rel, meta: dict[str, Any]) -> None:
        if self.final_root is None:
            return
        if rel and rel not in self.plan.dirs:
            self.plan.dirs.append(rel)
        self.plan.small[(*rel, META)] = _json(meta)

    @staticmethod
    def _claim(used: dict[str, str], name: str, key: str, rel: Rel) -> None:
        other = used.get(name)
        if other is not None:
            raise ValueError(
                f"the keys {other!r} and {key!r} of {'/'.join(rel) or 'the root'} would be "
                f"stored in the same file {name!r}; rename one of them."
            )
        used[name] = key


def _whole_file(tensor: MemoryMappedTensor, nbytes: int) -> bool:
    """Whether ``tensor`` is exactly the whole content of its file (so it can be linked)."""
    if tensor.is_nested or tensor.storage_offset() != 0 or not tensor.is_contiguous():
        return False
    try:
        return tensor._filename is not None and Path(tensor._filename).stat().st_size == nbytes
    except OSError:
        return False


def _is_view_class(td: TensorDictBase) -> bool:
    """Tensordict kinds saved as plain TensorDicts (views of other storage)."""
    return type(td).__name__ == "PersistentTensorDict" and type(td).__module__.startswith(
        "tensordict.memmap"
    )


def _names(td: Any) -> list[str | None] | None:
    try:
        names = list(td.names)
    except (AttributeError, RuntimeError):
        return None
    return names if any(n is not None for n in names) else None


def member_batch(batch_size: torch.Size, stack_dim: int) -> torch.Size:
    """The batch size of the members of a lazy stack of ``batch_size`` (``stack_dim``
    removed): what an empty ``LazyStackedTensorDict`` is built from.

    >>> import torch
    >>> member_batch(torch.Size([2, 0, 3]), 1)
    torch.Size([2, 3])
    """
    return batch_size[:stack_dim] + batch_size[stack_dim + 1 :]
