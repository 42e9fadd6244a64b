"""``TensorCollection``: the common base type of every tensordict-like container.

:class:`~tensordict.TensorDictBase` (so :class:`~tensordict.TensorDict` and the lazy
stacks) derives from it, and so do the tensorclasses of the ``tensorclass`` distribution.
Use it in type hints for "any tensordict or tensorclass"::

    >>> import torch
    >>> from tensordict import TensorCollection, TensorDict, lazy_stack
    >>> td = TensorDict(a=torch.zeros(2), batch_size=[2])
    >>> isinstance(td, TensorCollection), isinstance(lazy_stack([td, td]), TensorCollection)
    (True, True)
    >>> isinstance(torch.zeros(2), TensorCollection)
    False

A collection that *wraps* a tensordict (a tensorclass instance holds its data in a
:class:`~tensordict.TensorDict`) tells core so through :func:`wrapped`, so that functions
which rebuild nested entries from their data (``stack``, ``cat``, lazy stacks) give the
wrapper's type back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar


class TensorCollection:
    """Base of every tensor collection (tensordicts, lazy stacks, tensorclasses).

    It holds no state and no behaviour; ``isinstance(x, TensorCollection)`` is a plain
    class check.
    """

    __slots__ = ()

    #: True for collections that wrap a tensordict (tensorclasses): they hold it in
    #: ``_tensordict`` and their class method ``_rewrap(td)`` builds an instance around one.
    _wraps_tensordict: ClassVar[bool] = False


def wrapped(values: Sequence[Any]) -> tuple[list[Any], Callable[[Any], Any]] | None:
    """The tensordicts inside ``values`` and the function rebuilding the wrapper type,
    when every value is an instance of the same wrapping collection class; else ``None``.

    >>> from tensordict import TensorDict
    >>> from tensordict._leaves.collection import wrapped
    >>> wrapped([TensorDict(), TensorDict()]) is None
    True
    """
    if not values:
        return None
    cls = type(values[0])
    if not getattr(cls, "_wraps_tensordict", False) or any(type(v) is not cls for v in values):
        return None
    return [v._tensordict for v in values], cls._rewrap


def mixing_error(values: Sequence[Any], op: str) -> Exception | None:
    """The error for combining (``op``: ``"stack"``, ``"cat"``) instances of a wrapping
    collection class (a tensorclass) with other tensordicts, or with instances of another
    such class: there is no class to give the result. ``None`` when they do not mix.
    A ``TypeError`` for ``stack``, the ``RuntimeError`` the reference raises for ``cat``.

    >>> from tensordict import TensorDict
    >>> mixing_error([TensorDict(), TensorDict()], "stack") is None
    True
    """
    classes = {type(v) for v in values if getattr(type(v), "_wraps_tensordict", False)}
    if not classes or (len(classes) == 1 and all(type(v) in classes for v in values)):
        return None
    names = sorted({type(v).__name__ for v in values})
    kind = TypeError if op == "stack" else RuntimeError
    return kind(
        f"torch.{op}: cannot combine {' and '.join(names)} instances: the result would have "
        f"no single class. Convert them first (instance.to_tensordict(), or "
        f"Class.from_tensordict(td))."
    )


def data_of(value: Any) -> Any:
    """The tensordict a wrapping collection holds (``value`` itself for anything else).

    >>> from tensordict import TensorDict
    >>> from tensordict._leaves.collection import data_of
    >>> td = TensorDict()
    >>> data_of(td) is td
    True
    """
    return value._tensordict if getattr(type(value), "_wraps_tensordict", False) else value
