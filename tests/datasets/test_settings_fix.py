"""The generated ``tasks/settings-fix`` family: committed output matches its
generator, the splits are disjoint, and instances grade in real sandboxes."""

from __future__ import annotations

import subprocess
import sys

from megaflow.datasets import load_instances, validate_instances
from megaflow.environment.abstract import Runtime
from tests.datasets.conftest import REPO_ROOT

FAMILY = REPO_ROOT / "tasks" / "settings-fix"
SPLITS = ("demo", "train", "heldout")


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

    assert not changes("heldout") & (changes("demo") | changes("train"))
    assert {c[0] for c in changes("heldout")} <= {c[0] for c in changes("demo")}

    # the warm start rarely sees the phrasings that name the new value first
    def new_first(split: str) -> float:
        ts = [(i.model_extra or {})["settings_fix"]["template"] for i in sets[split]]
        return sum(t >= 3 for t in ts) / len(ts)

    assert new_first("demo") < 0.1
    assert new_first("train") > 0.3
    assert new_first("heldout") > 0.3


async def test_gold_resolves_and_empty_does_not(runtime: Runtime) -> None:
    insts = [load_instances(FAMILY / f"{s}.jsonl")[k] for s in SPLITS for k in (0, 5)]
    report = await validate_instances(runtime, insts, concurrency=2)
    assert report.ok, [r.reason() for r in report.results if not r.ok]
    assert sorted(r.check for r in report.results) == ["empty"] * 6 + ["gold"] * 6
