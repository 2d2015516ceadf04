"""The learning curve of a training run: one point per step and per held-out round.

:class:`Curve` is what the loop keeps of its past (it rides in every
checkpoint, so a resumed run continues the same curve) and what
`megaflow train` writes at the end: ``curve.json`` and a PNG of the train
reward per step and the held-out reward per evaluation round. matplotlib is
imported only to draw (the ``train`` extra), with the Agg backend.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from megaflow.train.stats import StepStats

CURVE_JSON = "curve.json"
"""The curve's file under ``OUT_DIR/<run id>/``, where the dashboard reads it."""


class StepPoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: int
    prompts: list[str] = Field(description="The instance ids of the step's groups, in order.")
    refill_prompts: list[str] | None = Field(
        None, description="Dynamic sampling: the extra prompts its refill rounds rolled out."
    )
    reward_mean: float
    loss: float | None = None
    kl: float | None = None
    weights_version: int = Field(description="The version the step's update produced.")
    staleness_max: int = 0
    samples: int = 0
    dropped: int = 0
    reweighted: int = 0
    tokens: int = Field(0, description="Tokens trained in the step (0: no update).")
    seconds: float = Field(0.0, description="Wall time of the whole step, rollouts included.")
    rollout_s: float | None = Field(
        None, description="Seconds the step waited for its rollouts (refills included)."
    )
    train_s: float | None = Field(
        None, description="Seconds the trainer's step took (None: no trainer step)."
    )
    sets: dict[str, dict[str, float | int | None]] | None = Field(
        None,
        description="A run with train.sets: each set's samples (graded), reward_mean and "
        "pass_rate (share of graded samples with reward 1) in the step.",
    )
    # The trainer's figures of the step (megaflow.train.stats.StepStats; None: not computed,
    # as with updates off) and the loop's own, for the dashboard's training page.
    reward_std: float | None = Field(None, description="Population std of the step's rewards.")
    groups: int | None = None
    groups_with_signal: int | None = None
    grad_norm: float | None = None
    clip_fraction: float | None = None
    mismatch: float | None = None
    entropy: float | None = None
    response_length: float | None = None
    truncation_rate: float | None = None
    lr: float | None = None
    sync_s: float | None = Field(None, description="Seconds the step's weight sync took.")


TRAINER_FIGURES = (
    "groups", "groups_with_signal", "grad_norm", "clip_fraction", "mismatch", "entropy",
    "response_length", "truncation_rate", "lr",
)  # fmt: skip
"""The :class:`~megaflow.train.stats.StepStats` fields a :class:`StepPoint` keeps."""

UPDATE_FIGURES = ("loss", "grad_norm", "clip_fraction", "mismatch", "entropy")
"""Figures only an optimizer step measures: a step that kept its weights reports them as
0.0, which a chart would draw as a real zero (an entropy of 0 reads as a collapsed policy)."""


def step_figures(stats: StepStats | None, *, kl_measured: bool) -> dict[str, Any]:
    """The trainer's figures of a step as :class:`StepPoint` fields: None for what the step
    did not measure (everything without a trainer step, ``updates: false``; the
    :data:`UPDATE_FIGURES` of a step that took no update; KL unless a reference model
    measured it, ``kl_coef > 0``), so the dashboard hides them rather than chart zeros."""
    if stats is None:
        return {}
    figures: dict[str, Any] = {k: getattr(stats, k) for k in TRAINER_FIGURES}
    figures.update(loss=stats.loss, kl=stats.kl if kl_measured else None)
    if not stats.updated:
        figures.update(dict.fromkeys(UPDATE_FIGURES), kl=None)
    return {**figures, "tokens": stats.tokens, "train_s": stats.seconds}


