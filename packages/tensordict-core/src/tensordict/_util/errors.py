"""Error messages shared by the tensordict types: each names the key and what was expected."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol


class _Keyed(Protocol):
    """What :func:`missing_key` needs of a tensordict (this bottom layer imports none)."""

    def keys(self) -> Iterable[object]: ...


class KeyThroughLeafError(KeyError, ValueError):
    """A nested key runs through a leaf (``("a", "b")`` where ``"a"`` is a tensor).

    Both a ``KeyError`` (the key is not there) and a ``ValueError`` (what the reference
    raises), so that either ``except`` clause catches it.
    """

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""


class InvalidKeyError(KeyError, TypeError):
    """A key that is not a string or a non-empty tuple of strings, given to ``get``,
    ``set``, ``del`` …: the ``KeyError`` the reference raises that is also a ``TypeError``
    (what a wrong type of argument is in Python)."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""


class ExclusiveKeysError(KeyError, RuntimeError):
    """Tensordicts to stack or concatenate whose keys differ: a ``KeyError`` that is also
    the ``RuntimeError`` the reference raises (clients match its first words)."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""


class NotAKeyError(TypeError, RuntimeError):
    """:func:`tensordict.unravel_key` given neither a string nor a tuple: a ``TypeError``
    that is also the ``RuntimeError`` the reference raises."""


class EllipsisError(IndexError, RuntimeError):
    """An index with more than one ellipsis: an ``IndexError`` (as torch raises) and a
    ``RuntimeError`` (what the reference raises)."""


class DimsError(ValueError, RuntimeError, IndexError):
    """Dimensions that do not form what an operation needs (``permute`` with a repeated
    or out-of-range dim): a ``ValueError`` (what the reference raises) that is also the
    ``RuntimeError``/``IndexError`` that torch raises for a tensor."""


class BadShapeError(TypeError, RuntimeError):
    """A shape argument that is not made of ints (``reshape(2.5)``): the ``TypeError``
    torch raises for a tensor that is also the ``RuntimeError`` the reference raises."""


class InplaceWriteError(ValueError, RuntimeError):
    """An in-place write (``set_``, ``update_``) of a value of another kind than the entry
    (a string into a tensor, a tensor into a nested tensordict): a ``ValueError`` that is
    also a ``RuntimeError``, as the reference raises."""


def lock_error(key: object, what: str = "add") -> RuntimeError:
    """The error for adding, replacing or removing keys of a locked tensordict."""
    return RuntimeError(
        f"Cannot modify locked TensorDict: cannot {what} key {key!r} because the tensordict "
        "is locked. Write existing entries in place with td.set_() (or inplace=True), or "
        "unlock it first with td.unlock_() (or `with td.unlock_(): ...`)."
    )


def index_write_error(
    value_batch: Sequence[int], index: object, selected: Sequence[int]
) -> RuntimeError:
    """The error for writing a tensordict at an index whose selection it cannot fill."""
    return RuntimeError(
        f"batch dimension mismatch: cannot write a tensordict of batch_size="
        f"{tuple(value_batch)} at index {index!r}, which selects a batch of shape "
        f"{tuple(selected)}."
    )


def missing_key(key: object, td: _Keyed) -> KeyError:
    """The error for a key that is not in ``td``, listing the keys that are."""
    return KeyError(
        f"key {key!r} not found in {type(td).__name__} with keys {sorted(map(str, td.keys()))}."
    )
