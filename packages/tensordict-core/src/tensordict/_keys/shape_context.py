"""Shape operations as context managers: entries written inside reach the source.

``with td.transpose(1, 0) as t: t.set("c", x)`` adds ``"c"`` to ``td`` (transposed
back) when the block exits, and so do ``permute``, ``unsqueeze``, ``squeeze(dim)``,
``view``, ``flatten`` and ``unflatten``: each records on its result a weak reference to
the tensordict it came from and how to undo it, and ``__exit__`` writes the result, with
the inverse operation applied, back into the source with ``update``. Entries deleted
inside the block are not deleted from the source.

Nothing is recorded under ``torch.compile`` (weak references do not trace).

The results of these operations, and of ``reshape`` and ``expand``, are views of the
source: when it is locked, they are locked too. In lazy-legacy mode
(:func:`~tensordict.set_lazy_legacy`) the results of the recorded operations are
:class:`~tensordict._dense.legacy_view.LegacyView` s, which write every entry set on them
through to their source at once.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from tensordict._keys.shape import normalize_dim
from tensordict._util.legacy import lazy_legacy

_F = TypeVar("_F", bound=Callable[..., Any])
_compiling = torch.compiler.is_dynamo_compiling

#: the class the results of these operations take in lazy-legacy mode, bound by
#: :mod:`tensordict._dense.legacy_view` (which needs ``TensorDict``, defined after this module)
LEGACY_VIEW: list[Any] = [None]


def undoable(inverse: Callable[..., tuple[str, tuple[Any, ...]]]) -> Callable[[_F], _F]:
    """Decorate a shape method so that its result can be used as a context manager.

    ``inverse(source, result, *args, **kwargs)`` returns ``(method name, args)`` that turn
    ``result`` back into the source's batch shape; it runs when the ``with`` block exits.
    """

    def decorator(method: _F) -> _F:
        name = method.__name__

        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = method(self, *args, **kwargs)
            if out is self:
                return out
            mine = self.__dict__.get("_legacy_origin") or self.__dict__.get("_last_op")
            if mine is not None and len(mine) == 7 and mine[3]() is out:
                return out  # the inverse gave the source back (lazy-legacy mode): untouched
            if self._is_locked and not out._is_locked:
                out.lock_()  # a view of a locked tensordict is locked too
            if not _compiling():
                out._last_op = (
                    name,
                    write_back,
                    weakref.ref(out),  # weak both ways: no cycle keeps the leaves alive
                    weakref.ref(self),
                    inverse,
                    args,
                    kwargs,
                )
                view_cls = LEGACY_VIEW[0]
                dtype_view = name == "view" and args and isinstance(args[0], torch.dtype)
                if (
                    view_cls is not None
                    and view_cls.__base__ is type(out)
                    and lazy_legacy()
                    and not dtype_view  # leaf by leaf, not a shape op: a plain TensorDict
                ):
                    out.__class__ = (
                        view_cls  # a lazy-legacy view (see tensordict._dense.legacy_view)
                    )
                    out._legacy_origin = out._last_op  # kept when _last_op is reused (locks)
            return out

        return wrapper  # type: ignore[return-value]

    return decorator


def keeps_lock(method: _F) -> _F:
    """Decorate a shape method whose result, a view, is locked when the source is."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = method(self, *args, **kwargs)
        if out is not self and self._is_locked and not out._is_locked:
            out.lock_()
        return out

    return wrapper  # type: ignore[return-value]


def write_back(
    result_ref: Callable[[], Any],
    source_ref: Callable[[], Any],
    inverse: Callable[..., tuple[str, tuple[Any, ...]]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    source, result = source_ref(), result_ref()
    if source is None or result is None:  # gone: nothing to write back
        return
    name, inverse_args = inverse(source, result, *args, **kwargs)
    source.update(getattr(result, name)(*inverse_args))


def _dims(source: Any, dims: Any) -> list[int]:
    return [normalize_dim(d, source.batch_dims) for d in dims]


def inverse_transpose(source: Any, result: Any, dim0: int, dim1: int) -> tuple[str, tuple]:
    return "transpose", (dim0, dim1)


def inverse_permute(source: Any, result: Any, *args: Any, dims: Any = None) -> tuple[str, tuple]:
    order = (
        list(dims)
        if dims is not None
        else list(args[0] if len(args) == 1 and not isinstance(args[0], int) else args)
    )
    perm = _dims(source, order)
    return "permute", (sorted(range(len(perm)), key=perm.__getitem__),)


def inverse_unsqueeze(source: Any, result: Any, dim: int) -> tuple[str, tuple]:
    return "squeeze", (normalize_dim(dim, result.batch_dims),)


def inverse_view(source: Any, result: Any, *args: Any, **kwargs: Any) -> tuple[str, tuple]:
    return "view", (source.batch_size,)


def inverse_squeeze(source: Any, result: Any, dim: Any = None) -> tuple[str, tuple]:
    if dim is None:
        raise RuntimeError(
            "td.squeeze() without a dim cannot be used as a context manager (the squeezed "
            "dimensions are not known when writing back); pass dim=."
        )
    return "reshape", (source.batch_size,)


def inverse_flatten(
    source: Any, result: Any, start_dim: Any = None, end_dim: Any = None, **kwargs: Any
) -> tuple[str, tuple]:
    start = normalize_dim(0 if start_dim is None else start_dim, source.batch_dims)
    end = normalize_dim(-1 if end_dim is None else end_dim, source.batch_dims)
    return "unflatten", (start, source.batch_size[start : end + 1])


def inverse_unflatten(
    source: Any, result: Any, dim: int, unflattened_size: Any, **kwargs: Any
) -> tuple[str, tuple]:
    d = normalize_dim(dim, source.batch_dims)
    return "flatten", (d, d + result.batch_dims - source.batch_dims)
