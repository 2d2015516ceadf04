"""Held-out task sets (``train.held_out`` as sets): a mixed train run whose held-out
split is a QA set graded by a ``python`` function beside a SWE-style set graded by the
run's ``swebench`` grader, through real sandboxes and the suite's small random policy
(its answers are wrong: this tests that each held-out sample reaches its set's grader
and that each set's figures reach the round's line and the curve)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from megaflow.app.training.intervals import pass_at_1
from megaflow.app.training.loop import TrainLoop
from megaflow.config import parse_config
from megaflow.datasets.loader import load_instances
from tests.train_loop.conftest import TASKS, train_config

pytestmark = pytest.mark.slow
TRAIN_FN = "tests.grading.rewards_for_tests.exact_match"
HELD_FN = "tests.train_loop.test_heldout_sets.held_out_reward"
SWE_HELD = f"swe.{load_instances(TASKS / 'heldout.jsonl')[0].instance_id}"


def held_out_reward(payload: dict[str, Any], answer: str) -> dict[str, float]:
    """Exact match, except a task marked ``any`` takes every answer; ``marker`` shows in
    the grade report that this function graded the sample."""
    right = bool(payload.get("any")) or answer.strip() == str(payload["answer"])
    return {"reward": float(right), "marker": 1.0}


def qa(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def mixed_with_held_out_sets(tmp: Path, policy: Path) -> dict[str, Any]:
    """A 1-step run on a SWE set and a QA set; held out: a QA set named like the train
    QA set but graded by its own function, and one settings-fix instance."""
    raw = train_config(
        tmp, policy, steps=1, prompts_per_step=2, eval_before=False, eval_samples=2,
        eval_greedy=True,
    )  # fmt: skip
    train_qa = [
        {"id": f"q{n}", "payload": {"problem_statement": f"What is 40 + {n}?", "answer": 40 + n}}
        for n in range(2)
    ]
    held_qa = [
        {"id": "h0", "payload": {"problem_statement": "Say anything.", "answer": "", "any": 1}},
        {"id": "h1", "payload": {"problem_statement": "What is 7 x 6?", "answer": 4242}},
    ]
    raw["train"]["sets"] = [
        {"name": "swe", "path": str(TASKS / "train.jsonl"), "weight": 1.0, "limit": 2},
        {
            "name": "qa", "type": "jsonl", "path": str(qa(tmp / "qa.jsonl", train_qa)),
            "grading": {"type": "python", "function": TRAIN_FN},
        },
    ]  # fmt: skip
    raw["train"]["held_out"] = [
        {
            "name": "qa", "type": "jsonl", "path": str(qa(tmp / "held.jsonl", held_qa)),
            "grading": {"type": "python", "function": HELD_FN, "on": "message"},
        },
        {"name": "swe", "path": str(TASKS / "heldout.jsonl"), "limit": 1},
    ]  # fmt: skip
    return raw


async def test_held_out_sets_are_graded_by_their_own_graders_with_per_set_figures(
    tmp_path: Path, policy: Path
) -> None:
    lines: list[str] = []
    raw = mixed_with_held_out_sets(tmp_path, policy)
    curve = await TrainLoop(parse_config(raw), run_id="hos", printer=lines.append).run()
    reports: dict[str, list[dict[str, Any]]] = {}
    for f in (tmp_path / "art").rglob("grade.json"):
        group = f.parents[2].name  # <incarnation>.e00001.<set>.<task>/<n>/attempt-1
        if ".e0000" in group:
            task = group.split(".e00001", 1)[1].removeprefix("g").removeprefix(".")  # greedy too
            reports.setdefault(task, []).append(json.loads(f.read_text()))
    assert sorted(reports) == ["qa.h0", "qa.h1", SWE_HELD]
    for key in ("qa.h0", "qa.h1"):  # all 3 samples by the held-out set's own function
        assert len(reports[key]) == 3
        assert all(r["grader"] == "python" and "marker" in r["rewards"] for r in reports[key])
    assert [r["reward"] for r in reports["qa.h0"]] == [1.0] * 3  # 'any' takes every answer
    assert [r["reward"] for r in reports["qa.h1"]] == [0.0] * 3  # the answer is wrong
    assert all("grader" not in r for r in reports[SWE_HELD])  # swebench
    (point,) = curve.evals
    assert point.sets is not None
    assert list(point.sets) == ["qa", "swe"]
    # the random policy's episodes end without a submission, the agent's own failure, so
    # every sample's reward is 0 whatever its grade; each set's interval is its own
    # prompts' (2 for qa, 1 for swe), the overall one all 3 prompts'
    for name, prompts, samples in (("qa", 2, 4), ("swe", 1, 2)):
        fig, est = point.sets[name], pass_at_1([[0.0, 0.0]] * prompts)
        assert (fig["samples"], fig["masked"], fig["reward_mean"]) == (samples, 0, 0.0)
        assert (fig["ci_low"], fig["ci_high"]) == (est.low, est.high)
        assert (fig["greedy"], fig["greedy_samples"]) == (0.0, prompts)  # one greedy each
        assert fig["pass_at_k"] == 0.0
        assert fig["malformed"] is not None
    assert point.sets["qa"]["ci_high"] != point.sets["swe"]["ci_high"]
    overall = pass_at_1([[0.0, 0.0]] * 3)
    assert (point.samples, point.reward_mean, point.ci_high) == (6, 0.0, overall.high)
    assert set(point.per_prompt) == {"qa.h0", "qa.h1", SWE_HELD}
    (line,) = [x for x in lines if x.startswith("held-out reward after step 1")]
    qa_high, swe_high = point.sets["qa"]["ci_high"], point.sets["swe"]["ci_high"]
    assert line.endswith(
        f"  sets qa 0.000 [0.000, {qa_high:.3f}] n 4 greedy 0.000"
        f"  swe 0.000 [0.000, {swe_high:.3f}] n 2 greedy 0.000"
    ), line
    written = json.loads((tmp_path / "out" / "hos" / "curve.json").read_text())
    assert written["evals"][0]["sets"] == point.sets  # in the exported curve
