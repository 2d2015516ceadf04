"""Loading task sets: JSON, JSONL, directories, and clear errors for bad instances."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from megaflow.core.errors import InvalidInput, NotFound
from megaflow.datasets import DirSource, GitBundleSource, TarballSource, load_instances
from tests.datasets.conftest import MINI_SWE, make_calc_repo, write_jsonl


def test_jsonl_file_resolves_source_against_its_directory(tmp_path: Path) -> None:
    repo, inst = make_calc_repo(tmp_path)
    (loaded,) = load_instances(write_jsonl(tmp_path / "set.jsonl", [inst]))
    assert loaded.instance_id == "calc__calc-1"
    assert isinstance(loaded.megaflow_source, DirSource)
    assert loaded.megaflow_source.path == str(repo)
    assert loaded.megaflow_reward == "binary"
    assert loaded.test_files() == ["test_new.py", "test_calc.py"]


def test_json_list_and_single_object(tmp_path: Path) -> None:
    _, inst = make_calc_repo(tmp_path)
    second = {**inst, "instance_id": "calc__calc-2"}
    (tmp_path / "list.json").write_text(json.dumps([inst, second]))
    (tmp_path / "one.json").write_text(json.dumps(inst))
    assert [i.instance_id for i in load_instances(tmp_path / "list.json")] == [
        "calc__calc-1",
        "calc__calc-2",
    ]
    assert len(load_instances(tmp_path / "one.json")) == 1


def test_task_set_directory(tmp_path: Path) -> None:
    _, inst = make_calc_repo(tmp_path)
    write_jsonl(tmp_path / "instances.jsonl", [inst])
    assert [i.instance_id for i in load_instances(tmp_path)] == ["calc__calc-1"]


def test_swebench_hub_export_shape(tmp_path: Path) -> None:
    """Hub exports keep the test lists as JSON text and carry extra fields."""
    _, inst = make_calc_repo(tmp_path)
    inst["FAIL_TO_PASS"] = json.dumps(inst["FAIL_TO_PASS"])
    inst["PASS_TO_PASS"] = "[]"
    inst["version"] = "1.0"
    inst["megaflow_source"] = {"type": "git_bundle", "path": "/abs/calc.bundle"}
    hub = write_jsonl(tmp_path / "hub.jsonl", [inst])
    (loaded,) = load_instances(hub, source_roots=["/abs"])
    assert loaded.FAIL_TO_PASS == ["test_new.py::test_add"]
    assert loaded.PASS_TO_PASS == []
    assert isinstance(loaded.megaflow_source, GitBundleSource)
    assert loaded.megaflow_source.path == "/abs/calc.bundle"
    assert loaded.to_payload()["version"] == "1.0"


def test_tarball_source_type(tmp_path: Path) -> None:
    _, inst = make_calc_repo(tmp_path)
    inst["megaflow_source"] = {"type": "tarball", "path": "calc.tar.gz"}
    (loaded,) = load_instances(write_jsonl(tmp_path / "t.jsonl", [inst]))
    assert isinstance(loaded.megaflow_source, TarballSource)
    assert loaded.megaflow_source.path == str(tmp_path / "calc.tar.gz")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"FAIL_TO_PASS": []}, "FAIL_TO_PASS"),
        ({"FAIL_TO_PASS": "not json"}, "FAIL_TO_PASS"),
        ({"test_patch": "  "}, "test_patch"),
        ({"megaflow_source": {"type": "svn", "path": "x"}}, "megaflow_source"),
        ({"megaflow_reward": "half"}, "megaflow_reward"),
        ({"base_commit": None}, "base_commit"),
    ],
)
def test_bad_instance_names_id_and_field(tmp_path: Path, change: dict, field: str) -> None:
    _, inst = make_calc_repo(tmp_path)
    good = {**inst, "instance_id": "ok-1"}
    bad = {**inst, **change}
    path = write_jsonl(tmp_path / "bad.jsonl", [good, bad])
    with pytest.raises(InvalidInput) as info:
        load_instances(path)
    msg = str(info.value)
    assert f"{path}:2" in msg
    assert "'calc__calc-1'" in msg
    assert repr(field) in msg or f"'{field}." in msg


def test_missing_field(tmp_path: Path) -> None:
    _, inst = make_calc_repo(tmp_path)
    del inst["patch"]
    with pytest.raises(
        InvalidInput, match=r"instance 'calc__calc-1': field 'patch': Field required"
    ):
        load_instances(write_jsonl(tmp_path / "s.jsonl", [inst]))


def test_duplicate_ids_and_broken_json(tmp_path: Path) -> None:
    _, inst = make_calc_repo(tmp_path)
    with pytest.raises(InvalidInput, match="repeats the one at"):
        load_instances(write_jsonl(tmp_path / "dup.jsonl", [inst, inst]))
    (tmp_path / "broken.jsonl").write_text(json.dumps(inst) + "\n{oops\n")
    with pytest.raises(InvalidInput, match=r"broken.jsonl:2: not valid JSON"):
        load_instances(tmp_path / "broken.jsonl")
    (tmp_path / "arr.jsonl").write_text("[1, 2]\n")
    with pytest.raises(InvalidInput, match="must be a JSON object"):
        load_instances(tmp_path / "arr.jsonl")


def test_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match=r"no instances\.jsonl or instances\.json"):
        load_instances(tmp_path)
    with pytest.raises(NotFound, match="does not exist"):
        load_instances(tmp_path / "nope.jsonl")


def test_bundled_set_loads() -> None:
    instances = load_instances(MINI_SWE)
    assert len(instances) >= 30
    assert len({i.repo for i in instances}) == len(instances)
    for inst in instances:
        assert Path(inst.megaflow_source.path).is_dir()
        assert inst.FAIL_TO_PASS
        assert inst.PASS_TO_PASS
