"""``CompositeDistribution``: several distributions, one per key, sampled into a tensordict."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import distributions as D

from tensordict import TensorDict, TensorDictBase, unravel_key
from tensordict._plugins.api import NestedKey
from tensordict.nn._interaction import deterministic_sample
from tensordict.nn.distributions.utils import NO_SHAPE as _NO_SHAPE
from tensordict.nn.utils import composite_lp_aggregate

__all__ = ["CompositeDistribution", "suffixed"]


def suffixed(key: NestedKey, suffix: str) -> NestedKey:
    """``key`` with ``suffix`` appended to its last part.

    >>> suffixed(("nested", "action"), "_log_prob")
    ('nested', 'action_log_prob')
    """
    key = unravel_key(key)
    if isinstance(key, str):
        return key + suffix
    return (*key[:-1], key[-1] + suffix)


def _sum_beyond(tensor: torch.Tensor, ndim: int) -> torch.Tensor:
    if tensor.ndim > ndim:
        return tensor.sum(tuple(range(ndim, tensor.ndim)))
    return tensor


class CompositeDistribution(D.Distribution):
    """A distribution over a tensordict: one distribution per entry.

    Args:
        params: a tensordict holding, at each key of ``distribution_map``, a tensordict
            of that distribution's keyword arguments.
        distribution_map: key -> distribution class.
        name_map: key -> the key the samples of that distribution are written to.
        extra_kwargs: key -> more keyword arguments for that distribution.
        log_prob_key: where the summed log-probability goes when
            :func:`~tensordict.nn.composite_lp_aggregate` is on (``"sample_log_prob"``).
        entropy_key: the same for the entropy (``"entropy"``).

    Samples are tensordicts with batch shape ``sample_shape + params.shape``.
    ``log_prob`` and ``entropy`` return a tensordict with one ``<name>_log_prob``
    (``<name>_entropy``) entry per distribution, or, when ``composite_lp_aggregate()``
    is true, one tensor: the sum of every entry over its dimensions beyond the batch.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import CompositeDistribution
    >>> params = TensorDict({
    ...     "move": {"loc": torch.zeros(3, 2), "scale": torch.ones(3, 2)},
    ...     "pick": {"logits": torch.zeros(3, 4)},
    ... }, [3])
    >>> dist = CompositeDistribution(params, {
    ...     "move": torch.distributions.Normal, "pick": torch.distributions.Categorical})
    >>> sample = dist.sample((5,))
    >>> sample["move"].shape, sample["pick"].shape
    (torch.Size([5, 3, 2]), torch.Size([5, 3]))
    >>> sorted(dist.log_prob(sample).keys())
    ['move_log_prob', 'pick_log_prob']
    """

    arg_constraints: dict[str, Any] = {}

    def __init__(
        self,
        params: TensorDictBase,
        distribution_map: dict[Any, Any],
        *,
        name_map: dict[Any, Any] | None = None,
        extra_kwargs: dict[Any, Any] | None = None,
        log_prob_key: NestedKey | None = None,
        entropy_key: NestedKey | None = None,
    ) -> None:
        names = {unravel_key(k): unravel_key(v) for k, v in (name_map or {}).items()}
        extra = {unravel_key(k): v for k, v in (extra_kwargs or {}).items()}
        dists: dict[Any, D.Distribution] = {}
        for key, dist_class in distribution_map.items():
            key = unravel_key(key)
            dist_params = params.get(key, None)
            if dist_params is None:
                raise KeyError(
                    f"CompositeDistribution: no parameters for {key!r} in the params "
                    f"tensordict (keys: {sorted(map(str, params.keys(True, True)))})."
                )
            kwargs = dict(dist_params.items()) if isinstance(dist_params, TensorDictBase) else {}
            kwargs.update(extra.get(key, {}))
            dists[names.get(key, key)] = dist_class(**kwargs)  # type: ignore[arg-type]
        self._setup(dists, params.batch_size, log_prob_key, entropy_key)

    def _setup(
        self,
        dists: dict[Any, Any],
        batch_shape: torch.Size,
        log_prob_key: NestedKey | None,
        entropy_key: NestedKey | None,
    ) -> None:
        self.dists = dists
        self.log_prob_key = unravel_key(log_prob_key) if log_prob_key else "sample_log_prob"
        self.entropy_key = unravel_key(entropy_key) if entropy_key else "entropy"
        super().__init__(batch_shape=torch.Size(batch_shape), validate_args=False)

    @classmethod
    def from_distributions(
        cls,
        params: TensorDictBase,
        distributions: dict[Any, Any],
        *,
        name_map: dict[Any, Any] | None = None,
        log_prob_key: NestedKey | None = None,
        entropy_key: NestedKey | None = None,
    ) -> CompositeDistribution:
        """A composite of already built distributions (``key -> distribution``);
        ``params`` gives the batch shape."""
        names = {unravel_key(k): unravel_key(v) for k, v in (name_map or {}).items()}
        self = cls.__new__(cls)
        dists = {names.get(unravel_key(k), unravel_key(k)): d for k, d in distributions.items()}
        self._setup(dists, params.batch_size, log_prob_key, entropy_key)
        return self

    # ------------------------------------------------------------------ samples
    def _gather(self, fn: Callable[[Any, D.Distribution], Any], batch: Sequence[int]) -> TensorDict:
        out = TensorDict(batch_size=torch.Size(batch))
        for name, dist in self.dists.items():
            out.set(name, fn(name, dist))
        return out

    def sample(self, sample_shape: torch.Size | Sequence[int] = _NO_SHAPE) -> TensorDict:  # type: ignore[override]
        shape = torch.Size(sample_shape)
        return self._gather(lambda _, d: d.sample(shape), shape + self.batch_shape)

    def rsample(self, sample_shape: torch.Size | Sequence[int] = _NO_SHAPE) -> TensorDict:  # type: ignore[override]
        shape = torch.Size(sample_shape)
        return self._gather(lambda _, d: d.rsample(shape), shape + self.batch_shape)

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return all(d.has_rsample for d in self.dists.values())

    @property
    def mode(self) -> TensorDict:  # type: ignore[override]
        return self._gather(lambda _, d: d.mode, self.batch_shape)

    @property
    def mean(self) -> TensorDict:  # type: ignore[override]
        return self._gather(lambda _, d: d.mean, self.batch_shape)

    @property
    def deterministic_sample(self) -> TensorDict:
        return self._gather(lambda _, d: deterministic_sample(d, 1000), self.batch_shape)

    # ------------------------------------------------------------------ densities
    def log_prob_composite(
        self, sample: TensorDictBase, include_sum: bool | None = None
    ) -> TensorDict:
        """One ``<name>_log_prob`` entry per distribution (and, when ``include_sum`` or
        :func:`~tensordict.nn.composite_lp_aggregate`, their sum at ``log_prob_key``)."""
        out = TensorDict(batch_size=sample.batch_size)
        total = self._log_probs_into(sample, out)
        if include_sum if include_sum is not None else composite_lp_aggregate():
            out.set(self.log_prob_key, total)
        return out

    def log_prob(self, sample: TensorDictBase, **kwargs: Any) -> TensorDictBase | torch.Tensor:  # type: ignore[override]
        """The log-probability of a sample (see the class docstring for its form).

        When aggregating, the per-distribution entries are also written into ``sample``.
        """
        if composite_lp_aggregate():
            return self._log_probs_into(sample, sample)
        return self.log_prob_composite(sample, include_sum=False)

    def _log_probs_into(self, sample: TensorDictBase, out: TensorDictBase) -> torch.Tensor:
        """Write each ``<name>_log_prob`` of ``sample`` into ``out``; return their sum
        (each summed over its dimensions beyond the sample's batch)."""
        total: Any = None
        for name, dist in self.dists.items():
            lp = dist.log_prob(sample.get(name))
            out.set(suffixed(name, "_log_prob"), lp)
            part = _sum_beyond(lp, sample.ndim)
            total = part if total is None else total + part
        return total  # type: ignore[no-any-return]

    def entropy(self, samples_mc: int = 1) -> TensorDictBase | torch.Tensor:  # type: ignore[override]
        """The entropy of each distribution (a Monte-Carlo estimate with ``samples_mc``
        samples where it has no closed form)."""
        parts = {}
        for name, dist in self.dists.items():
            try:
                parts[name] = dist.entropy()
            except NotImplementedError:
                x = dist.rsample((samples_mc,))
                parts[name] = -dist.log_prob(x).mean(0)
        if composite_lp_aggregate():
            total = None
            for value in parts.values():
                part = _sum_beyond(value, len(self.batch_shape))
                total = part if total is None else total + part
            return total  # type: ignore[return-value]
        out = TensorDict(batch_size=self.batch_shape)
        for name, value in parts.items():
            out.set(suffixed(name, "_entropy"), value)
        return out

    def cdf(self, sample: TensorDictBase) -> TensorDictBase:  # type: ignore[override]
        """Write ``<name>_cdf`` for every distribution into ``sample``; return it."""
        for name, dist in self.dists.items():
            sample.set(suffixed(name, "_cdf"), dist.cdf(sample.get(name)))
        return sample

    def icdf(self, sample: TensorDictBase) -> TensorDictBase:  # type: ignore[override]
        """Write ``<name>_icdf``, the inverse CDF of ``<name>_cdf`` (or of ``<name>``),
        for every distribution into ``sample``; return it."""
        for name, dist in self.dists.items():
            value = sample.get(suffixed(name, "_cdf"), None)
            if value is None:
                value = sample.get(name)
            sample.set(suffixed(name, "_icdf"), dist.icdf(value))
        return sample

    def __repr__(self) -> str:
        inner = ", ".join(f"{k!r}: {d}" for k, d in self.dists.items())
        return f"CompositeDistribution({{{inner}}})"


def is_composite_class(distribution_class: Any) -> bool:
    """Whether ``distribution_class`` builds a CompositeDistribution (a subclass, or a
    ``functools.partial`` of one)."""
    func = getattr(distribution_class, "func", distribution_class)
    return isinstance(func, type) and issubclass(func, CompositeDistribution)


def composite_keys(distribution_class: Any, distribution_kwargs: Mapping[str, Any]) -> list[Any]:
    """The sample keys of the composite that ``distribution_class(**kwargs)`` builds."""
    kwargs = {**getattr(distribution_class, "keywords", {}), **distribution_kwargs}
    dist_map = kwargs.get("distribution_map")
    if dist_map is None:
        raise ValueError(
            "A CompositeDistribution needs a distribution_map in distribution_kwargs (or in "
            "the partial) for its sample keys to be known."
        )
    names = {unravel_key(k): unravel_key(v) for k, v in (kwargs.get("name_map") or {}).items()}
    return [names.get(unravel_key(k), unravel_key(k)) for k in dist_map]
