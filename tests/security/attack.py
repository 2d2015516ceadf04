"""A scripted attacker driven through ``megaflow run``, and what the run stored.

Each attack is a list of shell commands that the builtin agent runs through
its ``bash`` tool (the ``scripted`` model), as an RL-trained agent could,
before it submits. :func:`run_attack` runs them on a one-bug task set with
the real local runtime and returns every stored result with its patch, grade
report and trajectory, so a test can check the reward and where it came from.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.datasets.conftest import make_calc_repo, write_jsonl

runner = CliRunner()

# A pytest plugin that reports every test as passed: the payload of several attacks.
EVIL_PLUGIN = """import pytest
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    out = yield
    out.get_result().outcome = "passed"
"""
# test_new.py as the test patch adds it; the bug (add subtracts) makes it fail.
FAILING_TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def write(path: str, text: str) -> str:
    """The shell command by which the scripted agent writes ``text`` to ``path``."""
    return f"mkdir -p $(dirname {path}) && printf %s {shlex.quote(text)} > {path}"


@dataclass
class Stored:
    """One task of an attacked run, as the stores hold it."""

    success: bool
    reward: float
    error: str | None
    patch: bytes
    grade: dict[str, Any]
    trajectory: dict[str, Any]

    def observations(self) -> str:
        return "\n".join(str(s.get("content", "")) for s in self.trajectory["steps"])


def calc_task_set(root: Path, **extra: Any) -> tuple[Path, dict[str, Any]]:
    """The one-bug calc task set (a git work tree source) in ``root``."""
    _, inst = make_calc_repo(root)
    inst.update(extra)
    return write_jsonl(root / "instances.jsonl", [inst]), inst


def run_config(tmp: Path, tasks: Path, commands: list[str], **over: Any) -> Path:
    cfg: dict[str, Any] = {
        "name": "attack",
        "tasks": {"type": "swebench", "path": str(tasks)},
        "agent": {"type": "builtin", "max_steps": len(commands) + 2},
        "model": {"type": "scripted", "bash": commands},
        "max_attempts": 1,
        "environment": {"runtime": {"type": "local", "root": str(tmp / "sb")}},
        "storage": {
            "metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
            "artifacts": {"type": "local", "root": str(tmp / "art")},
        },
        **over,
    }
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "attack.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def run_attack(tmp: Path, tasks: Path, commands: list[str], **over: Any) -> list[Stored]:
    """``megaflow run`` with the scripted attacker; every stored task of the run."""
    cfg = run_config(tmp, tasks, commands, **over)
    cwd = os.getcwd()
    os.chdir(tmp)  # the run's state directory, if any, stays in tmp
    try:
        res = runner.invoke(app, ["run", str(cfg)])
    finally:
        os.chdir(cwd)
    assert res.exit_code in (0, 1), res.output
    return asyncio.run(stored_results(tmp))


async def stored_results(tmp: Path) -> list[Stored]:
    artifacts = LocalArtifactStore(str(tmp / "art"))
    out = []
    async with SqliteMetadataStore(str(tmp / "m.db")) as store:
        for run in await store.list_runs():
            for r in await store.list_results(run.id):
                grade = json.loads(await artifacts.get(r.artifacts["grade"]))
                traj = json.loads(await artifacts.get(r.artifacts["trajectory"]))
                patch = await artifacts.get(r.artifacts["patch"])
                out.append(Stored(r.success, r.reward, r.error, patch, grade, traj))
    assert out, "the run stored no results"
    return out
