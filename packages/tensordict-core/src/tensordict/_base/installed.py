"""The classes that hold the methods ``import tensordict`` installs on every tensordict.

``TensorDictBase`` derives from them (first among its bases, so they take precedence over
its other mixins, as when the methods were set on ``TensorDictBase`` itself). Its own
``__dict__`` stays small: ``torch.compile`` guards a method it traces through the
dictionary of the class that defines it, at a cost that grows with that dictionary's size
(with the 350 installed methods in ``TensorDictBase``'s, a compiled ``td.apply(fn)`` paid
~30 µs per call in guards). Patching a method on ``TensorDictBase`` still reaches every
kind: ``TensorDictBase``'s own dictionary comes first.

>>> from tensordict import TensorDict, TensorDictBase
>>> from tensordict._base.installed import ElementwiseMethods
>>> "abs" in vars(ElementwiseMethods), TensorDict.abs is ElementwiseMethods.abs
(True, True)
"""

from __future__ import annotations


class SharedMethods:
    """The methods every kind shares (``tensordict._shared.install``)."""


class ElementwiseMethods:
    """Elementwise math, casts, operators and state ops (``tensordict._engine.ops``)."""


class ReductionMethods:
    """Reductions and cumulative ops (``tensordict._engine.ops_reduce``)."""


class BatchMethods:
    """Batch-shape ops (``tensordict._engine.ops_batch``)."""


class SiblingMethods:
    """The forwarders to the sibling distributions (``tensordict._plugins.forwarders``)."""


#: in the order ``TensorDictBase`` derives from them
HOLDERS = (SharedMethods, ElementwiseMethods, ReductionMethods, BatchMethods, SiblingMethods)
