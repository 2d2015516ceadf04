"""Feedback from the dispatch core: built for a policy or listener that hears it, only."""

from __future__ import annotations

import pytest

from megaflow.core.tasks import Outcome
from megaflow.scheduler import dispatch
from megaflow.scheduler.abstract import InstanceSpec, TaskFeedback
from megaflow.scheduler.config import CustomPolicyConfig, SchedulerConfig
from megaflow.scheduler.dispatch import DispatchCore
from megaflow.scheduler.policies import FifoPolicy
from tests.scheduler.helpers import task


class Hearing(FifoPolicy):
    heard: list[TaskFeedback] = []

    def observe(self, feedback: TaskFeedback) -> None:
        Hearing.heard.append(feedback)


def _core(cfg: SchedulerConfig) -> DispatchCore:
    core = DispatchCore(cfg)
    core.add_instance(InstanceSpec("i", cpu=4, memory_mb=8192, slots=4))
    return core


def _place_and_finish(core: DispatchCore, task_id: str) -> None:
    core.submit(task(task_id), now=0.0)
    assert [d.task.id for d in core.plan(1.0)] == [task_id]
    assert core.finish(task_id, 2.0, Outcome.OK)


def test_no_feedback_is_built_when_nobody_hears_it(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[TaskFeedback] = []

    def counting(*args: object) -> TaskFeedback:
        fb = TaskFeedback(*args)  # type: ignore[arg-type]
        built.append(fb)
        return fb

    monkeypatch.setattr(dispatch, "TaskFeedback", counting)
    core = _core(SchedulerConfig())  # fifo: does not learn
    _place_and_finish(core, "quiet")
    assert built == []
    got: list[TaskFeedback] = []
    core.listeners.append(got.append)  # a listener added later hears from then on
    _place_and_finish(core, "heard")
    assert [(fb.task.id, fb.outcome) for fb in got] == [("heard", Outcome.OK)]
    assert built == got


def test_a_policy_that_overrides_observe_hears_without_listeners() -> None:
    Hearing.heard = []
    core = _core(SchedulerConfig(policy=CustomPolicyConfig(path=f"{__name__}.Hearing")))
    _place_and_finish(core, "t")
    assert [(fb.task.id, fb.placed_at, fb.ended_at) for fb in Hearing.heard] == [("t", 1.0, 2.0)]
