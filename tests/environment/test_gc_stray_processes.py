"""``megaflow sandbox gc`` reports the stray sandbox processes it killed.

A MegaFlow process killed while a sandbox started can leave that sandbox's
processes outside every sandbox directory and cgroup; only the marker sweep
finds them. gc used to end them but report "removed 0", as if nothing had
been left: it now says how many it killed, apart from the sandboxes removed.

The strays and the gc run in a pid namespace of their own: the sweep counts
only its own namespace's markers, so no other test's sweep on the host can
take (or add to) the count.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent("""
    import subprocess, sys
    from typer.testing import CliRunner
    from megaflow.cli.main import app
    from megaflow.environment.local import sweep

    def stray(sandbox_id):
        env = {sweep.MARKER: f"{sweep.pid_namespace()}/999999999.1/{sandbox_id}"}
        code = "import time; print('up', flush=True); time.sleep(120)"
        p = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE)
        assert p.stdout.readline() == b"up\\n"
        return p

    left = [stray("abc"), stray("def")]
    for _ in range(2):
        gc = CliRunner().invoke(app, ["sandbox", "gc", "--root", sys.argv[1]])
        print(f"exit {gc.exit_code}: {gc.output}", flush=True)
    print("strays ended:", [p.wait(10) for p in left])
""")


def _counts(output: str) -> list[tuple[int, int, int]]:
    """(exit code, sandboxes removed, processes killed) of each gc."""
    pattern = r"exit (\d+): removed (\d+) orphaned sandbox\(es\); killed (\d+) stray sandbox"
    return [(int(a), int(b), int(c)) for a, b, c in re.findall(pattern, output)]


def test_gc_counts_the_processes_the_sweep_killed(tmp_path: Path) -> None:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.fail("unshare (util-linux) is needed for a pid namespace of the test's own")
    done = subprocess.run(
        [unshare, "--pid", "--fork", "--mount-proc", sys.executable, "-c", SCRIPT,
         str(tmp_path / "local")],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # the first gc removed no sandbox (none was left) and killed both strays; the second, nothing
    assert _counts(done.stdout) == [(0, 0, 2), (0, 0, 0)], done.stdout
    assert "strays ended: [-9, -9]" in done.stdout
