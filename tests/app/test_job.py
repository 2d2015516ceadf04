"""The main job end to end: scheduler -> local sandbox -> agent -> grading -> storage."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from megaflow.app.job import Job
from megaflow.app.summary import summarize_arm
from megaflow.cli.main import app
from megaflow.config import parse_config
from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind
from tests.environment.conftest import descendants, our_cgroups

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def job_config(tmp: Path, **over: object) -> dict[str, object]:
    cfg: dict[str, object] = {
        "name": "t",
        "samples": 1,
        "tasks": {"type": "swebench", "path": str(REPO / "tasks/mini-swe"), "limit": 3},
        "agent": {"type": "builtin", "max_steps": 10},
        "model": {"type": "replay", "play": "gold"},
        "control": {"model": {"type": "replay", "play": "empty"}},
        "expect": {"min_resolved": 1.0, "max_control_resolved": 0.0},
        "environment": {"runtime": {"type": "local", "root": str(tmp / "sb")}},
        "scheduler": {"max_concurrency": 3},
        "storage": {
            "metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
            "artifacts": {"type": "local", "root": str(tmp / "art")},
        },
    }
    cfg.update(over)
    return cfg


@pytest.mark.slow
async def test_gold_resolves_and_control_does_not(tmp_path: Path) -> None:
    cfg = parse_config(job_config(tmp_path))
    async with Job(cfg) as job:
        await job.submit()
        counts = await job.wait()
        main = await summarize_arm(job.stores.metadata, job.run_id, "main", 1)
        control = await summarize_arm(job.stores.metadata, job.run_ids[1], "control", 1)
        results = await job.stores.metadata.list_results(job.run_id)
        traj_key = results[0].artifacts["trajectory"]
        traj = json.loads(await job.stores.artifacts.get(traj_key))
        patch = await job.stores.artifacts.get(results[0].artifacts["patch"])
    assert counts == {
        job.run_id: {TaskState.SUCCEEDED: 3},
        job.run_ids[1]: {TaskState.SUCCEEDED: 3},
    }
    assert main.resolved == 1.0
    assert control.resolved == 0.0
    assert main.metrics.pass_at_k[1] == 1.0
    assert [s["kind"] for s in traj["steps"]].count("model_call") >= 2
    assert patch.startswith(b"diff --git")
    assert all(r.metrics["sandbox_start_s"] > 0 for r in results)
    # every sandbox was torn down: no process, cgroup or workspace is left
    assert not [n for n in descendants(os.getpid()).values() if n == "bwrap"]
    assert not our_cgroups()
    assert not list((tmp_path / "sb").rglob("workspace"))


async def test_agent_failure_is_a_sample_with_reward_0_not_retried(tmp_path: Path) -> None:
    cfg = parse_config(
        job_config(
            tmp_path,
            tasks={"type": "inline", "tasks": [{"id": "no-statement", "payload": {"x": 1}}]},
            control=None,
            expect={},
            max_attempts=3,
        )
    )
    async with Job(cfg) as job:
        await job.submit()
        counts = await job.wait()
        (rec,) = await job.stores.metadata.list_tasks(job.run_id)
        result = await job.stores.metadata.get_result(rec.id)
        traj = json.loads(await job.stores.artifacts.get(result.artifacts["trajectory"]))
    # ran to the end (SUCCEEDED), counted with reward 0 and its error, trajectory linked
    assert counts[job.run_id] == {TaskState.SUCCEEDED: 1}
    assert rec.attempts == 1
    assert (result.success, result.reward) == (False, 0.0)
    assert result.error_kind is ErrorKind.AGENT
    assert "problem_statement" in (result.error or "")
    assert traj["meta"]["error_kind"] == "agent"
    assert traj["meta"]["task_type"] == "synth"


def test_bad_config_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("tasks: {type: swebench}\nsamples: 0\n")
    res = runner.invoke(app, ["run", str(bad)])
    assert res.exit_code == 2
    assert "tasks.path" in res.output
    assert "samples" in res.output


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_finishes(tmp_path: Path) -> None:
    cfg = job_config(tmp_path, samples=2, control=None, expect={"min_resolved": 1.0})
    cfg["tasks"] = {"type": "swebench", "path": str(REPO / "tasks/mini-swe"), "limit": 6}
    cfg["scheduler"] = {"max_concurrency": 2}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(cfg))
    db = str(tmp_path / "m.db")
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "megaflow.cli.main", "run", str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    first = proc.stdout.readline()
    run_id = first.split()[1].rstrip(":")
    # wait until some tasks are done and some are in flight, then kill hard
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        res = runner.invoke(app, ["results", run_id, "--json", "--db", db])
        if (
            res.exit_code == 0
            and sum(r["state"] == "succeeded" for r in json.loads(res.stdout)) >= 2
        ):
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    before = json.loads(runner.invoke(app, ["results", run_id, "--json", "--db", db]).stdout)
    assert any(r["state"] != "succeeded" for r in before), "the run finished before the kill"

    res = subprocess.run(
        [sys.executable, "-m", "megaflow.cli.main", "run", "--resume", run_id, "--db", db],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    after = json.loads(runner.invoke(app, ["results", run_id, "--json", "--db", db]).stdout)
    assert len(after) == 12
    assert all(r["state"] == "succeeded" and r["success"] for r in after)
    done_before = {r["task_id"] for r in before if r["state"] == "succeeded"}
    for r in after:
        if r["task_id"] in done_before:  # terminal tasks were not run again
            assert (
                r["attempts"] == next(b for b in before if b["task_id"] == r["task_id"])["attempts"]
            )
