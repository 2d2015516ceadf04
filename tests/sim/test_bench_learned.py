"""The test split's figures regenerate from one command: ``bench_learned.py --split test``
writes a table with every test family and every policy and reference, and the same
command gives the same simulated figures again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from megaflow.sim.families import TEST_FAMILIES

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_learned.py"
POLICIES = ("fifo", "priority", "fair", "learned", "(ref) learned, no wait bound",
            "(ref) expected-work order", "(ref) clairvoyant shortest-first",
            "(ref) preemptive SRPT, pooled")  # fmt: skip


def _run(out: Path) -> list[str]:
    # the table goes to tmp; a working tree with changes must not stop the command
    env = {**os.environ, "MEGAFLOW_BENCH_RESULTS": str(out), "MEGAFLOW_BENCH_ALLOW_DIRTY": "1"}
    args = ["--split", "test", "--seeds", "1", "--tasks", "150", "--samples", "20", "--jobs", "1"]
    subprocess.run([sys.executable, str(BENCH), *args], env=env, check=True,
                   capture_output=True, timeout=600)  # fmt: skip
    text = (out / "learned-test.md").read_text()
    section = text[text.index("### Test families") :]
    return [line for line in section.splitlines() if line.startswith("|")]


@pytest.mark.slow
def test_the_test_split_regenerates_from_one_command(tmp_path: Path) -> None:
    rows = _run(tmp_path / "a")
    families = [r.split("|")[1].strip().split(" ")[0] for r in rows[2:] if r.split("|")[1].strip()]
    assert families == list(TEST_FAMILIES)
    assert [r.split("|")[2].strip() for r in rows[2:]] == list(POLICIES) * len(TEST_FAMILIES)
    assert rows == _run(tmp_path / "b")  # simulated time: the same figures every run


def test_publish_replaces_the_learned_section_alone(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH.parent))
    try:
        from bench_learned import SECTION, publish
    finally:
        sys.path.remove(str(BENCH.parent))
    table = tmp_path / "learned.md"
    table.write_text(f"{SECTION} (dirty)\n\nMeasured now.\n\n| a |\n|---|\n| 2 |\n")
    results = tmp_path / "RESULTS.md"
    results.write_text(f"# Results\n\n## Before\n\nkept\n\n{SECTION}\n\nstale | 1 |\n\n"
                       "## After\n\nkept too\n")  # fmt: skip
    publish(table, results)
    text = results.read_text()
    assert "stale" not in text
    assert text.count(SECTION) == 1
    assert (
        text.index("## Before") < text.index(SECTION) < text.index("| 2 |") < text.index("## After")
    )
    assert "kept\n" in text
    assert "kept too" in text
    assert "bench_learned.py --publish" in text
    publish(table, results)  # again: the same file
    assert results.read_text() == text
    table.write_text("no section here\n")
    with pytest.raises(SystemExit, match="no '## Learned"):
        publish(table, results)
