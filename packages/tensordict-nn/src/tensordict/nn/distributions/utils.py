"""Mappings from unconstrained reals to positive scales, by name.

``mappings("biased_softplus_1.0")`` is the softplus shifted so that ``f(0) == 1.0`` and
bounded below by ``0.01``; ``"biased_softplus_2.0_0.1"`` sets the bound too.
:func:`add_custom_mapping` registers more names.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

#: The default sample shape of the distributions (one shared constant).
NO_SHAPE = torch.Size()

__all__ = ["add_custom_mapping", "biased_softplus", "expln", "inv_softplus", "mappings"]


def inv_softplus(bias: float | torch.Tensor) -> float | torch.Tensor:
    """The inverse of softplus: ``log(exp(y) - 1)``.

    >>> import torch
    >>> round(inv_softplus(1.0), 4)
    0.5413
    >>> torch.nn.functional.softplus(inv_softplus(torch.tensor(2.0)))
    tensor(2.)
    """
    if isinstance(bias, torch.Tensor):
        return bias.expm1().log()
    return math.log(math.expm1(bias))


class biased_softplus(nn.Module):
    """``softplus(x + shift) + min_val`` with the shift chosen so that ``f(0) == bias``.

    >>> import torch
    >>> biased_softplus(1.0)(torch.zeros(2))
    tensor([1., 1.])
    >>> biased_softplus(1.0, min_val=0.1)(torch.tensor([-100.0]))
    tensor([0.1000])
    """

    def __init__(self, bias: float, min_val: float = 0.01) -> None:
        super().__init__()
        if bias <= min_val:
            raise ValueError(
                f"biased_softplus needs bias > min_val; got bias={bias}, min_val={min_val}."
            )
        self.bias = inv_softplus(bias - min_val)
        self.min_val = min_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.softplus(x + self.bias) + self.min_val


def expln(x: torch.Tensor) -> torch.Tensor:
    """``exp(x)`` for ``x <= 0``, ``log1p(x) + 1`` above: positive, grows slowly.

    >>> import torch
    >>> expln(torch.tensor([-1.0, 0.0, 1.0]))
    tensor([0.3679, 1.0000, 1.6931])
    """
    return torch.where(x <= 0, x.clamp(max=0).exp(), x.clamp(min=0).log1p() + 1)


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


_MAPPINGS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "softplus": torch.nn.functional.softplus,
    "exp": torch.exp,
    "relu": torch.relu,
    "expln": expln,
    "none": _identity,
}


def add_custom_mapping(name: str, mapping: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Register ``mapping`` under ``name`` for :func:`mappings` (and the modules using it).

    >>> import torch
    >>> add_custom_mapping("square", lambda x: x**2)
    >>> mappings("square")(torch.tensor(3.0))
    tensor(9.)
    """
    if not callable(mapping):
        raise TypeError(f"add_custom_mapping: the mapping for {name!r} must be callable.")
    _MAPPINGS[name] = mapping


def mappings(key: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The mapping registered as ``key`` (``"softplus"``, ``"exp"``, ``"relu"``,
    ``"expln"``, ``"none"``, ``"biased_softplus[_<bias>[_<min_val>]]"`` or a custom one).

    >>> import torch
    >>> mappings("biased_softplus_2.0")(torch.zeros(1))
    tensor([2.])
    """
    if key in _MAPPINGS:
        return _MAPPINGS[key]
    if key.startswith("biased_softplus"):
        parts = key.split("_")[2:]
        try:
            values = [float(p) for p in parts]
        except ValueError:
            raise NotImplementedError(f"Unknown mapping {key}: cannot read its numbers.") from None
        if len(values) > 2:
            raise NotImplementedError(f"Unknown mapping {key}: at most a bias and a minimum.")
        return biased_softplus(*(values or [1.0]))
    raise NotImplementedError(
        f"Unknown mapping {key}; known: {sorted(_MAPPINGS)} and biased_softplus_<bias>[_<min>]."
    )
