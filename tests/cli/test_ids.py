"""Ids as tables print them are ids every command takes: a run by a unique prefix,
a task relative to its run; `status` says when a run's process is gone, and keeps a
train run's held-out samples apart from its train samples."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from megaflow.cli.ids import _pick, short_ids
from megaflow.cli.main import app
from megaflow.cli.run_lock import hold, lock_path
from megaflow.core.states import TaskState as S
from megaflow.core.tasks import RunSpec, TaskSpec, TaskType
from megaflow.storage.abstract import Transition
from megaflow.storage.config import SqliteMetadataConfig
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.cli.test_run_accounting import _config, _run_id

runner = CliRunner()
A = "quickstart-20261201-071930-08c4"
B = "quickstart-20261201-071931-77ab"


def said(output: str) -> str:
    return " ".join(output.split())


def test_a_unique_prefix_names_one_run_and_its_control() -> None:
    ids = [A, A + "-control", B]
    short = short_ids(ids, ids)
    assert short == {
        A: "quickstart-20261201-071930",
        A + "-control": "quickstart-20261201-071930-control",
        B: "quickstart-20261201-071931",
    }
    assert all(_pick(s, ids) == rid for rid, s in short.items())
    assert _pick("quickstart-2026", ids) is None  # starts two runs: ambiguous


def test_logs_takes_the_ids_results_prints(tmp_path: Path) -> None:
    res = runner.invoke(app, ["run", str(_config(tmp_path))], env={"COLUMNS": "200"})
    run_id = _run_id(res.output)
    db = str(tmp_path / "m.db")
    shown = runner.invoke(app, ["results", run_id, "--db", db], env={"COLUMNS": "120"})
    assert "task ids relative to the run" in shown.output
    assert "as `megaflow logs TASK --run RUN` takes them" in said(shown.output)
    rel = "t1/0"
    assert f"│ {rel} " in shown.output  # results prints it this way
    prefix = run_id[:-3]
    for args in (
        [rel],
        [rel, "--run", prefix],
        [f"{prefix}/{rel}"],
        [f"{run_id}/{rel}"],
    ):
        out = runner.invoke(app, ["logs", *args, "--db", db, "--artifacts", str(tmp_path / "art")])
        assert out.exit_code == 0, (args, out.output)
        assert f"task {run_id}/{rel} (run {run_id})" in said(out.output)
    assert runner.invoke(app, ["results", prefix, "--db", db]).exit_code == 0
    missing = runner.invoke(app, ["logs", "t7/0", "--db", db])
    assert missing.exit_code == 2
    assert "Traceback" not in missing.output
    assert "no task 't7/0'" in said(missing.output)


async def _seed(path: str, run_ids: list[str]) -> None:
    async with SqliteMetadataStore(path) as s:
        for rid in run_ids:
            await s.create_run(RunSpec(id=rid, name="quickstart"))
            specs = [
                TaskSpec(id=f"{rid}/t{i}/0", run_id=rid, type=TaskType.TRAIN) for i in range(3)
            ]
            specs.append(TaskSpec(id=f"{rid}/e0/0", run_id=rid, type=TaskType.EVAL))
            await s.add_tasks(specs)
            await s.transition_many(
                [Transition(f"{rid}/t0/0", x) for x in (S.SCHEDULED, S.STARTING)]
            )


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "m.db")
    asyncio.run(_seed(path, [A, B]))
    return path


def test_status_says_driver_gone_once_the_process_is(db: str) -> None:
    lock = lock_path(SqliteMetadataConfig(path=db), A)
    with hold(lock):
        alive = runner.invoke(app, ["status", "--db", db], env={"COLUMNS": "120"})
    assert alive.exit_code == 0, alive.output
    assert "driver gone" not in alive.output
    assert "alive" in alive.output
    gone = runner.invoke(app, ["status", "--db", db], env={"COLUMNS": "120"})
    assert "gone" in gone.output
    assert f"driver gone: the process of {A} ended" in said(gone.output)
    assert f"megaflow run --resume {A}" in said(gone.output)
    assert B not in said(gone.output).split("driver gone")[1]  # no lock file: cannot tell


@pytest.mark.parametrize("columns", ["80", "120"])
def test_status_keeps_run_ids_on_one_line_and_types_apart(db: str, columns: str) -> None:
    res = runner.invoke(app, ["status", "--db", db], env={"COLUMNS": columns})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert all(len(line) <= int(columns) for line in lines)
    rows = [line for line in lines if "quickstart-" in line]
    # one row per type of each run, each with its whole unique prefix
    assert len(rows) == 4
    assert sum("quickstart-20261201-071930 " in r for r in rows) == 2
    assert sum(" train " in r for r in rows) == 2
    assert sum(" eval " in r for r in rows) == 2
    one = runner.invoke(app, ["status", "quickstart-20261201-071931", "--db", db])
    assert one.exit_code == 0
    assert "071930" not in one.output


def test_top_says_driver_gone_too(db: str) -> None:
    with hold(lock_path(SqliteMetadataConfig(path=db), A)):
        alive = runner.invoke(app, ["top", "--once", "--db", db], env={"COLUMNS": "120"})
    assert alive.exit_code == 0, alive.output
    assert "driver gone" not in alive.output
    gone = runner.invoke(app, ["top", "--once", "--db", db], env={"COLUMNS": "120"})
    stalled = "(4 tasks stalled until megaflow run --resume)"  # its 4 unfinished tasks
    assert f"driver gone: quickstart-20261201-071930 {stalled}" in said(gone.output)


def test_results_keep_a_train_runs_held_out_samples_apart(db: str) -> None:
    res = runner.invoke(app, ["results", "quickstart-20261201-071931", "--db", db])
    assert res.exit_code == 0, res.output
    out = said(res.output)
    assert "eval: 1 tasks, 0 with results, 0 resolved, 0 ungraded" in out
    assert "train: 3 tasks, 0 with results, 0 resolved, 0 ungraded" in out
    assert "4 tasks" not in out  # never one figure over both
