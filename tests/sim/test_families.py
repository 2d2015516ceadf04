"""Trace families: a run's length factor changes lengths only, and keeps each type's mean."""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict

import pytest

from megaflow.sim.families import (
    FAMILIES,
    TEST_FAMILIES,
    TEST_SEEDS,
    TRAIN_FAMILIES,
    TRAIN_SEEDS,
    VALIDATION_FAMILIES,
    VALIDATION_SEEDS,
    family,
)
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


def test_training_validation_and_test_families_are_apart() -> None:
    splits = [set(TRAIN_FAMILIES), set(VALIDATION_FAMILIES), set(TEST_FAMILIES)]
    assert sum(map(len, splits)) == len(set().union(*splits))  # no family in two splits
    assert len(VALIDATION_SEEDS) >= 10
    assert len(TEST_SEEDS) >= 10
    assert max(TRAIN_SEEDS - 1, 0) < min(VALIDATION_SEEDS) < min(TEST_SEEDS)
    assert not set(VALIDATION_SEEDS) & set(TEST_SEEDS)
    assert all(FAMILIES[n].run_sigma[0] < FAMILIES[n].run_sigma[1] for n in TRAIN_FAMILIES)


def test_expected_durations_are_each_runs_mean_length() -> None:
    fam = dataclasses.replace(family("mix-poisson"), run_sigma=(0.6, 0.6))
    trace = fam.trace(7, 100_000)
    expected = fam.expected_durations(7, trace)
    by_run: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for t, e in zip(trace, expected, strict=True):
        by_run[t.run].append((t.duration_s, e))
    assert len({round(e, 9) for _, e in by_run["train-0"]}) == 1  # one value per run
    assert len({round(pairs[0][1]) for pairs in by_run.values()}) == len(by_run)  # runs differ
    for run, pairs in by_run.items():  # a run's realised mean is near its expectation
        realised, want = statistics.fmean(d for d, _ in pairs), pairs[0][1]
        assert realised == pytest.approx(want, rel=0.08), run  # 3 standard errors or more
