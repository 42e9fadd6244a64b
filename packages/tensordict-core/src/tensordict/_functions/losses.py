"""Element-wise loss functions of :mod:`torch.nn.functional` on tensordicts.

``torch.nn.functional.l1_loss(td, target)`` (and ``mse_loss``, ``smooth_l1_loss``,
``huber_loss``) computes the loss of every tensor leaf against the matching entry of a
target tensordict (or a tensor lined up with the batch dimensions, as in arithmetic):
``reduction="none"`` gives a tensordict of the same structure, ``"mean"``/``"sum"`` a
tensordict of one scalar per leaf (``batch_size=[]``), as the reference does.

>>> import torch
>>> import torch.nn.functional as F
>>> from tensordict import TensorDict
>>> td = TensorDict({"a": torch.ones(3, 2), "b": {"c": torch.zeros(3)}}, [3])
>>> F.l1_loss(td, -td)["a"], F.mse_loss(td, -td, reduction="none")["a"].shape
(tensor(2.), torch.Size([3, 2]))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.nn.functional as F

from tensordict._engine.ops import _operands
from tensordict.base import TensorDictBase, implements_for_td

#: the losses computed leaf by leaf: name -> the torch function
LOSSES: dict[str, Callable[..., Any]] = {
    "l1_loss": F.l1_loss,
    "mse_loss": F.mse_loss,
    "smooth_l1_loss": F.smooth_l1_loss,
    "huber_loss": F.huber_loss,
}


def _make_loss(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def loss(
        input: TensorDictBase,
        target: Any,
        *args: Any,
        reduction: str = "mean",
        **kwargs: Any,
    ) -> TensorDictBase:
        if reduction not in ("none", "mean", "sum"):
            raise ValueError(
                f"{name}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}."
            )
        if not isinstance(input, TensorDictBase):  # these losses are symmetric
            input, target = target, input
        leaves = input._flat_tensors([])
        targets = _operands(input, target, leaves)
        out = []
        for i, x in enumerate(leaves):
            t = targets[i] if isinstance(targets, list) else targets
            if hasattr(t, "expand_as") and t.shape != x.shape:
                t = t.expand_as(x)  # lined up with the batch dims: broadcast explicitly
            out.append(fn(x, t, *args, reduction="none", **kwargs))
        result = input._rebuild(iter(out))
        if reduction == "none":
            return result
        return result.mean() if reduction == "mean" else result.sum()

    loss.__name__ = name
    loss.__doc__ = f":func:`torch.nn.functional.{name}` leaf by leaf (see :mod:`tensordict._functions.losses`)."
    return loss


for _name, _fn in LOSSES.items():
    implements_for_td(_fn)(_make_loss(_name, _fn))
