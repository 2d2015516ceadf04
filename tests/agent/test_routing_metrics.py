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
from megaflow.agent.routing import TaskRouter, identify_task_type
from megaflow.core.errors import InvalidInput
from megaflow.core.tasks import TaskSpec, TaskType, group_id, sample_id
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


def _traj(task: TaskSpec) -> Trajectory:
    t = Trajectory(id=f"tr-{task.id}", task_id=task.id, run_id="r")
    t.add(
        ModelCall(
            prompt_tokens=5, completion_tokens=2, prompt_token_ids=[7, 8],
            token_ids=[1, 2], logprobs=[-0.1, -0.2],
        )
    )  # fmt: skip
    return t


def test_one_sample_id_scheme_and_its_group() -> None:
    ids = [sample_id("r", "i1", n) for n in range(3)]
    assert ids == ["r/i1/0", "r/i1/1", "r/i1/2"]
    specs = [TaskSpec(id=i, run_id="r", sample=n) for n, i in enumerate(ids)]
    assert {group_id(s) for s in specs} == {"r/i1"}
    assert group_id(TaskSpec(id="r/t10", run_id="r", sample=0)) == "r/t10"  # not a sample id
    assert group_id(TaskSpec(id="r/t/1", run_id="r", sample=0)) == "r/t/1"


def test_annotate_eval_drops_token_data() -> None:
    router = TaskRouter(samples=3)
    task = TaskSpec(id="r/i1/0", run_id="r", payload=SWE)
    traj = _traj(task)
    plan = router.annotate(task, traj)
    assert (plan.task_type, plan.samples, plan.keep_token_data) == (TaskType.EVAL, 3, False)
    assert traj.meta == {"task_type": "eval", "task_type_source": "identified", "group_id": "r/i1"}
    call = traj.model_calls[0]
    assert (call.prompt_token_ids, call.token_ids, call.logprobs) == (None, None, None)
    assert call.completion_tokens == 2  # counts stay


def test_annotate_train_keeps_token_data_and_synth_when_ungraded() -> None:
    task = TaskSpec(id="r/i2/1", run_id="r", sample=1, payload=SWE)
    traj = _traj(task)
    plan = TaskRouter(trainer_attached=True).annotate(task, traj)
    assert (plan.task_type, plan.source, plan.keep_token_data) == (
        TaskType.TRAIN,
        "identified",
        True,
    )
    assert traj.model_calls[0].token_ids == [1, 2]
    assert traj.model_calls[0].prompt_token_ids == [7, 8]
    assert traj.meta["group_id"] == "r/i2"
    plain = TaskSpec(id="r/p/0", run_id="r", payload={"prompt": "x"})
    synth = TaskRouter().annotate(plain, _traj(plain), graded=False)
    assert (synth.task_type, synth.keep_successful_only) == (TaskType.SYNTH, True)
    given = TaskSpec(id="r/p/0", run_id="r", type=TaskType.TRAIN, payload={"prompt": "x"})
    assert TaskRouter().annotate(given, _traj(given)).source == "given"


def test_every_agent_config_has_its_tag() -> None:
    members = typing.get_args(typing.get_args(AgentConfig)[0])
    assert {m.model_fields["type"].default for m in members} == {
        "builtin",
        "mini-swe-agent",
        "openhands",
    }
