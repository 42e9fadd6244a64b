"""tensordict.tensorclass: dataclasses of tensors (the ``tensorclass`` distribution).

This subpackage will own:

* the ``@tensorclass`` decorator (declared with :func:`typing.dataclass_transform`, so
  type checkers and IDEs see the fields) and the ``TensorClass`` base class;
* ``from_dataclass``;
* tensorclass-specific behaviour (``fields``, ``from_tensordict``/``to_tensordict``,
  ``get``/``set``, ``state_dict``/``load_state_dict`` …), with every ``TensorDictBase``
  method available on instances.

It depends on ``tensordict-core`` only.

Once this subpackage is imported, Python binds ``tensordict.tensorclass`` to the
subpackage itself, shadowing the top-level decorator of the same name. So that
``@tensordict.tensorclass`` and ``from tensordict import tensorclass`` keep working as a
decorator, this module is callable: calling it calls its ``tensorclass`` attribute.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__version__ = "0.1.0"

_DISTRIBUTION = "tensorclass"


class _CallableModule(types.ModuleType):
    """A module that forwards calls to its ``tensorclass`` attribute (the decorator)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            decorator = self.__dict__["tensorclass"]
        except KeyError:
            raise NotImplementedError(
                f"tensordict.tensorclass(...): the installed '{_DISTRIBUTION}' distribution "
                "does not provide the 'tensorclass' decorator yet"
            ) from None
        return decorator(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
