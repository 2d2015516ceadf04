"""`megaflow run`: the progress bar ends at 100%, and `--resume` reports the
throughput of the tasks it ran, not of the whole run."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from megaflow.agent.metrics import summarize
from megaflow.app.summary import ArmSummary, JobSummary
from megaflow.cli.main import app
from megaflow.core.states import TaskState as S
from megaflow.storage.abstract import Transition
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.cli.test_run_accounting import _config, _run_id

runner = CliRunner()


def _bar(output: str) -> str:
    return next(line for line in output.splitlines() if line.startswith("tasks "))


async def _add_task(db: Path, run_id: str) -> None:
    """One more queued task in a finished run: what a resume has left to run."""
    async with SqliteMetadataStore(str(db)) as store:
        spec = (await store.list_tasks(run_id))[0].spec
        await store.add_tasks([spec.model_copy(update={"id": f"{run_id}/t9/0"})])


def test_the_bar_ends_at_100_and_a_resume_counts_its_own_tasks(tmp_path: Path) -> None:
    # every task ends within the first refresh: the bar must still show the end
    res = runner.invoke(app, ["run", str(_config(tmp_path))])
    assert "Traceback" not in res.output
    bar = _bar(res.output)
    assert "100%" in bar
    assert "2/2 done" in bar
    assert "2 tasks in " in res.output
    run_id = _run_id(res.output)
    db = tmp_path / "m.db"
    asyncio.run(_add_task(db, run_id))
    # the resume takes the run by a unique prefix, as `status` prints it
    again = runner.invoke(app, ["run", "--resume", run_id[:-3], "--db", str(db)])
    assert "Traceback" not in again.output
    resumed = _bar(again.output)
    assert "1/1 done" in resumed  # the task it had left to run
    assert "100%" in resumed
    assert "-" not in resumed.split("queued")[1].split("tasks/s")[0]
    line = next(x for x in again.output.splitlines() if "throughput" in x)
    assert line.startswith("1 tasks in ")
    assert "(2 had finished before this resume)" in " ".join(again.output.split())


async def _add_cancelled(db: Path, run_id: str) -> None:
    """A task of the run cancelled before the resume (as `megaflow cancel` leaves it)."""
    async with SqliteMetadataStore(str(db)) as store:
        spec = (await store.list_tasks(run_id))[0].spec
        await store.add_tasks([spec.model_copy(update={"id": f"{run_id}/t8/0"})])
        await store.transition_many([Transition(f"{run_id}/t8/0", S.CANCELLED)])


def test_a_resume_after_a_cancel_counts_the_tasks_it_ran(tmp_path: Path) -> None:
    """A task cancelled before the resume is neither work of the resume nor one that
    finished before it: the resume ran 1 task, not 0 (a resumed quickstart whose control
    arm was cancelled read "0 tasks in 382.2 s: no throughput (68 had finished ...)")."""
    res = runner.invoke(app, ["run", str(_config(tmp_path))])
    run_id = _run_id(res.output)
    db = tmp_path / "m.db"
    asyncio.run(_add_task(db, run_id))
    asyncio.run(_add_cancelled(db, run_id))
    again = runner.invoke(app, ["run", "--resume", run_id, "--db", str(db)])
    assert "Traceback" not in again.output
    line = " ".join(again.output.split()).split(" tasks in ")[0].split()[-1] + " tasks in"
    assert line == "1 tasks in", again.output
    said = " ".join(again.output.split())
    assert "(2 had finished before this resume); 1 cancelled, not counted" in said, said


def test_throughput_counts_the_tasks_this_process_ran() -> None:
    arm = ArmSummary(
        run_id="r", arm="main", counts={S.SUCCEEDED: 10}, metrics=summarize([]),
        task_p50_s=0, task_p99_s=0, start_p50_s=0, start_p99_s=0,
    )  # fmt: skip
    resumed = JobSummary(arms=[arm], wall_s=2.0, before=8)
    assert (resumed.finished, resumed.ran, resumed.throughput) == (10, 2, 1.0)
    assert JobSummary(arms=[arm], wall_s=2.0).throughput == 5.0
