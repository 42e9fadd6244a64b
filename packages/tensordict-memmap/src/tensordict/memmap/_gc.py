"""Pausing Python's cyclic garbage collector while a save or load builds many objects.

Saving or loading 10,000 leaves creates tens of thousands of short-lived containers; each
generation-0 collection then walks every tracked object that survived, which made such
saves about twice as slow. Nothing this package builds holds reference cycles that need
collecting in between, so the collector is paused for the call and resumed afterwards
(only if it was running: a caller that disabled it keeps it disabled).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic garbage collector for the ``with`` block.

    >>> import gc
    >>> with paused_gc():
    ...     print(gc.isenabled())
    False
    >>> gc.isenabled()
    True
    """
    was_enabled = gc.isenabled()
    if was_enabled:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
