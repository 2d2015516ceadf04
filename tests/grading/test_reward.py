"""The one reward rule, and the grading config union."""

from __future__ import annotations

import math
import typing

import pytest
from pydantic import TypeAdapter, ValidationError

from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind, TaskResult
from megaflow.grading.abstract import Verdict
from megaflow.grading.config import (
    GraderConfig,
    PythonGraderConfig,
    ScriptGraderConfig,
    SwebenchGraderConfig,
)
from megaflow.grading.reward import combined, reward_of, sample_reward


def test_reward_of_a_report() -> None:
    assert reward_of(Verdict(grader="script", reward=0.5)) == 0.5
    assert reward_of(Verdict(grader="script", reward=1.0, tampered=True)) == 0.0
    assert reward_of(Verdict(grader="script", reward=math.nan)) == 0.0
    assert reward_of(Verdict(grader="script", reward=7.0)) == 1.0
    assert combined({"reward": 0.25, "other": 1}) == 0.25
    assert combined({"a": 1, "b": 0}) == 0.5
    assert combined({}) == 0.0


def test_sample_reward_is_masked_exactly_when_the_task_did_not_succeed() -> None:
    done = TaskResult(task_id="t", success=True, reward=0.5)
    agent = TaskResult(task_id="t", success=False, reward=0.0, error_kind=ErrorKind.AGENT)
    infra = TaskResult(task_id="t", success=False, reward=0.0, error_kind=ErrorKind.INFRA)
    assert sample_reward(TaskState.SUCCEEDED, done) == 0.5
    assert sample_reward(TaskState.SUCCEEDED, agent) == 0.0  # the agent's own failure
    assert sample_reward(TaskState.FAILED, agent) is None  # raised by another executor
    assert sample_reward(TaskState.FAILED, infra) is None
    assert sample_reward(TaskState.TIMED_OUT, None) is None


def test_grading_type_builds_its_config_and_defaults_to_swebench() -> None:
    adapter: TypeAdapter[GraderConfig] = TypeAdapter(GraderConfig)
    assert isinstance(adapter.validate_python({"strict": True}), SwebenchGraderConfig)
    assert isinstance(adapter.validate_python({"type": "script"}), ScriptGraderConfig)
    fn = "tests.grading.rewards_for_tests.exact_match"
    cfg = adapter.validate_python({"type": "python", "function": fn})
    assert isinstance(cfg, PythonGraderConfig)
    with pytest.raises(ValidationError, match="judge"):
        adapter.validate_python({"type": "judge"})
    with pytest.raises(ValidationError, match="timeout_s"):
        adapter.validate_python({"type": "script", "timeout_s": -1})


def test_every_grader_config_has_its_tag() -> None:
    members = typing.get_args(typing.get_args(GraderConfig)[0])
    tags = set()
    for member in members:
        cls = typing.get_args(member)[0]
        tags.add(cls.model_fields["type"].default)
        assert cls.model_config.get("extra") == "forbid"
    assert tags == {"swebench", "script", "python", "judge", "sets"}
