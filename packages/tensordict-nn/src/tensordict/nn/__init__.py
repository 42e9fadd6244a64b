"""tensordict.nn: modules that read and write tensordicts (the ``tensordict-nn`` distribution).

This subpackage will own:

* ``TensorDictModuleBase``, ``TensorDictModule``, ``TensorDictModuleWrapper``,
  ``WrapModule``, ``TensorDictSequential``, ``EnsembleModule`` and the ``dispatch``
  decorator;
* ``TensorDictParams`` and the ``from_module``/``from_modules``/``to_module`` helpers
  (also reachable as ``tensordict.from_module``, ``TensorDict.to_module`` …);
* probabilistic modules and distributions (``ProbabilisticTensorDictModule``,
  ``CompositeDistribution``, ``NormalParamExtractor``, interaction types …);
* ``CudaGraphModule`` (falls back to eager execution on CPU).

It depends on ``tensordict-core`` only; tensorclass-aware modules need the
``tensorclass`` extra (``pip install tensordict-nn[tensorclass]``) and import
``tensordict.tensorclass`` only when used.
"""

__version__ = "0.1.0"
