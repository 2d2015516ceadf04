"""A job's metrics: what a run exports, and `megaflow run --metrics-port` serving them."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

from prometheus_client import generate_latest

from megaflow.app.job import Job
from megaflow.cli.run_cmd import _run
from megaflow.config import parse_config
from tests.app.test_job import job_config
from tests.fixtures.servers import free_port


def _value(text: str, prefix: str) -> float:
    line = next(ln for ln in text.splitlines() if ln.startswith(prefix))
    return float(line.rsplit(" ", 1)[1])


async def test_a_job_exports_run_sandbox_scheduler_and_model_metrics(tmp_path: Path) -> None:
    cfg = parse_config(job_config(tmp_path))
    job = Job(cfg)
    async with job:
        await job.submit()
        await job.wait()
    text = generate_latest(job.registry).decode()
    rid, ctl = job.run_ids
    assert _value(text, f'megaflow_run_success_ratio{{run="{rid}"}}') == 1.0
    assert _value(text, f'megaflow_run_success_ratio{{run="{ctl}"}}') == 0.0
    assert _value(text, f'megaflow_run_reward_mean{{run="{rid}"}}') == 1.0
    assert _value(text, f'megaflow_task_execution_seconds_count{{run="{rid}",type="eval"}}') == 3
    assert f'megaflow_task_execution_cv_ratio{{run="{rid}",type="eval"}}' in text
    assert _value(text, f'megaflow_model_request_seconds_count{{run="{rid}"}}') >= 6
    assert _value(text, 'megaflow_sandbox_start_seconds_count{kind="cold",runtime="local"}') >= 1
    assert _value(text, "megaflow_scheduler_queue_depth") == 0
    assert _value(text, 'megaflow_scheduler_tasks{state="succeeded"}') == 6
    assert "megaflow_scheduler_fragmentation_ratio" in text


async def test_run_serves_metrics_while_it_runs(tmp_path: Path) -> None:
    cfg = parse_config(job_config(tmp_path, control=None, expect={}))
    job = Job(cfg)
    port = free_port()
    run = asyncio.create_task(_run(job, False, port))
    body = ""
    while not run.done() and "megaflow_scheduler_queue_depth" not in body:
        try:
            body = await asyncio.to_thread(
                lambda: (
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)
                    .read()
                    .decode()
                )
            )
        except OSError:
            pass
        await asyncio.sleep(0.05)
    summary = await run
    assert "megaflow_scheduler_queue_depth" in body
    assert summary.ok
    # the server is gone once the job ends
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1)
        raise AssertionError("metrics server still answering after the job")
    except OSError:
        pass
