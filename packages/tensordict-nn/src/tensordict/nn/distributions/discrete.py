"""Discrete distributions: a one-hot categorical with straight-through samples."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import distributions as D

from tensordict.nn.distributions.utils import NO_SHAPE as _NO_SHAPE

__all__ = ["OneHotCategorical", "rand_one_hot"]


def rand_one_hot(values: torch.Tensor, do_softmax: bool = True) -> torch.Tensor:
    """A one-hot sample along the last dimension (``values`` are logits, or probabilities
    with ``do_softmax=False``).

    >>> import torch
    >>> sample = rand_one_hot(torch.tensor([[0.0, 100.0, 0.0]]))
    >>> sample
    tensor([[0, 1, 0]])
    """
    probs = values.softmax(-1) if do_softmax else values
    n = probs.shape[-1]
    index = torch.multinomial(probs.reshape(-1, n), 1).reshape(probs.shape[:-1])
    return torch.nn.functional.one_hot(index, n)


class OneHotCategorical(D.OneHotCategorical):
    """``torch.distributions.OneHotCategorical`` whose ``mode`` and deterministic sample
    are one-hot, with a straight-through ``rsample`` (the one-hot sample in the forward
    pass, the gradient of the probabilities in the backward pass).

    >>> import torch
    >>> d = OneHotCategorical(logits=torch.tensor([0.0, 5.0, 0.0]))
    >>> d.mode
    tensor([0., 1., 0.])
    >>> d.log_prob(d.mode).exp() > 0.9
    tensor(True)
    """

    def __init__(
        self, logits: torch.Tensor | None = None, probs: torch.Tensor | None = None, **kwargs: Any
    ) -> None:
        super().__init__(probs=probs, logits=logits, **kwargs)

    @property
    def mode(self) -> torch.Tensor:
        index = self.probs.argmax(-1)
        return torch.nn.functional.one_hot(index, self.event_shape[-1]).to(self.probs.dtype)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode

    def rsample(self, sample_shape: torch.Size | Sequence[int] = _NO_SHAPE) -> torch.Tensor:
        sample: torch.Tensor = self.sample(sample_shape)  # type: ignore[no-untyped-call]
        probs: torch.Tensor = self.probs.expand_as(sample)
        return sample + probs - probs.detach()
