"""Why a trajectory holds no turn, in the words of the outcomes: the task's own attempt
says its outcome, a retried attempt its own error kind (``infra lost``, not ``retried``);
a trajectory with a step says nothing."""

from __future__ import annotations

from megaflow.core.trajectory import ModelCall, Trajectory
from megaflow.dashboard.trajectories import _no_turns


def test_an_empty_trajectory_says_how_its_attempt_ended() -> None:
    empty = Trajectory(id="t", task_id="r/t/0", run_id="r")
    own = _no_turns(empty, "timed out", None, "task deadline of 15.0s passed")
    assert own == (
        "No turn was recorded: the attempt ended with timed out "
        "(task deadline of 15.0s passed) before the model answered."
    )
    retried = _no_turns(empty, "an error", "infra_lost", None)
    assert (
        retried
        == "No turn was recorded: the attempt ended with infra lost before the model answered."
    )
    empty.add(ModelCall(request={"messages": []}, response={"error": "refused"}))
    assert _no_turns(empty, "agent error", None, "refused") is None
