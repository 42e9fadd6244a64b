"""Methods about the leaves' state rather than their values: zeroing and filling,
detaching, contiguity, gradients (``requires_grad_``, ``grad``, ``zero_grad``,
``backward``) and the ``requires_grad``/``data``/``dtype`` properties.

:func:`install` adds them to ``TensorDictBase`` (called from :func:`tensordict._engine.ops.install`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from tensordict._engine.tree import leaf_items
from tensordict._keys.nested import unravel_key
from tensordict._kinds.inplace import adopt
from tensordict.base import TensorDictBase, is_tensor_collection

_Tensor = torch.Tensor


def _foreach_unsupported() -> bool:
    """Whether a failed ``torch._foreach_*`` call should be redone leaf by leaf.

    Inside ``torch.vmap`` (any ``torch.func`` transform) the foreach kernels have no
    batching rule; only then is the error not the user's. (Checked on the error path
    only: the eager hot path is unchanged.)
    """
    return torch._C._functorch.peek_interpreter_stack() is not None


def zero_(self: TensorDictBase) -> TensorDictBase:
    """Fill every leaf with zeros, in place.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> TensorDict({"a": torch.ones(2)}, [2]).zero_()["a"]
    tensor([0., 0.])
    """
    leaves = self._flat_tensors([])
    if leaves:
        try:
            torch._foreach_zero_(leaves)
        except RuntimeError:
            if not _foreach_unsupported():
                raise
            for x in leaves:
                x.zero_()
    return self


def fill_(self: TensorDictBase, key: Any, value: Any) -> TensorDictBase:
    """Fill the entry at ``key`` (a leaf or a whole nested tensordict) with ``value``.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> TensorDict({"a": torch.zeros(2)}, [2]).fill_("a", 3)["a"]
    tensor([3., 3.])
    """
    target = self.get(key)
    if isinstance(target, _Tensor):
        target.fill_(value)
    elif isinstance(target, TensorDictBase):
        for leaf in target._flat_tensors([]):
            leaf.fill_(value)
    else:
        raise TypeError(f"fill_(): entry {unravel_key(key)!r} is not a tensor or a tensordict.")
    return self


def detach(self: TensorDictBase) -> TensorDictBase:
    """A tensordict whose leaves are detached from the autograd graph."""
    return self._map_tensors(_Tensor.detach)


def detach_(self: TensorDictBase) -> TensorDictBase:
    """Detach every leaf in place."""
    for x in self._flat_tensors([]):
        x.detach_()
    return self


def _canonical_strides(x: _Tensor) -> bool:
    """Whether ``x`` has the row-major strides of its shape (size-1 dims included)."""
    expected, stride = [], 1
    for size in reversed(x.shape):
        expected.append(stride)
        stride *= size
    return x.stride() == tuple(reversed(expected))


def contiguous(
    self: TensorDictBase, *, canonical: bool = False, inplace: bool = False
) -> TensorDictBase:
    """A tensordict with contiguous leaves (leaves already contiguous are shared).

    With ``canonical=True`` a leaf whose strides are not exactly row-major (possible with
    size-1 dimensions) is copied too; with ``inplace=True`` the tensordict keeps its
    identity and its non-contiguous leaves are replaced by contiguous copies.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict(a=torch.zeros(4, 3).T, batch_size=[3])
    >>> td.contiguous(inplace=True) is td, td["a"].is_contiguous()
    (True, True)
    """

    def fn(x: _Tensor) -> _Tensor:
        if not canonical:
            return x.contiguous()
        return x if _canonical_strides(x) else x.clone(memory_format=torch.contiguous_format)

    if inplace:
        result: TensorDictBase = adopt(
            self, self._map_tensors(fn), "contiguous", keeps_structure=True
        )
        return result
    return self._map_tensors(fn)


def is_contiguous(self: TensorDictBase) -> bool:
    """Whether every leaf is contiguous."""
    return all(x.is_contiguous() for x in self._flat_tensors([]))


def requires_grad_(self: TensorDictBase, requires_grad: bool = True) -> TensorDictBase:
    """Set ``requires_grad`` on every floating-point leaf, in place.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> TensorDict({"a": torch.zeros(2)}, [2]).requires_grad_()["a"].requires_grad
    True
    """
    for x in self._flat_tensors([]):
        if x.is_floating_point() or x.is_complex():
            x.requires_grad_(requires_grad)
    return self


def _grad(self: TensorDictBase) -> TensorDictBase | None:
    out = self.apply(lambda x: x.grad, filter_empty=True)
    if out is None or out.is_empty():  # no leaf has a gradient (as the reference)
        return None
    return out.lock_() if self.is_locked else out


def zero_grad(self: TensorDictBase, set_to_none: bool = True) -> TensorDictBase:
    """Reset the gradient of every leaf: drop it (``set_to_none``) or fill it with zeros.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.ones(2, requires_grad=True)}, [2])
    >>> td.sum(reduce=True).backward()
    >>> td.zero_grad(set_to_none=False).grad["a"]
    tensor([0., 0.])
    """
    leaves = self._flat_tensors([])
    if set_to_none:
        for x in leaves:
            x.grad = None
        return self
    grads = [x.grad for x in leaves if x.grad is not None]
    if grads:
        torch._foreach_zero_(grads)
    return self


def backward(
    self: TensorDictBase,
    gradient: TensorDictBase | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: TensorDictBase | Sequence[_Tensor] | None = None,
) -> None:
    """Back-propagate from the leaves that require grad, like
    :func:`torch.autograd.backward` over them.

    Without ``gradient`` every such leaf must hold one element (a loss); otherwise
    ``gradient`` is a tensordict holding the gradient of each of them under its key.
    ``inputs`` (tensors, or a tensordict of them) restricts the tensors gradients are
    accumulated into.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> w = torch.ones(2, requires_grad=True)
    >>> td = TensorDict({"a": w * 3, "n": {"b": w * w}}, [2])
    >>> td.backward(td.apply(torch.ones_like), retain_graph=True)
    >>> w.grad
    tensor([5., 5.])
    >>> w.grad = None
    >>> td.sum().backward()  # leaves of one element
    >>> w.grad
    tensor([5., 5.])
    """
    pairs = [(k, x) for k, x in leaf_items(self) if isinstance(x, _Tensor) and x.requires_grad]
    if not pairs:
        raise RuntimeError("backward(): no leaf of the tensordict requires grad.")
    grads: list[Any] | None = None
    if gradient is None:
        for key, x in pairs:
            if x.numel() != 1:
                raise RuntimeError(
                    f"backward(): a gradient can be created implicitly only for leaves of one "
                    f"element, but the leaf {unravel_key(key)!r} has shape {tuple(x.shape)}; pass "
                    "a gradient tensordict holding the gradient of each leaf."
                )
    else:
        grads = []
        for key, _ in pairs:
            g = gradient.get(key, None)
            if g is None:
                raise KeyError(
                    f"backward(): the gradient tensordict has no entry {unravel_key(key)!r} for "
                    "a leaf that requires grad."
                )
            grads.append(g)
    if is_tensor_collection(inputs):
        inputs = list(inputs._flat_tensors([]))  # type: ignore[union-attr]
    torch.autograd.backward(
        [x for _, x in pairs],
        grads,
        retain_graph=retain_graph,
        create_graph=create_graph,
        inputs=inputs,  # type: ignore[arg-type]
    )


def as_tensor(self: TensorDictBase) -> TensorDictBase:
    """Leaves that define ``as_tensor()`` (memory-mapped tensors …) as plain tensors; other
    leaves unchanged.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> type(TensorDict({"a": torch.zeros(1)}, [1]).as_tensor()["a"]).__name__
    'Tensor'
    """

    def plain(x: _Tensor) -> _Tensor:
        fn = getattr(x, "as_tensor", None)
        return fn() if fn is not None else x

    return self._map_tensors(plain)


def _requires_grad(self: TensorDictBase) -> bool:
    return any(x.requires_grad for x in self._flat_tensors([]))


def _data(self: TensorDictBase) -> TensorDictBase:
    out = self._map_tensors(lambda x: x.data)
    return out.lock_() if self.is_locked and not out.is_locked else out


def _dtype(self: TensorDictBase) -> torch.dtype | None:
    dtypes = {x.dtype for x in self._flat_tensors([])}
    return dtypes.pop() if len(dtypes) == 1 else None


def is_floating_point(self: TensorDictBase) -> bool:
    """Whether every leaf has a floating-point dtype."""
    return all(x.is_floating_point() for x in self._flat_tensors([]))


def install(cls: type) -> None:
    """Add the methods and properties of this module to ``cls``."""
    for func in (
        zero_,
        fill_,
        detach,
        detach_,
        contiguous,
        is_contiguous,
        requires_grad_,
        zero_grad,
        backward,
        as_tensor,
        is_floating_point,
    ):
        setattr(cls, func.__name__, func)
    properties: dict[str, Any] = {
        "requires_grad": property(_requires_grad, doc="Whether any leaf requires grad."),
        "grad": property(
            _grad,
            doc="A tensordict of the leaves' gradients (leaves without one are left out), or "
            "``None`` when no leaf has one; locked when the tensordict is.",
        ),
        "data": property(
            _data, doc="A tensordict of the leaves' ``.data`` (locked when the tensordict is)."
        ),
        "dtype": property(
            _dtype, doc="The dtype shared by all leaves, or ``None`` if they differ."
        ),
    }
    for name, value in properties.items():
        setattr(cls, name, value)
