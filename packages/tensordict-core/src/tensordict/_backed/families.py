"""How a storage-backed tensordict runs the ``TensorDict`` methods it has no direct form
for, as tables (see :class:`~tensordict._backed.base.BackedTensorDict`):

* :data:`IN_MEMORY`: methods that make new data (shape ops, key layouts): run on the
  content read into memory; the result is an in-memory tensordict;
* :data:`VIEWS`: views (``view``, ``permute``, ``unsqueeze``…) raise ``RuntimeError``: an
  entry in a file or on a server has no view (``reshape`` copies, and works);
* :data:`WRITE_BACK`: in-place elementwise ops: computed on the content read into
  memory, then written back into the existing entries;
* :data:`FROM_METADATA`: sizes answered from the structure (``_skeleton()``, tensors as
  ``meta`` tensors): nothing is read.

>>> from tensordict._backed.families import IN_MEMORY, VIEWS
>>> "reshape" in IN_MEMORY, "view" in VIEWS
(True, True)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

#: ``TensorDict`` methods that make new data: run on the content read into memory
IN_MEMORY = tuple(
    """broadcast_to chunk consolidate expand expand_as flatten flatten_keys flip fliplr
    flipud narrow rename repeat reshape split tensor_split unbind unflatten
    unflatten_keys""".split()
)
#: views: refused (``RuntimeError`` naming the class and the way out)
VIEWS = tuple("movedim moveaxis permute squeeze swapaxes swapdims transpose unsqueeze view".split())
#: in-place elementwise ops: computed in memory, written back into the existing entries
WRITE_BACK = tuple(
    """abs_ acos_ add_ addcdiv_ addcmul_ apply_ asin_ atan_ ceil_ clamp_max_ clamp_min_
    cos_ cosh_ div_ erf_ erfc_ exp_ expm1_ fill_ floor_ frac_ lerp_ lgamma_ log10_ log1p_
    log2_ log_ masked_fill_ maximum_ minimum_ mul_ neg_ pow_ reciprocal_ round_ sigmoid_
    sign_ sin_ sinh_ sqrt_ sub_ tan_ tanh_ trunc_ zero_""".split()
)


#: sizes answered from the structure, without reading data
FROM_METADATA = ("bytes", "param_count")


def from_metadata(name: str, template: Callable[..., Any]) -> Callable[..., Any]:
    """``name`` run on ``self._skeleton()`` (the structure, tensors on the meta device)."""

    @functools.wraps(template)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._skeleton(), name)(*args, **kwargs)

    run.__doc__ = f"``TensorDict.{name}``, answered from the metadata (nothing is read)."
    return run


def in_memory(name: str, template: Callable[..., Any]) -> Callable[..., Any]:
    """``name`` run on ``self.to_tensordict()`` (``template``: the ``TensorDict`` method,
    for the signature and name)."""

    @functools.wraps(template)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.to_tensordict(), name)(*args, **kwargs)

    run.__doc__ = (
        f"``TensorDict.{name}`` of the content read into memory (``to_tensordict()``); "
        "the result is an in-memory tensordict."
    )
    return run


def refused_view(name: str, template: Callable[..., Any]) -> Callable[..., Any]:
    """``name`` raising ``RuntimeError``: the entries live in a backend, a view needs them
    in memory."""

    @functools.wraps(template)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        cls = type(self).__name__
        raise RuntimeError(
            f"Cannot call `{name}` on a {cls}: its entries live in {self._where()} and a "
            f"view needs them in memory. Call `to_tensordict()` first (or `reshape`, "
            "which copies)."
        )

    run.__doc__ = (
        f"Refused (``RuntimeError``): ``{name}`` makes a view, and the entries live in a "
        "backend; call ``to_tensordict()`` first."
    )
    return run


def written_back(name: str, template: Callable[..., Any]) -> Callable[..., Any]:
    """``name`` computed on the content read into memory, then written back in place."""

    @functools.wraps(template)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._writable()  # in place: allowed while locked, as for a TensorDict
        content = self.to_tensordict()
        getattr(content, name)(*args, **kwargs)
        self.update_(content)
        return self

    run.__doc__ = (
        f"``TensorDict.{name}`` computed on the content read into memory, whose leaves are "
        "then written back into the existing entries."
    )
    return run


def install(cls: type, template: type) -> None:
    """Put the four families on ``cls`` (where it does not define the name itself),
    taking names and signatures from ``template`` (``TensorDict``)."""
    tables = (
        (IN_MEMORY, in_memory),
        (VIEWS, refused_view),
        (WRITE_BACK, written_back),
        (FROM_METADATA, from_metadata),
    )
    for names, make in tables:
        for name in names:
            if name not in vars(cls):
                setattr(cls, name, make(name, getattr(template, name)))
