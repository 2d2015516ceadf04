"""The S3 server SIGKILLed under an embedded ``megaflow run`` and restarted.

The run writes its artifacts (trajectories, patches, grade reports) to a
``moto_server`` of the test's own, with ``create_bucket: true``. Once a task
has finished, the server is SIGKILLed and started again on the same port
after longer than the S3 store's connect timeout (5 s); it comes back
without the bucket. Checked: writes wait the outage out (connection refused,
then the missing bucket created again, as the config says) instead of
failing graded samples; the run exits by itself with 0, no traceback; every
gold sample SUCCEEDED with reward 1.0, every control sample with 0, each
task with one attempt.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from megaflow.storage.sqlite import SqliteMetadataStore
from tests.reliability.conftest import LeakCheck
from tests.reliability.store_chaos import (
    KillableMoto,
    RunProcess,
    check_graded_books,
    graded_job,
    sqlite_succeeded,
    until,
)

pytestmark = [pytest.mark.slow, pytest.mark.services]
DOWN_S = 6.0
"""Longer than the S3 store's connect timeout (5 s)."""


async def test_s3_killed_and_back_no_graded_sample_fails(tmp_path: Path, leaks: LeakCheck) -> None:
    moto = KillableMoto(tmp_path)
    moto.start()
    try:
        artifacts = {
            "type": "s3", "bucket": "chaos", "endpoint_url": moto.url, "region": "us-east-1",
            "access_key_id": "testing", "secret_access_key": "testing", "create_bucket": True,
        }  # fmt: skip
        run = RunProcess(tmp_path, graded_job(tmp_path, {"artifacts": artifacts}))
        try:
            leaks.watch(run.proc.pid)
            until(lambda: sqlite_succeeded(tmp_path / "m.db") >= 1, "a task finished", 90, run)
            moto.sigkill()
            time.sleep(DOWN_S)
            moto.start()
            code = run.wait(120)
        finally:
            run.kill()
    finally:
        moto.stop()
    assert code == 0, run.output[-4000:]
    async with SqliteMetadataStore(tmp_path / "m.db") as md:
        await check_graded_books(md, run.output)
    out = run.output
    assert "the artifacts store" in out, out[-3000:]  # the outage was met ...
    assert "is back after" in out, out[-3000:]  # ... and waited out
