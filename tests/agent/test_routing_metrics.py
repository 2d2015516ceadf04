"""Task-type routing and run metrics (pass@k)."""

from __future__ import annotations

import math
import typing
from itertools import combinations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from megaflow.agent.config import AgentConfig
from megaflow.agent.metrics import SampleOutcome, pass_at_k, percentile, summarize
from megaflow.agent.routing import TaskRouter, expand_samples, group_id, identify_task_type
from megaflow.core.errors import InvalidInput
from megaflow.core.tasks import ErrorKind, TaskResult, TaskSpec, TaskType
from megaflow.core.trajectory import ModelCall, Trajectory

SWE = {"problem_statement": "x", "FAIL_TO_PASS": ["t::a"], "PASS_TO_PASS": []}


def test_pass_at_k_known_values() -> None:
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 10, 5) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(5, 2))
    assert pass_at_k(4, 3, 2) == 1.0  # n - c < k: every pair holds a success
    with pytest.raises(InvalidInput, match="at least 3 samples"):
        pass_at_k(2, 1, 3)


@given(
    st.integers(1, 9).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n)))
)
def test_pass_at_k_equals_brute_force(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    samples = [True] * c + [False] * (n - c)
    subsets = list(combinations(samples, k))
    assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))


def test_summarize() -> None:
    outcomes = [
        SampleOutcome(task_id="a", success=True, reward=1, steps=3, tokens=100, duration_s=1),
        SampleOutcome(task_id="a", success=False, reward=0, steps=5, tokens=300, duration_s=3),
        SampleOutcome(task_id="b", success=False, reward=0, steps=2, tokens=50, duration_s=2),
        SampleOutcome(task_id="b", success=False, reward=0, error_kind="agent", duration_s=4),
    ]
    m = summarize(outcomes, ks=(1, 2, 5))
    assert (m.tasks, m.samples, m.errors) == (2, 4, 1)
    assert m.success_rate == 0.25
    assert m.reward_mean == 0.25
    assert m.reward_std == pytest.approx(math.sqrt(0.1875))
    assert m.pass_at_k == {1: pytest.approx(0.25), 2: pytest.approx(0.5)}  # no pass@5 with n=2
    assert m.tokens_total == 450
    assert m.steps_mean == 2.5
    assert m.duration_p50_s == 2.5
    assert m.as_flat()["pass@2"] == pytest.approx(0.5)
    assert summarize([]).samples == 0
    assert percentile([1, 2, 3, 4, 5], 99) == pytest.approx(4.96)


def test_identify_task_type() -> None:
    plain = TaskSpec(id="t", run_id="r", payload={"prompt": "write a poem"})
    swe = TaskSpec(id="t", run_id="r", payload=SWE)
    given_type = TaskSpec(id="t", run_id="r", type=TaskType.SYNTH, payload=SWE)
    assert identify_task_type(swe, trainer_attached=True) == (TaskType.TRAIN, "identified")
    assert identify_task_type(swe) == (TaskType.EVAL, "identified")
    assert identify_task_type(plain) == (TaskType.SYNTH, "identified")
    assert identify_task_type(plain, graded=True) == (TaskType.EVAL, "identified")
    assert identify_task_type(given_type, trainer_attached=True) == (TaskType.SYNTH, "given")


def _traj(task: TaskSpec, status: str = "submitted") -> Trajectory:
    t = Trajectory(id=f"tr-{task.id}", task_id=task.id, run_id="r", meta={"exit_status": status})
    t.add(ModelCall(prompt_tokens=5, completion_tokens=2, token_ids=[1, 2], logprobs=[-0.1, -0.2]))
    t.ended_at = t.started_at + 2
    return t


def test_eval_samples_and_pass_at_k() -> None:
    router = TaskRouter(samples=3, ks=(1, 3))
    task = TaskSpec(id="r/i1", run_id="r", payload=SWE)
    plan = router.plan(task)
    assert (plan.task_type, plan.samples, plan.keep_token_data) == (TaskType.EVAL, 3, False)
    samples = expand_samples(task, plan)
    assert [s.id for s in samples] == ["r/i1:s0", "r/i1:s1", "r/i1:s2"]
    assert {group_id(s) for s in samples} == {"r/i1"}
    assert group_id(TaskSpec(id="run/inst/2", run_id="run", sample=2)) == "run/inst"
    for s, ok in zip(samples, (True, False, False), strict=True):
        traj = _traj(s)
        router.record(s, TaskResult(task_id=s.id, success=ok, reward=float(ok)), traj)
        assert traj.meta["task_type"] == "eval"
        assert traj.meta["task_type_source"] == "identified"
        assert traj.model_calls[0].token_ids is None  # token data only kept for train
    m = router.metrics()
    assert m.tasks == 1
    assert m.pass_at_k[1] == pytest.approx(1 / 3)
    assert m.pass_at_k[3] == 1.0
    assert m.duration_mean_s == 2


def test_train_keeps_a_group_with_token_data() -> None:
    router = TaskRouter(samples=2, trainer_attached=True)
    task = TaskSpec(id="i2", run_id="r", payload=SWE)
    for s in expand_samples(task, router.plan(task)):
        router.record(
            s, TaskResult(task_id=s.id, success=s.sample == 0, reward=1.0 - s.sample), _traj(s)
        )
    (group,) = router.groups.values()
    assert [reward for _, reward in group] == [1.0, 0.0]
    assert all(t.model_calls[0].token_ids == [1, 2] for t, _ in group)
    assert group[0][0].meta["task_type"] == "train"


def test_synth_keeps_successful_trajectories() -> None:
    router = TaskRouter(samples=1)
    ok = TaskSpec(id="p1", run_id="r", payload={"prompt": "x"})
    bad = TaskSpec(id="p2", run_id="r", payload={"prompt": "y"})
    failed = TaskSpec(id="p3", run_id="r", payload={"prompt": "z"})
    router.record(ok, TaskResult(task_id="p1"), _traj(ok))
    router.record(bad, TaskResult(task_id="p2"), _traj(bad, status="step_limit"))
    err = TaskResult(task_id="p3", error_kind=ErrorKind.AGENT, error="boom")
    router.record(failed, err, _traj(failed))
    assert [t.task_id for t in router.dataset] == ["p1"]
    assert router.metrics().success_rate == pytest.approx(1 / 3)
    assert router.metrics().errors == 1


def test_every_agent_config_has_its_tag() -> None:
    members = typing.get_args(typing.get_args(AgentConfig)[0])
    assert {m.model_fields["type"].default for m in members} == {"builtin", "mini-swe-agent"}
