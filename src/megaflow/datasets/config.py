"""How a run grades: strict or SWE-bench-lenient, and the patch size limit."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from megaflow.core.tasks import TaskType


class GradingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    strict: bool | None = Field(
        None,
        description=(
            "Strict grading: a patch that touches test infrastructure (conftest.py, pytest/tox "
            "settings, files under test directories) does not resolve, and XFAIL, XPASS and "
            "SKIPPED count as not passing. None: strict for 'train' tasks, SWE-bench's "
            "lenient rule for the others."
        ),
    )
    calibrate: bool = Field(
        True,
        description=(
            "Before the first sample of an instance is graded, grade its base commit once "
            "(test patch applies, runner starts, PASS_TO_PASS pass): a broken grading "
            "environment is then an infrastructure error, never reward 0 for every sample."
        ),
    )
    parser: Literal["swebench", "megaflow"] = Field(
        "swebench",
        description=(
            "swebench: an instance of a repository the swebench harness knows, whose tests "
            "are read from their log (pytest_log, django), is graded by the harness's own "
            "parser and report; megaflow: MegaFlow's parsers for every instance. Strict "
            "grading and the pytest (reporter) format always use MegaFlow's."
        ),
    )
    max_patch_kb: int = Field(
        4096, ge=1, le=1_048_576, description="Largest candidate patch; a larger one fails."
    )

    def strict_for(self, task_type: TaskType | None) -> bool:
        """Whether a task of ``task_type`` is graded strictly."""
        if self.strict is not None:
            return self.strict
        return task_type is TaskType.TRAIN
