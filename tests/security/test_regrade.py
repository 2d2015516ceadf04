"""The reward is a function of the stored patch: grading it again gives it back.

Also ``megaflow grade``: the bundled task set's gold predictions resolve
every instance and its empty predictions none, in SWE-bench's report layout.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.datasets.loader import load_instances
from megaflow.datasets.validate import grade_patch
from megaflow.environment.config import LocalRuntimeConfig
from megaflow.environment.factory import make_runtime
from tests.security.attack import EVIL_PLUGIN, stored_results

REPO = Path(__file__).resolve().parents[2]
MINI_SWE = REPO / "tasks" / "mini-swe"
runner = CliRunner()

pytestmark = pytest.mark.slow


def _run(tmp: Path, model: dict[str, object], limit: int) -> None:
    cfg = {
        "name": "regrade",
        "tasks": {"type": "swebench", "path": str(MINI_SWE), "limit": limit},
        "model": model,
        "control": {"model": {"type": "replay", "play": "empty"}},
        "max_attempts": 1,
        "environment": {"runtime": {"type": "local", "root": str(tmp / "sb")}},
        "storage": {
            "metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
            "artifacts": {"type": "local", "root": str(tmp / "art")},
        },
    }
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "c.yaml").write_text(yaml.safe_dump(cfg))
    res = runner.invoke(app, ["run", str(tmp / "c.yaml")])
    assert res.exit_code in (0, 1), res.output


async def _regrade(tmp: Path) -> list[tuple[float, float, bool, bool]]:
    instances = {i.instance_id: i for i in load_instances(MINI_SWE)}
    stored = await stored_results(tmp)
    runtime = make_runtime(LocalRuntimeConfig(root=str(tmp / "sb2")))
    out = []
    async with runtime:
        for s in stored:
            inst = instances[s.grade["instance_id"]]
            again = await grade_patch(runtime, inst, s.patch, strict=s.grade["strict"])
            out.append((s.reward, again.reward, s.success, again.resolved))
    return out


def test_every_stored_patch_regrades_to_its_reward(tmp_path: Path) -> None:
    _run(tmp_path / "gold", {"type": "replay", "play": "gold"}, limit=3)
    cheat = {"type": "scripted", "bash": [f"printf %s '{EVIL_PLUGIN}' > conftest.py"]}
    _run(tmp_path / "cheat", cheat, limit=2)
    pairs = asyncio.run(_regrade(tmp_path / "gold")) + asyncio.run(_regrade(tmp_path / "cheat"))
    assert len(pairs) == 10
    for reward, again, success, resolved in pairs:
        assert reward == again
        assert success == resolved
    # gold resolves, its control does not; the cheat earns what its patch earns
    assert sorted(r for r, *_ in pairs).count(1.0) >= 3


def _predictions(path: Path, which: str) -> Path:
    rows = [json.loads(line) for line in (MINI_SWE / "instances.jsonl").read_text().splitlines()]
    with path.open("w") as f:
        for r in rows:
            patch = r["patch"] if which == "gold" else ""
            pred = {"instance_id": r["instance_id"], "model_name_or_path": which}
            f.write(json.dumps({**pred, "model_patch": patch}) + "\n")
    return path


@pytest.mark.parametrize(("which", "resolved"), [("gold", 34), ("empty", 0)])
def test_megaflow_grade_on_the_bundled_set(tmp_path: Path, which: str, resolved: int) -> None:
    preds = _predictions(tmp_path / f"{which}.jsonl", which)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        res = runner.invoke(app, ["grade", str(preds), "--tasks", str(MINI_SWE), "-o", "out"])
    finally:
        os.chdir(cwd)
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "out" / f"{which}.megaflow.json").read_text())
    assert summary["submitted_instances"] == 34
    assert summary["resolved_instances"] == resolved
    assert summary["error_instances"] == 0
    if which == "gold":
        assert summary["completed_instances"] == 34
        one = json.loads((tmp_path / "out/gold/mini-swe__bankxfer-1/report.json").read_text())
        assert one["mini-swe__bankxfer-1"]["resolved"] is True
        assert one["mini-swe__bankxfer-1"]["tests_status"]["FAIL_TO_PASS"]["failure"] == []
    else:
        assert summary["empty_patch_instances"] == 34
    assert f"resolved {resolved / 34:.1%}" in res.output


def test_megaflow_grade_refuses_bad_predictions(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "x", "model_patch": ""}\n')
    res = runner.invoke(app, ["grade", str(bad), "--tasks", str(MINI_SWE)])
    assert res.exit_code == 2
    assert "bad.jsonl:1" in res.output
    assert "model_name_or_path" in res.output
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps([{"instance_id": "nope", "model_name_or_path": "m"}]))
    res = runner.invoke(app, ["grade", str(unknown), "--tasks", str(MINI_SWE)])
    assert res.exit_code == 2
    assert "nope" in res.output
