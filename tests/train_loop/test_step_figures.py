"""What a step's point keeps of the trainer: a figure the step did not measure is None
(the dashboard hides it), not the 0.0 the trainer reports for it; the trainer's own time
beside the tokens it trained."""

from __future__ import annotations

from dataclasses import replace

from megaflow.app.training.curve import UPDATE_FIGURES, StepPoint, step_figures
from megaflow.train.stats import StepStats

UPDATED = StepStats(
    step=1, weights_version=1, updated=True, loss=0.0028, mean_ratio=1.0, clip_fraction=0.02,
    kl=0.013, grad_norm=0.5, tokens=90, samples=8, groups=4, zero_advantage_groups=1,
    masked_samples=0, seconds=1.25, groups_with_signal=3, mismatch=2e-5, entropy=1.8,
    response_length=41.0, truncation_rate=0.125, lr=1e-5,
)  # fmt: skip
# what the trainer reports for a step whose groups had no signal: no update, zeros
KEPT = replace(
    UPDATED, updated=False, skipped_without_signal=True, loss=0.0, clip_fraction=0.0, kl=0.0,
    grad_norm=0.0, tokens=0, groups_with_signal=0, mismatch=0.0, entropy=0.0,
)  # fmt: skip


def _point(figures: dict[str, object]) -> StepPoint:
    return StepPoint(step=1, prompts=["p"], reward_mean=0.0, weights_version=1, **figures)


def test_an_update_keeps_every_figure_and_the_trainers_time() -> None:
    p = _point(step_figures(UPDATED, kl_measured=True))
    assert (p.loss, p.grad_norm, p.clip_fraction, p.entropy, p.mismatch) == (
        0.0028, 0.5, 0.02, 1.8, 2e-5,
    )  # fmt: skip
    assert (p.kl, p.tokens, p.train_s, p.groups_with_signal) == (0.013, 90, 1.25, 3)
    assert (p.response_length, p.truncation_rate, p.lr) == (41.0, 0.125, 1e-5)


def test_kl_without_a_reference_model_is_not_a_figure() -> None:
    assert step_figures(UPDATED, kl_measured=False)["kl"] is None


def test_a_step_that_kept_its_weights_measured_no_update_figure() -> None:
    p = _point(step_figures(KEPT, kl_measured=True))
    for name in UPDATE_FIGURES:
        assert getattr(p, name) is None, name
    assert p.kl is None
    # what the batch itself says was measured all the same
    assert (p.groups, p.groups_with_signal, p.response_length) == (4, 0, 41.0)
    assert (p.tokens, p.train_s) == (0, 1.25)


def test_no_trainer_step_gives_no_trainer_figure() -> None:
    p = _point(step_figures(None, kl_measured=True))
    assert (p.loss, p.grad_norm, p.groups, p.train_s, p.tokens) == (None, None, None, None, 0)
