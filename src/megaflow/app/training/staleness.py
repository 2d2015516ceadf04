"""Bounded staleness: what a step does with samples from old weights.

A sample's staleness is the trainer's weights version at the step minus the
oldest version that generated any of its tokens (``weights_version``, which
the model service records on every call; a backend that records none is taken
as version 0, the initial weights). A sample at most ``max_staleness``
versions behind is trained as it is. An older one is dropped (``stale:
drop``) or kept with its loss weight multiplied by ``reweight_decay`` per
version beyond the bound (``stale: reweight``). A group left with fewer than
two samples carries no GRPO signal and is dropped whole. Masked samples (lost
to the infrastructure, no tokens) pass through untouched and uncounted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from megaflow.train.samples import TrainingSample

Group = list[TrainingSample]


@dataclass
class StaleReport:
    """What the policy did to one step's samples."""

    samples: int = 0
    dropped: int = 0
    reweighted: int = 0
    staleness_max: int = 0
    groups_dropped: int = 0


def staleness(sample: TrainingSample, version: int) -> int:
    return max(0, version - (sample.weights_version or 0))


def apply_staleness(
    groups: list[Group],
    version: int,
    *,
    max_staleness: int,
    stale: Literal["drop", "reweight"],
    decay: float = 0.5,
) -> tuple[list[Group], StaleReport]:
    """The groups a step trains on, with ``version`` the trainer's weights version."""
    report = StaleReport()
    kept: list[Group] = []
    for group in groups:
        out: Group = []
        for s in group:
            if s.masked:
                out.append(s)  # no tokens, out of the group's statistics anyway
                continue
            report.samples += 1
            age = staleness(s, version)
            report.staleness_max = max(report.staleness_max, age)
            if age <= max_staleness:
                out.append(s)
            elif stale == "drop":
                report.dropped += 1
            else:
                report.reweighted += 1
                out.append(
                    s.model_copy(update={"weight": s.weight * decay ** (age - max_staleness)})
                )
        live = sum(1 for s in out if not s.masked)
        if live >= 2:
            kept.append(out)
        else:
            report.groups_dropped += 1
            report.dropped += live
    return kept, report
