"""Continuous distributions and the modules that produce their parameters.

* :class:`Delta`: all the mass on one point (a deterministic "distribution").
* :class:`NormalParamExtractor`: split a tensor into a location and a positive scale.
* :class:`AddStateIndependentNormalScale`: add a learned scale that does not depend on the
  input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import distributions as D
from torch import nn

from tensordict.nn.distributions.utils import NO_SHAPE as _NO_SHAPE
from tensordict.nn.distributions.utils import mappings

__all__ = ["AddStateIndependentNormalScale", "Delta", "NormalParamExtractor"]


class Delta(D.Distribution):
    """A distribution whose only value is ``param``.

    ``log_prob`` is ``+inf`` where the value equals ``param`` (within ``atol``/``rtol``,
    over the event dimensions) and ``-inf`` elsewhere. By default the last dimension
    of ``param`` is the event dimension.

    >>> import torch
    >>> d = Delta(torch.tensor([[1.0, 2.0]]))
    >>> d.batch_shape, d.event_shape
    (torch.Size([1]), torch.Size([2]))
    >>> d.sample((3,)).shape, d.log_prob(torch.tensor([[1.0, 2.0]]))
    (torch.Size([3, 1, 2]), tensor([inf]))
    """

    arg_constraints: dict[str, Any] = {}
    has_rsample = True

    def __init__(
        self,
        param: torch.Tensor,
        atol: float = 1e-6,
        rtol: float = 1e-6,
        batch_shape: torch.Size | Sequence[int] | None = None,
        event_shape: torch.Size | Sequence[int] | None = None,
    ) -> None:
        if batch_shape is None and event_shape is None:
            event_shape = param.shape[-1:] if param.ndim else torch.Size([])
        if event_shape is None:
            event_shape = param.shape[len(batch_shape) :]  # type: ignore[arg-type]
        event_shape = torch.Size(event_shape)
        if batch_shape is None:
            batch_shape = param.shape[: param.ndim - len(event_shape)]
        batch_shape = torch.Size(batch_shape)
        if param.shape[param.ndim - len(event_shape) :] != event_shape and event_shape:
            raise ValueError(
                f"Delta: param of shape {tuple(param.shape)} does not end with the event "
                f"shape {tuple(event_shape)}."
            )
        self.param = param
        self.atol = atol
        self.rtol = rtol
        super().__init__(batch_shape=batch_shape, event_shape=event_shape, validate_args=False)

    def expand(self, batch_shape: Any, _instance: Delta | None = None) -> Delta:
        shape = torch.Size(batch_shape) + self.event_shape
        return Delta(self.param.expand(shape), self.atol, self.rtol, batch_shape, self.event_shape)

    def _is_equal(self, value: torch.Tensor) -> torch.Tensor:
        equal = torch.isclose(value, self.param.expand_as(value), atol=self.atol, rtol=self.rtol)
        for _ in self.event_shape:
            equal = equal.all(-1)
        return equal

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        equal = self._is_equal(value)
        return torch.where(equal, torch.inf, -torch.inf).to(self.param.dtype)

    @torch.no_grad()
    def sample(self, sample_shape: torch.Size | Sequence[int] = _NO_SHAPE) -> torch.Tensor:
        return self.param.expand(*sample_shape, *self.param.shape).clone()

    def rsample(self, sample_shape: torch.Size | Sequence[int] = _NO_SHAPE) -> torch.Tensor:
        return self.param.expand(*sample_shape, *self.param.shape)

    @property
    def mode(self) -> torch.Tensor:
        return self.param

    @property
    def mean(self) -> torch.Tensor:
        return self.param

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.param

    def entropy(self) -> torch.Tensor:
        raise NotImplementedError(
            "Delta has no (differential) entropy: all its mass is on one point."
        )


class NormalParamExtractor(nn.Module):
    """Split the last dimension of a tensor in two: a location and a positive scale.

    Args:
        scale_mapping: the name of the mapping that makes the scale positive (see
            :func:`~tensordict.nn.mappings`).
        scale_lb: the smallest scale.

    >>> import torch
    >>> loc, scale = NormalParamExtractor()(torch.zeros(3, 4))
    >>> loc.shape, scale
    (torch.Size([3, 2]), tensor([[1., 1.],
            [1., 1.],
            [1., 1.]]))
    """

    def __init__(self, scale_mapping: str = "biased_softplus_1.0", scale_lb: float = 1e-4) -> None:
        super().__init__()
        self.scale_mapping = mappings(scale_mapping)
        self.scale_lb = scale_lb

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        tensor, *others = tensors
        if not tensor.ndim:  # (a RuntimeError, as torch.chunk raises in the reference)
            raise RuntimeError(
                "NormalParamExtractor splits the last dimension of its input in two halves "
                "(loc, scale): it needs a tensor with at least one dimension, the last of even "
                "size; got a 0-dim tensor."
            )
        if tensor.shape[-1] % 2:
            raise ValueError(
                f"NormalParamExtractor splits the last dimension in two halves (loc, scale): "
                f"it needs a last dimension of even size; got a tensor of shape "
                f"{tuple(tensor.shape)} whose last dimension is odd."
            )
        loc, scale = tensor.chunk(2, -1)
        scale = self.scale_mapping(scale).clamp_min(self.scale_lb)
        return (loc, scale, *others)


class AddStateIndependentNormalScale(nn.Module):
    """Return ``(loc, scale, *rest)`` with a learned scale independent of the input.

    Args:
        scale_shape: the shape of the scale (the trailing shape of ``loc``).
        scale_mapping: maps the learned parameter to a positive scale.
        scale_lb: the smallest scale.
        device: where the parameter lives.
        make_param: learn the scale (else it is a buffer).
        init_value: the initial value of the parameter before the mapping.

    >>> import torch
    >>> module = AddStateIndependentNormalScale(4)
    >>> loc, scale = module(torch.zeros(3, 4))
    >>> scale.shape, bool((scale == 1).all())
    (torch.Size([3, 4]), True)
    """

    def __init__(
        self,
        scale_shape: torch.Size | int | tuple[int, ...] | None = None,
        *,
        scale_mapping: str = "exp",
        scale_lb: float = 1e-4,
        device: torch.device | None = None,
        make_param: bool = True,
        init_value: float = 0.0,
    ) -> None:
        super().__init__()
        if scale_shape is None:
            scale_shape = torch.Size([])
        elif isinstance(scale_shape, int):
            scale_shape = torch.Size([scale_shape])
        else:
            scale_shape = torch.Size(scale_shape)
        self.scale_shape = scale_shape
        self.scale_mapping = mappings(scale_mapping)
        self.scale_lb = scale_lb
        value = torch.full(scale_shape, float(init_value), device=device)
        if make_param:
            self.scale = nn.Parameter(value)
        else:
            self.register_buffer("scale", value)

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        loc, *others = tensors
        n = len(self.scale_shape)
        if n and loc.shape[-n:] != self.scale_shape:
            raise RuntimeError(
                f"AddStateIndependentNormalScale: loc of shape {tuple(loc.shape)} does not end "
                f"with the scale shape {tuple(self.scale_shape)}."
            )
        scale = self.scale_mapping(self.scale).clamp_min(self.scale_lb).expand_as(loc)
        return (loc, scale, *others)
