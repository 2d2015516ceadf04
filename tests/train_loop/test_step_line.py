"""What a step prints: the KL only when it was measured (kl_coef > 0)."""

from __future__ import annotations

from megaflow.app.training.curve import StepPoint
from megaflow.app.training.loop import _line
from megaflow.train.loop_config import TrainingConfig


def _config(kl_coef: float) -> TrainingConfig:
    return TrainingConfig.model_validate(
        {"held_out": {"path": "h.jsonl"}, "steps": 8, "kl_coef": kl_coef}
    )


def _point(kl: float | None) -> StepPoint:
    return StepPoint(step=1, prompts=["p"], reward_mean=0.25, loss=0.0028, kl=kl, weights_version=1)


def test_a_step_without_a_reference_model_prints_no_kl() -> None:
    line = _line(_point(None), _config(0.0), lost=0)
    assert line.startswith("step 1/8  reward 0.250  loss 0.0028  weights v1  staleness 0/1")
    assert "kl" not in line


def test_a_measured_kl_is_printed() -> None:
    line = _line(_point(0.0123), _config(0.05), lost=2)
    assert "loss 0.0028  kl 0.0123  weights v1" in line
    assert line.endswith("lost 2  0.0 s")
