"""The run config's ``train:`` section: what `megaflow train` does with a run.

A run with a ``train:`` section (the trainer's :class:`TrainerConfig` and the
loop's fields beside it) is a closed RL loop: its ``tasks`` (or the
``train_split`` taken from them) are the prompts, ``samples`` of each form a
GRPO group, and every step trains on ``prompts_per_step`` groups and pushes
the new weights to the rollout backend. The ``held_out`` split is evaluated
before training, every ``eval_every`` steps and at the end.

Like every config section this imports neither torch nor transformers.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    model_validator,
)

from megaflow.grading.config import LeafGraderConfig
from megaflow.train.config import TrainerConfig
from megaflow.train.task_sets import (
    CurriculumConfig,
    SetSourceConfig,
    TaskSetConfig,
    unique_names,
)
from megaflow.train.weight_sync.config import InProcessSyncConfig, WeightSyncConfig


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SplitConfig(_Cfg):
    """A task set for training or evaluation: SWE-bench-style instances."""

    path: str | None = Field(
        None,
        description="A task set directory, .json or .jsonl file (relative to the config); "
        "None means the run's own `tasks`.",
    )
    instances: list[str] | None = Field(None, description="Only these instance ids.")
    exclude: list[str] = Field(
        default_factory=list, description="Leave these instance ids out (e.g. the held-out ones)."
    )
    limit: int | None = Field(None, ge=1, description="Only the first N instances.")


class HeldOutConfig(SplitConfig):
    """What a run evaluates: without a ``name``, a split of SWE-bench-style instances
    graded by the run's ``grading`` (``{path, instances, exclude, limit}``); with one, a
    task set as a ``train.sets`` entry is (without weight), graded by its own
    ``grading``, whose figures the held-out rounds report by that name."""

    name: str | None = Field(
        None,
        pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$",
        description="Makes this a held-out task set, reported by this name (lower case, "
        "digits, - _); needed with a type other than swebench, a grading or in a list.",
    )
    type: Literal["swebench", "harbor", "jsonl"] = Field(
        "swebench",
        description="swebench: SWE-bench-style instances; harbor: a Harbor folder or "
        "converted file; jsonl: one task a line, {id, payload} (as in train.sets).",
    )
    grading: LeafGraderConfig | None = Field(
        None,
        description="How the set's tasks are graded; the run's grading if None (script for "
        "a harbor set).",
    )

    @model_validator(mode="after")
    def _a_set_is_named(self) -> HeldOutConfig:
        if self.name is None and (self.type != "swebench" or self.grading is not None):
            raise ValueError(
                "a held-out set with its own type or grading needs a name (its figures go by it)"
            )
        if self.name is not None and self.path is None:
            raise ValueError(f"held-out set {self.name!r} needs a path")
        return self

    def source(self) -> SetSourceConfig:
        """The set to load, as a train set's (:func:`megaflow.app.training.mixed.load_set`)."""
        assert self.name is not None
        assert self.path is not None
        return SetSourceConfig(
            name=self.name, type=self.type, path=self.path, limit=self.limit, grading=self.grading
        )


def _all_named(sets: list[HeldOutConfig]) -> list[HeldOutConfig]:
    unnamed = [n for n, s in enumerate(sets) if s.name is None]
    if unnamed:
        raise ValueError(f"entry {unnamed[0]} has no name: each held-out set in a list needs one")
    unique_names([s.name for s in sets if s.name is not None], "held_out")
    return sets


def _held_out_form(value: Any) -> str:
    """One held-out split or set, or a list of sets. The tags start with ``~`` so that
    a config error names the field as the user wrote it (``megaflow.config.loader``
    leaves such tags out of the path)."""
    return "~list" if isinstance(value, list) else "~one"


HeldOut = Annotated[
    Annotated[HeldOutConfig, Tag("~one")]
    | Annotated[list[HeldOutConfig], Field(min_length=1), AfterValidator(_all_named), Tag("~list")],
    Discriminator(_held_out_form),
]
"""``train.held_out``: one :class:`HeldOutConfig`, or a list of named ones."""


