"""An agent that hangs past its deadline ends timed out, never as an infra error.

The attacker is the agent's command, ``sleep 60`` (a scripted model answers it
every time), in real local (bubblewrap) sandboxes, under a task deadline of a
few seconds. The race: on a loaded machine the event loop stalls; the exec
server's closed pipe is read in one loop turn and reaches the channel in the
next, and the deadline timer that fell due meanwhile fires in between. The
channel then fails the outstanding exec, and on Python 3.11
``asyncio.wait_for``, woken by the cancel, found its reply future done and
raised that failure instead of the cancel: the attempt saw ``SandboxError:
exec server is gone``, was recorded ``infra`` and retried, so an agent that
learns to hang could turn its failures into retries. Two defences, each with
its own test here: the channel never loses a cancel to a reply or a loss in
the same turn (``environment.local.channel``), and once an attempt was
interrupted its interruption decides the outcome, whatever the executor raises
after it (``scheduler.attempts``), as when cleaning up a sandbox that is gone.

The stall is made on purpose (the loop blocked across the deadline, the
sandbox's processes killed from the host within it), so the race is hit every
time rather than now and then under load. A loss well before the deadline
stays what it is: infra, retried.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from megaflow.app.job import Job
from megaflow.config import parse_config
from megaflow.core.errors import SandboxError
from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind, TaskResult, Timeouts
from megaflow.environment.abstract import EnvironmentSpec, Sandbox
from megaflow.environment.config import LocalRuntimeConfig, PoolConfig
from megaflow.environment.local import LocalRuntime
from megaflow.environment.local.sandbox import LocalSandbox
from megaflow.environment.pool import SandboxPool
from megaflow.scheduler.abstract import TaskContext, TaskExecutor
from megaflow.scheduler.config import RetryConfig, SchedulerConfig
from megaflow.scheduler.service import Scheduler
from megaflow.storage.factory import Stores
from tests.reliability.jobs import inline_job, openai_model
from tests.reliability.ledger import check_ledger, read_ledger
from tests.reliability.openai_server import flaky_openai
from tests.scheduler.helpers import make_stores, run, task

ATTACK = "sleep 60"  # the scripted model's answer: a command that hangs past the deadline
DEADLINE_S = 6.0
SPEC = EnvironmentSpec(ttl_s=600)


def lose_in_a_stall(loop: asyncio.AbstractEventLoop, sandbox: Sandbox, until: float) -> None:
    """Kill the sandbox's processes from the host while the event loop is blocked
    (as on a loaded machine), and keep it blocked, in a second callback of the
    next turn, until loop time ``until``. The closed pipe is read in that turn
    and its end reaches the channel in the one after; a timer that fell due in
    the second block (the deadline) fires in between."""
    assert isinstance(sandbox, LocalSandbox)
    assert sandbox.proc is not None
    if sandbox.cgroup is not None:  # as the host ends a sandbox: through its groups
        sandbox.cgroup.kill_all()
        gone_by = time.monotonic() + 10
        while sandbox.cgroup.pids_in() and time.monotonic() < gone_by:
            time.sleep(0.01)
    else:  # bubblewrap: its pid namespace dies with it
        sandbox.proc.send_signal(signal.SIGKILL)
    time.sleep(0.3)  # the exec server's end of the pipe is closed by now
    loop.call_at(loop.time(), lambda: time.sleep(max(0.0, until - loop.time())))


class Attacker(TaskExecutor):
    """An attempt reduced to what the attack touches: a sandbox from the pool,
    given back on every path as the run's executor does, the agent's command in
    it, and on a failure what the agent left kept as evidence (a read in the
    sandbox, which fails once the sandbox is gone). ``lose`` says when the host
    loses the exec server: ``"stall"``, within a stalled loop turn of the
    deadline; ``"early"``, on the first attempt, one second into the command;
    None, never."""

    def __init__(self, pool: SandboxPool, lose: str | None) -> None:
        self.pool = pool
        self.lose = lose
        self.calls = 0

    async def run(self, ctx: TaskContext) -> TaskResult:
        self.calls += 1
        loop = asyncio.get_running_loop()
        due = loop.time() + DEADLINE_S  # the scheduler armed the deadline just now
        ctx.stage(TaskState.STARTING)
        sandbox = await self.pool.acquire(SPEC, owner=ctx.spec.id)
        timer = None
        try:
            ctx.stage(TaskState.RUNNING)
            if self.lose == "stall":
                timer = loop.call_at(due - 0.8, lose_in_a_stall, loop, sandbox, due + 0.2)
            elif self.lose == "early" and ctx.attempt == 1:
                timer = loop.call_later(1.0, lose_in_a_stall, loop, sandbox, 0.0)
            try:
                res = await sandbox.exec(ATTACK, timeout=120)
            except BaseException:
                await sandbox.exec("cat /proc/loadavg", timeout=10)  # the evidence
                raise
            return TaskResult(task_id=ctx.spec.id, success=res.ok)
        finally:
            if timer is not None:
                timer.cancel()
            await asyncio.shield(self.pool.release(sandbox, broken=True))


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[SandboxPool]:
    runtime = LocalRuntime(LocalRuntimeConfig(root=str(tmp_path / "sb")))
    await runtime.start()
    sandboxes = SandboxPool(runtime, "ephemeral", PoolConfig(warm_share=0))
    try:
        yield sandboxes
    finally:
        await sandboxes.stop()
        await runtime.stop()


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[Stores]:
    s = make_stores(tmp_path)
    async with s:
        yield s


async def _run_attack(stores: Stores, executor: Attacker, n: int) -> list[str]:
    cfg = SchedulerConfig(retry=RetryConfig(base_s=0.05, max_s=0.1), max_concurrency=n)
    tasks = [
        task(f"t{i}", max_attempts=3, timeouts=Timeouts(deadline_s=DEADLINE_S)) for i in range(n)
    ]
    async with Scheduler(cfg, stores, executor, seed=7) as s:
        await s.submit(run(), tasks)
        await asyncio.wait_for(s.wait("r1"), 120)
    return [t.id for t in tasks]


async def test_a_hang_past_the_deadline_is_a_timeout_even_when_the_sandbox_goes_with_it(
    pool: SandboxPool, stores: Stores
) -> None:
    ex = Attacker(pool, lose="stall")
    ids = await _run_attack(stores, ex, 3)
    md = stores.metadata
    for tid in ids:
        rec = await md.get_task(tid)
        attempts = await md.list_attempts(tid)
        said = [(a.error_kind, a.error) for a in attempts]
        assert rec.state is TaskState.TIMED_OUT, said
        assert [a.error_kind for a in attempts] == [ErrorKind.TIMEOUT], said  # no retry
        assert attempts[0].error == f"task deadline of {DEADLINE_S}s passed"
        assert (await md.get_result(tid)).error_kind is ErrorKind.TIMEOUT
    assert ex.calls == len(ids)


async def test_a_sandbox_lost_before_the_deadline_stays_infra_and_is_retried(
    pool: SandboxPool, stores: Stores
) -> None:
    ex = Attacker(pool, lose="early")
    (tid,) = await _run_attack(stores, ex, 1)
    attempts = await stores.metadata.list_attempts(tid)
    kinds = [a.error_kind for a in attempts]
    assert kinds == [ErrorKind.INFRA, ErrorKind.TIMEOUT], [a.error for a in attempts]
    assert "exec server" in str(attempts[0].error)
    assert (await stores.metadata.get_task(tid)).state is TaskState.TIMED_OUT


async def test_a_cancel_is_not_lost_to_the_sandbox_loss_in_the_same_loop_turn(
    pool: SandboxPool,
) -> None:
    """The channel alone: the caller's cancel (a timer that fell due in the stall)
    and the exec server's end arrive together; the caller sees its cancel."""
    loop = asyncio.get_running_loop()
    sandbox = await pool.acquire(SPEC, owner="t")
    try:
        call = asyncio.ensure_future(sandbox.exec(ATTACK, timeout=120))
        await asyncio.sleep(1.0)
        loop.call_at(loop.time() + 0.6, call.cancel)  # falls due in the second block
        loop.call_soon(lose_in_a_stall, loop, sandbox, loop.time() + 0.8)
        with pytest.raises(asyncio.CancelledError):
            await call
        with pytest.raises(SandboxError, match=r"exited|exec server is gone"):  # the loss was real
            await sandbox.exec("true", timeout=5)
    finally:
        await pool.release(sandbox, broken=True)


