"""`megaflow train --resume` after a SIGKILL: every planned prompt trained once."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from megaflow.app.training.plan import PromptPlan
from megaflow.datasets.loader import load_instances
from tests.train_loop.conftest import TASKS, train_config, write_config

pytestmark = pytest.mark.slow

STEP = re.compile(r"^step (\d+)/(\d+) ")


def _megaflow(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "megaflow.cli.main", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def _steps(lines: list[str]) -> list[int]:
    return [int(m.group(1)) for m in map(STEP.match, lines) if m]


def test_a_sigkilled_run_resumes_without_skipping_or_repeating_a_prompt(
    tmp_path: Path, policy: Path
) -> None:
    cfg = write_config(tmp_path, train_config(tmp_path, policy, steps=4, seed=7))
    first = _megaflow("train", str(cfg))
    assert first.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        line = first.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if _steps(lines[-1:]) == [2]:
            first.send_signal(signal.SIGKILL)  # mid-run: step 2 trained, maybe not saved
            break
    first.wait(30)
    assert first.returncode == -signal.SIGKILL, "\n".join(lines)
    run_id = re.search(r"train run (\S+):", "\n".join(lines))
    assert run_id is not None, lines
    assert _steps(lines) == [1, 2]

    second = subprocess.run(
        [sys.executable, "-m", "megaflow.cli.main", "train", str(cfg), "--resume", run_id[1]],
        capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    out = second.stdout.splitlines()
    assert second.returncode == 0, second.stdout + second.stderr
    resumed = _steps(out)
    assert resumed[0] in (2, 3), out  # after the checkpoint of step 1 or of step 2
    assert resumed == list(range(resumed[0], 5))
    assert f"resumed {run_id[1]} after step {resumed[0] - 1}" in second.stdout

    curve = json.loads((tmp_path / "out" / run_id[1] / "curve.json").read_text())
    ids = tuple(i.instance_id for i in load_instances(TASKS / "train.jsonl"))
    planned = PromptPlan(ids, prompts_per_step=2, steps=4, seed=7).sequence()
    trained = [p for s in curve["steps"] for p in s["prompts"]]
    assert [s["step"] for s in curve["steps"]] == [1, 2, 3, 4]
    assert trained == planned  # no gap, no repeat, in the planned order
    assert len(set(trained)) == len(trained)
    assert [s["weights_version"] for s in curve["steps"]] == [1, 2, 3, 4]
    assert [e["step"] for e in curve["evals"]] == [0, 4]  # before, and after the last step


def test_resume_of_a_run_without_checkpoint_is_a_clear_error(tmp_path: Path, policy: Path) -> None:
    cfg = write_config(tmp_path, train_config(tmp_path, policy))
    done = subprocess.run(
        [sys.executable, "-m", "megaflow.cli.main", "train", str(cfg), "--resume", "nope-1"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "has no checkpoint to resume from" in done.stderr
    assert "Traceback" not in done.stderr
