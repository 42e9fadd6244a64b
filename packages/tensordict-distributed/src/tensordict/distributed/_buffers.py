"""Reused transfer buffers.

A fresh large allocation is not free: the kernel maps and zeroes every page on first
touch, which for a 64 MiB buffer costs as much as copying it. Transfers therefore take
their byte buffers from a small pool and give them back once the data has gone (sender)
or has been copied out (receiver).
"""

from __future__ import annotations

import threading

import torch

#: Free buffers kept at most, and their total size.
MAX_BUFFERS = 4
MAX_BYTES = 1 << 30

_lock = threading.Lock()
_free: list[torch.Tensor] = []


def take(nbytes: int, device: torch.device) -> torch.Tensor:
    """A ``uint8`` tensor of ``nbytes`` on ``device`` (a pooled one when possible).

    >>> a = take(100, torch.device("cpu")); give(a); b = take(80, torch.device("cpu"))
    >>> b.numel(), b.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    (80, True)
    """
    if device.type == "cpu":
        with _lock:
            best = None
            for i, buf in enumerate(_free):
                if buf.numel() >= nbytes and (best is None or buf.numel() < _free[best].numel()):
                    best = i
            if best is not None:
                return _free.pop(best)[:nbytes]
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


def give(buffer: torch.Tensor) -> None:
    """Return a buffer made by :func:`take` (its whole storage) once nothing uses it."""
    if buffer.device.type != "cpu" or buffer.numel() == 0:
        return
    storage = buffer.untyped_storage()
    whole = torch.empty(0, dtype=torch.uint8).set_(storage)
    with _lock:
        if any(b.untyped_storage().data_ptr() == storage.data_ptr() for b in _free):
            return
        _free.append(whole)
        _free.sort(key=lambda b: b.numel(), reverse=True)
        while len(_free) > MAX_BUFFERS or sum(b.numel() for b in _free) > MAX_BYTES:
            _free.pop()
