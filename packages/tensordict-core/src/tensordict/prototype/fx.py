"""``tensordict.prototype.fx``: FX tracing of tensordict modules (the reference's module
path; ``tensordict-nn`` provides :func:`symbolic_trace` and :class:`TDGraphModule`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tensordict._plugins.siblings import module_forwarder

if TYPE_CHECKING:  # the names a sibling provides, for type checkers
    from tensordict.nn._fx import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
        TDGraphModule as TDGraphModule,
    )
    from tensordict.nn._fx import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
        symbolic_trace as symbolic_trace,
    )

__all__ = ["TDGraphModule", "symbolic_trace"]

__getattr__, __dir__ = module_forwarder(
    __name__, "nn", {"symbolic_trace": "_fx.symbolic_trace", "TDGraphModule": "_fx.TDGraphModule"}
)
