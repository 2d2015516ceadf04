"""PostgreSQL SIGKILLed under ``megaflow up`` while ``submit --wait`` waits.

A local cluster (``megaflow up``: scheduler, agent, environment and model
services in their own processes) keeps its metadata in a PostgreSQL cluster
of the test's own and its queue and events on a real ``redis-server``. A
graded run (mini-SWE, gold and empty arms) is submitted with ``--wait``; once
a task has finished, PostgreSQL is SIGKILLed and started again 12 s later
(past the store's 10 s connect timeout). Checked: ``submit --wait`` returns
by itself with 0, no traceback; every gold sample SUCCEEDED with reward 1.0
and every control sample with 0, each task with one attempt, the books
consistent (attempts equal the attempt count).
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from megaflow.storage.postgres import PostgresMetadataStore
from tests.fixtures.servers import free_port, start_redis, stop
from tests.reliability.conftest import LeakCheck
from tests.reliability.store_chaos import CLI, check_graded_books, graded_job, killable_postgres
from tests.reliability.test_store_faults_postgres import DOWN_S, succeeded

pytestmark = [pytest.mark.slow, pytest.mark.services]


def cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip


def cluster_config(root: Path, dsn: str, schema: str, redis_url: str) -> dict[str, Any]:
    state = root / "state"
    return {
        "state_dir": str(state),
        "auth": {"token_file": str(state / "token")},
        "scheduler": {
            "port": free_port(),
            "executor": "agent",
            "config": {"max_concurrency": 2, "retry": {"base_s": 0.2, "max_s": 1.0}},
            "storage": {
                "metadata": {"type": "postgres", "dsn": dsn, "db_schema": schema},
                "queue": {"type": "redis", "url": redis_url, "namespace": schema},
                "events": {"type": "redis", "url": redis_url, "namespace": schema},
                "artifacts": {"type": "local", "root": str(root / "art")},
                "outage": {"deadline_s": 90, "backoff_max_s": 1.0,
                           "spool_dir": str(root / "spool")},
            },
        },
        "environment": {"port": free_port(),
                        "runtime": {"type": "local", "root": str(state / "sb")}},
        "agent": {"port": free_port()},
        "model": {"port": free_port(), "http_port": free_port()},
    }  # fmt: skip


async def test_postgres_killed_under_a_cluster_submit_wait_returns(
    tmp_path: Path, leaks: LeakCheck
) -> None:
    schema = f"c{uuid.uuid4().hex[:8]}"
    redis_port = free_port()
    redis = start_redis(tmp_path / "redis", redis_port)
    try:
        with killable_postgres() as pg:
            path = tmp_path / "cluster.yaml"
            path.write_text(yaml.safe_dump(
                cluster_config(tmp_path, pg.dsn, schema, f"redis://127.0.0.1:{redis_port}/0")
            ))  # fmt: skip
            up = cli("up", str(path), cwd=tmp_path)
            assert up.returncode == 0, up.stdout + up.stderr
            try:
                for line in up.stdout.splitlines():  # the services' sandboxes are checked too
                    for word in line.split():
                        if word.isdigit() and Path(f"/proc/{word}").exists():
                            leaks.watch(int(word))
                run_yaml = tmp_path / "run.yaml"
                run_yaml.write_text(yaml.safe_dump(graded_job(tmp_path / "run", {})))
                cfg = yaml.safe_load(path.read_text())
                target = f"127.0.0.1:{cfg['scheduler']['port']}"
                log = tmp_path / "submit.log"
                with log.open("wb") as out:
                    submit = subprocess.Popen(
                        [*CLI, "submit", str(run_yaml), "--cluster", target, "--token-file",
                         str(tmp_path / "state" / "token"), "--wait"],
                        cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                    )  # fmt: skip
                try:
                    deadline = time.monotonic() + 120
                    while succeeded(pg, schema) < 1:
                        assert submit.poll() is None, log.read_text()[-3000:]
                        assert time.monotonic() < deadline, "no task finished"
                        time.sleep(0.2)
                    pg.sigkill()
                    time.sleep(DOWN_S)
                    pg.start()
                    code = submit.wait(150)
                finally:
                    if submit.poll() is None:
                        submit.kill()
                        submit.wait(30)
                output = log.read_text(errors="replace")
                assert code == 0, output[-4000:]
                async with PostgresMetadataStore(pg.dsn, schema=schema) as md:
                    await check_graded_books(md, output)
                logs = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*.log")
                               if "state" in p.parts)  # fmt: skip
                assert "is back after" in logs or "answers again" in logs, logs[-3000:]
            finally:
                cli("down", str(path), cwd=tmp_path)
    finally:
        stop(redis)
