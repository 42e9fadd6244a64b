"""How a probabilistic module turns a distribution into a value.

:class:`InteractionType` names the ways (a random sample, the mode, the mean …);
:class:`set_interaction_type` chooses one for a block of code; :func:`draw` applies it
to a ``torch.distributions.Distribution``, falling back (for the deterministic kinds) on
the quantities the distribution does implement.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from enum import Enum
from typing import Any

import torch
from torch import distributions as D

from tensordict.nn._mode import ScopedSetter, Setting

__all__ = ["InteractionType", "interaction_type", "set_interaction_type"]


class InteractionType(str, Enum):
    """How a probabilistic module produces its output from its distribution.

    A string enum, as in the reference: a member equals and prints as its value.

    >>> from tensordict.nn import InteractionType
    >>> InteractionType.from_str("Mode")
    <InteractionType.MODE: 'mode'>
    >>> str(InteractionType.DETERMINISTIC), InteractionType.MODE == "mode"
    ('deterministic', True)
    """

    MODE = "mode"
    MEDIAN = "median"
    MEAN = "mean"
    RANDOM = "random"
    DETERMINISTIC = "deterministic"

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def from_str(cls, type_str: str) -> InteractionType:
        """The interaction type named ``type_str`` (case-insensitive)."""
        try:
            return cls(type_str.lower())
        except ValueError:
            raise ValueError(
                f"{type_str} is not a valid InteractionType; valid names are "
                f"{[t.value for t in cls]} (in any case)."
            ) from None


_INTERACTION = Setting(None)


def interaction_type() -> InteractionType | None:
    """The interaction type set by the innermost :class:`set_interaction_type`, or ``None``
    (each module then uses its ``default_interaction_type``).

    >>> from tensordict.nn import interaction_type, set_interaction_type
    >>> interaction_type() is None
    True
    >>> with set_interaction_type("random"):
    ...     interaction_type()
    <InteractionType.RANDOM: 'random'>
    """
    value: InteractionType | None = _INTERACTION.get()
    return value


def as_interaction_type(value: InteractionType | str | None) -> InteractionType | None:
    if value is None or isinstance(value, InteractionType):
        return value
    if isinstance(value, str):
        return InteractionType.from_str(value)
    raise TypeError(f"Expected an InteractionType, a str or None; got {value!r}.")


class set_interaction_type(ScopedSetter):
    """Set the interaction type of probabilistic modules (context manager or decorator).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import ProbabilisticTensorDictModule, set_interaction_type
    >>> module = ProbabilisticTensorDictModule(
    ...     in_keys=["loc", "scale"], out_keys=["action"],
    ...     distribution_class=torch.distributions.Normal)
    >>> td = TensorDict(loc=torch.zeros(3), scale=torch.ones(3))
    >>> with set_interaction_type("mode"):
    ...     module(td)["action"]
    tensor([0., 0., 0.])
    """

    setting = _INTERACTION

    def __init__(
        self,
        type: InteractionType | str | None = InteractionType.DETERMINISTIC,
        *,
        thread_local: bool = False,
    ) -> None:
        self.value = as_interaction_type(type)
        self.thread_local = thread_local


# --------------------------------------------------------------------------- sampling


def _is_discrete(dist: D.Distribution) -> bool:
    try:
        support = dist.support
    except NotImplementedError:
        return False
    return bool(getattr(support, "is_discrete", False))


def empirical_mean(dist: D.Distribution, n: int) -> Any:
    """The mean of ``n`` reparameterised samples."""
    if not dist.has_rsample:
        raise RuntimeError(
            f"DETERMINISTIC, MEAN and MODE are not implemented for {type(dist).__name__}: it "
            "has no mean or mode, and no rsample to estimate the mean from samples. Use "
            "set_interaction_type('random') to sample from it."
        )
    return dist.rsample((n,)).mean(0)


def deterministic_sample(dist: D.Distribution, n_empirical: int) -> Any:
    """``dist.deterministic_sample`` when defined; else the mode of a discrete distribution,
    the mean, the mode, or an empirical mean, whichever exists first."""
    if hasattr(type(dist), "deterministic_sample"):
        return getattr(dist, "deterministic_sample")  # noqa: B009 (a property of subclasses)
    if _is_discrete(dist):
        with contextlib.suppress(NotImplementedError):
            return dist.mode
    with contextlib.suppress(NotImplementedError):
        return dist.mean
    with contextlib.suppress(NotImplementedError):
        return dist.mode
    return empirical_mean(dist, n_empirical)


def draw(
    dist: D.Distribution,
    kind: InteractionType,
    n_empirical: int,
    sample_shape: torch.Size | None = None,
) -> Any:
    """The value of ``dist`` for interaction type ``kind``."""
    if sample_shape is None:
        sample_shape = torch.Size()
    if kind is InteractionType.RANDOM:
        if dist.has_rsample:
            return dist.rsample(sample_shape)
        return dist.sample(sample_shape)
    if kind is InteractionType.DETERMINISTIC:
        return deterministic_sample(dist, n_empirical)
    if kind is InteractionType.MODE:
        return dist.mode
    if kind is InteractionType.MEAN:
        try:
            return dist.mean
        except NotImplementedError:
            return empirical_mean(dist, n_empirical)
    if kind is InteractionType.MEDIAN:
        median = getattr(dist, "median", None)
        if median is not None:
            return median
        try:
            return dist.icdf(torch.full(dist.batch_shape + dist.event_shape, 0.5))
        except NotImplementedError:
            raise NotImplementedError(
                f"method {type(dist)}.median is not implemented (nor icdf)."
            ) from None
    raise ValueError(f"Unknown interaction type {kind!r}.")


# --------------------------------------------------------------------------- generators


@contextlib.contextmanager
def using_generator(generator: torch.Generator) -> Iterator[None]:
    """Make ``generator`` the source of random numbers for its device during the block;
    it advances, and the default generator is left as it was."""
    device = generator.device
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        saved = torch.cuda.get_rng_state(index)
        torch.cuda.set_rng_state(generator.get_state(), index)
        try:
            yield
        finally:
            generator.set_state(torch.cuda.get_rng_state(index))
            torch.cuda.set_rng_state(saved, index)
        return
    saved = torch.get_rng_state()
    torch.set_rng_state(generator.get_state())
    try:
        yield
    finally:
        generator.set_state(torch.get_rng_state())
        torch.set_rng_state(saved)
