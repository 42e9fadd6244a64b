"""tensordict.nn: modules that read and write tensordicts (the ``tensordict-nn`` distribution).

* :class:`TensorDictModule` wraps any callable so that it reads ``in_keys`` and writes
  ``out_keys`` of a tensordict; :class:`TensorDictSequential` chains such modules;
  :class:`TensorDictModuleBase`, :class:`TensorDictModuleWrapper`, :class:`WrapModule`,
  :class:`as_tensordict_module` and :class:`dispatch` (call with tensors instead of a
  tensordict) complete the family.
* Parameters as tensordicts: :class:`TensorDictParams` (a tensordict that is an
  ``nn.Module``), ``TensorDict.from_module``/``from_modules`` and
  ``td.to_module(module)`` (functional calls, ensembles with ``torch.vmap``,
  meta-learning); :class:`EnsembleModule` runs vmapped copies of a module.
* Probabilistic modules: :class:`ProbabilisticTensorDictModule`,
  :class:`ProbabilisticTensorDictSequential`, interaction types and the distributions of
  :mod:`tensordict.nn.distributions`.
* :class:`CudaGraphModule` captures a module in a CUDA graph (eager, with a warning, on
  CPU).

It depends on ``tensordict-core`` only; tensorclass-aware modules
(:class:`TensorClassModuleBase`) are typed on classes of the ``tensorclass``
distribution (``pip install tensordict-nn[tensorclass]``), never imported here.
"""

from tensordict import make_tensordict
from tensordict.nn._interaction import InteractionType, interaction_type, set_interaction_type
from tensordict.nn._prob_sequence import ProbabilisticTensorDictSequential
from tensordict.nn._wrappers import TensorDictModuleWrapper, WrapModule, as_tensordict_module
from tensordict.nn.common import TensorDictModule, TensorDictModuleBase
from tensordict.nn.cudagraphs import CudaGraphModule
from tensordict.nn.dispatch import dispatch
from tensordict.nn.distributions import (
    AddStateIndependentNormalScale,
    CompositeDistribution,
    Delta,
    NormalParamExtractor,
    OneHotCategorical,
    TruncatedNormal,
    add_custom_mapping,
    biased_softplus,
    inv_softplus,
    mappings,
    rand_one_hot,
)
from tensordict.nn.ensemble import EnsembleModule
from tensordict.nn.functional_modules import from_module, from_modules

# Hooks of core's TensorDict.from_module / td.to_module forwarders.
from tensordict.nn.functional_modules import td_from_module as td_from_module
from tensordict.nn.functional_modules import td_to_module as td_to_module
from tensordict.nn.params import TensorDictParams
from tensordict.nn.probabilistic import ProbabilisticTensorDictModule
from tensordict.nn.sequence import TensorDictSequential
from tensordict.nn.tensorclass_module import TensorClassModuleBase, TensorClassModuleWrapper
from tensordict.nn.utils import (
    composite_lp_aggregate,
    set_composite_lp_aggregate,
    set_skip_existing,
    skip_existing,
)

__version__ = "0.1.0"

__all__ = [
    "AddStateIndependentNormalScale",
    "CompositeDistribution",
    "CudaGraphModule",
    "Delta",
    "EnsembleModule",
    "InteractionType",
    "NormalParamExtractor",
    "OneHotCategorical",
    "ProbabilisticTensorDictModule",
    "ProbabilisticTensorDictSequential",
    "TensorClassModuleBase",
    "TensorClassModuleWrapper",
    "TensorDictModule",
    "TensorDictModuleBase",
    "TensorDictModuleWrapper",
    "TensorDictParams",
    "TensorDictSequential",
    "TruncatedNormal",
    "WrapModule",
    "add_custom_mapping",
    "as_tensordict_module",
    "biased_softplus",
    "composite_lp_aggregate",
    "dispatch",
    "from_module",
    "from_modules",
    "interaction_type",
    "inv_softplus",
    "make_tensordict",
    "mappings",
    "rand_one_hot",
    "set_composite_lp_aggregate",
    "set_interaction_type",
    "set_skip_existing",
    "skip_existing",
]
