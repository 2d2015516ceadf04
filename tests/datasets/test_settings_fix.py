"""The generated ``tasks/settings-fix`` family: committed output matches its
generator, the splits are disjoint, the demonstrations avoid the held-out
changes, and instances grade in real sandboxes."""

from __future__ import annotations

import json
import subprocess
import sys

from megaflow.datasets import load_instances, validate_instances
from megaflow.environment.abstract import Runtime
from megaflow.train.warm_start import load_conversations
from tests.datasets.conftest import REPO_ROOT

FAMILY = REPO_ROOT / "tasks" / "settings-fix"
SPLITS = ("train", "heldout")


def test_committed_set_is_what_the_generator_writes() -> None:
    res = subprocess.run(
        [sys.executable, str(FAMILY / "build" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert res.returncode == 0, res.stderr


def test_splits_share_no_instance_and_no_repository() -> None:
    sets = {s: load_instances(FAMILY / f"{s}.jsonl") for s in SPLITS}
    repos = {s: {i.repo for i in insts} for s, insts in sets.items()}
    ids = {s: {i.instance_id for i in insts} for s, insts in sets.items()}
    for a in SPLITS:
        for b in SPLITS:
            if a < b:
                assert not repos[a] & repos[b], (a, b)
                assert not ids[a] & ids[b], (a, b)

    # every held-out change is a new combination of a package, constant and values
    def changes(split: str) -> set[tuple[object, ...]]:
        metas = [(i.model_extra or {})["settings_fix"] for i in sets[split]]
        return {(m["path"], m["name"], m["old"], m["new"]) for m in metas}

    assert not changes("heldout") & changes("train")
    assert {c[0] for c in changes("heldout")} <= {c[0] for c in changes("train")}

    # both splits phrase many issues with the new value first
    for split in SPLITS:
        ts = [(i.model_extra or {})["settings_fix"]["template"] for i in sets[split]]
        assert sum(t >= 3 for t in ts) / len(ts) > 0.3, split


def test_demonstrations_never_answer_a_held_out_issue_and_most_are_sloppy() -> None:
    rows = [json.loads(line) for line in (FAMILY / "demonstrations.jsonl").open()]
    assert len(load_conversations(FAMILY / "demonstrations.jsonl")) == len(rows)
    held = {
        (m["path"], m["name"], m["old"], m["new"])
        for m in (
            (i.model_extra or {})["settings_fix"] for i in load_instances(FAMILY / "heldout.jsonl")
        )
    }
    taught = {(t["path"], t["name"], t["old"], t["new"]) for t in (r["teacher"] for r in rows)}
    assert not held & taught
    assert {h[0] for h in held} <= {t[0] for t in taught}
    sloppy = [r["teacher"]["sloppy"] for r in rows]
    assert 0.65 < sum(sloppy) / len(sloppy) < 0.75
    for row in rows[:50]:
        edit = json.loads(row["messages"][-1]["tool_calls"][0]["function"]["arguments"])
        t = row["teacher"]
        assert edit["old_str"] == f"{t['name']} = {t['old']}"
        assert (edit["new_str"] == f"{t['name']} = {t['new']}") is not t["sloppy"]


async def test_gold_resolves_and_empty_does_not(runtime: Runtime) -> None:
    insts = [load_instances(FAMILY / f"{s}.jsonl")[k] for s in SPLITS for k in (0, 5)]
    report = await validate_instances(runtime, insts, concurrency=2)
    assert report.ok, [r.reason() for r in report.results if not r.ok]
    assert sorted(r.check for r in report.results) == ["empty"] * 4 + ["gold"] * 4
