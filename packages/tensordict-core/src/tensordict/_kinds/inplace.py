"""``inplace=True`` for the operations that change the batch shape.

``td.reshape(12, inplace=True)``, ``td.pad(..., inplace=True)``, ``td.roll(1, 0,
inplace=True)`` … compute their result as usual, then make ``td`` itself hold it: its
entries, batch size and dimension names are replaced, and the nested tensordicts keep
their identity (each adopts its own part of the result), so references to
``td["nested"]`` see the change. The old leaves are released.

Only dense tensordicts can change shape in place; a lazy stack raises
:class:`NotImplementedError`, and a locked tensordict :class:`RuntimeError` (its structure
is frozen), except for ``contiguous``, which keeps the structure.
"""

from __future__ import annotations

from typing import Any

from tensordict._kinds import kinds as _kinds


def adopt(td: Any, result: Any, what: str, *, keeps_structure: bool = False) -> Any:
    """Make the dense ``td`` hold ``result`` (same keys or not) in place; return ``td``.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict._kinds.inplace import adopt
    >>> td = TensorDict(a=torch.arange(6), n={"b": torch.zeros(6, 2)}, batch_size=[6])
    >>> nested = td["n"]
    >>> adopt(td, td.reshape(2, 3), "reshape") is td
    True
    >>> td.batch_size, nested.batch_size, td["n", "b"].shape
    (torch.Size([2, 3]), torch.Size([2, 3]), torch.Size([2, 3, 2]))
    """
    check(td, what, keeps_structure=keeps_structure)
    if result is not td:
        _adopt(td, result)
    return td


def check(td: Any, what: str, *, keeps_structure: bool = False) -> None:
    """Raise if ``td`` cannot change in place (before any work is done)."""
    if not isinstance(td, _kinds.Dense):
        raise NotImplementedError(
            f"{what}(inplace=True) is not supported on {type(td).__name__}: call "
            ".to_tensordict() first, or use inplace=False."
        )
    if not keeps_structure and _any_locked(td):
        raise RuntimeError(
            f"{what}(inplace=True) would change the batch size of a locked tensordict; "
            "unlock it first (td.unlock_()) or use inplace=False."
        )


def _any_locked(td: Any) -> bool:
    if td._is_locked:
        return True
    return any(
        isinstance(value, _kinds.Dense) and _any_locked(value) for value in td._tensordict.values()
    )


def _adopt(td: Any, result: Any) -> None:
    if not isinstance(result, _kinds.Dense):
        result = result.to_tensordict()
    old = td._tensordict
    new = {}
    for key, value in result._tensordict.items():
        mine = old.get(key)
        if isinstance(mine, _kinds.Dense) and isinstance(value, _kinds.Dense):
            if value is not mine:
                _adopt(mine, value)
            new[key] = mine
        else:
            new[key] = value
    td._tensordict = new
    td._batch_size = result._batch_size
    td._device = result._device
    td._names = None if result._names is None else list(result._names)
