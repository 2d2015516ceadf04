"""A trajectory's JSON (as the artifact store keeps it) reads back as the same trajectory,
non-finite floats included."""

from __future__ import annotations

import json
import math

from megaflow.core.trajectory import Action, ModelCall, Observation, Trajectory


def test_trajectory_json_round_trips_with_non_finite_floats() -> None:
    traj = Trajectory(
        id="r/t/0", task_id="t", run_id="r",
        steps=[
            ModelCall(request={"messages": [{"role": "user", "content": "héllo"}]},
                      token_ids=[5, 6], logprobs=[-math.inf, -0.25]),
            Action(tool="bash", arguments={"command": "echo", "weight": math.nan}),
            Observation(content="ok\n", exit_code=0),
        ],
    )  # fmt: skip
    text = traj.model_dump_json()
    for back in (Trajectory.model_validate(json.loads(text)), Trajectory.model_validate_json(text)):
        call, action, _ = back.steps
        assert isinstance(call, ModelCall)
        assert call.logprobs == [-math.inf, -0.25]
        assert isinstance(action, Action)
        assert math.isnan(action.arguments["weight"])
        assert back.model_dump(exclude={"steps"}) == traj.model_dump(exclude={"steps"})
        assert back.steps[2] == traj.steps[2]
    assert json.loads(text) == json.loads(json.dumps(traj.model_dump(mode="json")))


def test_each_step_is_written_as_its_own_type() -> None:
    steps = [ModelCall(request={"tools": [{"type": "function"}]}), Action(tool="submit"),
             Observation(content="done", truncated=True)]  # fmt: skip
    traj = Trajectory(id="r/t/0", task_id="t", run_id="r", steps=steps)
    written = json.loads(traj.model_dump_json())["steps"]
    assert written == [json.loads(s.model_dump_json()) for s in steps]
    assert [s["kind"] for s in written] == ["model_call", "action", "observation"]
    assert traj.model_dump()["steps"] == [s.model_dump() for s in steps]
