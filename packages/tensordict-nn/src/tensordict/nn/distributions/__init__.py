"""Distributions and parameter mappings for probabilistic tensordict modules.

* :class:`Delta`, :class:`TruncatedNormal`, :class:`OneHotCategorical` and
  :class:`CompositeDistribution` (several distributions over a tensordict);
* :class:`NormalParamExtractor` and :class:`AddStateIndependentNormalScale`, which build
  a location and a positive scale;
* :func:`mappings`, :func:`add_custom_mapping`, :class:`biased_softplus`,
  :func:`inv_softplus` and :func:`rand_one_hot`.
"""

from tensordict.nn._interaction import InteractionType, set_interaction_type
from tensordict.nn.distributions.composite import CompositeDistribution
from tensordict.nn.distributions.continuous import (
    AddStateIndependentNormalScale,
    Delta,
    NormalParamExtractor,
)
from tensordict.nn.distributions.discrete import OneHotCategorical, rand_one_hot
from tensordict.nn.distributions.truncated_normal import TruncatedNormal
from tensordict.nn.distributions.utils import (
    add_custom_mapping,
    biased_softplus,
    expln,
    inv_softplus,
    mappings,
)

__all__ = [
    "AddStateIndependentNormalScale",
    "CompositeDistribution",
    "Delta",
    "InteractionType",
    "NormalParamExtractor",
    "OneHotCategorical",
    "TruncatedNormal",
    "add_custom_mapping",
    "biased_softplus",
    "expln",
    "inv_softplus",
    "mappings",
    "rand_one_hot",
    "set_interaction_type",
]
