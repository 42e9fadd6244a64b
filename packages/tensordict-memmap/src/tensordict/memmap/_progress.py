"""Progress bars for long saves and loads (tqdm), shown only when useful.

A bar appears when ``progress=True``, or when ``progress`` is None, the work is at least
:data:`AUTO_BYTES` and standard error is a terminal. ``progress=False`` never shows one,
and non-interactive output (logs, CI) gets none unless asked.
"""

from __future__ import annotations

import sys
from typing import Any

#: Work (bytes) from which a bar is shown automatically on a terminal.
AUTO_BYTES = 1 << 30


def wants_bar(progress: bool | None, nbytes: int) -> bool:
    """Whether to show a bar for ``nbytes`` of work.

    >>> wants_bar(False, 1 << 40), wants_bar(True, 0)
    (False, True)
    """
    if progress is not None:
        return bool(progress)
    stream = sys.stderr
    return nbytes >= AUTO_BYTES and stream is not None and stream.isatty()


class Bar:
    """A byte counter drawn by tqdm (or nothing when disabled); usable as a context manager."""

    def __init__(self, total: int, desc: str, enabled: bool) -> None:
        self._bar: Any = None
        if enabled:
            from tqdm.auto import tqdm  # type: ignore[import-untyped, import-not-found, unused-ignore]

            self._bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024)

    def update(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.close()
