"""Preparing a repository: the base commit's history only, and a clear error
when the source does not hold ``base_commit``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from megaflow.core.errors import InvalidInput
from megaflow.datasets import environment_spec, load_instances, prepare_sandbox
from megaflow.environment.abstract import Runtime
from tests.datasets.conftest import make_calc_repo, write_jsonl


async def test_a_plain_directory_must_snapshot_to_base_commit(
    tmp_path: Path, runtime: Runtime
) -> None:
    repo, inst = make_calc_repo(tmp_path)
    shutil.rmtree(repo / ".git")  # a plain folder: its files are committed as the base
    (repo / "extra.txt").write_text("not in the base\n")
    (loaded,) = load_instances(write_jsonl(tmp_path / "s.jsonl", [inst]))
    async with await runtime.create(environment_spec(loaded)) as box:
        with pytest.raises(InvalidInput) as err:
            await prepare_sandbox(box, loaded)
    assert "calc__calc-1" in str(err.value)
    assert f"base_commit is {inst['base_commit']}" in str(err.value)
    assert "snapshot commit is" in str(err.value)


async def test_a_git_source_without_base_commit_is_refused(
    tmp_path: Path, runtime: Runtime
) -> None:
    _, inst = make_calc_repo(tmp_path)
    inst["base_commit"] = "0" * 40
    (loaded,) = load_instances(write_jsonl(tmp_path / "s.jsonl", [inst]))
    async with await runtime.create(environment_spec(loaded)) as box:
        with pytest.raises(InvalidInput, match="its history has no commit 0000000000"):
            await prepare_sandbox(box, loaded)


async def test_the_workspace_holds_only_the_base_history(tmp_path: Path, runtime: Runtime) -> None:
    _, inst = make_calc_repo(tmp_path)
    (loaded,) = load_instances(write_jsonl(tmp_path / "s.jsonl", [inst]))
    async with await runtime.create(environment_spec(loaded)) as box:
        prepared = await prepare_sandbox(box, loaded)
        out = await box.exec(
            "git for-each-ref --format='%(refname)'; git rev-list --all | wc -l; ls /tmp",
            cwd="/workspace",
        )
    assert prepared.head == inst["base_commit"]
    assert out.stdout.split() == ["refs/heads/main", "1"]  # and no scratch left in /tmp
