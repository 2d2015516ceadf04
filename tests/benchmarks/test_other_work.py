"""benchmarks/other_work.py: what the benchmark starts is its own, even detached;
every other process's CPU is other work, and makes a table not quotable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from benchmarks.other_work import MARK_ENV, OtherWork

from benchmarks import other_work, report

BUSY = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 30: pass"


def _idle() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])


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


def test_a_detached_process_naming_a_claimed_path_is_the_benchmarks_own(tmp_path: Path) -> None:
    """Podman starts each container's conmon detached (its parent init) with an
    environment of its own: no marker, no ancestor of the benchmark's. It names
    the benchmark's storage folder on its command line, which the benchmark
    claims; before the claim it is other work, after it not."""
    folder = str(tmp_path / "podman-root")
    token = f"test-{os.getpid()}-{time.time_ns()}"
    # double fork, as conmon's start: the busy process's parent is init at once
    line = f"{sys.executable} -c '{BUSY}' --root {folder} >/dev/null 2>&1 & echo $!"
    launch = subprocess.run(
        ["/bin/sh", "-c", line],
        capture_output=True, text=True, check=True, env={}, start_new_session=True,
    )  # fmt: skip
    daemon = int(launch.stdout.split()[0])
    try:
        time.sleep(0.3)
        assert _stat_parent(daemon) == 1
        work = OtherWork(mark=token)
        assert _used(work).get(daemon, 0) > 0  # not claimed: other work
        work.claim(folder)
        assert _used(work).get(daemon, 0) == 0
    finally:
        os.kill(daemon, signal.SIGKILL)


def test_an_orphan_first_seen_dead_is_left_to_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """A conmon that lives under a second may first be seen as a zombie whose
    parent is init: no environment or command line is left to ask, and init,
    whose reaped children are not counted, takes its CPU next. It is not other
    work; an orphan seen alive as other work stays other work as it ends. (The
    busy processes here are alive: :func:`other_work._stat` is made to report
    them dead and orphaned, which cannot be arranged for real in time.)"""
    token = f"test-{os.getpid()}-{time.time_ns()}"
    seen_dead, seen_alive = _busy(), _busy()
    bench = _idle()  # the "benchmark": neither is its own
    dead: set[int] = {seen_dead.pid}
    real = other_work._stat

    def stat(pid: int) -> tuple[int, int, int, int, bool] | None:
        got = real(pid)
        if got is None or pid not in dead:
            return got
        return 1, got[1], got[2], got[3], True

    monkeypatch.setattr(other_work, "_stat", stat)
    try:
        time.sleep(0.3)
        work = OtherWork(root=bench.pid, mark=token)
        used = _used(work)
        assert used.get(seen_dead.pid, 0) == 0  # first seen dead, orphaned
        assert used.get(seen_alive.pid, 0) > 0  # a stranger, alive
        dead.add(seen_alive.pid)
        assert _used(work).get(seen_alive.pid, 0) > 0  # still a stranger as it ends
    finally:
        for proc in (seen_dead, seen_alive, bench):
            proc.kill()
            proc.wait()


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / other_work.TICKS


def test_a_command_reaped_during_the_run_counts_only_what_it_used_since() -> None:
    """A shell (the one that started the benchmark, say) reaps a command that
    began before the run: its CPU reaches the shell's whole at that moment. Only
    what it used since the run began is other work, not its whole life."""
    token = f"test-{os.getpid()}-{time.time_ns()}"
    burn = "import time\nwhile time.process_time() < 1.5: pass"
    shell = subprocess.Popen(["sh", "-c", f"{sys.executable} -c '{burn}'; sleep 30"])
    bench = _idle()  # the "benchmark": the shell is a stranger
    try:
        kids = Path(f"/proc/{shell.pid}/task/{shell.pid}/children")
        while not (children := kids.read_text().split()):
            time.sleep(0.01)
        command = int(children[0])
        while _cpu_s(command) < 1.1:  # most of its 1.5 s used before the run
            time.sleep(0.02)
        work = OtherWork(root=bench.pid, mark=token)
        while os.path.exists(f"/proc/{command}"):  # reaped by the shell
            time.sleep(0.05)
        counted = sum(t for (pid, _), t in work.by_process().items() if pid in (shell.pid, command))
        assert counted / other_work.TICKS < 0.9, counted  # its last ~0.4 s, not 1.5
    finally:
        for proc in (shell, bench):
            proc.kill()
            proc.wait()


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_a_tree_reaped_within_one_interval_is_counted_once() -> None:
    """A stranger shell's command waits for its busy worker and exits at once:
    the worker's CPU reaches the command's, and both reach the shell's, within
    one interval. It was counted while the worker ran, and must not be again."""
    token = f"test-{os.getpid()}-{time.time_ns()}"
    burn = "import time\nwhile time.process_time() < 1.0: pass"
    command = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {burn!r}])\n"
    shell = subprocess.Popen(["/bin/sh", "-c", f'{sys.executable} -c "{command}"; read x'],
                             stdin=subprocess.PIPE)  # fmt: skip
    bench = _idle()
    try:
        work = OtherWork(root=bench.pid, mark=token)
        tree, counted = {shell.pid}, 0
        while True:  # sampled while the worker runs, as the benchmark's sampler does
            time.sleep(0.2)
            below = _children(shell.pid)
            tree |= {*below, *(g for c in below for g in _children(c))}
            counted += sum(t for (pid, _), t in work.by_process().items() if pid in tree)
            if len(tree) > 1 and not below:  # the command ran and was reaped
                break
        time.sleep(0.3)
        counted += sum(t for (pid, _), t in work.by_process().items() if pid in tree)
        assert counted / other_work.TICKS < 1.6, counted  # the worker's 1 s once, not twice
    finally:
        for proc in (shell, bench):
            proc.kill()
            proc.wait()
