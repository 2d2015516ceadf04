"""The MongoDB-wire server SIGKILLed under an embedded ``megaflow run``, restarted later.

The run keeps its metadata (``storage.metadata: {type: mongo}``) in an
nx-27017 server of the test's own, its databases in SQLite files on disk so a
restart finds them again. Once a quarter of the tasks have finished, the
server is SIGKILLed and started again on the same port and the same data
20 s later (twice the store's connect timeout, 10 s), while sandboxes keep
running and grading. Checked, as for PostgreSQL: the run waits the outage out
and exits by itself with 0, no traceback; every gold sample SUCCEEDED with
reward 1.0 and every control sample with 0, each task with exactly one
attempt and attempts equal to its attempt count.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from megaflow.storage.mongo import MongoMetadataStore
from tests.fixtures.servers import IN_CI, free_port, wait_until
from tests.fixtures.sql_servers import find_nx27017
from tests.reliability.conftest import LeakCheck
from tests.reliability.store_chaos import LIMIT, RunProcess, check_graded_books, graded_job, until

pytestmark = [pytest.mark.slow, pytest.mark.services]
DOWN_S = 20.0
"""Longer than the MongoDB store's connect timeout (10 s) with room to spare: pymongo
waits up to that timeout for a server before a call fails, so a call made in the
outage's last 10 s sees the server back and never fails (with 12 s no store call
failed in a first try: nothing for the retries to do)."""
DATABASE = "kill1"


class KillableMongo:
    """nx-27017 on a fixed loopback port with its data in files: SIGKILLed, then
    started again on the same port and the same data."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        self.data = workdir / "data"
        self.data.mkdir()
        self.port = free_port()
        self.uri = f"mongodb://127.0.0.1:{self.port}/?directConnection=true"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = self.workdir / f"server-{self.starts}.log"
        cmd = [self.binary, "--data-dir", str(self.data), "--host", "127.0.0.1",
               "-p", str(self.port), "--log-file", str(self.workdir / "nx.log"),
               "--pid-file", str(self.workdir / "nx.pid")]  # fmt: skip
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        wait_until(self.answers, "nx-27017", self.proc, 60, log)

    def answers(self) -> bool:
        try:
            client: MongoClient[dict[str, Any]]
            with MongoClient(self.uri, serverSelectionTimeoutMS=1000) as client:
                client.admin.command("ping")
            return True
        except PyMongoError:
            return False

    def sigkill(self) -> None:
        """SIGKILL the server: a crash, not a stop."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def succeeded(self) -> int:
        """Tasks SUCCEEDED so far (0 while the server does not answer)."""
        try:
            client: MongoClient[dict[str, Any]]
            with MongoClient(self.uri, serverSelectionTimeoutMS=2000) as client:
                return int(client[DATABASE]["tasks"].count_documents({"state": "succeeded"}))
        except PyMongoError:
            return 0


@contextmanager
def killable_mongo(tmp: Path) -> Iterator[KillableMongo]:
    binary = find_nx27017()
    if binary is None:
        message = "nx-27017 not found; install the dev extra: pip install -e '.[dev]'"
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    workdir = tmp / "mongo"
    workdir.mkdir()
    server = KillableMongo(binary, workdir)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_mongo_killed_and_back_the_run_finishes(tmp_path: Path, leaks: LeakCheck) -> None:
    with killable_mongo(tmp_path) as mongo:
        storage = {"metadata": {"type": "mongo", "uri": mongo.uri, "database": DATABASE}}
        sched = {"max_concurrency": 4, "retry": {"base_s": 0.2, "max_s": 1.0}}
        run = RunProcess(tmp_path, graded_job(tmp_path, storage, scheduler=sched))
        try:
            leaks.watch(run.proc.pid)
            # a quarter of the tasks (both arms) finished
            until(lambda: mongo.succeeded() >= (2 * LIMIT) // 4, "tasks finished", 90, run)
            mongo.sigkill()
            time.sleep(DOWN_S)
            mongo.start()
            code = run.wait(120)
        finally:
            run.kill()
        assert code == 0, run.output[-4000:]
        async with MongoMetadataStore(mongo.uri, database=DATABASE) as md:
            await check_graded_books(md, run.output)
        assert "is back after" in run.output or "answers again" in run.output, run.output[-3000:]
