"""Trace families: a run's length factor changes lengths only, and keeps each type's mean."""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict

import pytest

from megaflow.sim.families import EVAL_FAMILIES, FAMILIES, TRAIN_FAMILIES, family
from megaflow.sim.trace import MAX_DURATION_S


def test_run_sigma_scales_each_run_and_leaves_the_rest_of_the_trace_alone() -> None:
    varied = dataclasses.replace(family("mix-poisson"), run_sigma=(0.6, 0.6), load=(1.0, 1.0))
    alike = dataclasses.replace(varied, run_sigma=(0.0, 0.0))
    a, b = alike.trace(11, 3000), varied.trace(11, 3000)
    assert [(t.arrival_s, t.type, t.run, t.priority) for t in a] == [
        (t.arrival_s, t.type, t.run, t.priority) for t in b
    ]
    ratios: dict[str, set[float]] = defaultdict(set)
    for x, y in zip(a, b, strict=True):
        if all(1.0 < t.duration_s < MAX_DURATION_S for t in (x, y)):
            ratios[y.run].add(round(y.duration_s / x.duration_s, 6))
    assert all(len(r) == 1 for r in ratios.values())  # one factor per run
    factors = {run: next(iter(r)) for run, r in ratios.items()}
    assert max(factors.values()) / min(factors.values()) > 1.5  # runs do differ
    for kind in ("train", "eval", "synth"):  # factors average 1 over a type's runs
        mine = [f for run, f in factors.items() if run.startswith(kind)]
        assert len(mine) == 4
        assert statistics.fmean(mine) == pytest.approx(1.0, abs=1e-6)
    assert varied.trace(12, 100) != b[:100]  # factors are drawn per trace


def test_training_and_evaluation_families_are_apart() -> None:
    assert not set(TRAIN_FAMILIES) & set(EVAL_FAMILIES)
    assert all(FAMILIES[n].run_sigma[0] < FAMILIES[n].run_sigma[1] for n in TRAIN_FAMILIES)
