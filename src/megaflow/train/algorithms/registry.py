"""Advantage estimators and policy losses, registered by name.

An estimator maps the rewards of a step's groups (one tensor of the live
samples' rewards per group) to their advantages, in the same shapes::

    @register_advantage("grpo")
    def grpo(rewards: Sequence[Tensor], *, scale_std: bool, std_eps: float) -> list[Tensor]

A policy loss maps the log importance ratios ``[B, T]`` (already against the
right base: the sampler's logprobs, or the trainer's own under a mismatch
correction), the advantages ``[B, 1]``, the loss mask ``[B, T]`` and the
:class:`~megaflow.train.algorithms.algorithm.Clip` to the per-token loss and
which tokens the clip cut::

    @register_policy_loss("ppo")
    def ppo(log_ratio, adv, mask, clip) -> tuple[Tensor, Tensor]

An algorithm config names one of each (``megaflow.train.algorithms.config``);
the worker calls the built :class:`Algorithm` without knowing which. The
built-in ones live in :mod:`.advantages` and :mod:`.losses`. A name with a
dot is a plug-in's function by dotted path (``package.module.function``,
through :func:`megaflow.core.plugins.load_object`); ``{type: custom}``
combines any estimator with any loss.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from megaflow.core.errors import ConfigError
from megaflow.core.plugins import load_object

if TYPE_CHECKING:
    import torch

    from megaflow.train.algorithms.algorithm import Clip

    AdvantageFn = Callable[[Sequence[torch.Tensor]], list[torch.Tensor]]
    PolicyLossFn = Callable[
        [torch.Tensor, torch.Tensor, torch.Tensor, Clip], tuple[torch.Tensor, torch.Tensor]
    ]

F = TypeVar("F", bound=Callable[..., Any])

_ADVANTAGES: dict[str, Callable[..., Any]] = {}
_POLICY_LOSSES: dict[str, Callable[..., Any]] = {}


def register_advantage(name: str) -> Callable[[F], F]:
    """Register an advantage estimator under ``name``."""

    def put(fn: F) -> F:
        _ADVANTAGES[name] = fn
        return fn

    return put


def register_policy_loss(name: str) -> Callable[[F], F]:
    """Register a policy loss under ``name``."""

    def put(fn: F) -> F:
        _POLICY_LOSSES[name] = fn
        return fn

    return put


def _builtins() -> None:
    from megaflow.train.algorithms import advantages, losses  # noqa: F401  (they register)


def _get(
    table: dict[str, Callable[..., Any]], what: str, name: str, field: str
) -> Callable[..., Any]:
    if "." in name or ":" in name:
        fn = load_object(name)
        if not callable(fn):
            raise ConfigError(f"{field}: {name!r} is not a function", [(field, "not callable")])
        return fn  # type: ignore[no-any-return]
    _builtins()
    if name not in table:
        known = ", ".join(sorted(table))
        raise ConfigError(
            f"{field}: no {what} named {name!r}; registered: {known}, or a dotted path",
            [(field, f"unknown {what}")],
        )
    return table[name]


def advantage_estimator(
    name: str, params: dict[str, Any] | None = None, field: str = "train.algorithm.advantage"
) -> AdvantageFn:
    """The estimator ``name`` (registered, or a dotted path) with ``params`` bound."""
    import torch

    est = functools.partial(_get(_ADVANTAGES, "advantage estimator", name, field), **(params or {}))
    try:  # wrong options fail here, naming the field, not in the first step
        est([torch.tensor([1.0, 0.0], dtype=torch.float64)])
    except TypeError as exc:
        raise ConfigError(
            f"{field}: the estimator {name!r} does not take these options: {exc}",
            [(field, "options the estimator does not take")],
        ) from None
    return est


def policy_loss_fn(name: str, field: str = "train.algorithm.policy_loss") -> PolicyLossFn:
    """The policy loss ``name`` (registered, or a dotted path)."""
    return _get(_POLICY_LOSSES, "policy loss", name, field)


def registered() -> dict[str, list[str]]:
    """The names of every registered estimator and loss."""
    _builtins()
    return {"advantages": sorted(_ADVANTAGES), "policy_losses": sorted(_POLICY_LOSSES)}