async def _stall_at_each_deadline(job: Job, seen: set[str]) -> None:
    """For each attempt of the job, once its agent's command runs, lose its sandbox
    within a stalled loop turn of its deadline (as :class:`Attacker` does)."""
    loop = asyncio.get_running_loop()
    runtime = job.runtime
    assert isinstance(runtime, LocalRuntime)
    runner = job.sched.runner
    assert runner is not None
    stalls: list[asyncio.Task[None]] = []
    try:
        while True:
            for tid in list(runner.running_tasks):
                if tid not in seen:
                    seen.add(tid)
                    due = loop.time() + DEADLINE_S
                    stalls.append(loop.create_task(_stall_one(runtime, tid, due)))
            await asyncio.sleep(0.01)
    finally:
        for stall in stalls:
            stall.cancel()


async def _stall_one(runtime: LocalRuntime, tid: str, due: float) -> None:
    loop = asyncio.get_running_loop()
    while loop.time() < due - 0.8:
        busy = [sb for sb in runtime.sandboxes.values()
                if sb.info.owner == tid and sb.info.state == "busy"]  # fmt: skip
        if busy and loop.time() > due - 1.0:
            lose_in_a_stall(loop, busy[0], due + 0.2)
            return
        await asyncio.sleep(0.01)


async def test_the_builtin_agent_hanging_in_a_real_run_ends_timed_out_without_a_retry(
    tmp_path: Path,
) -> None:
    """The whole path of a run (scheduler, executor, builtin agent, a scripted
    OpenAI-compatible model that answers ``sleep 60`` every time, local sandboxes),
    each attempt's sandbox lost within a stalled loop turn of its deadline."""
    n = 3
    with flaky_openai(lambda i, body: "sleep") as server:
        cfg = inline_job(
            tmp_path, openai_model(server.base_url), n, max_attempts=3, deadline_s=DEADLINE_S
        )
        cfg["scheduler"]["max_concurrency"] = 1  # one stall at a time: each attempt hits it
        async with Job(parse_config(cfg)) as job:
            await job.submit()
            seen: set[str] = set()
            staller = asyncio.get_running_loop().create_task(_stall_at_each_deadline(job, seen))
            try:
                counts = await asyncio.wait_for(job.wait(), 180)
            finally:
                staller.cancel()
            led = await read_ledger(job.stores.metadata, job.run_id)
    assert counts[job.run_id] == {TaskState.TIMED_OUT: n}, led.attempts
    check_ledger(led, n)
    for tid, attempts in led.attempts.items():
        said = [(a.error_kind, a.error) for a in attempts]
        assert [a.error_kind for a in attempts] == [ErrorKind.TIMEOUT], said  # no retry
        assert led.results[tid].error_kind is ErrorKind.TIMEOUT
    assert len(seen) == n  # one attempt each


async def test_a_reply_to_a_call_cancelled_in_the_same_turn_is_dropped_not_a_violation(
    pool: SandboxPool,
) -> None:
    """The command's reply is read in the turn its caller's cancel falls due: the
    reply is late, not a reply to no request (a protocol violation, which tears
    the sandbox down); the sandbox serves the next call."""
    loop = asyncio.get_running_loop()
    sandbox = await pool.acquire(SPEC, owner="t")
    try:
        call = asyncio.ensure_future(sandbox.exec("sleep 0.3", timeout=30))
        await asyncio.sleep(0.1)
        loop.call_at(loop.time() + 0.1, call.cancel)  # due in the block below
        loop.call_soon(time.sleep, 1.0)  # the reply arrives while the loop is blocked
        with pytest.raises(asyncio.CancelledError):
            await call
        assert isinstance(sandbox, LocalSandbox)
        assert sandbox.violation is None
        assert (await sandbox.exec("echo on", timeout=30)).stdout == "on\n"
    finally:
        await pool.release(sandbox, broken=True)
