"""benchmarks/other_work.py: what the benchmark starts is its own, even detached;
every other process's CPU is other work, and makes a table not quotable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from benchmarks.other_work import MARK_ENV, OtherWork

from benchmarks import report

BUSY = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 30: pass"


def _busy(env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", BUSY], env=env)


def _stat_parent(pid: int) -> int | None:
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return None


def _used(work: OtherWork, seconds: float = 1.5) -> dict[int, int]:
    """CPU ticks each other process used over ``seconds``, by pid. Per process, so
    the suite's other work on the machine (its other workers) does not matter."""
    work.by_process()
    time.sleep(seconds)
    return {pid: ticks for (pid, _), ticks in work.by_process().items()}


def _bench_shell(prefix: str = "") -> tuple[subprocess.Popen[bytes], int]:
    """The "benchmark": a shell in a session of its own with a busy child
    (``prefix`` goes before it); the shell and the child's pid."""
    bench = subprocess.Popen(
        ["sh", "-c", f"{prefix}{sys.executable} -c '{BUSY}' & echo $!; sleep 30"],
        stdout=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    assert bench.stdout is not None
    return bench, int(bench.stdout.readline())


def test_the_benchmarks_own_processes_are_not_other_work() -> None:
    """The "benchmark" here is a shell; its busy child is its own, and so is a busy
    process outside its tree that carries its marker (a daemon it started that
    detached); a busy process of neither is other work."""
    token = f"test-{os.getpid()}-{time.time_ns()}"
    bench, child = _bench_shell()
    detached = _busy({**os.environ, MARK_ENV: token})
    stranger = _busy()
    try:
        time.sleep(0.3)
        used = _used(OtherWork(root=bench.pid, mark=token))
        assert used.get(child, 0) == 0  # the benchmark's busy child
        assert used.get(detached.pid, 0) == 0  # detached, with the marker
        assert used.get(stranger.pid, 0) > 0  # a busy process of neither
    finally:
        os.killpg(bench.pid, signal.SIGKILL)  # the shell and its busy child
        for proc in (bench, detached, stranger):
            proc.kill()
            proc.wait()


def test_other_work_decides_whether_a_table_is_quotable() -> None:
    """The load counts the benchmark's own work: with other work measured, a high
    load alone does not make a table not quotable, and other work does."""
    clean = report.Tree("abc123", False, "")
    cores = os.cpu_count() or 1
    for others, ok in (([0.01, 0.02, 0.0], True), ([0.01, 0.9, 0.9, 0.9, 0.0], False),
                       ([0.0] * 10 + [0.66] + [0.0] * 10, True),  # one second's breath
                       ([0.08, 0.08, 0.08], False)):  # fmt: skip
        values = iter([*others, 0.0])  # the last: the table's own moment
        sampler = report.LoadSampler(
            read=lambda: cores + 50.0, others=lambda values=values: next(values)
        )
        for _ in others:
            sampler.sample()
        line, quotable = report.provenance(tree=clean, load=sampler.summary())
        assert quotable is ok, line
        assert "Other work (every process outside the benchmark's" in line
        assert ("**Not quotable**" in line) is not ok


def test_a_process_of_the_benchmarks_stays_its_own_once_orphaned() -> None:
    """A killed Ray node leaves its sandboxes' processes to init: they were the
    benchmark's, and stay so; init's reaping of them is not other work either."""
    token = f"test-{os.getpid()}-{time.time_ns()}"
    # the "benchmark": a shell whose busy child (no marker) outlives it
    bench, orphan = _bench_shell(f"env -u {MARK_ENV} ")
    try:
        time.sleep(0.3)
        work = OtherWork(root=bench.pid, mark=token)
        assert _used(work, 0.5).get(orphan, 0) == 0
        bench.kill()  # the shell dies: its busy child goes to init
        bench.wait()
        time.sleep(0.2)
        assert _stat_parent(orphan) not in (None, bench.pid)  # alive, and orphaned
        assert _used(work).get(orphan, 0) == 0
    finally:
        os.killpg(bench.pid, signal.SIGKILL)
