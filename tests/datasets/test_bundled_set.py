"""The bundled ``tasks/mini-swe`` set, graded in real local sandboxes:
every gold patch resolves its instance and no empty patch does."""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest

from megaflow.datasets import load_instances, validate_instances
from megaflow.datasets.sources import source_archive
from megaflow.environment.abstract import Runtime
from tests.datasets.conftest import MINI_SWE, git


def test_base_commits_match_the_repository_directories(tmp_path: Path) -> None:
    """A repository directory committed with the fixed identity gives base_commit,
    so ``git diff`` against it in the sandbox shows only the agent's changes."""
    for inst in load_instances(MINI_SWE):
        work = tmp_path / inst.instance_id
        with tarfile.open(fileobj=io.BytesIO(source_archive(inst.megaflow_source))) as tar:
            tar.extractall(work, filter="data")
        git(work, "init", "-q", "-b", "main")
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", "base")
        assert git(work, "rev-parse", "HEAD").strip() == inst.base_commit, inst.instance_id
        shutil.rmtree(work)


@pytest.mark.slow
async def test_gold_resolves_all_and_empty_resolves_none(runtime: Runtime) -> None:
    instances = load_instances(MINI_SWE)
    assert len(instances) >= 30
    report = await validate_instances(runtime, instances, concurrency=4)
    gold = {r.instance_id: r for r in report.results if r.check == "gold"}
    empty = {r.instance_id: r for r in report.results if r.check == "empty"}
    assert len(gold) == len(empty) == len(instances)
    not_resolved = {i: r.reason() for i, r in gold.items() if not r.ok}
    assert not not_resolved, not_resolved
    resolved_empty = [i for i, r in empty.items() if not r.ok]
    assert not resolved_empty, resolved_empty
    for r in gold.values():
        assert r.report is not None
        assert r.report.reward == 1.0
    for r in empty.values():
        assert r.report is not None
        assert r.report.reward == 0.0
        # the untouched repository keeps its own tests green
        assert not r.report.pass_to_pass.failed, r.instance_id
    assert report.ok
