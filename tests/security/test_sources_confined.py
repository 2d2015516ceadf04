"""Task sources stay inside the task set's folder (or a named source root) and
under the size cap; symlinks inside a directory source are packed as links.

Every refusal goes through the real CLI (`megaflow tasks validate` and
`megaflow run`): exit code 2, a message naming the file, the instance and the
field, and nothing written.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.datasets import load_instances
from megaflow.datasets.instance import DirSource
from megaflow.datasets.sources import source_archive
from tests.datasets.conftest import make_calc_repo, write_jsonl

runner = CliRunner()
SECRET = b"top-secret-host-content\n"


def _task_set(tmp_path: Path, source: dict[str, Any]) -> Path:
    """A task set folder holding the calc repository and one instance using ``source``."""
    tset = tmp_path / "set"
    _, inst = make_calc_repo(tset)
    inst["megaflow_source"] = source
    write_jsonl(tset / "instances.jsonl", [inst])
    return tset


def _outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir(exist_ok=True)
    (out / "secret.txt").write_bytes(SECRET)
    return out


def _etc(tmp_path: Path) -> dict[str, Any]:
    return {"type": "dir", "path": "/etc"}


def _traversal(tmp_path: Path) -> dict[str, Any]:
    return {"type": "dir", "path": "../" * 12 + "root"}


def _absolute(tmp_path: Path) -> dict[str, Any]:
    return {"type": "dir", "path": str(_outside(tmp_path))}


def _symlinked(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "escape").symlink_to(_outside(tmp_path))
    return {"type": "dir", "path": "escape"}


def _outside_tarball(tmp_path: Path) -> dict[str, Any]:
    tgz = tmp_path / "outside.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(_outside(tmp_path), arcname="outside")
    return {"type": "tarball", "path": "../outside.tar.gz"}


def _big_dir(tmp_path: Path) -> dict[str, Any]:
    big = tmp_path / "set" / "big"
    big.mkdir(parents=True)
    for n in range(3):
        (big / f"blob{n}").write_bytes(b"\0" * (600 * 1024))
    return {"type": "dir", "path": "big"}


def _big_tarball(tmp_path: Path) -> dict[str, Any]:
    """Small on disk (zeros compress), 3 MiB of members."""
    (tmp_path / "set").mkdir()
    tgz = tmp_path / "set" / "big.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        info = tarfile.TarInfo("big/zeros")
        info.size = 3 * 1024 * 1024
        tar.addfile(info, io.BytesIO(b"\0" * info.size))
    assert tgz.stat().st_size < 1024 * 1024
    return {"type": "tarball", "path": "big.tar.gz"}


def _big_bundle(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "big.bundle").write_bytes(os.urandom(2 * 1024 * 1024))
    return {"type": "git_bundle", "path": "big.bundle"}


# name -> (source maker, fragment of the reason)
OUTSIDE: dict[str, Callable[[Path], dict[str, Any]]] = {
    "etc": _etc,
    "traversal": _traversal,
    "absolute": _absolute,
    "symlinked path": _symlinked,
    "tarball outside": _outside_tarball,
}
OVERSIZED: dict[str, Callable[[Path], dict[str, Any]]] = {
    "dir": _big_dir,
    "tarball": _big_tarball,
    "bundle": _big_bundle,
}
CASES = {**{f"outside: {k}": v for k, v in OUTSIDE.items()},
         **{f"oversized: {k}": v for k, v in OVERSIZED.items()}}  # fmt: skip


def _squeezed(text: str) -> str:
    return "".join(text.split())  # undo the console's line wrapping, even inside paths


def _check_refusal(name: str, output: str) -> None:
    text = _squeezed(output)
    reason = "outside the task set's folder" if name.startswith("outside") else "the cap is 1048576"
    for fragment in ("instances.jsonl:1", "calc__calc-1", "'megaflow_source.path'", reason):
        assert _squeezed(fragment) in text, (fragment, output)
    assert "Traceback" not in output


@pytest.mark.parametrize("name", sorted(CASES))
def test_tasks_validate_refuses(tmp_path: Path, name: str) -> None:
    tset = _task_set(tmp_path, CASES[name](tmp_path))
    boxes = tmp_path / "sandboxes"
    res = runner.invoke(
        app,
        ["tasks", "validate", str(tset), "--max-source-mb", "1", "--sandbox-root", str(boxes)],
    )
    assert res.exit_code == 2, res.output
    _check_refusal(name, res.output)
    assert not boxes.exists(), "no sandbox may be made for a refused task set"


@pytest.mark.parametrize("name", sorted(CASES))
def test_run_refuses_before_any_work(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tset = _task_set(tmp_path, CASES[name](tmp_path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.yaml").write_text(
        f"tasks: {{type: swebench, path: {tset.name}, max_source_mb: 1}}\n"
    )
    res = runner.invoke(app, ["run", "run.yaml"])
    assert res.exit_code == 2, res.output
    _check_refusal(name, res.output)
    assert not (tmp_path / ".megaflow").exists(), "nothing may be written for a refused set"


def test_a_source_root_admits_an_outside_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = _outside(tmp_path)
    tset = _task_set(tmp_path, {"type": "dir", "path": str(outside)})
    res = runner.invoke(app, ["tasks", "ls", str(tset), "--source-root", str(outside)])
    assert res.exit_code == 0, res.output
    assert "calc__calc-1" in res.output
    (inst,) = load_instances(tset, source_roots=[tmp_path])
    assert inst.megaflow_source.path == str(outside.resolve())
    # the run config's source_roots, relative to the config file
    from megaflow.app.assembly import task_specs
    from megaflow.config import load_config

    (tmp_path / "run.yaml").write_text(
        "tasks: {type: swebench, path: set, source_roots: [outside]}\n"
    )
    monkeypatch.chdir("/")
    specs = task_specs(load_config(tmp_path / "run.yaml"), "r1", tmp_path)
    assert specs[0].payload["megaflow_source"]["path"] == str(outside.resolve())


def test_symlink_members_of_a_dir_source_are_not_followed(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    tset = _task_set(tmp_path, {"type": "dir", "path": "calc"})
    repo = tset / "calc"
    (repo / "shadow").symlink_to("/etc/shadow")
    (repo / "secret").symlink_to(outside / "secret.txt")
    (repo / "escape-dir").symlink_to(outside, target_is_directory=True)
    os.mkfifo(repo / "fifo")
    (inst,) = load_instances(tset)
    assert isinstance(inst.megaflow_source, DirSource)
    archive = source_archive(inst.megaflow_source)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["shadow"].issym()
    assert members["shadow"].linkname == "/etc/shadow"
    assert members["shadow"].size == 0
    assert members["secret"].issym()
    assert members["escape-dir"].issym()
    assert not any(n.startswith("escape-dir/") for n in members), "a linked dir is not walked"
    assert "fifo" not in members
    assert SECRET not in archive
    if Path("/etc/shadow").is_file() and os.access("/etc/shadow", os.R_OK):
        shadow = Path("/etc/shadow").read_bytes()
        assert shadow.strip()
        assert shadow not in archive


def test_symlinked_files_do_not_count_towards_the_size_cap(tmp_path: Path) -> None:
    """The walk measures what is packed: a link to a huge file is a few bytes."""
    big = tmp_path / "huge"
    big.write_bytes(b"\0" * (2 * 1024 * 1024))
    tset = _task_set(tmp_path, {"type": "dir", "path": "calc"})
    (tset / "calc" / "huge").symlink_to(big)
    (inst,) = load_instances(tset, max_source_bytes=1024 * 1024)
    assert len(source_archive(inst.megaflow_source, 1024 * 1024)) < 1024 * 1024


def test_the_bundled_task_set_loads_confined() -> None:
    from tests.datasets.conftest import MINI_SWE

    instances = load_instances(MINI_SWE)
    root = MINI_SWE.resolve()
    assert instances
    assert all(Path(i.megaflow_source.path).is_relative_to(root) for i in instances)
