"""Batch-shape operations of the dense ``TensorDict``.

Each operation computes the new batch size (and dimension names) once, then maps one
function over every tensor and nested tensordict through ``_map_batch``: the function
touches the batch dimensions and carries the trailing feature dimensions along, which
works the same for tensors (``.shape``) and nested tensordicts (``.shape`` is their batch
size).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from tensordict._keys.shape import (
    flip_dims,
    infer_shape,
    movedim_order,
    narrow_slice,
    normalize_dim,
    unpack_shape,
)
from tensordict._keys.shape_context import (
    inverse_flatten,
    inverse_permute,
    inverse_squeeze,
    inverse_transpose,
    inverse_unflatten,
    inverse_unsqueeze,
    inverse_view,
    keeps_lock,
    undoable,
)
from tensordict._kinds.inplace import adopt
from tensordict._kinds.inplace import check as check_inplace
from tensordict._leaves.nontensor import NON_TENSOR
from tensordict._leaves.unbatched import is_carried
from tensordict._util.errors import DimsError
from tensordict._util.legacy import lazy_legacy
from tensordict.base import NO_DEFAULT, TensorDictBase

if TYPE_CHECKING:  # pragma: no cover
    from tensordict._dense.td import TensorDict

_Tensor = torch.Tensor


class DenseShapeOps:
    """Mixin with the shape operations of :class:`~tensordict.TensorDict`."""

    @undoable(inverse_view)
    def view(self, *shape: Any, size: Any = None, batch_size: Any = None) -> TensorDict:
        """View with a new batch shape (``-1`` inferred); ``view(dtype)`` views every leaf
        (``batch_size`` then gives the result's batch size, for dtypes of another width).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(2, 3, 4)}, [2, 3])
        >>> td.view(-1)["a"].shape
        torch.Size([6, 4])
        """
        if size is not None:
            shape = (size,)
        if len(shape) == 1 and isinstance(shape[0], torch.dtype):
            dtype = shape[0]
            viewed = self._map_tensors(lambda x: x.view(dtype))
            if batch_size is not None:
                viewed.batch_size = batch_size
            return viewed
        shape = infer_shape(unpack_shape(shape), self.numel())
        nb = self.batch_dims
        if shape == self.batch_size:
            return self
        source = _undone_by(self, lambda n, a, src: n == "view" and a == (shape,))
        if source is not None:  # viewing back (lazy-legacy mode): the original
            return source
        # varargs are faster than one tuple argument, which an empty shape needs
        return self._map_batch(
            (lambda x: x.view(*shape, *x.shape[nb:]))
            if shape
            else (lambda x: x.view((*shape, *x.shape[nb:]))),
            shape,
        )

    @keeps_lock
    def reshape(self, *shape: Any, size: Any = None, inplace: bool = False) -> TensorDict:
        """Reshape the batch dimensions (copying when a view is impossible); with
        ``inplace=True`` the tensordict itself takes the new shape (see :mod:`~tensordict._kinds.inplace`).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(2, 3)}, [2, 3]).reshape(3, 2)["a"].shape
        torch.Size([3, 2])
        """
        if size is not None:
            shape = (size,)
        shape = infer_shape(unpack_shape(shape), self.numel())
        nb = self.batch_dims
        if inplace:
            check_inplace(self, "reshape")
        out = self._map_batch(
            (lambda x: x.reshape(*shape, *x.shape[nb:]))
            if shape
            else (lambda x: x.reshape((*shape, *x.shape[nb:]))),
            shape,
        )
        return adopt(self, out, "reshape") if inplace else out

    @undoable(inverse_flatten)
    def flatten(
        self, start_dim: int | None = None, end_dim: int | None = None, *, inplace: bool = False
    ) -> TensorDict:
        """Merge batch dimensions ``start_dim..end_dim`` (default: all) into one; with
        ``inplace=True`` the tensordict itself takes the new shape.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(2, 3, 4)}, [2, 3]).flatten(0, 1).batch_size
        torch.Size([6])
        """
        nb = self.batch_dims
        if inplace:
            check_inplace(self, "flatten")
            return adopt(self, self.flatten(start_dim, end_dim), "flatten")
        if nb == 0:
            return self.reshape(1)
        start = normalize_dim(0 if start_dim is None else start_dim, nb, "start_dim")
        end = normalize_dim(-1 if end_dim is None else end_dim, nb, "end_dim")
        if end < start:
            raise RuntimeError(f"flatten(): start_dim={start_dim} comes after end_dim={end_dim}.")
        if start == end:
            return self
        bs = self.batch_size
        new = bs[:start] + torch.Size([bs[start : end + 1].numel()]) + bs[end + 1 :]
        names = None
        if self._has_names():
            old = self.names
            names = old[:start] + [None] + old[end + 1 :]
        return self._map_batch(lambda x: x.flatten(start, end), new, names)

    @undoable(inverse_unflatten)
    def unflatten(
        self, dim: int, unflattened_size: Sequence[int], *, inplace: bool = False
    ) -> TensorDict:
        """Split batch dimension ``dim`` into ``unflattened_size``; with ``inplace=True`` the
        tensordict itself takes the new shape.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(6, 4)}, [6]).unflatten(0, (2, 3))["a"].shape
        torch.Size([2, 3, 4])
        """
        if inplace:
            check_inplace(self, "unflatten")
            return adopt(self, self.unflatten(dim, unflattened_size), "unflatten")
        nb = self.batch_dims
        d = normalize_dim(dim, nb)
        bs = self.batch_size
        sizes = infer_shape(list(unflattened_size), bs[d])
        new = bs[:d] + sizes + bs[d + 1 :]
        names = None
        if self._has_names():
            old = self.names
            names = old[:d] + [None] * len(sizes) + old[d + 1 :]
        return self._map_batch(lambda x: x.unflatten(d, sizes), new, names)

    @undoable(inverse_squeeze)
    def squeeze(self, dim: int | Sequence[int] | None = None) -> TensorDict:
        """Remove batch dimensions of size 1 (all of them, or ``dim``).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(1, 3, 2)}, [1, 3]).squeeze().batch_size
        torch.Size([3])
        """
        bs = self.batch_size
        nb = len(bs)
        if dim is None:
            dims = [i for i, s in enumerate(bs) if s == 1]
        else:
            asked = [dim] if isinstance(dim, int) else list(dim)
            dims = sorted({d for d in (normalize_dim(d, nb) for d in asked) if bs[d] == 1})
        if not dims:
            return self
        source = _undone_by(self, lambda n, a, src: n == "squeeze" and list(a) == dims)
        if source is not None:  # squeezing back (lazy-legacy mode): the original
            return source
        keep = [i for i in range(nb) if i not in dims]
        new = torch.Size([bs[i] for i in keep])
        names = [self.names[i] for i in keep] if self._has_names() else None
        target = tuple(dims)
        return self._map_batch(lambda x: x.squeeze(target), new, names)

    @undoable(inverse_unsqueeze)
    def unsqueeze(self, dim: int) -> TensorDict:
        """Insert a batch dimension of size 1 at ``dim`` (negative counts from the end).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(3, 2)}, [3])
        >>> td.unsqueeze(-1)["a"].shape
        torch.Size([3, 1, 2])
        """
        nb = self.batch_dims
        d = normalize_dim(dim, nb, extra=1)
        bs = self.batch_size
        new = bs[:d] + torch.Size([1]) + bs[d:]
        source = _undone_by(self, lambda n, a, src: n == "reshape" and src.batch_size == new)
        if source is not None:  # unsqueezing back (lazy-legacy mode): the original
            return source
        names = None
        if self._has_names():
            old = self.names
            names = old[:d] + [None] + old[d:]
        return self._map_batch(lambda x: x.unsqueeze(d), new, names, spread=True)

    @undoable(inverse_permute)
    def permute(self, *args: Any, dims: Sequence[int] | None = None) -> TensorDict:
        """Permute the batch dimensions (feature dimensions stay in place); the order is
        given as ints, one sequence, or ``dims=``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(2, 3, 4)}, [2, 3]).permute(1, 0)["a"].shape
        torch.Size([3, 2, 4])
        """
        dims = unpack_shape(args) if dims is None else tuple(dims)
        nb = self.batch_dims
        if len(dims) != nb or any(not -nb <= d < nb for d in dims):
            raise DimsError(
                f"permute(): {list(dims)} is not a permutation of the {nb} batch dimension(s) "
                f"of batch_size={tuple(self.batch_size)}."
            )
        perm = [d % nb for d in dims]
        if sorted(perm) != list(range(nb)):
            raise DimsError(
                f"permute(): {list(dims)} repeats a dimension; it is not a permutation of the "
                f"{nb} batch dimension(s)."
            )
        if perm == list(range(nb)):
            return self
        source = _undone_by(self, lambda n, a, src: n == "permute" and a == (perm,))
        if source is not None:  # permuting back (lazy-legacy mode): the original
            return source
        bs = self.batch_size
        new = torch.Size([bs[d] for d in perm])
        names = [self.names[d] for d in perm] if self._has_names() else None

        def fn(x: Any) -> Any:
            return x.permute(*perm, *range(nb, x.ndim if isinstance(x, _Tensor) else x.batch_dims))

        return self._map_batch(fn, new, names)

    @undoable(inverse_transpose)
    def transpose(self, dim0: int, dim1: int) -> TensorDict:
        """Swap two batch dimensions.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(2, 3)}, [2, 3]).transpose(0, 1).batch_size
        torch.Size([3, 2])
        """
        nb = self.batch_dims
        if not (-nb <= dim0 < nb and -nb <= dim1 < nb):
            bad = dim0 if not -nb <= dim0 < nb else dim1
            raise DimsError(
                f"transpose(): dim={bad} is out of range: dim0 and dim1 must be within the range "
                f"of the number of dimensions; the provided dimensions are incompatible with the "
                f"{nb} batch dimension(s) of batch_size="
                f"{tuple(self.batch_size)} (expected values in [{-nb}, {nb - 1}])."
            )
        d0, d1 = dim0 % nb, dim1 % nb
        if d0 == d1:
            return self
        source = _undone_by(
            self, lambda n, a, src: n == "transpose" and {x % nb for x in a} == {d0, d1}
        )
        if source is not None:  # transposing back (lazy-legacy mode): the original
            return source
        bs = list(self.batch_size)
        bs[d0], bs[d1] = bs[d1], bs[d0]
        names = None
        if self._has_names():
            names = self.names
            names[d0], names[d1] = names[d1], names[d0]
        return self._map_batch(lambda x: x.transpose(d0, d1), torch.Size(bs), names)

    def swapaxes(self, axis0: int, axis1: int) -> TensorDict:
        """Alias of :meth:`transpose` (numpy's names)."""
        return self.transpose(axis0, axis1)

    def swapdims(self, axis0: int, axis1: int) -> TensorDict:
        """Alias of :meth:`transpose`."""
        return self.transpose(axis0, axis1)

    def movedim(self, source: int | Sequence[int], destination: int | Sequence[int]) -> TensorDict:
        """Move batch dimension(s) ``source`` to position(s) ``destination``, as
        :func:`torch.movedim` (the other dimensions keep their order).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict(batch_size=[2, 3, 4]).movedim(0, 2).batch_size
        torch.Size([3, 4, 2])
        >>> TensorDict(batch_size=[2, 3, 4]).movedim((0, 1), (2, 0)).batch_size
        torch.Size([3, 4, 2])
        """
        return self.permute(movedim_order(source, destination, self.batch_dims))

    def moveaxis(self, source: int | Sequence[int], destination: int | Sequence[int]) -> TensorDict:
        """Alias of :meth:`movedim` (numpy's name)."""
        return self.movedim(source, destination)

    @keeps_lock
    def expand(self, *shape: Any, size: Sequence[int] | None = None) -> TensorDict:
        """Expand the batch to ``shape`` or ``size=`` (new leading dims allowed, ``-1`` keeps
        a size).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(3, 2)}, [3]).expand(4, 3)["a"].shape
        torch.Size([4, 3, 2])
        """
        shape = list(unpack_shape(shape if size is None else (size,)))
        bs = self.batch_size
        nb = len(bs)
        extra = len(shape) - nb
        if extra < 0:
            raise RuntimeError(
                f"expand(): the target shape {shape} has fewer dimensions than batch_size={tuple(bs)}."
            )
        for i, s in enumerate(bs):
            t = shape[extra + i]
            if t == -1:
                shape[extra + i] = s
            elif s != t and s != 1:
                raise RuntimeError(
                    f"expand(): cannot expand batch_size={tuple(bs)} to {shape}: dimension "
                    f"{i} has size {s}, which is neither {t} nor 1."
                )
        new = torch.Size(shape)
        names = None
        if self._has_names():
            names = [None] * extra + self.names
        return self._map_batch(
            (lambda x: x.expand(*new, *x.shape[nb:]))
            if new
            else (lambda x: x.expand((*new, *x.shape[nb:]))),
            new,
            names,
            spread=True,
        )

    def expand_as(self, other: Any) -> TensorDict:
        """Expand to the shape of ``other``: a tensor gives the batch shape; a tensordict
        expands every leaf to the shape of its leaf there (feature dims included).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.ones(3, 1)}, [3])
        >>> td.expand_as(TensorDict({"a": torch.zeros(2, 3, 5)}, [2, 3]))["a"].shape
        torch.Size([2, 3, 5])
        """
        if isinstance(other, TensorDictBase):
            return self._expand_as_td(other)
        return self.expand(other.shape)

    def _expand_as_td(self, other: Any) -> TensorDict:
        """``expand_as`` a tensordict: leaf by leaf (every key must be in ``other``)."""
        bs = other.batch_size
        out: dict[str, Any] = {}
        for key, value in self._tensordict.items():
            target = other._get_str(key, NO_DEFAULT)
            if isinstance(value, NON_TENSOR):
                out[key] = value._with(bs)
            else:
                try:
                    out[key] = value.expand_as(target)
                except RuntimeError as err:
                    raise RuntimeError(
                        f"expand_as(): entry {key!r} of shape {tuple(value.shape)} cannot be "
                        f"expanded to the shape {tuple(target.shape)} it has in the other "
                        f"tensordict: {err}"
                    ) from None
        return self._new_unsafe(out, bs, self._device)

    def broadcast_to(self, shape: Sequence[int]) -> TensorDict:
        """Alias of :meth:`expand` with a shape argument."""
        return self.expand(shape)

    def repeat(self, *repeats: Any, inplace: bool = False) -> TensorDict:
        """Repeat along the batch dimensions, like :meth:`torch.Tensor.repeat`; with
        ``inplace=True`` the tensordict itself takes the new shape.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(2, 5)}, [2]).repeat(3)["a"].shape
        torch.Size([6, 5])
        """
        repeats = tuple(unpack_shape(repeats))
        bs = self.batch_size
        nb = len(bs)
        if len(repeats) < nb:
            raise RuntimeError(
                f"repeat(): got {len(repeats)} repeat counts for batch_size={tuple(bs)}; need at least {nb}."
            )
        extra = len(repeats) - nb
        new = torch.Size(repeats[:extra]) + torch.Size(
            r * s for r, s in zip(repeats[extra:], bs, strict=False)
        )

        def fn(x: Any) -> Any:
            feat = (x.ndim if isinstance(x, _Tensor) else x.batch_dims) - nb
            return x.repeat(*repeats, *([1] * feat))

        names = None if self._names is None else [None] * extra + list(self._names)
        if inplace:
            check_inplace(self, "repeat")
            return adopt(self, self._map_batch(fn, new, names), "repeat")
        return self._map_batch(fn, new, names)

    def flip(self, dims: int | Sequence[int], *more_dims: int) -> TensorDict:
        """Reverse the order along the given batch dimensions (one int or sequence, or
        several ints as :meth:`torch.Tensor.flip` takes them).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.arange(3)}, [3]).flip(0)["a"]
        tensor([2, 1, 0])
        """
        ds = flip_dims((dims, *more_dims), self.batch_dims)
        return self._map_batch(lambda x: x.flip(ds), self.batch_size, self._names)

    def fliplr(self) -> TensorDict:
        """Flip batch dimension 1 (:func:`torch.fliplr`: at least 2 batch dimensions).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.arange(4).view(2, 2)}, [2, 2]).fliplr()["a"].tolist()
        [[1, 0], [3, 2]]
        """
        _needs_dims(self, "fliplr", 2)
        return self.flip(1)

    def flipud(self) -> TensorDict:
        """Flip batch dimension 0 (:func:`torch.flipud`: at least 1 batch dimension).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.arange(3)}, [3]).flipud()["a"].tolist()
        [2, 1, 0]
        """
        _needs_dims(self, "flipud", 1)
        return self.flip(0)

    def narrow(self, dim: int, start: int, length: int) -> TensorDict:
        """Slice ``length`` entries from ``start`` along batch dimension ``dim``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.arange(5)}, [5]).narrow(0, 1, 2)["a"]
        tensor([1, 2])
        """
        d = normalize_dim(dim, self.batch_dims)
        return self._index((slice(None),) * d + (narrow_slice(self.batch_size[d], start, length),))

    # ------------------------------------------------------------------ splitting
    def unbind(self, dim: int = 0) -> tuple[TensorDict, ...]:
        """Split along batch dimension ``dim`` into a tuple of tensordicts without it.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> a, b = TensorDict({"x": torch.arange(2)}, [2]).unbind(0)
        >>> a["x"], b["x"]
        (tensor(0), tensor(1))
        """
        bs = self.batch_size
        d = normalize_dim(dim, len(bs))
        new = bs[:d] + bs[d + 1 :]
        names = None
        if self._has_names():
            names = self.names
            del names[d]
        return self._split_entries(lambda x: x.unbind(d), bs[d], [new] * bs[d], names)

    def split(self, split_size: int | Sequence[int], dim: int = 0) -> tuple[TensorDict, ...]:
        """Split along batch dimension ``dim`` into chunks of ``split_size`` (or the given sizes).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> [t.batch_size[0] for t in TensorDict({"a": torch.zeros(5)}, [5]).split(2)]
        [2, 2, 1]
        """
        bs = self.batch_size
        d = normalize_dim(dim, len(bs))
        size = bs[d]
        if isinstance(split_size, int):
            if split_size <= 0:
                raise ValueError(f"split(): split_size must be positive, got {split_size}.")
            sizes = [split_size] * (size // split_size) + (
                [size % split_size] if size % split_size else []
            )
            if not sizes:
                sizes = [0]
        else:
            sizes = list(split_size)
            if sum(sizes) != size:
                raise RuntimeError(
                    f"split(): sizes {sizes} sum to {sum(sizes)} but batch dimension {d} has size {size}."
                )
        shapes = [bs[:d] + torch.Size([s]) + bs[d + 1 :] for s in sizes]
        arg = split_size if isinstance(split_size, int) else sizes
        return self._split_entries(
            lambda x: _split_leaf(x, arg, sizes, d), len(sizes), shapes, self._names
        )

    def chunk(self, chunks: int, dim: int = 0) -> tuple[TensorDict, ...]:
        """Split into ``chunks`` nearly equal parts along batch dimension ``dim``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> [t.batch_size[0] for t in TensorDict(batch_size=[5]).chunk(2)]
        [3, 2]
        """
        if chunks <= 0:
            raise ValueError(f"chunk(): chunks must be positive, got {chunks}.")
        size = self.batch_size[normalize_dim(dim, self.batch_dims)]
        step = -(-size // chunks) if size else 1
        return self.split(max(step, 1), dim)

    def tensor_split(self, indices_or_sections: Any, dim: int = 0) -> tuple[TensorDict, ...]:
        """Split like :func:`torch.tensor_split` along a batch dimension.

        >>> from tensordict import TensorDict
        >>> [t.batch_size[0] for t in TensorDict(batch_size=[5]).tensor_split(3)]
        [2, 2, 1]
        """
        d = normalize_dim(dim, self.batch_dims)
        proxy = torch.empty(self.batch_size[d], 0).tensor_split(indices_or_sections, 0)
        return self.split([p.shape[0] for p in proxy], d)

    def _split_entries(self, fn: Any, n: int, shapes: list, names: list | None) -> tuple:
        parts: list[dict] = [{} for _ in range(n)]
        for key, value in self._tensordict.items():
            if type(value) is not _Tensor and is_carried(value):  # one value / no batch dim
                for i in range(n):
                    parts[i][key] = value._with(shapes[i])
                continue
            for i, piece in enumerate(fn(value)):
                parts[i][key] = piece
        cls = type(self)
        dev = self._device
        return tuple(
            cls._new_unsafe(parts[i], torch.Size(shapes[i]), dev, names and list(names))
            for i in range(n)
        )


def _split_leaf(x: Any, arg: Any, sizes: list[int], d: int) -> Any:
    """``x.split(arg, d)``; a nested tensor, which cannot be split along its batch dim
    0, is regrouped from its components."""
    if type(x) is _Tensor and not x.is_nested:  # the sizes are known: no Python wrapper
        return x.split_with_sizes(sizes, d)
    if isinstance(x, _Tensor) and x.is_nested and d == 0:
        parts = x.unbind(0)
        out, start = [], 0
        for size in sizes:
            out.append(
                torch.nested.as_nested_tensor(list(parts[start : start + size]), layout=x.layout)
            )
            start += size
        return tuple(out)
    return x.split(arg, d)


def _needs_dims(td: Any, what: str, n: int) -> None:
    if td.batch_dims < n:
        raise RuntimeError(
            f"{what}() requires at least {n} batch dimension(s), got batch_size="
            f"{tuple(td.batch_size)}."
        )


def _undone_by(td: Any, accept: Any) -> Any:
    """In lazy-legacy mode (:func:`~tensordict.set_lazy_legacy`), the tensordict that
    ``td`` was made from by a shape op, when ``accept(name, args, source)`` says that the
    call being made is that op's inverse ``name(*args)`` (as the reference's lazy views:
    permuting back gives the original), else ``None``."""
    if not lazy_legacy():
        return None
    last = td._legacy_origin or td._last_op
    if not last or len(last) != 7:
        return None
    source = last[3]()
    if source is None:
        return None
    try:
        name, args = last[4](source, td, *last[5], **last[6])
    except RuntimeError:  # an op without an inverse (squeeze() of every size-1 dim)
        return None
    return source if accept(name, args, source) else None
