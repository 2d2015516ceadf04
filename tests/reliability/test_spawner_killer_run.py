"""An agent that kills its sandbox's command spawner cannot turn its episode
into a retried infrastructure error, through the whole path of a run.

The spawner runs with the agent's uid, so the agent may kill it. An exec whose
spawner died before reporting the command used to fail with ``SandboxError``
(infrastructure: the attempt recorded ``infra`` and run again, never scored).
The scripted model here has the builtin agent start a loop that kills every
spawner it sees, then keep running commands; each such exec now ends with exit
126 (the command's failure) and the episode goes on to its submit.
``tests/environment/test_spawner.py`` shows the attack's effect on one sandbox
(22 of 60 execs failed so before the fix).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from megaflow.app.job import Job
from megaflow.config import parse_config
from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind
from tests.reliability.jobs import inline_job, openai_model
from tests.reliability.ledger import read_ledger
from tests.reliability.openai_server import flaky_openai, step_of

KILLER = "while :; do pkill -9 -P 2 -u 1000 -x python3; done"
ATTACK = f"setsid sh -c '{KILLER}' >/dev/null 2>&1 & true"
STEPS = 12  # commands run under the killer before the submit


def _behave(n: int, body: dict[str, Any]) -> str:
    return "big" if step_of(body) < STEPS else "ok"


async def test_killing_the_spawner_in_a_run_is_never_an_infra_error(tmp_path: Path) -> None:
    n = 2
    with flaky_openai(_behave, big_command=ATTACK) as server:
        cfg = inline_job(tmp_path, openai_model(server.base_url), n, max_attempts=3)
        cfg["agent"]["max_steps"] = STEPS + 2
        async with Job(parse_config(cfg)) as job:
            await job.submit()
            counts = await job.wait()
            led = await read_ledger(job.stores.metadata, job.run_id)
    kinds = {tid: [(a.error_kind, a.error) for a in at] for tid, at in led.attempts.items()}
    assert counts[job.run_id] == {TaskState.SUCCEEDED: n}, kinds
    for tid, attempts in led.attempts.items():
        assert len(attempts) == 1, kinds[tid]  # no retry
        assert all(a.error_kind is not ErrorKind.INFRA for a in attempts), kinds[tid]
