"""Fixtures for task-set tests: a real local runtime and a tiny git repository."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from megaflow.datasets.prepare import GIT_ENV
from megaflow.environment.abstract import Runtime
from megaflow.environment.config import LocalRuntimeConfig
from megaflow.environment.factory import make_runtime

REPO_ROOT = Path(__file__).resolve().parents[2]
MINI_SWE = REPO_ROOT / "tasks" / "mini-swe"

CALC = """def add(a, b):
    return a - b
"""
CALC_FIXED = """def add(a, b):
    return a + b
"""
TEST_OLD = """from calc import add


def test_zero():
    assert add(2, 0) == 2
"""
TEST_NEW = """from calc import add


def test_add():
    assert add(2, 3) == 5
"""


def git(cwd: Path, *args: str) -> str:
    res = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


def diff_of(repo: Path, files: dict[str, str]) -> str:
    """The unified diff that writes ``files`` into the (clean) git ``repo``."""
    for rel, text in files.items():
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    out = git(repo, "diff", "--cached")
    git(repo, "reset", "-q", "--hard")
    git(repo, "clean", "-fdq")
    return out


def make_calc_repo(root: Path) -> tuple[Path, dict[str, Any]]:
    """A one-bug repository as a git work tree, and its instance (dir source)."""
    repo = root / "calc"
    repo.mkdir(parents=True)
    (repo / "calc.py").write_text(CALC)
    (repo / "test_calc.py").write_text(TEST_OLD)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD").strip()
    instance = {
        "instance_id": "calc__calc-1",
        "repo": "example/calc",
        "base_commit": base,
        "problem_statement": "add() subtracts",
        "patch": diff_of(repo, {"calc.py": CALC_FIXED}),
        "test_patch": diff_of(repo, {"test_new.py": TEST_NEW}),
        "FAIL_TO_PASS": ["test_new.py::test_add"],
        "PASS_TO_PASS": ["test_calc.py::test_zero"],
        "megaflow_source": {"type": "dir", "path": "calc"},
    }
    return repo, instance


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    """A started local (bubblewrap) runtime, stopped afterwards."""
    rt = make_runtime(LocalRuntimeConfig(root=str(tmp_path / "sandboxes")))
    await rt.start()
    try:
        yield rt
    finally:
        await rt.stop()
