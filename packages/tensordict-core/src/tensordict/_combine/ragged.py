"""Stacking tensors whose shapes differ: as a list, a padded tensor or a nested tensor.

One function, :func:`stack_ragged`, serves ``lazy_stack`` of tensors and the
``as_list``/``as_padded_tensor``/``as_nested_tensor`` options of
``LazyStackedTensorDict.get``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from tensordict._keys.nested import key_as_tuple
from tensordict.base import NO_DEFAULT

#: The keyword options of :func:`stack_ragged` (and of a lazy stack's ``get``).
RAGGED_OPTIONS = frozenset(
    {"as_list", "as_padded_tensor", "as_nested_tensor", "layout", "padding_side", "padding_value"}
)


def check_options(options: dict[str, Any], what: str) -> None:
    """Raise :class:`TypeError` for keywords that are not ragged-stacking options, and
    :class:`ValueError` when more than one of the ``as_*`` modes is asked for."""
    unknown = set(options) - RAGGED_OPTIONS
    if unknown:
        raise TypeError(f"{what} got unexpected keyword argument(s) {sorted(unknown)}.")
    modes = [m for m in ("as_list", "as_padded_tensor", "as_nested_tensor") if options.get(m)]
    if len(modes) > 1:
        raise ValueError(f"{what}: {' and '.join(modes)} are mutually exclusive; pass one.")
    side = options.get("padding_side", "right")
    if side not in ("left", "right"):
        raise ValueError(f"{what}: padding_side must be 'left' or 'right', got {side!r}.")


def pad_to(t: torch.Tensor, shape: Sequence[int], side: str, value: Any) -> torch.Tensor:
    """``t`` padded with ``value`` up to ``shape`` (same number of dims), on ``side``."""
    if tuple(t.shape) == tuple(shape):
        return t
    out = torch.full(tuple(shape), value, dtype=t.dtype, device=t.device)
    index = tuple(
        slice(s - n, s) if side == "left" else slice(0, n)
        for n, s in zip(t.shape, shape, strict=True)
    )
    out[index] = t
    return out


def stack_ragged(
    values: Sequence[Any],
    dim: int = 0,
    *,
    as_list: bool = False,
    as_padded_tensor: bool = False,
    as_nested_tensor: bool = False,
    layout: torch.layout | None = None,
    padding_side: str = "right",
    padding_value: Any = 0.0,
) -> Any:
    """Stack ``values`` (tensors, or lists of them from inner stacks) along ``dim``.

    ``as_list`` returns the list itself; ``as_padded_tensor`` pads every dimension to its
    largest size (``padding_side``, ``padding_value``) then stacks; ``as_nested_tensor``
    builds a :mod:`torch.nested` tensor (``layout``, ``torch.jagged`` by default) whose
    first dimension runs over ``values``; otherwise :func:`torch.stack`.

    >>> import torch
    >>> from tensordict._combine.ragged import stack_ragged
    >>> xs = [torch.ones(1), torch.ones(3)]
    >>> stack_ragged(xs, as_padded_tensor=True, padding_value=-1)
    tensor([[ 1., -1., -1.],
            [ 1.,  1.,  1.]])
    >>> stack_ragged(xs, as_nested_tensor=True).is_nested
    True
    """
    check_options(
        {
            "as_list": as_list,
            "as_padded_tensor": as_padded_tensor,
            "as_nested_tensor": as_nested_tensor,
            "padding_side": padding_side,
        },
        "stack",
    )
    items = list(values)
    if as_list:
        return items
    if as_nested_tensor:
        if any(isinstance(v, torch.Tensor) and v.is_nested for v in items):
            raise ValueError(
                "as_nested_tensor=True: the entries are nested tensors themselves (as the "
                "inner stacks of a lazy stack of lazy stacks give); a nested tensor has one "
                "nested level. Flatten the stack (view(-1)) or use as_padded_tensor=True."
            )
        return torch.nested.nested_tensor(items, layout=layout or torch.jagged)
    if as_padded_tensor:
        ndims = {v.ndim for v in items}
        if len(ndims) != 1:
            raise RuntimeError(
                "as_padded_tensor=True needs entries with the same number of dimensions, got "
                f"shapes {[tuple(v.shape) for v in items]}."
            )
        shape = [max(sizes) for sizes in zip(*(v.shape for v in items), strict=True)]
        items = [pad_to(v, shape, padding_side, padding_value) for v in items]
    return torch.stack(items, dim)


class LazyRaggedOps:
    """Mixin of :class:`~tensordict.LazyStackedTensorDict`: ``get`` with the ragged
    options, and ``get_nestedtensor``."""

    tensordicts: list[Any]
    stack_dim: int

    def get(self, key: Any, *args: Any, **kwargs: Any) -> Any:
        """Like :meth:`TensorDictBase.get`; for entries whose shape differs across the
        members, ``as_list=True`` returns the members' tensors, ``as_padded_tensor=True``
        pads them (``padding_side``, ``padding_value``) and stacks them, and
        ``as_nested_tensor=True`` returns a nested tensor (``layout``, jagged by default).

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict(x=torch.ones(1)), TensorDict(x=torch.ones(2) * 2)])
        >>> lazy.get("x", as_list=True)
        [tensor([1.]), tensor([2., 2.])]
        >>> lazy.get("x", as_padded_tensor=True)
        tensor([[1., 0.],
                [2., 2.]])
        """
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in RAGGED_OPTIONS}
        hook = getattr(self, "hook_out", None)
        if not any(options.get(m) for m in ("as_list", "as_padded_tensor", "as_nested_tensor")):
            value = super().get(key, *args, **kwargs)  # type: ignore[misc]
            return hook(value) if hook is not None and isinstance(value, torch.Tensor) else value
        check_options(options, "get()")
        if len(args) > 1 or (args and "default" in kwargs) or set(kwargs) - {"default"}:
            raise TypeError("get() takes a key, at most one default and the ragged options.")
        default = args[0] if args else kwargs.get("default", _RAISE)
        return self._ragged(_as_tuple(key), default, options)

    def _ragged(self, path: tuple[str, ...], default: Any, options: dict[str, Any]) -> Any:
        values = []
        for td in self.tensordicts:
            if hasattr(td, "_ragged"):  # an inner lazy stack: its own ragged entry
                value = td._ragged(path, _MISSING, options)
            else:
                value = td._get_tuple(path, _MISSING)
            if value is _MISSING:
                if default is _RAISE:
                    return self._gather(path, NO_DEFAULT)  # type: ignore[attr-defined]  # raises
                return default
            values.append(value)
        if all(isinstance(v, (torch.Tensor, list)) for v in values):
            return stack_ragged(values, self.stack_dim, **options)
        return self._gather(path, NO_DEFAULT)  # type: ignore[attr-defined]  # tensordicts, non-tensors

    def get_nestedtensor(
        self, key: Any, default: Any = NO_DEFAULT, *, layout: torch.layout | None = None
    ) -> Any:
        """The entry ``key`` of every member as one nested tensor (``torch.strided`` by
        default). A tensor ``default`` stands for the members lacking ``key``; any other
        default is returned as is when a member lacks it.

        >>> import torch
        >>> from tensordict import TensorDict, lazy_stack
        >>> lazy = lazy_stack([TensorDict(a=torch.zeros(4), b=torch.zeros(4)), TensorDict(a=torch.ones(5))])
        >>> [t.shape for t in lazy.get_nestedtensor("a").unbind()]
        [torch.Size([4]), torch.Size([5])]
        >>> lazy.get_nestedtensor("b", default=torch.ones(4)).unbind()[1].tolist()
        [1.0, 1.0, 1.0, 1.0]
        """
        if self.stack_dim != 0:
            raise RuntimeError(
                f"get_nestedtensor: nested tensors stack along dimension 0, but this stack is "
                f"along stack_dim={self.stack_dim}; use get(key, as_nested_tensor=True)."
            )
        path = _as_tuple(key)
        values = []
        for td in self.tensordicts:
            value = td._get_tuple(path, _MISSING)
            if value is _MISSING:
                if isinstance(default, torch.Tensor):
                    value = default
                elif default is NO_DEFAULT:
                    return self._gather(path, NO_DEFAULT)  # type: ignore[attr-defined]  # raises
                else:
                    return default
            values.append(value)
        return torch.nested.nested_tensor(values, layout=layout or torch.strided)


_MISSING: Any = object()
_RAISE: Any = object()


def _as_tuple(key: Any) -> tuple[str, ...]:
    if isinstance(key, str):
        return (key,)
    return tuple(key_as_tuple(key))
