"""The generated ``tasks/settings-kinds`` family: committed output matches its
generator, held-out packages and names are new, the demonstrations never repeat
a train issue and slip per kind, and in real sandboxes each kind's slip fails
where the right entry passes."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from types import ModuleType

from megaflow.datasets import load_instances
from megaflow.datasets.validate import grade_patches
from megaflow.environment.abstract import Runtime
from megaflow.train.warm_start import load_conversations
from tests.datasets.conftest import REPO_ROOT

FAMILY = REPO_ROOT / "tasks" / "settings-kinds"
KINDS = ("py", "json", "toml", "ini")


def _kinds() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kinds", FAMILY / "build" / "kinds.py")
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _meta(split: str) -> list[dict[str, object]]:
    return [
        (i.model_extra or {})["settings_kinds"] for i in load_instances(FAMILY / f"{split}.jsonl")
    ]


def _teacher() -> list[dict[str, object]]:
    return [json.loads(line)["teacher"] for line in (FAMILY / "demonstrations.jsonl").open()]


def test_committed_set_is_what_the_generator_writes() -> None:
    res = subprocess.run(
        [sys.executable, str(FAMILY / "build" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert res.returncode == 0, res.stderr


def test_held_out_packages_paths_and_names_occur_nowhere_else() -> None:
    held, train, demos = _meta("heldout"), _meta("train"), _teacher()
    for field in ("package", "path", "name"):
        seen = {m[field] for m in train} | {t[field] for t in demos}
        assert not {m[field] for m in held} & seen, field
    assert not {(m["package"], m["name"]) for m in held} & (
        {(m["package"], m["name"]) for m in train} | {(t["package"], t["name"]) for t in demos}
    )
    # ... while every word of them does, in other pairs
    words = {w for m in train for w in str(m["name"]).split("_")}
    assert {w for m in held for w in str(m["name"]).split("_")} <= words
    # every kind, evenly, in the held-out rounds (the first 32) and in training
    for metas in (held[:32], train):
        counts = [sum(m["kind"] == k for m in metas) for k in KINDS]
        assert min(counts) == max(counts), counts


def test_no_train_issue_is_a_demonstration_word_for_word() -> None:
    issues = {i.problem_statement for i in load_instances(FAMILY / "train.jsonl")}
    rows = load_conversations(FAMILY / "demonstrations.jsonl")
    assert len(rows) == 4000
    asked = {str(c[1]["content"]) for c in rows}
    assert not issues & asked
    assert len(issues) == 192


def test_the_teacher_slips_on_every_kind_in_that_kind_s_own_way() -> None:
    kinds = _kinds()
    rows = [json.loads(line) for line in (FAMILY / "demonstrations.jsonl").open()]
    for kind in KINDS:
        mine = [r for r in rows if r["teacher"]["kind"] == kind]
        share = sum(r["teacher"]["sloppy"] for r in mine) / len(mine)
        assert 0.63 < share < 0.77, (kind, share)
        for r in mine[:40]:
            t = r["teacher"]
            edit = json.loads(r["messages"][-1]["tool_calls"][0]["function"]["arguments"])
            assert edit["path"].endswith(f".{kind}")
            assert edit["old_str"] == kinds.edit_text(kind, t["name"], t["old"])
            right = kinds.edit_text(kind, t["name"], t["new"])
            assert edit["new_str"] == (
                kinds.slip(kind, t["name"], t["new"]) if t["sloppy"] else right
            )
    # a trailing comma is the slip in Python and the right answer in JSON
    assert kinds.slip("py", "A_B", 5).endswith(",")
    assert kinds.edit_text("json", "A_B", 5).endswith(",")


async def test_in_a_sandbox_gold_passes_and_each_kind_s_slip_fails(runtime: Runtime) -> None:
    kinds = _kinds()
    insts = load_instances(FAMILY / "heldout.jsonl")
    for kind in KINDS:
        inst = next(i for i in insts if (i.model_extra or {})["settings_kinds"]["kind"] == kind)
        m = (inst.model_extra or {})["settings_kinds"]
        slipped = inst.patch.replace(
            "+" + kinds.entry(kind, m["name"], m["new"]),
            "+"
            + kinds.entry(kind, m["name"], m["new"]).replace(
                str(m["new_str"]), kinds.slip(kind, m["name"], m["new"])
            ),
        )
        assert slipped != inst.patch, kind
        gold, slip, empty = await grade_patches(runtime, inst, [inst.patch, slipped, ""])
        assert (gold.resolved, slip.resolved, empty.resolved) == (True, False, False), kind
