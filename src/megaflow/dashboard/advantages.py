"""The advantages a train run's trainer computed, recomputed for the trajectory page.

The loop does not store advantages; they are a function of the graded
rewards and the run's ``train.algorithm``. This module builds that
algorithm from the run's stored config (the registry's estimator with the
run's options: GRPO, Dr. GRPO, RLOO, REINFORCE++, a plug-in) and applies its
estimator to the rewards of the step the sample belongs to, group by group,
as :meth:`megaflow.train.algorithms.algorithm.Algorithm.prepare` does: masked
samples (no graded reward) are left out, and an estimator that normalises
over the whole batch (REINFORCE++) sees every group of the step.

What the page cannot recompute it names: the overlong penalty (it needs each
sibling's token count), the staleness weight of an asynchronous run, and the
reward permutation of a shuffled control. A plug-in estimator (a dotted path)
is named, not imported: the dashboard runs no code a stored config names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from megaflow.core.errors import ConfigError
from megaflow.train.algorithms.config import AlgorithmConfig

#: ``<incarnation>.s<step>.`` in a train task's id: the round (one step) it was rolled out in.
_ROUND = re.compile(r"\.s\d{5}\.")


@dataclass(frozen=True, slots=True)
class Estimator:
    """The run's advantage estimator as the page names it, or why there is none."""

    name: str  # the algorithm's tag: grpo, dr_grpo, rloo, reinforce_pp, custom ...
    formula: str  # what it computes, from the algorithm config's own description
    notes: list[str] = field(default_factory=list)  # what the page does not recompute
    problem: str | None = None  # why no advantage is shown
    fn: Any = None  # the registry's estimator with the run's options bound


def _describe(cfg: Any) -> str:
    text = " ".join((type(cfg).__doc__ or "").split()).rstrip(".")
    if cfg.type == "custom":
        opts = f" with {cfg.advantage_options}" if cfg.advantage_options else ""
        return f"the estimator {cfg.advantage!r}{opts} ({text})"
    return text


def run_estimator(config: dict[str, Any]) -> Estimator:
    """The estimator of a run whose validated config is ``config`` (GRPO when the
    config names no ``train.algorithm``, as the trainer's default)."""
    got = config.get("train")
    train: dict[str, Any] = got if isinstance(got, dict) else {}
    raw = train.get("algorithm") or {"type": "grpo"}
    try:
        cfg = TypeAdapter(AlgorithmConfig).validate_python(raw)
    except ValidationError as exc:
        name = str(raw.get("type", "?")) if isinstance(raw, dict) else "?"
        return Estimator(name, "", problem=f"train.algorithm does not validate: {exc}")
    notes = []
    if cfg.overlong_penalty is not None:
        notes.append("without the overlong penalty (each sample's length is not read here)")
    if train.get("mode") == "async" and train.get("stale") == "reweight":
        notes.append("before the staleness weight of samples older than max_staleness")
    if train.get("control", "none") != "none":
        notes.append(
            f"of the graded rewards; the {train.get('control')} control trained on them permuted"
        )
    if cfg.type == "custom" and ("." in cfg.advantage or ":" in cfg.advantage):
        # the dashboard imports no code a stored config names
        return Estimator(cfg.type, _describe(cfg), notes, "a plug-in estimator is not loaded here")
    try:
        fn = cfg.build().advantage
    except ImportError:
        return Estimator(cfg.type, _describe(cfg), notes, "torch is not installed (train extra)")
    except ConfigError as exc:
        return Estimator(cfg.type, _describe(cfg), notes, str(exc))
    return Estimator(cfg.type, _describe(cfg), notes, fn=fn)


def warm_up() -> None:
    """Import torch and the built-in estimators (seconds on a busy host), so the first
    trajectory page does not wait for them; nothing when the train extra is missing."""
    try:
        from megaflow.train.algorithms import advantages  # noqa: F401
    except ImportError:
        pass


def step_of(group: str) -> str | None:
    """The step round of a train group id (``<run>/<inc>.s00003.<task>`` ->
    ``<run>/<inc>.s00003.``), or None when the id names no round."""
    m = _ROUND.search(group)
    return group[: m.end()] if m else None


def step_advantages(
    est: Estimator, groups: list[list[float | None]]
) -> list[list[float | None]] | None:
    """Each sample's advantage over a step's groups of rewards (None: masked, and stays
    None); None when the estimator cannot be run."""
    if est.fn is None:
        return None
    import torch

    live = [[r for r in g if r is not None] for g in groups]
    advs = est.fn([torch.tensor(g, dtype=torch.float64) for g in live])
    out: list[list[float | None]] = []
    for g, adv in zip(groups, advs, strict=True):
        values = iter(adv.tolist())
        out.append([None if r is None else float(next(values)) for r in g])
    return out
