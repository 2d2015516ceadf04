"""A train run whose ``train.sets`` are a Harbor set and a QA set needs no ``tasks``.

The run trains on a Harbor folder (its verifier run by the ``script`` grader in
a fresh container) and a JSONL QA set (a ``python`` reward), holds out a QA
set, and has no top-level ``tasks`` at all: the sets are its prompts. It runs
on the container runtime of the test Podman service (Harbor's ``/logs`` needs
a writable root) with the suite's small random policy, whose episodes end
without an answer: this tests that such a run is accepted, plans from its
sets and completes, not that it learns.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from megaflow.app.training.loop import TrainLoop
from megaflow.config import parse_config
from tests.train_loop.conftest import train_config

pytestmark = [pytest.mark.container, pytest.mark.slow]
FN = "tests.grading.rewards_for_tests.exact_match"
VERIFIER = """#!/bin/sh
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = "{answer}" ]; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""


def harbor_folder(root: Path, image: str, n: int = 2) -> Path:
    """``n`` Harbor tasks in ``image`` (no build): write a number to /app/answer.txt."""
    for i in range(n):
        task = root / f"write-{i}"
        (task / "tests").mkdir(parents=True)
        (task / "task.toml").write_text(
            f'[verifier]\ntimeout_sec = 60.0\n[environment]\ndocker_image = "{image}"\n'
        )
        (task / "instruction.md").write_text(f"Write {40 + i} to /app/answer.txt.\n")
        (task / "tests" / "test.sh").write_text(VERIFIER.format(answer=40 + i))
    return root


def qa_file(path: Path, first: int, n: int) -> Path:
    rows = [
        {"id": f"q{k}", "payload": {"problem_statement": f"What is 40 + {k}?", "answer": 40 + k}}
        for k in range(first, first + n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def sets_only(tmp: Path, policy: Path, url: str, image: str) -> dict[str, Any]:
    """A 2-step run on a Harbor set and a QA set, a QA set held out, and no ``tasks``."""
    raw = train_config(tmp, policy, steps=2, prompts_per_step=2, eval_before=False)
    del raw["tasks"]
    raw["environment"] = {
        "runtime": {
            "type": "container", "base_url": url, "host_image": image,
            "namespace": f"tl-sets-{os.urandom(3).hex()}",
        },
    }  # fmt: skip
    raw["scheduler"]["max_concurrency"] = 4
    graded = {"type": "python", "function": FN}
    raw["train"]["sets"] = [
        {"name": "harbor", "type": "harbor", "path": str(harbor_folder(tmp / "hb", image))},
        {"name": "qa", "type": "jsonl", "path": str(qa_file(tmp / "qa.jsonl", 0, 2)),
         "grading": graded},
    ]  # fmt: skip
    raw["train"]["held_out"] = {
        "name": "qa", "type": "jsonl", "path": str(qa_file(tmp / "held.jsonl", 10, 1)),
        "grading": graded,
    }  # fmt: skip
    return raw


async def test_harbor_and_qa_sets_train_without_tasks(
    tmp_path: Path, policy: Path, podman_service: Any
) -> None:
    raw = sets_only(tmp_path, policy, podman_service.url, podman_service.image)
    cfg = parse_config(raw)
    assert cfg.tasks is None
    lines: list[str] = []
    curve = await TrainLoop(cfg, run_id="notasks", printer=lines.append).run()
    steps = [line for line in lines if line.startswith("step ")]
    assert len(steps) == 2, lines
    for point in curve.steps:  # one prompt of each set every step, both sets' figures
        assert point.sets is not None
        assert {n: f["samples"] for n, f in point.sets.items()} == {"harbor": 2, "qa": 2}
        assert sorted(p.split(".")[0] for p in point.prompts) == ["harbor", "qa"]
    graders: dict[str, set[str]] = {}
    for f in (tmp_path / "art").rglob("grade.json"):
        group = f.parents[2].name  # <round>.<set>.<task>/<n>/attempt-1
        kind = "held" if ".e0000" in group else group.split(".")[2]
        graders.setdefault(kind, set()).add(json.loads(f.read_text()).get("grader", "swebench"))
    # the Harbor tasks by their verifier in a container, the QA ones by the function
    assert graders == {"harbor": {"script"}, "qa": {"python"}, "held": {"python"}}
    (point,) = curve.evals
    assert point.step == 2
    assert point.sets is not None
    assert point.sets["qa"]["samples"] == 1
    written = json.loads((tmp_path / "out" / "notasks" / "curve.json").read_text())
    assert len(written["steps"]) == 2
