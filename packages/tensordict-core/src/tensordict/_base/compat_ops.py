"""Methods of the reference 0.15 surface that no other mixin owns: ``rename_keys``,
``pack``, ``from_schema``, ``is_meta`` and ``clear_refs_for_compile_``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict._formats.pack import PackLayout
from tensordict._formats.pack import pack as _pack
from tensordict._keys.nested import NestedKey, key_as_tuple, unravel_key
from tensordict._kinds import kinds as _kinds
from tensordict._plugins.siblings import sibling_attr

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Self


_MISSING: Any = object()


class CompatOps:
    """Mixin of :class:`~tensordict.TensorDictBase` (see the module docstring)."""

    @property
    def is_meta(self) -> bool:
        """Whether the tensordict's device is the meta device (``False`` without a device).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(a=torch.zeros(2, device="meta"), device="meta").is_meta
        True
        """
        device = self.device  # type: ignore[attr-defined]
        return device is not None and device.type == "meta"

    def clear_refs_for_compile_(self) -> Self:
        """Forget the record of the last operation (what ``with td.op(...):`` undoes) here
        and in every nested tensordict; returns ``self``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(2, 3), batch_size=[2, 3]).transpose(1, 0)
        >>> td.clear_refs_for_compile_()._last_op is None
        True
        """
        self.__dict__.pop("_last_op", None)
        for value in self.values(include_nested=True):  # type: ignore[attr-defined]
            if isinstance(value, _kinds.Base):
                value.__dict__.pop("_last_op", None)
        return self

    def pack(
        self, dim: int = -1, *, layout: PackLayout | None = None
    ) -> tuple[torch.Tensor, PackLayout]:
        """Pack every leaf into one tensor of features: each leaf flattened after the batch
        dimensions, concatenated in sorted key order (or ``layout``'s order), the packed
        dimension at ``dim``. Returns the tensor and its :class:`~tensordict.PackLayout`,
        whose ``unpack`` inverts it. The leaves must share one dtype; non-tensor data cannot
        be packed.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(p=torch.zeros(5), v=torch.ones(5, 3), n={"s": torch.ones(5, 3, 3)}, batch_size=[5])
        >>> flat, layout = td.pack()
        >>> flat.shape, layout.keys
        (torch.Size([5, 13]), (('n', 's'), 'p', 'v'))
        >>> bool((layout.unpack(flat) == td).all())
        True
        """
        return _pack(self, dim, layout=layout)

    def rename_keys(self, mapping: Mapping[NestedKey, NestedKey], *, strict: bool = True) -> Self:
        """A tensordict with several keys renamed at once (``self`` is not changed; the
        leaves are shared, the tree of nested tensordicts is new).

        Every source is read before any destination is written, so swaps and chains work.
        A nested tensordict the renaming empties is removed. ``strict=False`` skips the
        sources that are missing.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(()), b=torch.ones(()))
        >>> td.rename_keys({"a": "b", "b": "a"})["a"]
        tensor(1.)
        >>> td = TensorDict(raw=TensorDict(p=torch.zeros(3), u=torch.ones(3)))
        >>> sorted(td.rename_keys({("raw", "p"): "p", ("raw", "u"): "u"}).keys(True))
        ['p', 'u']
        """
        members = _kinds.lazy_members(self)
        if members is not None:
            renamed = [m.rename_keys(mapping, strict=strict) for m in members]
            return _kinds.Lazy(*renamed, stack_dim=self.stack_dim)  # type: ignore[attr-defined,no-any-return]
        pairs = [(key_as_tuple(s), key_as_tuple(d)) for s, d in mapping.items()]
        _check_pairs(pairs)
        out = _structure_copy(self)
        present = []
        for src, dst in pairs:
            value = out._get_tuple(src, _MISSING)
            if value is _MISSING:
                if strict:
                    raise KeyError(f"rename_keys: no entry {unravel_key(src)!r} to rename.")
                continue
            present.append((src, dst, value))
        sources = {src for src, _, _ in present}
        for _, dst, _ in present:
            if out._get_tuple(dst, _MISSING) is not _MISSING and not any(
                dst[: len(s)] == s for s in sources
            ):
                raise ValueError(
                    f"rename_keys: the destination {unravel_key(dst)!r} is already an entry "
                    "and is not renamed away."
                )
        for src, _, _ in present:
            out.del_(src)
            for cut in range(len(src) - 1, 0, -1):  # drop the nested tensordicts emptied
                parent = out._get_tuple(src[:cut], None)
                if isinstance(parent, _kinds.Base) and not list(parent.keys()):
                    out.del_(src[:cut])
                else:
                    break
        for _, dst, value in present:
            out.set(dst, value)
        return out  # type: ignore[no-any-return]

    @classmethod
    def from_schema(
        cls,
        schema: dict[str, tuple[Sequence[int] | torch.Size, torch.dtype]],
        *,
        batch_size: Sequence[int] | torch.Size | None = None,
        storage: str | None = None,
        device: Any = None,
        **kwargs: Any,
    ) -> _kinds.Base:
        """A zero-filled tensordict from ``{key: (element_shape, dtype)}``: each entry has
        shape ``[*batch_size, *element_shape]``.

        ``storage`` picks where the zeros live: ``None`` (plain tensors), ``"shared"``
        (shared memory), ``"memmap"`` (memory-mapped files, ``prefix=`` and the other
        arguments of ``memmap_like``), ``"zarr"`` (a zarr store at ``filename=``, whose
        chunked arrays are allocated without writing any data; other keywords go to
        ``zarr.Group.create_array``) or ``"h5"`` (an HDF5 file at ``filename=``); the
        last three need ``tensordict-memmap`` (with its ``zarr``/``h5`` extra). ``"redis"``
        and ``"dragonfly"`` upload the zeros to a server and return a
        ``TensorDictStore`` (``host=``, ``port=``, ... as ``td.to_store``; needs
        ``tensordict-distributed[redis]``).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict.from_schema({"obs": ([4, 4], torch.uint8), "r": ([], torch.float32)}, batch_size=[10])
        >>> td["obs"].shape, td["r"].dtype
        (torch.Size([10, 4, 4]), torch.float32)
        """
        bs = torch.Size([] if batch_size is None else batch_size)
        if storage not in (None, "memmap", "shared", "h5", "zarr", "redis", "dragonfly"):
            raise ValueError(
                f"from_schema: unknown storage {storage!r}; expected None, 'memmap', 'shared', "
                "'h5', 'zarr', 'redis' or 'dragonfly'."
            )
        store_kwargs: dict[str, Any] = {}
        if storage in ("redis", "dragonfly"):  # zeros built here, then uploaded once
            sibling_attr(
                "distributed", "td_to_store", f"TensorDict.from_schema(storage={storage!r})"
            )
            store_kwargs, kwargs = {"backend": storage, **kwargs}, {}
        if storage == "zarr":
            if "filename" not in kwargs:
                raise TypeError("from_schema(storage='zarr') needs filename=<path or store>.")
            hook = sibling_attr(
                "memmap", "zarr_from_schema", "TensorDict.from_schema(storage='zarr')"
            )
            return hook(schema, bs, **kwargs)  # type: ignore[no-any-return]
        if storage == "h5" and "filename" not in kwargs:
            raise TypeError("from_schema(storage='h5') needs filename=<path>.")
        if kwargs and storage not in ("memmap", "h5"):  # (store keywords already taken)
            raise TypeError(f"from_schema() got unexpected keyword arguments {sorted(kwargs)}.")
        out = _kinds.Dense(batch_size=bs, device=None if storage in ("memmap", "h5") else device)
        for key, spec in schema.items():
            try:
                shape, dtype = spec
            except (TypeError, ValueError):
                raise TypeError(
                    f"from_schema: the schema of {key!r} must be (element_shape, dtype), got "
                    f"{spec!r}."
                ) from None
            tensor_device = None if storage in ("memmap", "h5") else device
            out.set(key, torch.zeros((*bs, *shape), dtype=dtype, device=tensor_device))
        if storage == "h5":
            sibling_attr("memmap", "td_to_h5", "TensorDict.from_schema(storage='h5')")
            return out.to_h5(**kwargs)  # type: ignore[attr-defined,no-any-return]
        if storage == "shared":
            out.share_memory_()
        elif store_kwargs:
            return out.to_store(**store_kwargs)  # type: ignore[attr-defined,no-any-return]
        elif storage == "memmap":
            sibling_attr("memmap", "td_memmap_like", "TensorDict.from_schema(storage='memmap')")
            return out.memmap_like(**kwargs)  # type: ignore[attr-defined,no-any-return]
        return out


def _check_pairs(pairs: list[tuple[tuple[str, ...], tuple[str, ...]]]) -> None:
    dests = [d for _, d in pairs]
    if len(set(dests)) != len(dests):
        raise ValueError(f"rename_keys: two sources have the same destination ({dests}).")
    for group, what in (([s for s, _ in pairs], "source"), (dests, "destination")):
        for a in group:
            for b in group:
                if a != b and b[: len(a)] == a:
                    raise ValueError(
                        f"rename_keys: the {what} {unravel_key(b)!r} lies inside the {what} "
                        f"{unravel_key(a)!r}."
                    )


def _structure_copy(td: Any) -> Any:
    """A copy of ``td`` with new nested tensordicts and the same leaves."""
    if isinstance(td, _kinds.Dense):
        store = {
            k: _structure_copy(v) if isinstance(v, _kinds.Dense) else v
            for k, v in td._tensordict.items()
        }
        return td._new_unsafe(store, td._batch_size, td._device, td._names)
    return td.copy()
