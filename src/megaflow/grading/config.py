"""``grading``: how a run's tasks are graded, one config per grader.

The ``type`` tag names the grader (``swebench`` when absent, so older configs
keep their meaning); each config builds its grader (``build``), importing its
module only then::

    grading: {strict: true}                                  # swebench
    grading: {type: script, timeout_s: 600}                  # Harbor's tests/test.sh
    grading: {type: python, function: mypkg.rewards.exact_match}
    grading: {type: judge, rubric: "1 if the answer is correct, else 0"}

``build`` takes the run's model client too; only the ``judge`` grader uses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator

from megaflow.core.errors import PluginError
from megaflow.core.plugins import load_object
from megaflow.datasets.config import GradingConfig
from megaflow.model.config import ModelConfig

if TYPE_CHECKING:
    from megaflow.grading.abstract import Grader
    from megaflow.grading.swebench import CalibrationCache
    from megaflow.model.abstract import ModelClient


class SwebenchGraderConfig(GradingConfig):
    """SWE-bench instances: the candidate patch graded in a fresh sandbox prepared
    from the task's source, through MegaFlow's reporter (docs/tasks-format.md)."""

    type: Literal["swebench"] = Field("swebench", description="This grader's tag.")

    def build(
        self, calibrations: CalibrationCache | None = None, model: ModelClient | None = None
    ) -> Grader:
        from megaflow.grading.swebench import SwebenchGrader

        return SwebenchGrader(self, calibrations)


class ScriptGraderConfig(BaseModel):
    """A verifier script (Harbor's ``tests/test.sh``) run in a fresh sandbox of the
    task's image against the agent's final files, writing its reward where only
    it can: ``reward.txt`` (a number) or ``reward.json`` (named numbers)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["script"] = Field("script", description="This grader's tag.")
    tests_dir: str = Field("/tests", description="Where the task's tests go in the verifier.")
    reward_dir: str = Field(
        "/logs/verifier", description="Where the verifier writes reward.txt or reward.json."
    )
    timeout_s: float | None = Field(
        None, gt=0, description="Longest verifier run; None: the task's own (task.toml)."
    )
    max_state_mb: int = Field(
        256, ge=1, le=65_536, description="Largest final state (the workdir as a tar) taken."
    )

    def build(
        self, calibrations: CalibrationCache | None = None, model: ModelClient | None = None
    ) -> Grader:
        from megaflow.grading.script import ScriptGrader

        return ScriptGrader(self)


class PythonGraderConfig(BaseModel):
    """A reward function, named by dotted path, called on the host with the task's
    payload and the agent's final answer (its submission) or patch, never with
    anything else of its sandbox: ``fn(payload, answer) -> float | dict[str, float]``."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["python"] = Field("python", description="This grader's tag.")
    function: str = Field(description="``package.module.function`` (or ``module:function``).")
    on: Literal["answer", "message", "patch"] = Field(
        "answer",
        description="What is graded: 'answer' the file answer_file of the workdir (read as "
        "data), 'message' the agent's last message, 'patch' its git diff against the "
        "payload's base_commit.",
    )
    answer_file: str = Field("answer.txt", description="With on: answer, the file read.")
    timeout_s: float = Field(60, gt=0, description="Longest call of the function.")
    max_answer_kb: int = Field(256, ge=1, le=65_536, description="Largest answer or patch.")

    @field_validator("function")
    @classmethod
    def _loadable(cls, path: str) -> str:
        """A function that cannot be loaded is a config error, before any work starts."""
        try:
            fn = load_object(path)
        except PluginError as e:
            raise ValueError(str(e)) from None
        if not callable(fn):
            raise ValueError(f"{path!r} is not callable")
        return path

    def build(
        self, calibrations: CalibrationCache | None = None, model: ModelClient | None = None
    ) -> Grader:
        from megaflow.grading.python_fn import PythonGrader

        return PythonGrader(self)


class JudgeGraderConfig(BaseModel):
    """An LLM judge with a rubric: the run's model (through its gateway), or a model
    block of its own, grades the agent's answer, given to it as fenced data; its
    reply's last line must be ``SCORE: <0..1>`` (anything else is reward 0, with
    why). The judge's calls are kept in the grade report, never as training data."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["judge"] = Field("judge", description="This grader's tag.")
    rubric: str = Field(
        min_length=1, max_length=20_000, description="What the judge scores the answer by."
    )
    model: ModelConfig | None = Field(
        None,
        description="The judge's own model (started for each grading); None: the run's "
        "model, through its gateway.",
    )
    on: Literal["answer", "message", "patch"] = Field(
        "message",
        description="What is judged: 'message' the agent's last message, 'answer' the file "
        "answer_file of the workdir (read as data), 'patch' its git diff against the "
        "payload's base_commit.",
    )
    answer_file: str = Field("answer.txt", description="With on: answer, the file read.")
    task_field: str = Field(
        "problem_statement", description="The payload field shown to the judge as the task."
    )
    temperature: float = Field(0.0, ge=0, le=2, description="The judge's sampling temperature.")
    max_tokens: int = Field(512, ge=1, le=32_768, description="Longest judge reply, in tokens.")
    max_answer_kb: int = Field(
        64, ge=1, le=4096, description="Largest answer given to the judge; a larger one is 0."
    )

    def build(
        self, calibrations: CalibrationCache | None = None, model: ModelClient | None = None
    ) -> Grader:
        from megaflow.grading.judge import JudgeGrader

        return JudgeGrader(self, model)


def _tag(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("type", "swebench"))
    return str(getattr(value, "type", "swebench"))


LeafGraderConfig = Annotated[
    Annotated[SwebenchGraderConfig, Tag("swebench")]
    | Annotated[ScriptGraderConfig, Tag("script")]
    | Annotated[PythonGraderConfig, Tag("python")]
    | Annotated[JudgeGraderConfig, Tag("judge")],
    Discriminator(_tag),
]
"""Every grader that grades a task itself."""


class SetsGraderConfig(BaseModel):
    """Each task graded by its task set's grader (the payload's ``megaflow_set``), or
    by ``default`` when it names no set here: what a train run with ``train.sets``
    grades by (docs/train-loop.md)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["sets"] = Field("sets", description="This grader's tag.")
    sets: dict[str, LeafGraderConfig] = Field(description="Each set's grader, by set name.")
    default: LeafGraderConfig = Field(
        default_factory=SwebenchGraderConfig, description="The grader of every other task."
    )

    def build(
        self, calibrations: CalibrationCache | None = None, model: ModelClient | None = None
    ) -> Grader:
        from megaflow.grading.sets import SetsGrader

        return SetsGrader(
            {name: cfg.build(calibrations, model) for name, cfg in self.sets.items()},
            self.default.build(calibrations, model),
        )


GraderConfig = Annotated[
    Annotated[SwebenchGraderConfig, Tag("swebench")]
    | Annotated[ScriptGraderConfig, Tag("script")]
    | Annotated[PythonGraderConfig, Tag("python")]
    | Annotated[JudgeGraderConfig, Tag("judge")]
    | Annotated[SetsGraderConfig, Tag("sets")],
    Discriminator(_tag),
]
"""Every grader's config: the union is the list of graders."""