class TrainingConfig(TrainerConfig):
    """The closed loop: rollouts -> GRPO step -> new weights to the rollout backend.
    The trainer's own fields (optimizer, loss, checkpoints) sit beside the loop's."""

    train_split: SplitConfig = Field(
        default_factory=SplitConfig, description="The prompts trained on; the run's tasks."
    )
    held_out: HeldOut = Field(
        description="What is evaluated (never trained on): a split of SWE-bench-style "
        "instances ({path, instances, exclude, limit}), or a named task set or a list of "
        "them as in `sets` (without weight), each graded by its own grading."
    )
    sets: list[TaskSetConfig] | None = Field(
        None,
        min_length=1,
        description="Train on several task sets, each with its weight and grading, in place "
        "of train_split (docs/train-loop.md, 'Several task sets').",
    )
    curriculum: CurriculumConfig | None = Field(
        None, description="With sets: sample tasks by their running pass rate."
    )
    prompts_per_step: int = Field(4, ge=1, le=10_000, description="Groups per training step.")
    steps: int = Field(10, ge=1, le=1_000_000, description="Training steps in the run.")
    eval_every: int = Field(
        5, ge=0, description="Evaluate the held-out split every K steps (0: before and at end)."
    )
    eval_samples: int = Field(1, ge=1, le=100, description="Samples of each held-out task.")
    eval_temperature: float | None = Field(
        None,
        ge=0,
        le=2,
        description="Sampling temperature of the held-out rounds (0: greedy); the agent's if None.",
    )
    eval_greedy: bool = Field(
        False,
        description="Also decode each held-out task once greedily in every held-out round "
        "(reported as 'greedy' beside the sampled pass@1).",
    )
    eval_before: bool = Field(
        True,
        description="Evaluate the held-out split before the first step (false: a control arm "
        "that starts from the same weights as a run which already did).",
    )
    mode: Literal["sync", "async"] = Field(
        "sync",
        description="sync: roll out, then train. async: the next steps' rollouts keep "
        "running while a step trains.",
    )
    lookahead: int | None = Field(
        None,
        ge=1,
        le=64,
        description="async: steps of rollouts in flight ahead of training; max_staleness if None.",
    )
    max_staleness: int = Field(
        1, ge=0, le=1_000, description="Oldest weights (in versions behind) a sample may use."
    )
    stale: Literal["drop", "reweight"] = Field(
        "drop",
        description="A sample older than max_staleness: dropped, or kept with its weight "
        "multiplied by `reweight_decay` per version beyond the bound.",
    )
    reweight_decay: float = Field(0.5, gt=0, le=1)
    updates: bool = Field(
        True, description="false: the same loop without optimizer steps (a control)."
    )
    control: Literal["none", "shuffled"] = Field(
        "none",
        description="shuffled: each group's graded rewards are permuted among its samples "
        "before the advantages, so the updates carry no signal (the control arm).",
    )
    max_steps_without_signal: int | None = Field(
        5,
        ge=1,
        description="Stop with an error after this many steps in a row in which every graded "
        "sample scored 0 (nothing to learn from, as when the grading environment is broken); "
        "None: never stop for it.",
    )
    policy: str | None = Field(
        None,
        description="The model directory the trainer starts from; the rollout model's own "
        "for model.type transformers. Needed when the rollout engines run elsewhere "
        "(model.type openai): they must serve these weights as version 0.",
    )
    weight_sync: WeightSyncConfig = Field(
        default_factory=InProcessSyncConfig,
        description="How new weights reach the rollout engines: in_process (tensors, the "
        "default) or disk (a versioned safetensors checkpoint each engine loads by path).",
    )
    out_dir: str = Field(
        ".megaflow/train", description="The learning curve goes to OUT_DIR/<run id>/."
    )
    curve: str | None = Field(
        None,
        description="Where the PNG learning curve goes (its JSON beside it, .json); "
        "OUT_DIR/<run id>/curve.png if None.",
    )

    @model_validator(mode="after")
    def _async_only(self) -> TrainingConfig:
        if self.mode == "sync" and self.lookahead is not None:
            raise ValueError("lookahead applies to mode: async only")
        return self

    @model_validator(mode="after")
    def _sets(self) -> TrainingConfig:
        unique_names([s.name for s in self.sets or []], "sets")
        if self.sets is None and self.curriculum is not None:
            raise ValueError("curriculum applies with sets only")
        if self.sets is not None and self.train_split != SplitConfig():
            raise ValueError("sets replace train_split: give one of the two")
        if self.sets is not None and self.algorithm.dynamic_sampling:
            raise ValueError("sets do not refill filtered groups: turn dynamic_sampling off")
        return self

    def held_out_sets(self) -> list[HeldOutConfig]:
        """The held-out task sets; none when ``held_out`` is a split of instances."""
        if isinstance(self.held_out, list):
            return self.held_out
        return [] if self.held_out.name is None else [self.held_out]

    def held_out_paths(self) -> list[tuple[str, str | None]]:
        """(config field, path) of each file or folder the held-out split names."""
        held = self.held_out if isinstance(self.held_out, list) else [self.held_out]
        return [(f"{self.held_out_field(n)}.path", h.path) for n, h in enumerate(held)]

    def held_out_field(self, n: int) -> str:
        """The config field of held-out set ``n``: ``train.held_out`` or ``train.held_out[n]``."""
        return f"train.held_out[{n}]" if isinstance(self.held_out, list) else "train.held_out"

    @property
    def ahead(self) -> int:
        """Steps whose rollouts run ahead of the one being trained (0 in sync mode)."""
        if self.mode == "sync":
            return 0
        return self.lookahead if self.lookahead is not None else max(1, self.max_staleness)

    def train_samples(self, samples: int) -> int:
        """Train samples a run plans: ``steps x prompts_per_step x samples`` (dynamic
        sampling's refills come on top)."""
        return self.steps * self.prompts_per_step * samples

    def heldout_rounds(self) -> int:
        """Held-out rounds a run from step 1 takes: one before training when
        ``eval_before``, one every ``eval_every`` steps, and one after the last step."""
        every = self.eval_every
        periodic = self.steps // every if every else 0
        last_extra = 0 if every and self.steps % every == 0 else 1
        return int(self.eval_before) + periodic + last_extra
