"""Repository sources (directory, tarball, git bundle) placed in real sandboxes."""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest

from megaflow.core.errors import InvalidInput, NotFound
from megaflow.datasets import (
    environment_spec,
    extract_patch,
    grade_patch,
    load_instances,
    prepare_sandbox,
)
from megaflow.datasets.instance import DirSource, TarballSource
from megaflow.datasets.patches import apply_patch
from megaflow.datasets.sources import source_archive
from megaflow.environment.abstract import Runtime
from tests.datasets.conftest import git, make_calc_repo, write_jsonl


def _members(archive: bytes) -> set[str]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return set(tar.getnames())


def test_tarball_single_top_dir_is_stripped(tmp_path: Path) -> None:
    repo, _ = make_calc_repo(tmp_path)
    tgz = tmp_path / "calc-1.0.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(repo / "calc.py", arcname="calc-1.0/calc.py")
        tar.add(repo / "test_calc.py", arcname="calc-1.0/test_calc.py")
    assert _members(source_archive(TarballSource(path=str(tgz)))) == {"calc.py", "test_calc.py"}


def test_unsafe_tarball_is_refused(tmp_path: Path) -> None:
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as tar:
        info = tarfile.TarInfo("../escape.txt")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(InvalidInput, match="unsafe member"):
        source_archive(TarballSource(path=str(evil)))


def test_dir_archive_skips_caches(tmp_path: Path) -> None:
    repo, _ = make_calc_repo(tmp_path)
    (repo / "__pycache__").mkdir()
    (repo / "__pycache__" / "calc.cpython-311.pyc").write_bytes(b"x")
    names = _members(source_archive(DirSource(path=str(repo))))
    assert "calc.py" in names
    assert not any("__pycache__" in n for n in names)
    with pytest.raises(NotFound):
        source_archive(DirSource(path=str(tmp_path / "missing")))


def _variants(tmp_path: Path) -> dict[str, dict]:
    """The same instance with each kind of source."""
    repo, inst = make_calc_repo(tmp_path)
    plain = tmp_path / "plain"
    shutil.copytree(repo, plain, ignore=shutil.ignore_patterns(".git"))
    tgz = tmp_path / "calc.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(plain, arcname="calc-src")
    bundle = tmp_path / "calc.bundle"
    git(repo, "bundle", "create", "-q", str(bundle), "--all")
    sources = {
        "git-dir": {"type": "dir", "path": "calc"},
        "plain-dir": {"type": "dir", "path": "plain"},
        "tarball": {"type": "tarball", "path": "calc.tar.gz"},
        "git-bundle": {"type": "git_bundle", "path": "calc.bundle"},
    }
    return {
        k: {**inst, "instance_id": f"calc-{k}", "megaflow_source": v} for k, v in sources.items()
    }


@pytest.mark.slow
async def test_every_source_prepares_a_git_checkout_at_base(
    tmp_path: Path, runtime: Runtime
) -> None:
    variants = _variants(tmp_path)
    instances = load_instances(write_jsonl(tmp_path / "set.jsonl", list(variants.values())))
    for inst in instances:
        async with await runtime.create(environment_spec(inst)) as box:
            prepared = await prepare_sandbox(box, inst)
            # the snapshot of identical files under the fixed identity is the same commit
            assert prepared.matches_base, (inst.instance_id, prepared.head, inst.base_commit)
            status = await box.exec("git status --porcelain && ls", cwd="/workspace")
            assert status.ok
            assert status.stdout.split() == ["calc.py", "test_calc.py"]
            assert await apply_patch(box, inst.patch.encode()) is None
            diff = await box.exec("git diff", cwd="/workspace")
            assert "+    return a + b" in diff.stdout
            candidate = await extract_patch(box, inst.base_commit)
            report = await grade_patch(runtime, inst, candidate.patch)
            assert report.resolved, (inst.instance_id, report.error, report.test_output)
            assert report.reward == 1.0
            assert "return a + b" in report.model_patch


def test_oversized_sources_are_refused_before_copying(tmp_path: Path) -> None:
    repo, _ = make_calc_repo(tmp_path)
    (repo / "blob").write_bytes(b"\0" * 4096)
    with pytest.raises(InvalidInput, match=r"more than .* bytes.*the cap is 1024 bytes"):
        source_archive(DirSource(path=str(repo)), limit=1024)
    tgz = tmp_path / "calc.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(repo / "blob", arcname="calc/blob")
    with pytest.raises(InvalidInput, match="tarball"):
        source_archive(TarballSource(path=str(tgz)), limit=1024)
    assert _members(source_archive(TarballSource(path=str(tgz)), limit=None)) == {"blob"}


def test_sources_outside_the_task_set_are_refused(tmp_path: Path) -> None:
    _, inst = make_calc_repo(tmp_path / "set")
    inst["megaflow_source"] = {"type": "dir", "path": "/etc"}
    path = write_jsonl(tmp_path / "set" / "instances.jsonl", [inst])
    with pytest.raises(InvalidInput, match=r"instances.jsonl:1: instance 'calc__calc-1': field "):
        load_instances(path)
    (loaded,) = load_instances(path, source_roots=["/etc"])
    assert loaded.megaflow_source.path == str(Path("/etc").resolve())
