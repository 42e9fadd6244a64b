"""``ProbabilisticTensorDictSequential``: modules computing distribution parameters, then
probabilistic modules that draw from them."""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any, cast

import torch
from torch import distributions as D
from torch import nn

from tensordict import TensorDictBase
from tensordict._plugins.api import NestedKey
from tensordict.nn._interaction import InteractionType
from tensordict.nn._keys import as_key_list
from tensordict.nn.distributions.composite import CompositeDistribution
from tensordict.nn.probabilistic import ProbabilisticTensorDictModule
from tensordict.nn.sequence import TensorDictSequential

__all__ = ["ProbabilisticTensorDictSequential"]


def _is_prob(module: Any) -> bool:
    return isinstance(module, (ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential))


class ProbabilisticTensorDictSequential(TensorDictSequential):
    """A :class:`~tensordict.nn.TensorDictSequential` whose probabilistic modules define
    a distribution over its outputs.

    Args:
        *modules: the modules (or one ``OrderedDict`` of them); none raises
            :class:`ValueError`. Without a probabilistic module the sequence runs as a
            ``TensorDictSequential`` and :meth:`get_dist` raises :class:`RuntimeError`.
        partial_tolerant, selected_out_keys, inplace: as for ``TensorDictSequential``.
        return_composite: make :meth:`get_dist` return a
            :class:`~tensordict.nn.CompositeDistribution` over every probabilistic
            module's samples. Defaults to ``True`` when there are several probabilistic
            modules or the last module is not one; with ``False`` the last module must
            be probabilistic and :meth:`get_dist` returns its distribution.

    >>> import torch
    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import (NormalParamExtractor, ProbabilisticTensorDictModule,
    ...     ProbabilisticTensorDictSequential, TensorDictModule)
    >>> policy = ProbabilisticTensorDictSequential(
    ...     TensorDictModule(nn.Sequential(nn.Linear(3, 4), NormalParamExtractor()),
    ...                      in_keys=["obs"], out_keys=["loc", "scale"]),
    ...     ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"],
    ...                                   distribution_class=torch.distributions.Normal,
    ...                                   return_log_prob=True))
    >>> td = policy(TensorDict(obs=torch.randn(5, 3), batch_size=[5]))
    >>> td["action"].shape, policy.log_prob(td).shape
    (torch.Size([5, 2]), torch.Size([5, 2]))
    """

    def __init__(
        self,
        *modules: Any,
        partial_tolerant: bool = False,
        return_composite: bool | None = None,
        selected_out_keys: list[NestedKey] | None = None,
        inplace: bool | None = None,
    ) -> None:
        listed = (
            list(modules[0].values())
            if len(modules) == 1 and isinstance(modules[0], dict)
            else list(modules)
        )
        if not listed:  # (a ValueError, as the reference)
            raise ValueError(
                "ProbabilisticTensorDictSequential needs modules: zero or more modules that "
                "compute distribution parameters, then at least one "
                "ProbabilisticTensorDictModule; none were given."
            )
        prob = [m for m in listed if _is_prob(m)]
        if return_composite is None:
            # without a probabilistic module it runs as a TensorDictSequential (as the
            # reference); get_dist and log_prob then raise
            return_composite = len(prob) > 1 or not _is_prob(listed[-1])
        elif not return_composite and not _is_prob(listed[-1]):
            raise TypeError(
                f"ProbabilisticTensorDictSequential(return_composite=False): the last module "
                f"must be probabilistic (a ProbabilisticTensorDictModule or "
                f"ProbabilisticTensorDictSequential), since get_dist() returns its "
                f"distribution; it is a {type(listed[-1]).__name__}. Pass "
                "return_composite=True to end with deterministic modules."
            )
        # Not passing selected_out_keys up: subclasses may put a class whose __init__
        # does not take it between this one and TensorDictSequential.
        super().__init__(*modules, partial_tolerant=partial_tolerant, inplace=inplace)
        self.return_composite = return_composite
        self._requires_sample = bool(prob)
        if selected_out_keys is not None:
            self.select_out_keys(*as_key_list(selected_out_keys, "selected_out_keys"))

    def _new_like(self, modules: list[nn.Module], names: list[str] | None) -> TensorDictSequential:
        args: Any = (OrderedDict(zip(names, modules)),) if names is not None else modules
        if any(_is_prob(m) for m in modules) and (self.return_composite or _is_prob(modules[-1])):
            return ProbabilisticTensorDictSequential(
                *args,
                partial_tolerant=self.partial_tolerant,
                return_composite=self.return_composite,
                inplace=self.inplace,  # type: ignore[arg-type]
            )
        return TensorDictSequential(
            *args, partial_tolerant=self.partial_tolerant, inplace=self.inplace
        )

    # ------------------------------------------------------------------ parts
    def _prob_modules(self) -> list[Any]:
        return [m for m in self._module_list() if _is_prob(m)]

    def _last_prob(self) -> Any:
        prob = self._prob_modules()
        if not prob:
            names = [type(m).__name__ for m in self._module_list()]
            raise RuntimeError(
                f"This ProbabilisticTensorDictSequential has no probabilistic module (its "
                f"modules are {names}): it defines no distribution. Add a "
                "ProbabilisticTensorDictModule."
            )
        return prob[-1]

    @property
    def _det_part(self) -> TensorDictSequential | None:
        modules = self._module_list()
        if not self._prob_modules():
            return None
        last = max(i for i, m in enumerate(modules) if _is_prob(m))
        return TensorDictSequential(*modules[:last]) if last else None

    @property
    def det_part(self) -> TensorDictSequential | None:
        """Deprecated: the modules before the last probabilistic one."""
        warnings.warn(
            "ProbabilisticTensorDictSequential.det_part is deprecated and will be removed in "
            "TensorDict 0.17. Use get_dist_params() instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._det_part

    @property
    def default_interaction_type(self) -> InteractionType:
        """The default interaction type of the last probabilistic module."""
        kind: InteractionType = self._last_prob().default_interaction_type
        return kind

    @property
    def num_samples(self) -> torch.Size | tuple[int, ...]:
        """The number of samples drawn by the last probabilistic module (``()``: one)."""
        prob = self._prob_modules()
        value = prob[-1].num_samples if prob else None
        return () if value is None else value

    def _keys_of_prob_modules(self, attribute: str) -> list[Any]:
        keys: list[Any] = []
        for module in self._prob_modules():
            keys += [k for k in getattr(module, attribute) if k not in keys]
        return keys

    @property
    def dist_params_keys(self) -> list[Any]:
        """The keys of the distribution parameters of the probabilistic modules."""
        return self._keys_of_prob_modules("dist_params_keys")

    @property
    def dist_sample_keys(self) -> list[Any]:
        """The keys the probabilistic modules write their samples to."""
        return self._keys_of_prob_modules("dist_sample_keys")

    @property
    def log_prob_keys(self) -> list[Any]:
        """The keys the probabilistic modules write log-probabilities to."""
        return self._keys_of_prob_modules("log_prob_keys")

    @property
    def log_prob_key(self) -> Any:
        keys = self.log_prob_keys
        if len(keys) != 1:
            raise RuntimeError(
                f"This sequence writes several log-probabilities {keys}; read log_prob_keys."
            )
        return keys[0]

    # ------------------------------------------------------------------ distributions
    def get_dist_params(
        self,
        tensordict: TensorDictBase,
        tensordict_out: TensorDictBase | None = None,
        **kwargs: Any,
    ) -> TensorDictBase:
        """Run the modules before the last probabilistic one (in place) and return the
        tensordict holding the distribution parameters."""
        det = self._det_part
        if det is None:
            return tensordict if tensordict_out is None else tensordict_out
        out: TensorDictBase = det(tensordict, tensordict_out=tensordict_out, **kwargs)
        return out

    def build_dist_from_params(self, tensordict: TensorDictBase) -> D.Distribution:
        """The last probabilistic module's distribution from parameters already computed."""
        dist: D.Distribution = self._last_prob().build_dist_from_params(tensordict)
        return dist

    def get_dist(
        self,
        tensordict: TensorDictBase,
        tensordict_out: TensorDictBase | None = None,
        **kwargs: Any,
    ) -> D.Distribution:
        """The distribution of the sequence's samples.

        Without ``return_composite``: the last probabilistic module's distribution, once
        the modules before it ran. With it: a :class:`CompositeDistribution` over every
        probabilistic module's samples; earlier probabilistic modules draw their samples
        (when not already in ``tensordict``) for the modules after them.
        """
        self._last_prob()  # no probabilistic module: a RuntimeError (as the reference)
        if not self.return_composite:
            params = self.get_dist_params(tensordict, tensordict_out, **kwargs)
            dist: D.Distribution = self._last_prob().get_dist(params)
            return dist
        td = tensordict if tensordict_out is None else tensordict_out
        dists: dict[Any, D.Distribution] = {}
        modules = self._module_list()
        last = len(modules) - 1
        for i, module in enumerate(modules):
            module = cast(Any, module)
            if not _is_prob(module):
                td = module(td, **kwargs)
                continue
            dist = module.get_dist(td)
            if isinstance(dist, CompositeDistribution):
                dists.update(dist.dists)
            else:
                dists[module.dist_sample_keys[0]] = dist
            present = td.keys(True)
            if i != last and not all(k in present for k in module.dist_sample_keys):
                td = module(td, **kwargs)
        return CompositeDistribution.from_distributions(td, dists)

    def log_prob(
        self,
        tensordict: TensorDictBase,
        tensordict_out: TensorDictBase | None = None,
        *,
        dist: D.Distribution | None = None,
        **kwargs: Any,
    ) -> TensorDictBase | torch.Tensor:
        """The log-probability of the samples in ``tensordict`` (a tensordict of per-key
        entries for a composite distribution, unless aggregated)."""
        if dist is None:
            dist = self.get_dist(tensordict, tensordict_out, **kwargs)
        if isinstance(dist, CompositeDistribution):
            return dist.log_prob(tensordict)
        return dist.log_prob(tensordict.get(self._last_prob().dist_sample_keys[0]))

    def entropy(self, tensordict: TensorDictBase, **kwargs: Any) -> TensorDictBase | torch.Tensor:
        """The entropy of :meth:`get_dist` (per key for a composite, unless aggregated)."""
        return self.get_dist(tensordict, **kwargs).entropy()
