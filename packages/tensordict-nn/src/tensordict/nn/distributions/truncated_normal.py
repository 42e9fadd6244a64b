"""``TruncatedNormal``: a normal distribution restricted to an interval ``[a, b]``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Number
from typing import Any

import torch
from torch import distributions as D
from torch.distributions import constraints
from torch.distributions.utils import broadcast_all

from tensordict.nn.distributions.utils import NO_SHAPE as _NO_SHAPE

__all__ = ["TruncatedNormal", "TruncatedStandardNormal"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _pdf(x: torch.Tensor) -> torch.Tensor:
    return torch.exp(-0.5 * x * x - _LOG_SQRT_2PI)


class TruncatedNormal(D.Distribution):
    """The normal distribution ``N(loc, scale)`` conditioned on ``a <= x <= b``.

    ``a`` and ``b`` are bounds on the values (not on the standardised variable).
    Samples are reparameterised (``rsample``), through the inverse CDF.

    >>> import torch
    >>> d = TruncatedNormal(torch.zeros(2), torch.ones(2), -1.0, 2.0)
    >>> d.mean
    tensor([0.2296, 0.2296])
    >>> bool(((d.sample((100,)) >= -1) & (d.sample((100,)) <= 2)).all())
    True
    """

    arg_constraints = {
        "loc": constraints.real,
        "scale": constraints.positive,
        "a": constraints.real,
        "b": constraints.real,
    }
    has_rsample = True
    eps = 1e-6

    def __init__(
        self,
        loc: Number | torch.Tensor,
        scale: Number | torch.Tensor,
        a: Number | torch.Tensor,
        b: Number | torch.Tensor,
        validate_args: bool | None = None,
    ) -> None:
        self.loc, self.scale, self.a, self.b = broadcast_all(loc, scale, a, b)  # type: ignore[arg-type]
        if validate_args is not False and bool((self.a >= self.b).any()):
            raise ValueError("TruncatedNormal needs a < b everywhere.")
        dtype = self.loc.dtype
        self._alpha = (self.a - self.loc) / self.scale
        self._beta = (self.b - self.loc) / self.scale
        self._cdf_alpha = torch.special.ndtr(self._alpha)
        self._z = (torch.special.ndtr(self._beta) - self._cdf_alpha).clamp_min(
            torch.finfo(dtype).tiny
        )
        super().__init__(batch_shape=self.loc.shape, validate_args=validate_args)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.interval(self.a, self.b)  # type: ignore[no-untyped-call]

    def expand(self, batch_shape: Any, _instance: TruncatedNormal | None = None) -> TruncatedNormal:
        shape = torch.Size(batch_shape)
        return TruncatedNormal(
            self.loc.expand(shape),
            self.scale.expand(shape),
            self.a.expand(shape),
            self.b.expand(shape),
            validate_args=False,
        )

    # ------------------------------------------------------------------ moments
    @property
    def _pdf_gap(self) -> torch.Tensor:
        gap: torch.Tensor = (_pdf(self._alpha) - _pdf(self._beta)) / self._z
        return gap

    @property
    def mean(self) -> torch.Tensor:
        return self.loc + self.scale * self._pdf_gap

    @property
    def mode(self) -> torch.Tensor:
        return torch.maximum(torch.minimum(self.loc, self.b), self.a)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mean

    @property
    def variance(self) -> torch.Tensor:
        alpha_pdf = self._alpha * _pdf(self._alpha)
        beta_pdf = torch.where(self._beta.isinf(), 0.0, self._beta * _pdf(self._beta))
        alpha_pdf = torch.where(self._alpha.isinf(), 0.0, alpha_pdf)
        ratio = (alpha_pdf - beta_pdf) / self._z
        variance: torch.Tensor = self.scale.pow(2) * (1 + ratio - self._pdf_gap.pow(2))
        return variance

    def entropy(self) -> torch.Tensor:
        alpha_pdf = torch.where(self._alpha.isinf(), 0.0, self._alpha * _pdf(self._alpha))
        beta_pdf = torch.where(self._beta.isinf(), 0.0, self._beta * _pdf(self._beta))
        entropy: torch.Tensor = (
            _LOG_SQRT_2PI
            + 0.5
            + self.scale.log()
            + self._z.log()
            + (alpha_pdf - beta_pdf) / (2 * self._z)
        )
        return entropy

    # ------------------------------------------------------------------ density
    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        if self._validate_args:
            self._validate_sample(value)
        xi = (value - self.loc) / self.scale
        log_prob: torch.Tensor = -0.5 * xi * xi - _LOG_SQRT_2PI - self.scale.log() - self._z.log()
        return log_prob

    def cdf(self, value: torch.Tensor) -> torch.Tensor:
        xi = (value - self.loc) / self.scale
        cdf: torch.Tensor = ((torch.special.ndtr(xi) - self._cdf_alpha) / self._z).clamp(0, 1)
        return cdf

    def icdf(self, value: torch.Tensor) -> torch.Tensor:
        p = (self._cdf_alpha + value * self._z).clamp(self.eps, 1 - self.eps)
        x = self.loc + self.scale * torch.special.ndtri(p)
        return torch.maximum(torch.minimum(x, self.b), self.a)

    def rsample(self, sample_shape: torch.Size | Sequence[int] = _NO_SHAPE) -> torch.Tensor:
        shape = self._extended_shape(torch.Size(sample_shape))
        u = torch.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)


class TruncatedStandardNormal(TruncatedNormal):
    """The standard normal distribution ``N(0, 1)`` conditioned on ``a <= x <= b``.

    >>> import torch
    >>> d = TruncatedStandardNormal(torch.tensor([-1.0]), torch.tensor([2.0]))
    >>> d.mean
    tensor([0.2296])
    >>> torch.allclose(d.log_prob(torch.tensor([0.5])), torch.tensor([-0.8438]), atol=1e-4)
    True
    """

    arg_constraints = {"a": constraints.real, "b": constraints.real}

    def __init__(
        self,
        a: Number | torch.Tensor,
        b: Number | torch.Tensor,
        validate_args: bool | None = None,
    ) -> None:
        a_t, b_t = broadcast_all(a, b)  # type: ignore[arg-type]
        super().__init__(torch.zeros_like(a_t), torch.ones_like(a_t), a_t, b_t, validate_args)

    @property
    def auc(self) -> torch.Tensor:
        """The probability mass of ``[a, b]`` under the standard normal."""
        auc: torch.Tensor = self._z
        return auc

    def expand(
        self, batch_shape: Any, _instance: TruncatedNormal | None = None
    ) -> TruncatedStandardNormal:
        shape = torch.Size(batch_shape)
        return TruncatedStandardNormal(self.a.expand(shape), self.b.expand(shape), False)
