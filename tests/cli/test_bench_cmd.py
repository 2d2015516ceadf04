"""`megaflow bench`: RESULTS.md written whole from one run's own tables, and a
dirty tree refused unless --allow-dirty."""

from __future__ import annotations

import subprocess
from pathlib import Path

from typer.testing import CliRunner

from megaflow.cli.main import app

runner = CliRunner()

SCRIPT = """
import os, pathlib
out = pathlib.Path(os.environ["MEGAFLOW_BENCH_RESULTS"])
run = os.environ["MEGAFLOW_BENCH_RUN"]
dirty = os.environ.get("MEGAFLOW_BENCH_ALLOW_DIRTY", "0")
(out / "ok.md").write_text(f"<!-- megaflow bench run: {run} -->\\n## ours dirty={dirty}\\n")
(out / "spliced.md").write_text("## a table pasted in by hand\\n")
"""


def _bench_dir(tmp_path: Path) -> Path:
    d = tmp_path / "benchmarks"
    d.mkdir()
    (d / "bench_ok.py").write_text(SCRIPT)
    return d


def test_results_hold_only_this_runs_tables(tmp_path: Path) -> None:
    d = _bench_dir(tmp_path)
    res = runner.invoke(app, ["bench", "ok", "--settle-s", "0", "--bench-dir", str(d)])
    assert res.exit_code == 0, res.output
    text = (d / "RESULTS.md").read_text()
    assert "## ours dirty=0" in text
    assert "a table pasted in by hand" not in text
    assert "Left out, not written by this run: spliced.md" in text
    assert sorted(p.name for p in (d / "results").glob("*.md")) == ["ok.md"]


def test_a_dirty_tree_is_refused_unless_allowed(tmp_path: Path) -> None:
    d = _bench_dir(tmp_path)

    def git(*a: str) -> None:
        subprocess.run(["git", "-C", str(d), *a], check=True, capture_output=True)

    git("init", "-q")
    git("add", "bench_ok.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    (d / "bench_ok.py").write_text(SCRIPT + "\n# changed\n")
    res = runner.invoke(app, ["bench", "ok", "--settle-s", "0", "--bench-dir", str(d)])
    assert res.exit_code == 2
    assert "--allow-dirty" in " ".join(res.output.split())
    assert not (d / "RESULTS.md").exists()
    res = runner.invoke(
        app, ["bench", "ok", "--settle-s", "0", "--bench-dir", str(d), "--allow-dirty"]
    )
    assert res.exit_code == 0, res.output
    text = (d / "RESULTS.md").read_text()
    assert "## ours dirty=1" in text
    assert "**Dirty tree**" in text
    assert "bench_ok.py" in text
