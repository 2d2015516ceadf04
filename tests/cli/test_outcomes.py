"""The command line's words for how a task ended (resolved, unresolved, the error
kind) in status, top and submit --wait, and tables whose ids are never cut off."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.core.outcomes import outcome
from megaflow.core.states import TaskState as S
from megaflow.core.tasks import ErrorKind, RunSpec, TaskResult, TaskSpec
from megaflow.storage.abstract import Transition
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.cli.scheduler_service import ClusterScheduler

runner = CliRunner()
RUN = "quickstart-20261201-071930-08c4"
GRADED = [S.SCHEDULED, S.STARTING, S.RUNNING, S.GRADING, S.SUCCEEDED]
TASKS = Path(__file__).resolve().parents[2] / "tasks" / "mini-swe"


def test_outcome_names_graded_tasks_and_error_kinds() -> None:
    res = TaskResult(task_id="t", success=True, reward=1.0)
    assert outcome(S.SUCCEEDED, res) == "resolved"
    assert outcome(S.SUCCEEDED, TaskResult(task_id="t")) == "unresolved"
    agent = TaskResult(task_id="t", error_kind=ErrorKind.AGENT)
    assert outcome(S.SUCCEEDED, agent) == "agent error"
    assert outcome(S.FAILED, TaskResult(task_id="t", error_kind=ErrorKind.INFRA)) == "infra error"
    assert outcome(S.FAILED, None) == "infra error"
    assert outcome(S.TIMED_OUT, None) == "timed out"
    assert outcome(S.CANCELLED, None) == "cancelled"
    lost = TaskResult(task_id="t", error_kind=ErrorKind.INFRA_LOST)
    assert outcome(S.FAILED, lost) == "infra lost"
    assert outcome(S.RUNNING, None) == "running"


async def _seed(path: str) -> None:
    async with SqliteMetadataStore(path) as s:
        await s.create_run(RunSpec(id=RUN, name="quickstart"))
        names = ["django-admin-widget-fix", "flask-routing-bug", "numpy-dtype-cast", "queued"]
        await s.add_tasks([TaskSpec(id=f"{RUN}/{n}/0", run_id=RUN) for n in names])
        for n in names[:2]:
            await s.transition_many([Transition(f"{RUN}/{n}/0", x) for x in GRADED])
        await s.transition_many(
            [Transition(f"{RUN}/numpy-dtype-cast/0", x) for x in (S.SCHEDULED, S.TIMED_OUT)]
        )
        await s.put_results([
            TaskResult(task_id=f"{RUN}/django-admin-widget-fix/0", success=True, reward=1.0),
            TaskResult(task_id=f"{RUN}/flask-routing-bug/0"),
            TaskResult(task_id=f"{RUN}/numpy-dtype-cast/0", error_kind=ErrorKind.TIMEOUT,
                       error="task deadline of 3600 s passed"),
        ])  # fmt: skip


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    # COLUMNS, not console.width: undoing a set width would pin the shared console's
    monkeypatch.setenv("COLUMNS", "80")
    path = str(tmp_path / "m.db")
    asyncio.run(_seed(path))
    return path


def test_status_says_resolved_unresolved_and_the_error_kind(db: str) -> None:
    res = runner.invoke(app, ["status", "--db", db])
    assert res.exit_code == 0, res.output
    header = next(line for line in res.output.splitlines() if "resolved" in line)
    for word in ("queued", "resolved", "unresolved", "timed out", "total"):
        assert word in " ".join(res.output.split()), word
    assert "succeeded" not in res.output
    assert header.index("resolved") < header.index("unresolved")


def test_results_at_80_columns_keep_every_task_id_whole(db: str) -> None:
    res = runner.invoke(app, ["results", RUN, "--db", db])
    assert res.exit_code == 0, res.output
    assert "…" not in res.output
    assert res.output.count(RUN) == 1  # once, above the table
    rows = [line for line in res.output.splitlines() if line.startswith("│")]
    first = "".join(line.split("│")[1].strip() for line in rows)
    for name in ("django-admin-widget-fix/0", "flask-routing-bug/0", "numpy-dtype-cast/0"):
        assert name in first, (name, res.output)
    assert "resolved" in res.output
    outcomes = " ".join(line.split("│")[2].strip() for line in rows)
    assert "resolved unresolved timed out (ungraded) queued" in " ".join(outcomes.split())
    assert all(len(line) <= 80 for line in res.output.splitlines())
    assert "4 tasks, 3 with results, 1 resolved, 1 ungraded" in res.output


def _run_config(tmp_path: Path) -> Path:
    path = tmp_path / "run.yaml"
    tasks = {"type": "swebench", "path": str(TASKS), "limit": 2}
    path.write_text(yaml.safe_dump({"name": "mini", "tasks": tasks}))
    return path


def test_submit_wait_and_cluster_status_say_resolved(
    cluster: ClusterScheduler, tmp_path: Path
) -> None:
    auth = ["--token-file", str(cluster.token_file)]
    res = runner.invoke(
        app, ["submit", str(_run_config(tmp_path)), "--cluster", cluster.url, "--wait",
              "--cluster-config", str(cluster.config_file)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "resolved" in res.output
    assert "succeeded" not in res.output
    assert "graded" not in res.output
    status = runner.invoke(
        app, ["status", "--cluster", cluster.url, "--config", str(cluster.config_file)]
    )
    assert status.exit_code == 0, status.output
    assert "resolved" in status.output
    # without the cluster's store only the control plane's counts: graded, said plainly
    bare = runner.invoke(app, ["submit", str(_run_config(tmp_path)), "--cluster", cluster.url,
                               "--wait", *auth])  # fmt: skip
    assert bare.exit_code == 0, bare.output
    assert "graded" in bare.output
    assert "succeeded" not in bare.output
