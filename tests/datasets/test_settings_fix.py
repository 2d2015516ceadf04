"""The generated ``tasks/settings-fix`` family: committed output matches its
generator, the splits are disjoint, the demonstrations read before they edit
and avoid the held-out packages and constants, and instances grade in real
sandboxes."""

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

    # every held-out change is new: its package and constant occur in no train instance
    # (tests/train_loop/test_quickstart_family.py checks the demonstrations too)
    def metas(split: str) -> list[dict[str, object]]:
        return [(i.model_extra or {})["settings_fix"] for i in sets[split]]

    for key in ("package", "name"):
        assert not {m[key] for m in metas("heldout")} & {m[key] for m in metas("train")}, key

    # both splits use every phrasing
    for split in SPLITS:
        assert {m["template"] for m in metas(split)} == set(range(6)), split


def test_demonstrations_read_first_and_most_copy_the_next_line() -> None:
    rows = [json.loads(line) for line in (FAMILY / "demonstrations.jsonl").open()]
    assert len(load_conversations(FAMILY / "demonstrations.jsonl")) == len(rows)
    held = {
        (m["path"], m["name"])
        for m in (
            (i.model_extra or {})["settings_fix"] for i in load_instances(FAMILY / "heldout.jsonl")
        )
    }
    taught = {(t["path"], t["name"]) for t in (r["teacher"] for r in rows)}
    assert not held & taught
    sloppy = [r["teacher"]["sloppy"] for r in rows]
    assert 0.65 < sum(sloppy) / len(sloppy) < 0.75
    for row in rows[:50]:
        read, answer = row["messages"][2], row["messages"][4]
        t = row["teacher"]
        assert json.loads(read["tool_calls"][0]["function"]["arguments"]) == {"path": t["path"]}
        edit = json.loads(answer["tool_calls"][0]["function"]["arguments"])
        assert f"{t['name']} = {t['old']}\n" in row["messages"][3]["content"]
        assert edit["old_str"] == f"{t['name']} = {t['copied']}"
        assert edit["new_str"] == f"{t['name']} = {t['new']}"
        assert (t["copied"] == t["old"]) is not t["sloppy"]


async def test_gold_resolves_and_empty_does_not(runtime: Runtime) -> None:
    insts = [load_instances(FAMILY / f"{s}.jsonl")[k] for s in SPLITS for k in (0, 5)]
    report = await validate_instances(runtime, insts, concurrency=2)
    assert report.ok, [r.reason() for r in report.results if not r.ok]
    assert sorted(r.check for r in report.results) == ["empty"] * 4 + ["gold"] * 4
