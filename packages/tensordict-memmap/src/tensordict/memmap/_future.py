"""``TensorDictFuture``: the result of a save started with ``return_early=True``."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any


class TensorDictFuture:
    """A save running in the background; :meth:`result` waits for it and returns the
    memory-mapped tensordict (or raises the error the save met).

    >>> import tempfile, torch
    >>> from tensordict import TensorDict
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     future = TensorDict({"a": torch.zeros(3)}, [3]).memmap(tmp, num_threads=2, return_early=True)
    ...     print(future.result()["a"])
    MemoryMappedTensor([0., 0., 0.])
    """

    def __init__(self, future: concurrent.futures.Future[Any]) -> None:
        self._future = future

    @classmethod
    def start(cls, work: Callable[[], Any]) -> TensorDictFuture:
        """Run ``work`` in a new daemon thread."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(work())
            except BaseException as err:  # noqa: BLE001 - handed to the caller of result()
                future.set_exception(err)

        threading.Thread(target=run, name="tensordict-memmap-save", daemon=True).start()
        return cls(future)

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the save (at most ``timeout`` seconds) and return the tensordict."""
        return self._future.result(timeout)

    def done(self) -> bool:
        """Whether the save has finished (successfully or not)."""
        return self._future.done()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The error the save raised, or None."""
        return self._future.exception(timeout)

    def add_done_callback(self, fn: Callable[[TensorDictFuture], Any]) -> None:
        """Call ``fn(self)`` when the save finishes."""
        self._future.add_done_callback(lambda _: fn(self))

    def __repr__(self) -> str:
        state = "done" if self.done() else "running"
        return f"TensorDictFuture({state})"