class EvalPoint(BaseModel):
    """One held-out evaluation (``heldout.py``): the sampled round's pass@1 with its
    95% interval, and, with ``train.eval_greedy``, the greedy round's resolved share."""

    model_config = ConfigDict(extra="forbid")

    step: int = Field(description="Steps trained before the round (0: before training).")
    weights_version: int
    reward_mean: float | None = Field(
        None, description="Sampled pass@1 (mean of per-prompt means); None: nothing graded."
    )
    ci_low: float | None = Field(None, description="Lower end of pass@1's 95% interval.")
    ci_high: float | None = Field(None, description="Upper end of pass@1's 95% interval.")
    pass_at_k: float | None = Field(
        None,
        description="Sampled pass@k, k the samples per prompt (at least 2): the "
        "chance one of k samples is resolved; None when a round has fewer.",
    )
    k: int = Field(0, description="The k of pass_at_k (train.eval_samples); 0: not computed.")
    samples: int = Field(0, description="Samples graded (masked ones excluded).")
    masked: int = Field(0, description="Samples lost to the infrastructure.")
    malformed: float | None = Field(
        None, description="Share of graded sampled answers with a malformed model turn."
    )
    per_prompt: dict[str, float] = Field(
        default_factory=dict, description="Each held-out instance's mean sampled reward."
    )
    greedy: float | None = Field(None, description="Share of greedy samples resolved.")
    greedy_samples: int = Field(0, description="Greedy samples graded.")
    greedy_malformed: float | None = Field(
        None, description="Share of graded greedy answers with a malformed model turn."
    )
    sets: dict[str, dict[str, float | int | None]] | None = Field(
        None,
        description="Held-out task sets (train.held_out as sets): each set's samples and "
        "masked, reward_mean (pass@1) with ci_low and ci_high, pass_at_k, malformed and, "
        "with eval_greedy, greedy and greedy_samples.",
    )


class Curve(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    updates: bool = True
    control: str = Field("none", description="train.control of the run: none or shuffled.")
    steps: list[StepPoint] = Field(default_factory=list)
    evals: list[EvalPoint] = Field(default_factory=list)

    def trained_prompts(self) -> list[str]:
        return [p for s in self.steps for p in s.prompts]

    def write(self, png: Path) -> tuple[Path, Path]:
        """Write ``png`` and the JSON beside it (same name, ``.json``)."""
        js = self.write_json(png.with_suffix(".json"))
        self._draw(png)
        return png, js

    def write_json(self, js: Path) -> Path:
        """Write the curve's JSON, replacing the file whole (a reader never sees half of it);
        the loop calls it after every step, so the dashboard follows the run step by step."""
        js.parent.mkdir(parents=True, exist_ok=True)
        tmp = js.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.model_dump(mode="json"), indent=1))
        tmp.replace(js)
        return js

    def _draw(self, png: Path) -> None:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
        try:
            if self.steps:
                ax.plot(
                    [s.step for s in self.steps],
                    [s.reward_mean for s in self.steps],
                    color="tab:blue", alpha=0.6, label="train reward (step)",
                )  # fmt: skip
            done = [e for e in self.evals if e.reward_mean is not None]
            graded = [(e.step, e.reward_mean) for e in done if e.reward_mean is not None]
            if graded:
                lows = [
                    m - (e.ci_low if e.ci_low is not None else m)
                    for e, (_, m) in zip(done, graded, strict=True)
                ]
                highs = [
                    (e.ci_high if e.ci_high is not None else m) - m
                    for e, (_, m) in zip(done, graded, strict=True)
                ]
                ax.errorbar(
                    [step for step, _ in graded], [mean for _, mean in graded],
                    yerr=[lows, highs], fmt="o-", color="tab:red", capsize=3,
                    label="held-out pass@1 (sampled, 95% interval)",
                )  # fmt: skip
            greedy = [(e.step, e.greedy) for e in self.evals if e.greedy is not None]
            if greedy:
                ax.plot(
                    [step for step, _ in greedy], [g for _, g in greedy],
                    "s--", color="tab:green", label="held-out greedy",
                )  # fmt: skip
            ax.set_xlabel("training step")
            ax.set_ylabel("reward")
            values = [s.reward_mean for s in self.steps] + [mean for _, mean in graded]
            values += [g for _, g in greedy]
            ax.set_ylim(min([0.0, *values]) - 0.05, max([1.0, *values]) + 0.05)
            ax.grid(alpha=0.3)
            ax.legend(loc="best")
            arm = "" if self.updates else " (no updates)"
            arm += f" (control: {self.control} rewards)" if self.control != "none" else ""
            ax.set_title(f"{self.run_id}{arm}")
            fig.tight_layout()
            fig.savefig(png)
        finally:
            plt.close(fig)
