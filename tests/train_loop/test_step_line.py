"""What a step prints: the KL only when it was measured (kl_coef > 0), and the
trainer's figures (signal, clip, ratio, mismatch, grad norm, entropy, length,
truncation), or that a step without signal kept the weights."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from megaflow.app.training.curve import StepPoint
from megaflow.app.training.step_line import step_line
from megaflow.train.loop_config import TrainingConfig
from megaflow.train.stats import StepStats


def _config(kl_coef: float) -> TrainingConfig:
    return TrainingConfig.model_validate(
        {"held_out": {"path": "h.jsonl"}, "steps": 8, "kl_coef": kl_coef}
    )


def _point(kl: float | None) -> StepPoint:
    return StepPoint(step=1, prompts=["p"], reward_mean=0.25, loss=0.0028, kl=kl, weights_version=1)


BASE = StepStats(
    step=1, weights_version=1, updated=True, loss=0.0028, mean_ratio=1.0004,
    clip_fraction=0.0213, kl=0.0, grad_norm=0.512, tokens=90, samples=8, groups=4,
    zero_advantage_groups=1, masked_samples=0, seconds=1.0, groups_with_signal=3,
    mismatch=2.1e-5, entropy=1.843, response_length=41.0, truncation_rate=0.125,
)  # fmt: skip


def _stats(**kw: Any) -> StepStats:
    return replace(BASE, **kw)


def test_a_step_without_a_reference_model_prints_no_kl() -> None:
    line = step_line(_point(None), _config(0.0), lost=0)
    assert line.startswith("step 1/8  reward 0.250  loss 0.0028  weights v1  staleness 0/1")
    assert "kl" not in line


def test_a_measured_kl_is_printed() -> None:
    line = step_line(_point(0.0123), _config(0.05), lost=2)
    assert "loss 0.0028  kl 0.0123  weights v1" in line
    assert line.endswith("lost 2  0.0 s")


def test_the_trainer_figures_follow_the_staleness() -> None:
    line = step_line(_point(None), _config(0.0), lost=0, stats=_stats())
    assert "staleness 0/1  signal 3/4  clip 0.021  ratio 1.000  mismatch 2.1e-05" in line
    assert "grad 0.512  entropy 1.84  len 41.0  trunc 0.12  0.0 s" in line
    assert "kl" not in line
    assert "corrected" not in line
    corrected = step_line(_point(None), _config(0.0), 0, _stats(corrected_fraction=0.05))
    assert "entropy 1.84  corrected 0.050  len" in corrected
    dapo = step_line(_point(None), _config(0.0), 0, _stats(filtered_groups=1, overlong_filtered=2))
    assert "trunc 0.12  filtered 1  overlong 2  0.0 s" in dapo


def test_a_step_without_signal_says_the_weights_were_kept() -> None:
    skipped = _stats(updated=False, skipped_without_signal=True, groups_with_signal=0)
    line = step_line(_point(None), _config(0.0), lost=1, stats=skipped)
    kept = "staleness 0/1  signal 0/4  no signal: weights kept  len 41.0  trunc 0.12  lost 1"
    assert kept in line
    assert "grad" not in line
    assert "ratio" not in line
