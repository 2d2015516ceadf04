"""A run seeded as an RL engineer meets it: a GRPO group, an agent error, a patch, many tasks.

Run ``rl`` (its config names a real ``tokenizers`` tokenizer, saved under the
test's folder) holds a train group of four samples (rewards 1, 0, 0 and an
agent error with the pipeline's own message), whose first sample has a
token-exact episode with a ``write_file`` patch, and 120 eval tasks for
paging. Training runs ``rl`` (the trained arm, its config with ``kl_coef``
0) and ``rl-control`` have curves with every figure the loop records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from megaflow.core.states import TaskState
from megaflow.core.tasks import (
    Attempt,
    ErrorKind,
    RunSpec,
    TaskResult,
    TaskSpec,
    TaskType,
    artifact_prefix,
)
from megaflow.core.trajectory import Action, ModelCall, Observation, Trajectory
from megaflow.storage.abstract import ArtifactStore, MetadataStore

RUN = "rl"
INSTANCE = "settings-fix-3"
GROUP = f"{RUN}/ab12.s00001.{INSTANCE}"
CONTROL = f"{RUN}-control"
AGENT_ERROR = "the model gave 2 malformed answers in a row (trajectory x); giving up"
PATCH = "--- a/settings.py\n+++ b/settings.py\n@@ -1 +1 @@\n-DEBUG = True,\n+DEBUG = True\n"
WORDS = ["<s>", "fix", "the", "settings", "write_file", "DEBUG", "=", "True", "done", "\n"]
EVAL_TASKS = 120
CANCELLED = "all-cancelled"
RETRIED = "retried"
RETRIED_TASK = f"{RETRIED}/t/0"
LOST = "sandbox sb-1 lost (its runtime stopped answering)"
DEAD = "driver-died"
PATH = [TaskState.SCHEDULED, TaskState.STARTING, TaskState.RUNNING, TaskState.GRADING]


def tokenizer_dir(tmp: Path) -> Path:
    """A word-level tokenizer over :data:`WORDS` (id = index), saved as tokenizer.json."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<s>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    out = tmp / "policy"
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    return out


def episode(task_id: str) -> Trajectory:
    traj = Trajectory(id=f"{task_id}/a1", task_id=task_id, run_id=RUN)
    traj.meta.update(task_type="train", group_id=GROUP)
    call = {"id": "c1", "function": {"name": "write_file",
            "arguments": json.dumps({"path": "/tmp/fix.patch", "content": PATCH})}}  # fmt: skip
    traj.add(ModelCall(
        request={"messages": [{"role": "system", "content": "You fix settings."},
                              {"role": "user", "content": "fix the settings"}]},
        response={"message": {"role": "assistant", "content": "", "tool_calls": [call]}},
        prompt_token_ids=[1, 2, 3], token_ids=[4, 5, 6, 7], logprobs=[-0.01, -0.2, -3.0, -0.5],
        weights_version=3,
    ))  # fmt: skip
    traj.add(Action(tool="write_file", arguments={"path": "/tmp/fix.patch", "content": PATCH}))
    traj.add(Observation(content="wrote /tmp/fix.patch", exit_code=0))
    traj.add(ModelCall(prompt_token_ids=[1, 2, 3, 4, 5, 6, 7, 9], token_ids=[8], logprobs=[-0.05],
                       weights_version=3))  # fmt: skip
    return traj


async def _finish(meta: MetadataStore, spec: TaskSpec, result: TaskResult) -> None:
    for dst in [*PATH, TaskState.SUCCEEDED]:
        await meta.transition(spec.id, dst)
    await meta.put_result(result)


