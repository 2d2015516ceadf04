"""``megaflow sandbox shell | ls | gc`` against real local sandboxes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.environment.local import records
from tests.environment.conftest import leak_check  # noqa: F401 - autouse leak check


def test_shell_runs_lines_in_a_sandbox(tmp_path: Path) -> None:
    root = tmp_path / "local"
    script = "echo hi from $(hostname)\ncd /tmp\npwd\nls -A /root | wc -l\nexit 3\nexit\n"
    result = CliRunner().invoke(app, ["sandbox", "shell", "--root", str(root)], input=script)
    assert result.exit_code == 0, result.output
    assert "hi from sandbox" in result.output
    assert "/tmp\n" in result.output
    assert list((root / "boxes").iterdir()) == []


def test_shell_rejects_a_bad_spec(tmp_path: Path) -> None:
    bad = tmp_path / "spec.yaml"
    bad.write_text("network: sideways\n")
    result = CliRunner().invoke(app, ["sandbox", "shell", str(bad), "--root", str(tmp_path)])
    assert result.exit_code == 2
    assert "network" in result.output


def test_ls_shows_orphans_and_gc_removes_them(tmp_path: Path) -> None:
    root = tmp_path / "local"
    crash = textwrap.dedent(f"""
        import asyncio, os
        from megaflow.environment.abstract import EnvironmentSpec
        from megaflow.environment.config import LocalRuntimeConfig
        from megaflow.environment.local import LocalRuntime
        async def main():
            rt = LocalRuntime(LocalRuntimeConfig(root={str(root)!r}))
            await rt.start()
            await rt.create(EnvironmentSpec(), owner="crashed-task")
            os._exit(9)
        asyncio.run(main())
    """)
    subprocess.run([sys.executable, "-c", crash], check=False)
    listed = CliRunner().invoke(app, ["sandbox", "ls", "--root", str(root)])
    assert listed.exit_code == 0
    assert "crashed-task" in listed.output
    assert "orphan" in listed.output
    gc = CliRunner().invoke(app, ["sandbox", "gc", "--root", str(root), "--images"])
    assert gc.exit_code == 0, gc.output
    assert "removed 1 orphaned" in gc.output
    assert list((root / "boxes").iterdir()) == []


def test_ls_and_gc_of_directories_cut_short_while_made_or_removed(tmp_path: Path) -> None:
    boxes = tmp_path / "local" / "boxes"
    for name, sid in ((f"{records.NEW}999999999.1-abc", "abc"), (f"{records.GONE}def", "def")):
        (boxes / name).mkdir(parents=True)
        now = time.time()
        records.SandboxRecord(sid, "cut", now + 600, now, "host", "999999999.1").save(boxes / name)
    listed = CliRunner().invoke(app, ["sandbox", "ls", "--root", str(boxes.parent)])
    assert listed.exit_code == 0, listed.output
    states = {line.split()[0]: line.split()[2] for line in listed.output.splitlines()[1:]}
    assert states == {"abc": "making,orphan", "def": "removing,orphan"}
    gc = CliRunner().invoke(app, ["sandbox", "gc", "--root", str(boxes.parent)])
    assert gc.exit_code == 0, gc.output
    assert list(boxes.iterdir()) == []


def _reap(pid: int, out: bytes) -> int:
    """Wait for the CLI to exit; kill it (and fail) if it hangs, so the test
    never blocks the suite."""
    import os
    import signal

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    os.kill(pid, signal.SIGTERM)
    time.sleep(2)
    if os.waitpid(pid, os.WNOHANG)[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    raise pytest.fail.Exception(f"megaflow sandbox shell did not exit; it printed: {out[-2000:]!r}")


def test_shell_on_a_real_terminal(tmp_path: Path) -> None:
    """Run the CLI on a pseudo-terminal, as a person would, and type into it."""
    import os
    import pty
    import select

    megaflow = Path(sys.executable).with_name("megaflow")
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(str(megaflow), [str(megaflow), "sandbox", "shell", "--root", str(tmp_path)])
    out = b""
    typed = False
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if not typed and b"leaves" in out:
                os.write(fd, b"echo $((6*7)); tty\nexit 5\n")
                typed = True
    finally:
        status = _reap(pid, out)
        os.close(fd)
    assert b"42" in out, out
    assert b"/dev/pts/" in out
    assert os.waitstatus_to_exitcode(status) == 0
    assert list((tmp_path / "boxes").iterdir()) == []
