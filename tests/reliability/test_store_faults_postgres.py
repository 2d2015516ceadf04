"""PostgreSQL SIGKILLed under an embedded ``megaflow run`` and restarted later.

The run keeps its metadata in a PostgreSQL cluster of the test's own. Once
a task has finished, the postmaster and all its backends are SIGKILLed; the
cluster is restarted after longer than the store's connect timeout (10 s),
while sandboxes keep running and grading. Checked: the run waits the outage
out and exits by itself with 0, no traceback; every gold sample SUCCEEDED
with reward 1.0 and every control sample with 0, each task with exactly one
attempt and attempts equal to its attempt count.

A second case keeps PostgreSQL down: the run stops within its outage
deadline with one clear error naming the metadata store and how to resume,
exit 1, no traceback; once PostgreSQL is back, ``--resume`` finishes the run
and the books are the same as above.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import psycopg
import pytest

from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind
from megaflow.storage.postgres import PostgresMetadataStore
from tests.reliability.conftest import LeakCheck
from tests.reliability.ledger import check_ledger, read_ledger
from tests.reliability.store_chaos import (
    LIMIT,
    KillablePostgres,
    RunProcess,
    check_graded_books,
    graded_job,
    killable_postgres,
    until,
)

pytestmark = [pytest.mark.slow, pytest.mark.services]
DOWN_S = 12.0
"""Longer than the PostgreSQL store's connect timeout (10 s)."""


def succeeded(pg: KillablePostgres, schema: str) -> int:
    try:
        with psycopg.connect(pg.dsn, connect_timeout=2) as conn:
            row = conn.execute(
                f"SELECT count(*) FROM {schema}.tasks WHERE state = 'succeeded'"
            ).fetchone()
    except psycopg.Error:
        return 0
    return int(row[0]) if row else 0


def pg_storage(pg: KillablePostgres, schema: str) -> dict[str, object]:
    return {"metadata": {"type": "postgres", "dsn": pg.dsn, "db_schema": schema}}


async def books(pg: KillablePostgres, schema: str, output: str) -> None:
    async with PostgresMetadataStore(pg.dsn, schema=schema) as md:
        await check_graded_books(md, output)


async def test_postgres_killed_and_back_the_run_finishes(tmp_path: Path, leaks: LeakCheck) -> None:
    with killable_postgres() as pg:
        run = RunProcess(tmp_path, graded_job(tmp_path, pg_storage(pg, "kill1")))
        try:
            leaks.watch(run.proc.pid)
            until(lambda: succeeded(pg, "kill1") >= 1, "a task finished", 90, run)
            pg.sigkill()
            time.sleep(DOWN_S)
            pg.start()
            code = run.wait(120)
        finally:
            run.kill()
        assert code == 0, run.output[-4000:]
        await books(pg, "kill1", run.output)
        assert "is back after" in run.output or "answers again" in run.output, run.output[-3000:]


async def test_postgres_gone_past_the_deadline_stops_then_resume_finishes(
    tmp_path: Path, leaks: LeakCheck
) -> None:
    with killable_postgres() as pg:
        storage = pg_storage(pg, "kill2")
        spool = tmp_path / "spool"
        storage["outage"] = {"deadline_s": 5, "backoff_max_s": 1.0, "spool_dir": str(spool)}
        run = RunProcess(tmp_path, graded_job(tmp_path, storage))
        try:
            leaks.watch(run.proc.pid)
            until(lambda: succeeded(pg, "kill2") >= 1, "a task finished", 90, run)
            pg.sigkill()
            t0 = time.monotonic()
            code = run.wait(60)
            stopped_s = time.monotonic() - t0
        finally:
            run.kill()
        out = run.output
        assert code == 1, out[-4000:]
        assert "StoreUnavailable" in out, out[-3000:]
        assert "metadata store" in out, out[-3000:]
        assert "megaflow run --resume" in out, out[-3000:]
        assert "Traceback" not in out, out[-4000:]
        # the deadline, plus one connect timeout (10 s) for the last try, plus teardown
        assert stopped_s < 5 + 10 + 20, stopped_s
        # the writes the store missed (finished tasks' results) were kept locally
        kept = [json.loads(line) for f in spool.glob("*.jsonl") for line in f.open()]
        kept_results = {i["task_id"]: i for e in kept if e["kind"] == "results" for i in e["items"]}
        assert kept_results, "no result was kept while PostgreSQL was away"
        pg.start()
        async with PostgresMetadataStore(pg.dsn, schema="kill2") as md:
            run_id = next(r.id for r in await md.list_runs() if not r.id.endswith("-control"))
        cfg_path = tmp_path / "run.yaml"
        resumed = RunProcess(tmp_path, None, "--resume", run_id, "--config", str(cfg_path))
        try:
            leaks.watch(resumed.proc.pid)
            code = resumed.wait(120)
        finally:
            resumed.kill()
        assert code == 0, resumed.output[-4000:]
        assert not list(spool.glob("*.jsonl")), "the resume did not write what was kept"
        async with PostgresMetadataStore(pg.dsn, schema="kill2") as md:
            for run_ in await md.list_runs():
                control = run_.id.endswith("-control")
                led = await read_ledger(md, run_.id)
                check_ledger(led, LIMIT)
                assert led.states == {TaskState.SUCCEEDED: LIMIT}, (run_.id, led.states)
                for tid, res in led.results.items():
                    assert res.reward == (0.0 if control else 1.0), res
                    atts = led.attempts[tid]
                    if tid in kept_results:  # finished while the store was away: not run again
                        assert len(atts) == 1, (tid, atts)
                        assert res.model_dump(mode="json") == kept_results[tid]
                    else:  # at most the attempt in flight at the stop, lost, then one more
                        assert [a.error_kind for a in atts[:-1]] in ([], [ErrorKind.INFRA_LOST])
        assert "Traceback" not in resumed.output, resumed.output[-4000:]