async def seed_rl(meta: MetadataStore, art: ArtifactStore, tmp: Path) -> None:
    config = {"model": {"type": "transformers", "path": str(tokenizer_dir(tmp))},
              "train": {"kl_coef": 0.0, "steps": 3}}  # fmt: skip
    await meta.create_run(RunSpec(id=RUN, name="rl", config=config))
    named = {"instance_id": INSTANCE}
    group = [
        TaskSpec(id=f"{GROUP}/{n}", run_id=RUN, type=TaskType.TRAIN, sample=n, payload=named)
        for n in range(4)
    ]
    evals = [
        TaskSpec(id=f"{RUN}/ab12.e00000.heldout-{n:03d}/0", run_id=RUN, type=TaskType.EVAL)
        for n in range(EVAL_TASKS)
    ]
    await meta.add_tasks([*group, *evals])
    key = f"runs/{RUN}/g0/trajectory.json"
    await art.put(key, json.dumps(episode(group[0].id).model_dump(mode="json")).encode())
    for n, reward in enumerate((1.0, 0.0, 0.0)):
        arts = {"trajectory": key} if n == 0 else {}
        await _finish(meta, group[n], TaskResult(
            task_id=group[n].id, success=reward == 1.0, reward=reward, artifacts=arts,
            metrics={"agent_s": 1.0 + n},
        ))  # fmt: skip
    # the agent's own failure: the task succeeds as a task, graded 0, the message in the result
    bad = group[3]
    await meta.put_attempt(Attempt(task_id=bad.id, number=1, instance="local", sandbox="sb-9"))
    bkey = f"runs/{RUN}/g3/trajectory.json"
    await art.put(bkey, json.dumps(episode(bad.id).model_dump(mode="json")).encode())
    await _finish(meta, bad, TaskResult(
        task_id=bad.id, success=False, reward=0.0, error_kind=ErrorKind.AGENT,
        error=AGENT_ERROR, artifacts={"trajectory": bkey},
    ))  # fmt: skip
    for n, spec in enumerate(evals):
        await _finish(meta, spec, TaskResult(
            task_id=spec.id, success=n % 3 == 0, reward=float(n % 3 == 0),
            metrics={"agent_s": float(n)},
        ))  # fmt: skip
    arm = {"arm": "control", "job": RUN}  # as the job labels its control arm
    await meta.create_run(RunSpec(id=CONTROL, name="rl", config=config, labels=arm))
    ctl = [
        TaskSpec(id=f"{CONTROL}/cd34.s00001.{INSTANCE}/{n}", run_id=CONTROL, type=TaskType.TRAIN,
                 sample=n, payload=named)
        for n in range(2)
    ]  # fmt: skip
    await meta.add_tasks(ctl)
    for spec in ctl:
        await _finish(meta, spec, TaskResult(task_id=spec.id, success=False, reward=0.0))
    await meta.create_run(RunSpec(id=DEAD, name="dead", labels={"job": DEAD}))
    await meta.add_tasks([TaskSpec(id=f"{DEAD}/t{n}/0", run_id=DEAD) for n in range(2)])
    for state in PATH[:3]:  # one task was running when its driver died
        await meta.transition(f"{DEAD}/t1/0", state)
    await meta.claim_lease(DEAD, "elsewhere:1:dead", ttl_s=0.001)  # its driver stopped renewing
    await meta.create_run(RunSpec(id=CANCELLED, name="cancelled"))
    gone = [TaskSpec(id=f"{CANCELLED}/t{n}/0", run_id=CANCELLED) for n in range(3)]
    await meta.add_tasks(gone)
    for spec in gone:
        await meta.transition(spec.id, TaskState.CANCELLED)
    await seed_retried(meta, art)


async def seed_retried(meta: MetadataStore, art: ArtifactStore) -> None:
    """Run ``retried``: one task whose first attempt lost its sandbox (an infrastructure
    error, retried; its trajectory kept as the attempt pipeline keeps evidence) and
    whose second attempt resolved it. Each trajectory under its attempt's own prefix."""
    await meta.create_run(RunSpec(id=RETRIED, name="retried"))
    spec = TaskSpec(id=RETRIED_TASK, run_id=RETRIED, max_attempts=2)
    await meta.add_tasks([spec])
    for n, said in ((1, "first try, cut off"), (2, "second try, submitted")):
        traj = Trajectory(id=f"{spec.id}/a{n}", task_id=spec.id, run_id=RETRIED, attempt=n)
        traj.add(Observation(content=said, exit_code=0))
        key = f"{artifact_prefix(spec, n)}/trajectory.json"
        await art.put(key, json.dumps(traj.model_dump(mode="json")).encode())
        failed = n == 1
        await meta.put_attempt(Attempt(
            task_id=spec.id, number=n, instance="local", sandbox=f"sb-{n}", ended_at=2.0 + n,
            error_kind=ErrorKind.INFRA if failed else None, error=LOST if failed else None,
        ))  # fmt: skip
    await _finish(meta, spec, TaskResult(
        task_id=spec.id, success=True, reward=1.0, artifacts={"trajectory": key},
    ))  # fmt: skip


def step(n: int, reward: float, **extra: Any) -> dict[str, Any]:
    """A step as an older loop wrote it with kl_coef 0: KL 0.0, not None (the page hides it
    by the run's config)."""
    return {"step": n, "prompts": ["p"], "reward_mean": reward, "reward_std": 0.4, "loss": 0.5 / n,
            "kl": 0.0, "weights_version": n, "staleness_max": 0, "samples": 8, "tokens": 4000,
            "seconds": 2.0, "groups": 4, "groups_with_signal": 5 - n, "grad_norm": 1.5 / n,
            "clip_fraction": 0.01 * n, "mismatch": 1e-4, "entropy": 1.2,
            "response_length": 40.0 + n, "truncation_rate": 0.0, "lr": 1e-5, "sync_s": 0.3,
            **extra}  # fmt: skip


def seed_curves(train_dir: Path) -> None:
    """curve.json of ``rl`` (3 steps, rising) and of ``rl-control`` (3 steps, flat)."""
    for run, rewards in ((RUN, (0.3, 0.5, 0.7)), (CONTROL, (0.3, 0.3, 0.3))):
        curve = {"run_id": run, "steps": [step(i + 1, r) for i, r in enumerate(rewards)],
                 "evals": [{"step": 0, "weights_version": 0, "reward_mean": 0.25, "ci_low": 0.1,
                            "ci_high": 0.4, "samples": 8},
                           {"step": 3, "weights_version": 3, "reward_mean": rewards[-1],
                            "ci_low": rewards[-1] - 0.1, "ci_high": rewards[-1] + 0.1,
                            "samples": 8, "pass_at_k": rewards[-1] + 0.2, "k": 4}]}  # fmt: skip
        (train_dir / run).mkdir(parents=True, exist_ok=True)
        (train_dir / run / "curve.json").write_text(json.dumps(curve))
