"""A model backend that hangs, answers 500, or answers garbage.

A real HTTP server on loopback speaks the OpenAI API badly; the run's
``openai`` model config points at it; the tasks run the builtin agent in real
local sandboxes. The rules checked (docs/agent.md, docs/scheduler.md):

- an error answer (500) or an unusable one (not JSON, no ``choices``) is a
  ``ModelError``: the agent's own failure, a graded sample (SUCCEEDED) with
  reward 0 and kind ``agent``, not retried;
- answers without a tool call are format errors; ``max_format_errors`` of them
  in a row are an ``AgentError``: the same, SUCCEEDED with reward 0, kind
  ``agent``, not retried;
- no answer within ``timeout_s`` is a ``MegaFlowTimeout``: TIMED_OUT, not retried;
- an unreachable backend (502, a dropped connection) is a ``TransportError``:
  the gateway retries it ``retries`` times, then the scheduler retries the
  attempt as infrastructure, up to ``max_attempts``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from megaflow.app.attempt import artifact_prefix
from megaflow.app.job import Job
from megaflow.config import parse_config
from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind
from tests.reliability.jobs import inline_job, openai_model
from tests.reliability.ledger import check_ledger, integrity_check, read_ledger
from tests.reliability.openai_server import flaky_openai

ROUTER_TRIES = 3  # retries: 2 (the default) after the first try

CASES = {
    # name: (behaviour, state, kind of the last attempt, attempts, requests, message)
    "500": (lambda n, b: "500", TaskState.SUCCEEDED, ErrorKind.AGENT, 1, 1, "answered 500"),
    "garbage": (
        lambda n, b: "garbage", TaskState.SUCCEEDED, ErrorKind.AGENT, 1, 1,
        "no usable chat completion",
    ),
    "wrong-shape": (
        lambda n, b: "wrong-shape", TaskState.SUCCEEDED, ErrorKind.AGENT, 1, 1, "no usable"
    ),
    "prose": (
        lambda n, b: "prose", TaskState.SUCCEEDED, ErrorKind.AGENT, 1, 2, "malformed answers"
    ),
    "hang": (lambda n, b: "hang", TaskState.TIMED_OUT, ErrorKind.TIMEOUT, 1, 1, "no answer"),
    "502-always": (
        lambda n, b: "502", TaskState.FAILED, ErrorKind.INFRA, 2, 2 * ROUTER_TRIES, "502"
    ),
    "502-then-ok": (
        lambda n, b: "502" if n <= ROUTER_TRIES else "ok",
        TaskState.SUCCEEDED, None, 2, ROUTER_TRIES + 2, "",
    ),
    "drop-then-ok": (
        lambda n, b: "drop" if n == 1 else "ok", TaskState.SUCCEEDED, None, 1, 3, ""
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
async def test_bad_model_backend(case: str, tmp_path: Path) -> None:
    behave, state, kind, n_attempts, n_requests, message = CASES[case]
    with flaky_openai(behave) as server:
        model = openai_model(server.base_url, timeout_s=3)
        cfg = parse_config(inline_job(tmp_path, model))
        async with Job(cfg) as job:
            await job.submit()
            counts = await job.wait()
            led = await read_ledger(job.stores.metadata, job.run_id)
            (tid,) = led.tasks
            traj = json.loads(
                await job.stores.artifacts.get(
                    f"{artifact_prefix(led.tasks[tid].spec, n_attempts)}/trajectory.json"
                )
            )
        requests = list(server.requests)

    assert counts[job.run_id] == {state: 1}  # the run finished
    check_ledger(led, 1)
    attempts = led.attempts[tid]
    assert len(attempts) == n_attempts, attempts
    # a graded sample's attempt ended without error; its result keeps the agent's
    assert attempts[-1].error_kind is (None if state is TaskState.SUCCEEDED else kind)
    assert all(a.error_kind is ErrorKind.INFRA for a in attempts[:-1])
    result = led.results[tid]
    assert result.error_kind is kind
    if kind is not None:
        assert message in (result.error or ""), result.error
        assert not result.success
        # the failed attempt's trajectory is kept, with its error
        assert traj["meta"]["error_kind"] == kind.value
        assert message in traj["meta"]["error"]
    else:
        assert result.success
        assert traj["meta"]["exit_status"] == "submitted"
    assert len(requests) == n_requests, requests
    assert integrity_check(tmp_path / "m.db") == "ok"
