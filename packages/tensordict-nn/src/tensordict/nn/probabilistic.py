"""Probabilistic modules: build a distribution from tensordict entries and write a value
drawn from it (and its log-probability).

:class:`ProbabilisticTensorDictModule` reads distribution parameters and writes samples;
:class:`ProbabilisticTensorDictSequential` (in :mod:`tensordict.nn._prob_sequence`)
chains it after the modules that compute those parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import distributions as D

from tensordict import TensorDictBase, unravel_key
from tensordict._plugins.api import NON_TENSOR, NestedKey
from tensordict.nn._client_compat import _use_generator as _use_generator  # for clients
from tensordict.nn._interaction import (
    InteractionType,
    as_interaction_type,
    draw,
    interaction_type,
)
from tensordict.nn._interaction import set_interaction_type as set_interaction_type
from tensordict.nn._keys import IGNORE, as_key_list
from tensordict.nn.common import TensorDictModuleBase, _non_tensor_value
from tensordict.nn.dispatch import tensordict_entry
from tensordict.nn.distributions.composite import (
    CompositeDistribution,
    composite_keys,
    is_composite_class,
    suffixed,
)
from tensordict.nn.distributions.continuous import Delta
from tensordict.nn.utils import composite_lp_aggregate

# Also importable from here (defined elsewhere): InteractionType, interaction_type,
# set_interaction_type, ProbabilisticTensorDictSequential.
__all__ = ["ProbabilisticTensorDictModule"]

_SEED_BOUND = 2**62


def _kwarg_name(key: Any) -> str:
    return key if isinstance(key, str) else key[-1]


class ProbabilisticTensorDictModule(TensorDictModuleBase):
    """Build a distribution from tensordict entries and write a value drawn from it.

    Args:
        in_keys: the entries holding the distribution's keyword arguments: a key or list
            of keys (the argument is the key's last part), or a dict ``{argument: key}``.
        out_keys: where the value is written (for a
            :class:`~tensordict.nn.CompositeDistribution`, defaults to its sample keys).
        default_interaction_type: how the value is drawn when no
            :class:`~tensordict.nn.set_interaction_type` is active (``"deterministic"``:
            the distribution's deterministic sample, mean or mode; ``"random"``: a
            sample, reparameterised when possible; ``"mode"``, ``"mean"``, ``"median"``).
        distribution_class: the distribution (class or callable), :class:`Delta` by
            default.
        distribution_kwargs: more keyword arguments of every distribution built.
        return_log_prob: also write the value's log-probability.
        log_prob_keys, log_prob_key: where log-probabilities go (default: the sample
            key with ``_log_prob`` appended, or ``"sample_log_prob"`` when
            :func:`~tensordict.nn.composite_lp_aggregate` is on).
        cache_dist: keep the last distribution built in ``self._dist``.
        n_empirical_estimate: number of samples of an empirical mean (for distributions
            without a mean or mode).
        num_samples: draw this many samples (a leading batch dimension) in random mode.
        generator: a ``torch.Generator``, an int seed, or a key of the input tensordict
            holding a generator or a seed (a seed is replaced by the next one after the
            call) used for random draws; the global generator is left untouched.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import ProbabilisticTensorDictModule
    >>> module = ProbabilisticTensorDictModule(
    ...     in_keys=["loc", "scale"], out_keys=["action"],
    ...     distribution_class=torch.distributions.Normal, return_log_prob=True)
    >>> td = module(TensorDict(loc=torch.zeros(3), scale=torch.ones(3), batch_size=[3]))
    >>> td["action"], td["action_log_prob"]
    (tensor([0., 0., 0.]), tensor([-0.9189, -0.9189, -0.9189]))
    """

    def __init__(
        self,
        in_keys: NestedKey | list[NestedKey] | dict[str, NestedKey],
        out_keys: NestedKey | list[NestedKey] | None = None,
        *,
        default_interaction_type: InteractionType | str = InteractionType.DETERMINISTIC,
        distribution_class: type = Delta,
        distribution_kwargs: dict[str, Any] | None = None,
        return_log_prob: bool = False,
        log_prob_keys: list[NestedKey] | None = None,
        log_prob_key: NestedKey | None = None,
        cache_dist: bool = False,
        n_empirical_estimate: int = 1000,
        num_samples: int | torch.Size | None = None,
        generator: torch.Generator | int | NestedKey | None = None,
    ) -> None:
        super().__init__()
        if isinstance(in_keys, Mapping):
            names = list(in_keys.keys())
            keys = as_key_list(list(in_keys.values()), "in_keys")
        else:
            keys = as_key_list(in_keys, "in_keys")
            names = [_kwarg_name(key) for key in keys]
        self.__dict__["_dist_names"] = names
        self.in_keys = keys
        self.distribution_class = distribution_class
        self.distribution_kwargs = dict(distribution_kwargs) if distribution_kwargs else {}
        self._composite = is_composite_class(distribution_class)
        if out_keys is None:
            out_keys = (
                composite_keys(distribution_class, self.distribution_kwargs)
                if self._composite
                else [IGNORE]
            )
        self.__dict__["_sample_keys"] = as_key_list(out_keys, "out_keys")
        kind = as_interaction_type(default_interaction_type)
        if kind is None:
            raise ValueError("default_interaction_type cannot be None.")
        self.default_interaction_type: InteractionType = kind
        self.return_log_prob = return_log_prob
        self._aggregate = composite_lp_aggregate()
        self._log_prob_key = None if log_prob_key is None else unravel_key(log_prob_key)
        self._log_prob_keys = (
            None
            if log_prob_keys is None
            else as_key_list(
                list(log_prob_keys),
                "log_prob_keys",
            )
        )
        self.cache_dist = cache_dist
        self._dist: D.Distribution | None = None
        self.n_empirical_estimate = n_empirical_estimate
        if num_samples is not None and not isinstance(num_samples, torch.Size):
            num_samples = torch.Size([num_samples] if isinstance(num_samples, int) else num_samples)
        self.num_samples = num_samples
        if generator is None or isinstance(generator, torch.Generator):
            self._generator, self._generator_key = generator, None
        elif isinstance(generator, bool) or not isinstance(generator, (int, str, tuple)):
            raise TypeError(
                f"generator must be a torch.Generator, an int seed or a key of the input "
                f"tensordict; got {generator!r} (type {type(generator).__name__})."
            )
        elif isinstance(generator, int):
            self._generator = torch.Generator().manual_seed(generator)
            self._generator_key = None
        else:
            self._generator, self._generator_key = None, unravel_key(generator)

    # ------------------------------------------------------------------ keys
    @property
    def dist_params_keys(self) -> list[Any]:
        """The keys the distribution's parameters are read from."""
        return list(self.in_keys)

    @property
    def dist_sample_keys(self) -> list[Any]:
        """The keys the value drawn is written to."""
        return [key for key in self.__dict__["_sample_keys"] if key != IGNORE]

    def _check_aggregate(self) -> None:
        if composite_lp_aggregate() != self._aggregate:
            raise RuntimeError(
                f"composite_lp_aggregate is {composite_lp_aggregate()} but the module was "
                f"built with {self._aggregate}, which decides its log_prob keys. Build it "
                "under the setting it is used with."
            )

    @property
    def log_prob_keys(self) -> list[Any]:
        """Where log-probabilities are written."""
        self._check_aggregate()
        if self._aggregate:
            if self._log_prob_key is not None:
                return [self._log_prob_key]
            key = self.distribution_kwargs.get("log_prob_key") if self._composite else None
            return [unravel_key(key) if key is not None else "sample_log_prob"]
        if self._log_prob_keys is not None:
            return list(self._log_prob_keys)
        if self._log_prob_key is not None and len(self.dist_sample_keys) <= 1:
            return [self._log_prob_key]
        return [suffixed(key, "_log_prob") for key in self.dist_sample_keys]

    @property
    def log_prob_key(self) -> Any:
        """The single log-probability key (an error when there are several)."""
        keys = self.log_prob_keys
        if len(keys) != 1:
            raise RuntimeError(
                f"This module writes several log-probabilities {keys} (composite_lp_aggregate "
                "is off); read log_prob_keys instead."
            )
        return keys[0]

    @property
    def out_keys(self) -> list[Any]:
        keys = list(self.__dict__["_sample_keys"])
        if self.return_log_prob:
            keys += [k for k in self.log_prob_keys if k not in keys]
        selected = self.__dict__.get("_selected_out_keys")
        return keys if selected is None else selected

    @out_keys.setter
    def out_keys(self, value: Any) -> None:
        self.__dict__["_sample_keys"] = as_key_list(value, "out_keys")

    @property
    def out_keys_source(self) -> list[Any]:
        keys = list(self.__dict__["_sample_keys"])
        if self.return_log_prob:
            keys += [k for k in self.log_prob_keys if k not in keys]
        return keys

    def _selection_changed(self) -> None:
        pass

    # ------------------------------------------------------------------ distribution
    def build_dist_from_params(self, tensordict: TensorDictBase) -> D.Distribution:
        """The distribution whose parameters are the entries of ``tensordict``."""
        kwargs = {}
        for name, key in zip(self.__dict__["_dist_names"], self.in_keys):
            value = tensordict.get(key)
            kwargs[name] = _non_tensor_value(value) if isinstance(value, NON_TENSOR) else value
        try:
            dist: D.Distribution = self.distribution_class(**kwargs, **self.distribution_kwargs)
            return dist
        except TypeError as err:
            if "unexpected keyword" not in str(err) and "missing" not in str(err):
                raise
            raise TypeError(
                f"distribution keywords and tensordict keys indicated by "
                f"ProbabilisticTensorDictModule.in_keys must match: "
                f"{self.distribution_class} got {sorted(kwargs)} (from keys {self.in_keys}) "
                f"and {sorted(self.distribution_kwargs)}: {err}"
            ) from err

    def get_dist(self, tensordict: TensorDictBase) -> D.Distribution:
        """The distribution built from ``tensordict``."""
        dist = self.build_dist_from_params(tensordict)
        if self.cache_dist:
            self._dist = dist
        return dist

    def log_prob(self, tensordict: TensorDictBase, *, dist: D.Distribution | None = None) -> Any:
        """The log-probability of the value stored in ``tensordict`` (a tensordict of
        per-key log-probabilities for a composite distribution, unless aggregated)."""
        if dist is None:
            dist = self.get_dist(tensordict)
        if isinstance(dist, CompositeDistribution):
            return dist.log_prob(tensordict)
        keys = self.dist_sample_keys
        if len(keys) != 1:
            raise RuntimeError(f"log_prob needs one sample key; this module writes {keys}.")
        return dist.log_prob(tensordict.get(keys[0]))

    # ------------------------------------------------------------------ call
    def _interaction(self) -> InteractionType:
        current = interaction_type()
        kind: InteractionType = self.default_interaction_type if current is None else current
        return kind

    def _draw(self, dist: D.Distribution, kind: InteractionType, tensordict: TensorDictBase) -> Any:
        if kind is not InteractionType.RANDOM:
            return draw(dist, kind, self.n_empirical_estimate, torch.Size())
        generator, writeback = self._resolve_generator(tensordict)
        value = self._dist_sample(dist, kind, generator=generator)
        if writeback is not None:
            assert generator is not None  # a writeback comes with the generator it reads
            writeback(generator)
        return value

    def _resolve_generator(
        self, tensordict: TensorDictBase
    ) -> tuple[torch.Generator | None, Callable[[torch.Generator], None] | None]:
        """The generator of this call's random draws and, when it was made from a seed
        read in ``tensordict``, the function that writes the next seed back there once
        the generator has drawn (the reference's private signature, used by clients).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> module = ProbabilisticTensorDictModule(in_keys=["loc"], out_keys=["x"], generator="seed")
        >>> td = TensorDict(seed=torch.tensor(3))
        >>> gen, writeback = module._resolve_generator(td)
        >>> writeback(gen)
        >>> int(td["seed"]) != 3
        True
        """
        if self._generator is not None or self._generator_key is None:
            return self._generator, None
        key = self._generator_key
        held = tensordict.get(key)
        if held is None:
            return None, None
        if isinstance(held, NON_TENSOR):  # a seed or generator stored as non-tensor data
            held = _non_tensor_value(held)
        if isinstance(held, torch.Generator):
            return held, None
        if isinstance(held, torch.Tensor) and held.numel() == 1:
            seed = int(held.item())
        elif isinstance(held, int) and not isinstance(held, bool):
            seed = held
        else:
            raise TypeError(
                f"The generator key {key!r} holds {held!r}; expected a torch.Generator, an "
                "int seed or a one-element integer tensor."
            )
        generator = torch.Generator().manual_seed(seed)

        def writeback(used: torch.Generator) -> None:
            next_seed = int(torch.randint(0, _SEED_BOUND, (), generator=used))
            if isinstance(held, torch.Tensor):
                tensordict.set(key, torch.tensor(next_seed, dtype=held.dtype, device=held.device))
            else:
                tensordict.set_non_tensor(key, next_seed)

        return generator, writeback

    def _dist_sample(
        self,
        dist: D.Distribution,
        interaction_type: InteractionType | str | None = None,
        *,
        generator: torch.Generator | None = None,
    ) -> Any:
        """The value of ``dist`` for ``interaction_type`` (the module's default when
        ``None``), random draws taken from ``generator``; ``num_samples`` values in random
        mode, the one deterministic value repeated otherwise (the reference's private
        signature, used by clients).

        >>> import torch
        >>> module = ProbabilisticTensorDictModule(in_keys=["loc"], out_keys=["x"])
        >>> module._dist_sample(torch.distributions.Normal(torch.ones(2), 1.0), "mode")
        tensor([1., 1.])
        """
        kind = as_interaction_type(interaction_type) or self.default_interaction_type
        random = kind is InteractionType.RANDOM
        shape = torch.Size(self.num_samples) if (self.num_samples and random) else torch.Size()
        with _use_generator(generator if random else None):
            value = draw(dist, kind, self.n_empirical_estimate, shape)
        if self.num_samples and not random:
            if isinstance(value, tuple):
                return tuple(v.expand(*self.num_samples, *v.shape) for v in value)
            return value.expand(*self.num_samples, *value.shape)
        return value

    #: The message of the error raised when ``composite_lp_aggregate`` changed since the
    #: module was built (the reference's private attribute, formatted by clients).
    _CHANGE_IN_C_LP_A = (
        "The value returned by composite_lp_aggregate changed between init of {} and its "
        "execution ({} -> {}). Make sure the mode matches."
    )

    @property
    def _composite_lp_aggreate_at_init(self) -> bool:
        """The ``composite_lp_aggregate()`` value the module was built under (the
        reference's private name, spelling included, read by clients)."""
        return bool(self._aggregate)

    @property
    def _out_keys(self) -> list[Any]:
        """The ``out_keys`` as given (the sample keys, without the log-probability keys;
        the reference's private attribute, read by clients)."""
        return list(self.__dict__["_sample_keys"])

    def _update_td_lp(self, lp: TensorDictBase) -> None:
        """Rename, in the tensordict ``lp`` of per-sample log-probabilities, each entry
        ``<sample key>_log_prob`` to this module's log-probability key for that sample
        (the reference's private method, used by clients)."""
        renames = [
            (suffixed(out_key, "_log_prob"), lp_key)
            for out_key, lp_key in zip(self.dist_sample_keys, self.log_prob_keys)
            if suffixed(out_key, "_log_prob") != lp_key
        ]
        values = [lp.pop(old) for old, _ in renames]  # read all before writing any
        for (_, new), value in zip(renames, values):
            lp.set(new, value)

    @tensordict_entry(auto_batch_size=False)
    def forward(
        self,
        tensordict: TensorDictBase,
        tensordict_out: TensorDictBase | None = None,
        _requires_sample: bool = True,
    ) -> TensorDictBase:
        """Build the distribution, draw a value, write it (and its log-probability)."""
        out = tensordict if tensordict_out is None else tensordict_out
        dist = self.get_dist(tensordict)
        if not _requires_sample:
            return out
        kind = self._interaction()
        value = self._draw(dist, kind, tensordict)
        if self.num_samples and kind is InteractionType.RANDOM:
            out = out.expand(*self.num_samples, *out.batch_size)
        selected = self.__dict__.get("_selected_out_keys")
        if isinstance(dist, CompositeDistribution):
            self._write_composite(out, dist, value, selected)
            return out
        keys = self.__dict__["_sample_keys"]
        if len(keys) != 1:
            raise RuntimeError(
                f"{type(dist).__name__} draws one value but out_keys={keys}; give one key "
                "(or use a CompositeDistribution)."
            )
        if keys[0] != IGNORE and (selected is None or keys[0] in selected):
            out.set(keys[0], value)
        if self.return_log_prob:
            key = self.log_prob_keys[0]
            if selected is None or key in selected:
                out.set(key, dist.log_prob(value))
        return out

    def _write_composite(
        self, out: TensorDictBase, dist: CompositeDistribution, value: Any, selected: Any
    ) -> None:
        for key in value.keys(True, True):
            if selected is None or key in selected:
                out.set(key, value.get(key))
        if not self.return_log_prob:
            return
        lps = dist.log_prob_composite(value, include_sum=False)
        names = self._log_prob_keys
        total = None
        for i, name in enumerate(dist.dists):
            lp = lps.get(suffixed(name, "_log_prob"))
            target = (
                names[i]
                if names is not None and not self._aggregate and i < len(names)
                else suffixed(name, "_log_prob")
            )
            if selected is None or target in selected:
                out.set(target, lp)
            part = lp.sum(tuple(range(value.ndim, lp.ndim))) if lp.ndim > value.ndim else lp
            total = part if total is None else total + part
        if self._aggregate:
            out.set(self.log_prob_key, total)

    def _repr_fields(self) -> list[str]:
        fields = super()._repr_fields()
        fields.append(f"distribution_class={self.distribution_class}")
        if self.distribution_kwargs:
            fields.append(f"distribution_kwargs={self.distribution_kwargs}")
        fields.append(f"default_interaction_type={self.default_interaction_type.value}")
        if self.num_samples:
            fields.append(f"num_samples={tuple(self.num_samples)}")
        return fields


def __getattr__(name: str) -> Any:
    # ProbabilisticTensorDictSequential lives in its own module (it builds on the class
    # above) and is importable from here, where the reference library defines it: looked
    # up when first asked for, so the two modules do not import each other.
    if name == "ProbabilisticTensorDictSequential":
        from tensordict.nn._prob_sequence import ProbabilisticTensorDictSequential

        return ProbabilisticTensorDictSequential
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
