"""tensordict.nn: modules that read and write tensordicts (the ``tensordict-nn`` distribution).

* :class:`TensorDictModule` wraps any callable so that it reads ``in_keys`` and writes
  ``out_keys`` of a tensordict; :class:`TensorDictSequential` chains such modules;
  :class:`TensorDictModuleBase`, :class:`TensorDictModuleWrapper`, :class:`WrapModule`,
  :class:`as_tensordict_module` and :class:`dispatch` (call with tensors instead of a
  tensordict) complete the family.
* Parameters as tensordicts: :class:`TensorDictParams` (a tensordict that is an
  ``nn.Module``), :func:`from_module`/:func:`from_modules` and ``td.to_module(module)``
  (functional calls, ensembles with ``torch.vmap``, meta-learning);
  :class:`EnsembleModule` runs vmapped copies of a module.
* Probabilistic modules: :class:`ProbabilisticTensorDictModule`,
  :class:`ProbabilisticTensorDictSequential`, interaction types and the distributions of
  :mod:`tensordict.nn.distributions`.
* :class:`CudaGraphModule` captures a module in a CUDA graph (eager, with a warning, on
  CPU).

It depends on ``tensordict-core`` only; tensorclass-aware modules
(:class:`TensorClassModuleBase`) need the ``tensorclass`` extra
(``pip install tensordict-nn[tensorclass]``) and import ``tensordict.tensorclass`` only
when used.
"""

from tensordict import make_tensordict

from tensordict.nn.common import (
    TensorDictModule,
    TensorDictModuleBase,
    TensorDictModuleWrapper,
    WrapModule,
    as_tensordict_module,
)
from tensordict.nn.dispatch import dispatch
from tensordict.nn.sequence import TensorDictSequential
from tensordict.nn.utils import (
    composite_lp_aggregate,
    set_composite_lp_aggregate,
    set_skip_existing,
    skip_existing,
)

__version__ = "0.1.0"

__all__ = [
    "TensorDictModule",
    "TensorDictModuleBase",
    "TensorDictModuleWrapper",
    "TensorDictSequential",
    "WrapModule",
    "as_tensordict_module",
    "composite_lp_aggregate",
    "dispatch",
    "make_tensordict",
    "set_composite_lp_aggregate",
    "set_skip_existing",
    "skip_existing",
]
