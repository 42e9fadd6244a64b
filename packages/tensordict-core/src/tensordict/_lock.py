"""Lock state of nested tensordicts: a tensordict locked as part of a locked parent.

Locking a tensordict locks its nested tensordicts (and the members of nested lazy stacks).
Each nested one counts the locked tensordicts (or lazy stacks, for their members) that
hold it (``_lock_parents``), so that:

* it cannot be unlocked on its own while a parent is locked — that would let writes reach
  a locked tree (``td.lock_(); td["nest"].unlock_()`` raises ``RuntimeError``);
* unlocking a root unlocks what it holds, except a tensordict that another locked
  tensordict also holds: that unlock is refused as a whole, before anything changes.

>>> import torch
>>> from tensordict import TensorDict
>>> td = TensorDict(nest=TensorDict(x=torch.zeros(2), batch_size=[2]), batch_size=[2]).lock_()
>>> try:
...     td["nest"].unlock_()
... except RuntimeError:
...     print("refused")
refused
>>> td.unlock_()["nest"].is_locked
False
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tensordict import _kinds
from tensordict._collection import data_of


def _children(td: Any) -> list[Any]:
    """The dense tensordicts whose lock ``td`` holds: its nested tensordicts (of
    tensorclasses too) and the members of its nested lazy stacks."""
    out = []
    for value in td._tensordict.values():
        sub = data_of(value)
        if isinstance(sub, _kinds.Dense):
            out.append(sub)
        elif isinstance(sub, _kinds.Lazy):
            stack = list(sub.tensordicts)
            while stack:  # members of nested stacks, flattened
                member = stack.pop()
                if isinstance(member, _kinds.Lazy):
                    stack.extend(member.tensordicts)
                elif isinstance(member, _kinds.Dense):
                    out.append(member)
    return out


def lock(td: Any) -> None:
    """Lock the dense ``td`` and what it holds (each held tensordict counts it once)."""
    if td._is_locked:
        return
    td._is_locked = True
    for child in _children(td):
        child._lock_parents = child._lock_parents + 1
        lock(child)


def hold(parent: Any, child: Any) -> None:
    """``child`` (a dense tensordict) was just stored in the locked ``parent``."""
    child._lock_parents = child._lock_parents + 1
    lock(child)


def check_unlock(td: Any, held_by_caller: int = 0) -> None:
    """Raise ``RuntimeError`` (changing nothing) if unlocking ``td`` would unlock a
    tensordict that a locked tensordict outside ``td`` holds (``held_by_caller``: the
    holds of the caller, a lazy stack unlocking its members, that do not count)."""
    if not td._is_locked:
        return
    if td._lock_parents > held_by_caller:
        raise RuntimeError(
            "cannot unlock this tensordict: it is nested in a locked tensordict "
            f"({td._lock_parents} locked parent(s)), whose tree would then take writes. "
            "Unlock the root tensordict instead."
        )
    held: Counter[int] = Counter()
    nodes: dict[int, Any] = {}
    stack = [td]
    while stack:
        node = stack.pop()
        for child in _children(node):
            held[id(child)] += 1
            if id(child) not in nodes:
                nodes[id(child)] = child
                if child._is_locked:
                    stack.append(child)
    for key, count in held.items():
        if nodes[key]._lock_parents > count:
            raise RuntimeError(
                "cannot unlock this tensordict: one of its nested tensordicts is also held by "
                "another locked tensordict. Unlock that one first, or group both under one "
                "root and unlock the root."
            )


def release(td: Any) -> None:
    """Drop one hold on the dense ``td`` (see :func:`hold`); unlock it if none is left."""
    td._lock_parents = max(0, td._lock_parents - 1)
    if not td._lock_parents:
        unlock(td)


def unlock(td: Any) -> None:
    """Unlock the dense ``td`` and what only it keeps locked (see :func:`check_unlock`)."""
    if not td._is_locked:
        return
    td._is_locked = False
    for child in _children(td):
        release(child)
