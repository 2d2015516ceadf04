"""`megaflow cancel`: through a cluster's control plane, and in the store of an
embedded run only when that is safe."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TypeVar

import pytest
from typer.testing import CliRunner, Result

from megaflow.cli.main import app
from megaflow.cli.run_lock import hold, lock_path
from megaflow.core.states import TaskState as S
from megaflow.core.tasks import Attempt, ErrorKind, RunSpec, TaskSpec
from megaflow.storage.abstract import Transition
from megaflow.storage.config import SqliteMetadataConfig
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.cli.scheduler_service import ClusterScheduler

runner = CliRunner()
T = TypeVar("T")


def said(res: Result) -> str:
    """The output as one line (rich wraps at the terminal's width)."""
    return " ".join(res.output.split())


RUN = "quickstart-20261201-071930"


async def _seed(path: str) -> None:
    async with SqliteMetadataStore(path) as s:
        await s.create_run(RunSpec(id=RUN, name="quickstart"))
        await s.add_tasks([TaskSpec(id=f"{RUN}/t{i}/0", run_id=RUN) for i in range(3)])
        done = [S.SCHEDULED, S.STARTING, S.RUNNING, S.GRADING, S.SUCCEEDED]
        await s.transition_many([Transition(f"{RUN}/t0/0", x) for x in done])
        running = [S.SCHEDULED, S.STARTING, S.RUNNING]
        await s.transition_many([Transition(f"{RUN}/t2/0", x) for x in running])
        await s.put_attempt(Attempt(task_id=f"{RUN}/t2/0", number=1, sandbox="sb-1"))


def _states(path: str) -> dict[str, S]:
    async def go() -> dict[str, S]:
        async with SqliteMetadataStore(path) as s:
            return {r.id.split("/")[1]: r.state for r in await s.list_tasks(RUN)}

    return asyncio.run(go())


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "m.db")
    asyncio.run(_seed(path))
    return path


def test_a_live_run_is_refused_with_how_to_cancel_it(db: str) -> None:
    with hold(lock_path(SqliteMetadataConfig(path=db), RUN)):
        res = runner.invoke(app, ["cancel", RUN, "--db", db])
    assert res.exit_code == 2
    assert "process is still running" in said(res)
    assert "Ctrl-C" in said(res)
    assert _states(db) == {"t0": S.SUCCEEDED, "t1": S.QUEUED, "t2": S.RUNNING}


def test_in_flight_tasks_with_unknown_liveness_are_refused(db: str) -> None:
    res = runner.invoke(app, ["cancel", RUN, "--db", db])  # no lock file: cannot tell
    assert res.exit_code == 2
    assert "in flight" in said(res)
    assert "Ctrl-C" in said(res)
    assert _states(db)["t2"] is S.RUNNING
    # a queued task alone is safe to cancel: nothing of it is in flight
    res = runner.invoke(app, ["cancel", f"{RUN}/t1/0", "--db", db])
    assert res.exit_code == 0, res.output
    assert "cancelled 1 task(s)" in said(res)
    assert _states(db) == {"t0": S.SUCCEEDED, "t1": S.CANCELLED, "t2": S.RUNNING}


def test_a_run_whose_process_is_gone_is_cancelled_in_the_store(db: str) -> None:
    with hold(lock_path(SqliteMetadataConfig(path=db), RUN)):
        pass  # a process drove it and ended: its lock file stays, free
    res = runner.invoke(app, ["cancel", RUN, "--db", db])
    assert res.exit_code == 0, res.output
    assert "cancelled 2 task(s)" in said(res)
    assert "1 of them in flight" in said(res)
    assert _states(db) == {"t0": S.SUCCEEDED, "t1": S.CANCELLED, "t2": S.CANCELLED}

    async def check() -> None:
        async with SqliteMetadataStore(db) as s:
            res = await s.get_result(f"{RUN}/t2/0")
            assert res.error_kind is ErrorKind.CANCELLED
            (attempt,) = await s.list_attempts(f"{RUN}/t2/0")
            assert attempt.ended_at is not None
            assert attempt.error_kind is ErrorKind.CANCELLED

    asyncio.run(check())
    again = runner.invoke(app, ["cancel", RUN, "--db", db])
    assert again.exit_code == 0
    assert "nothing to cancel" in said(again)
    unknown = runner.invoke(app, ["cancel", "nope", "--db", db])
    assert unknown.exit_code == 2
    assert "nope" in said(unknown)


def test_cancel_through_the_cluster_control_plane(
    cluster: ClusterScheduler, tmp_path: Path
) -> None:
    assert cluster.cp is not None
    tasks = [TaskSpec(id=f"r1/t{i}/0", run_id="r1", payload={"sleep_s": 60}) for i in range(3)]
    cluster.call(cluster.cp.submit_run(RunSpec(id="r1"), tasks))
    args = ["--cluster", cluster.url, "--token-file", str(cluster.token_file)]
    one = runner.invoke(app, ["cancel", "r1/t2/0", *args])
    assert one.exit_code == 0, one.output
    assert "cancelled 1 task(s) of task r1/t2/0" in said(one)
    rest = runner.invoke(app, ["cancel", "r1", *args])
    assert rest.exit_code == 0, rest.output
    assert "cancelled 2 task(s) of run r1" in said(rest)
    status = cluster.call(cluster.cp.wait("r1"))
    assert status.counts == {S.CANCELLED: 3}
    unknown = runner.invoke(app, ["cancel", "r9/x/0", *args])
    assert unknown.exit_code == 2
    assert "r9/x/0" in said(unknown)
