"""``TensorDictFuture``: the result of a write that returned early (``return_early=True``).

A bottom module, so that both :mod:`tensordict._wire.consolidate` and :mod:`tensordict.utils`
(which re-exports it) can import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any


class TensorDictFuture:
    """A tensordict whose leaves are still being written by worker threads.

    Returned by the methods that accept ``return_early=True`` (``consolidate``, and
    ``memmap``/``save`` in ``tensordict-memmap``); :meth:`result` waits for the writes
    and returns the tensordict.

    >>> from concurrent.futures import ThreadPoolExecutor
    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict(a=torch.zeros(3))
    >>> with ThreadPoolExecutor(1) as pool:
    ...     future = TensorDictFuture([pool.submit(td["a"].fill_, 2.0)], td)
    ...     future.result()["a"].tolist()
    [2.0, 2.0, 2.0]
    """

    def __init__(self, futures: Sequence[Future[Any]], resulting_td: Any) -> None:
        self.futures = list(futures)
        self.resulting_td = resulting_td

    def result(self) -> Any:
        """Wait for every write (re-raising the first error) and return the tensordict
        (``resulting_td``, or the last future's result when ``resulting_td`` is ``None``)."""
        last = None
        for future in self.futures:
            last = future.result()
        return last if self.resulting_td is None else self.resulting_td

    def done(self) -> bool:
        """Whether every write has finished."""
        return all(future.done() for future in self.futures)

    def __repr__(self) -> str:
        return f"TensorDictFuture(pending={sum(not f.done() for f in self.futures)})"
