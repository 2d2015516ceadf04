"""The warm start `make run` begins with (`python -m megaflow.app.training.quickstart`)
says what it does before the first step and reports the first step at once, so a
loaded machine does not leave it silent for a minute."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_the_warm_start_reports_each_phase_and_its_first_step(tmp_path: Path) -> None:
    out = tmp_path / "policy"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    started = time.monotonic()
    proc = subprocess.Popen(
        # settings-fix: a family without a copy bar, so 3 steps make a policy
        [sys.executable, "-m", "megaflow.app.training.quickstart", str(out), "--sft-steps", "3",
         "--tasks", "tasks/settings-fix"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    seen: list[tuple[float, str]] = []
    for line in proc.stdout:
        seen.append((time.monotonic() - started, line.strip()))
    assert proc.wait(timeout=600) == 0, seen
    lines = [text for _, text in seen if text.startswith("warm start:")]
    assert lines[0].startswith("warm start: building the tokenizer and policy from ")
    assert lines[1].startswith("warm start: 3 steps on ")
    assert lines[2].startswith("warm start: step 1/3, loss ")  # the first step, at once
    assert lines[3].startswith("warm start: step 3/3, loss ")
    assert lines[4].startswith("warm start: 3 steps, loss ")
    assert (out / "config.json").is_file()
