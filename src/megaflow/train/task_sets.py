"""``train.sets`` and ``train.curriculum``: one train run drawing from several task sets.

::

    train:
      sets:
        - {name: swe, path: tasks/settings-fix/train.jsonl, weight: 0.5}
        - {name: qa, type: jsonl, path: qa.jsonl, weight: 0.5,
           grading: {type: python, function: mypkg.rewards.exact_match}}
      curriculum: {min_attempts: 4}
      held_out: {name: qa-eval, type: jsonl, path: qa-eval.jsonl,
                 grading: {type: python, function: mypkg.rewards.exact_match}}

Without ``sets`` a run trains on its ``train_split`` as before. With them,
each step's prompts are drawn from the sets by weight, each set graded by
its own ``grading`` (the run's when it names none); a GRPO group is always
the samples of one task. ``held_out`` takes the same kinds of set (one, or a
list), each graded by its own grader too. The sampler is :mod:`megaflow.app.training.sampler`.
Like every config section this imports neither torch nor transformers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from megaflow.grading.config import LeafGraderConfig


class SetSourceConfig(BaseModel):
    """Where a task set comes from and how its tasks are graded: a train set
    (:class:`TaskSetConfig`), or a held-out set (``train.held_out`` with a ``name``)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$",
        description="The set's name in the step line and the curve (lower case, digits, - _).",
    )
    type: Literal["swebench", "harbor", "jsonl"] = Field(
        "swebench",
        description="swebench: SWE-bench-style instances (as tasks.type swebench); harbor: a "
        "Harbor folder or converted file; jsonl: one task a line, {id, payload}.",
    )
    path: str = Field(
        min_length=1, description="The set's file or folder (relative to the config)."
    )
    limit: int | None = Field(None, ge=1, description="Only the first N tasks of the set.")
    grading: LeafGraderConfig | None = Field(
        None, description="How the set's tasks are graded; the run's grading if None."
    )


class TaskSetConfig(SetSourceConfig):
    """One task set of a mixed train run."""

    weight: float = Field(1.0, gt=0, le=1e6, description="The set's share of each step's prompts.")


def held_out_grader_key(name: str) -> str:
    """The ``sets`` grader's key of held-out set ``name``: apart from the train sets'
    keys (a set name holds no dot), so a held-out set may share a train set's name
    and still be graded by its own grader."""
    return f"held_out.{name}"


class CurriculumConfig(BaseModel):
    """Sample tasks by their running pass rate (share of graded samples with reward 1)."""

    model_config = ConfigDict(extra="forbid")

    min_attempts: int = Field(
        4,
        ge=1,
        le=100_000,
        description="Graded samples of a task after which, if it passed every time or never, "
        "it is skipped.",
    )
    floor: float = Field(
        0.05,
        gt=0,
        le=0.25,
        description="Least weight of a task that is not skipped (its weight is p(1-p), p its "
        "smoothed pass rate, at most 0.25).",
    )


def unique_names(names: Sequence[str], field: str) -> None:
    """Refuse sets of which two share a name (their figures would merge)."""
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{field}: set name(s) used twice: {', '.join(twice)}")
