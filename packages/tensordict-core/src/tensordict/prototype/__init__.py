"""``tensordict.prototype``: features whose API may still change (the reference's module
path). :func:`symbolic_trace` is provided by ``tensordict-nn``."""

from __future__ import annotations

from tensordict._plugins.siblings import module_forwarder

__all__ = ["symbolic_trace"]

__getattr__, __dir__ = module_forwarder(__name__, "nn", {"symbolic_trace": "_fx.symbolic_trace"})
