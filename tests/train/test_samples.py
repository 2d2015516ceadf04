"""Building a training sample from a trajectory: which weights version it is charged to."""

from __future__ import annotations

from megaflow.core.trajectory import ModelCall, Trajectory
from megaflow.train.samples import sample_from_trajectory


def _calls(versions: list[int | None]) -> list[ModelCall]:
    """Token-exact calls, each continuing the previous one with two new tokens."""
    calls, prompt = [], [1, 2]
    for i, version in enumerate(versions):
        completion = [100 + i]
        calls.append(
            ModelCall(
                prompt_token_ids=list(prompt),
                token_ids=completion,
                logprobs=[-0.5],
                weights_version=version,
            )
        )
        prompt += [*completion, 50 + i]  # the observation fed back before the next call
    return calls


def test_a_sample_served_by_several_weights_versions_is_as_old_as_its_oldest() -> None:
    """Staleness is judged by the oldest weights that produced any token: a sample
    answered by versions 3, then 1, then 2 counts as version 1 (not its first,
    last or newest call's)."""
    traj = Trajectory(id="traj", task_id="t", run_id="r", steps=list(_calls([3, 1, None, 2])))
    sample = sample_from_trajectory(traj, 1.0, group_id="g")
    assert sample.weights_version == 1
    assert sample.completion_ids == [100, 50, 101, 51, 102, 52, 103]
    assert sample.loss_mask == [1, 0, 1, 0, 1, 0, 1]


def test_a_sample_without_recorded_versions_has_none() -> None:
    traj = Trajectory(id="traj", task_id="t", run_id="r", steps=list(_calls([None, None])))
    assert sample_from_trajectory(traj, 0.0, group_id="g").weights_version is None
