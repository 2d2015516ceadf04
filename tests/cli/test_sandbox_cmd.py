"""``megaflow sandbox shell | ls | gc`` against real local sandboxes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from typer.testing import CliRunner

from megaflow.cli.main import app
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
