"""benchmarks/report.py's rules: the load sampled over the whole run decides
whether a table is quotable; a dirty tree is refused unless allowed, and then
marked with its diff; every flag, seed and repetition is written down; and the
A/B helper alternates the sides and warms each up alike."""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from benchmarks import ab, report


def _git_repo(where: Path) -> Path:
    where.mkdir()

    def run(*a: str) -> None:
        subprocess.run(["git", "-C", str(where), *a], check=True, capture_output=True)

    run("init", "-q")
    (where / "code.py").write_text("x = 1\n")
    run("add", "code.py")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    return where


def _reader(values: list[float]) -> Iterator[float]:
    yield from values
    while True:
        yield values[-1]


def test_a_busy_middle_makes_the_table_not_quotable() -> None:
    """Quiet at the start and at the end, busy in between: the old start/end check
    passed such a run; the sampled one does not."""
    cores = os.cpu_count() or 1
    values = _reader([0.1, 0.2, cores + 5.0, 0.3, 0.1])
    sampler = report.LoadSampler(read=lambda: next(values))
    for _ in range(4):
        sampler.sample()
    load = sampler.summary()
    assert (load.first, load.last, load.high, load.low) == (0.1, 0.1, cores + 5.0, 0.1)
    assert load.median == 0.2
    assert load.count == 5
    assert report.quotable(load.first, load.last)  # what start and end alone would say
    clean = report.Tree("abc123", False, "")
    line, ok = report.provenance(tree=clean, load=load)
    assert not ok
    assert "**Not quotable**" in line
    assert f"max {cores + 5.0:.2f}" in line
    assert "median 0.20" in line
    assert "5 samples" in line
    quiet = report.LoadSampler(read=lambda: 0.1)
    quiet.sample()
    assert report.provenance(tree=clean, load=quiet.summary())[1]


def test_the_benchmarks_own_load_from_a_point_on_does_not_decide() -> None:
    """The density rows start a thousand sandboxes after every latency row: the load
    they raise is shown, and only the samples before them decide."""
    cores = os.cpu_count() or 1
    clean = report.Tree("abc123", False, "")
    for before, ok in ((0.5, True), (cores + 1.0, False)):
        values = _reader([0.2, before, cores + 40.0, cores + 90.0])
        sampler = report.LoadSampler(read=lambda values=values: next(values))
        sampler.sample()
        sampler.sample()
        sampler.own_load("1,024 live sandboxes")
        sampler.sample()
        load = sampler.summary()
        assert load.high == cores + 90.0
        line, quotable = report.provenance(tree=clean, load=load)
        assert quotable is ok
        assert "From its 1,024 live sandboxes on, the load is the benchmark's own" in line
        assert f"(max {max(0.2, before):.2f})" in line


def test_the_sampler_samples_in_the_background() -> None:
    n = iter(range(10**6))
    sampler = report.LoadSampler(period_s=0.01, read=lambda: float(next(n))).start()
    time.sleep(0.2)
    sampler.stop()
    assert len(sampler.samples) >= 5
    assert sampler.samples == sorted(sampler.samples)
    assert report.SAMPLER.samples, "the module's sampler started at import"


def test_a_dirty_tree_is_refused_unless_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(report.ALLOW_DIRTY_ENV, raising=False)
    repo = _git_repo(tmp_path / "repo")
    assert report.check_tree(repo=repo).dirty is False
    (repo / "code.py").write_text("x = 2\n")
    with pytest.raises(SystemExit) as stop:
        report.check_tree(repo=repo)
    assert stop.value.code == 2
    assert "--allow-dirty" in capsys.readouterr().err
    tree = report.check_tree(allow_dirty=True, repo=repo)
    assert tree.dirty
    assert "code.py" in tree.diff_stat
    monkeypatch.setenv(report.ALLOW_DIRTY_ENV, "1")
    assert report.check_tree(repo=repo).dirty


def _args(**kw: object) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--quick", action="store_true")
    report.add_rule_args(ap)
    return ap.parse_args([f"--{k.replace('_', '-')}" if v is True else f"--{k}={v}"
                          for k, v in kw.items()])  # fmt: skip


def test_the_table_records_flags_seeds_reps_run_and_the_dirty_diff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _git_repo(tmp_path / "repo")
    (repo / "code.py").write_text("x = 3\n")
    monkeypatch.setattr(report, "REPO", repo)
    monkeypatch.setenv(report.RESULTS_ENV, str(tmp_path / "out"))
    monkeypatch.setenv(report.RUN_ENV, "RUN42")
    monkeypatch.delenv(report.ALLOW_DIRTY_ENV, raising=False)
    args = _args(reps=5, seeds="3,4", quick=True, allow_dirty=True)
    report.report("t", "A table", ["a"], [["1"]], "a note", args=args)
    text = (tmp_path / "out" / "t.md").read_text()
    assert text.splitlines()[0] == report.RUN_MARK.format("RUN42")
    assert "## A table" in text
    assert "(dirty)" in text
    assert "--reps=5" in text
    assert "--quick" in text
    assert "--seeds=3,4" in text
    assert "Seeds: 3, 4." in text
    assert "Repetitions: 5." in text
    assert "**Dirty tree**" in text
    assert "code.py" in text
    assert "1 file changed" in text
    assert "median" in text
    assert "max" in text


def test_report_refuses_a_dirty_tree_without_the_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _git_repo(tmp_path / "repo")
    (repo / "code.py").write_text("x = 4\n")
    monkeypatch.setattr(report, "REPO", repo)
    monkeypatch.setenv(report.RESULTS_ENV, str(tmp_path / "out"))
    monkeypatch.delenv(report.ALLOW_DIRTY_ENV, raising=False)
    with pytest.raises(SystemExit) as stop:
        report.report("t", "A table", ["a"], [["1"]], args=_args())
    assert stop.value.code == 2
    assert not (tmp_path / "out" / "t.md").exists()


def test_interleave_alternates_and_warms_every_side_alike() -> None:
    calls: list[str] = []

    def side(name: str, value: int) -> Callable[[], int]:
        def run() -> int:
            calls.append(name)
            return value

        return run

    sides = [side("A", 1), side("B", 2)]
    got = ab.interleave(4, sides, warmup=2)
    assert calls[:4] == ["A", "B", "B", "A"]  # the warm-up, alternated too
    assert calls[4:] == ["A", "B", "B", "A", "A", "B", "B", "A"]
    assert got == [[1] * 4, [2] * 4]
    seen: list[tuple[str, int]] = []
    ab.interleave_reps(2, [lambda r: seen.append(("A", r)), lambda r: seen.append(("B", r))],
                       warmup=1)  # fmt: skip
    assert seen == [("A", -1), ("B", -1), ("B", 0), ("A", 0), ("A", 1), ("B", 1)]


def test_interleave_async_keeps_the_same_order_and_warm_up() -> None:
    calls: list[str] = []

    def side(name: str, value: int) -> Callable[[], Awaitable[int]]:
        async def run() -> int:
            calls.append(name)
            await asyncio.sleep(0)
            return value

        return run

    sides = [side("A", 1), side("B", 2), side("C", 3)]
    got = asyncio.run(ab.interleave_async(2, sides, warmup=1))
    assert calls == ["A", "B", "C", "C", "B", "A", "A", "B", "C"]  # warm-up, then on alternating
    assert got == [[1, 1], [2, 2], [3, 3]]
