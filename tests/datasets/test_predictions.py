"""Reading SWE-bench predictions files in each layout SWE-bench accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from megaflow.core.errors import InvalidInput
from megaflow.datasets.predictions import load_predictions

PRED = {"model_name_or_path": "m", "model_patch": "diff --git a/x b/x\n"}


def test_jsonl_list_and_keyed_object_give_the_same_predictions(tmp_path: Path) -> None:
    rows = [{"instance_id": "a", **PRED}, {"instance_id": "b", **PRED, "model_patch": None}]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "p.json").write_text(json.dumps(rows))
    (tmp_path / "k.json").write_text(json.dumps({"a": PRED, "b": {**PRED, "model_patch": None}}))
    got = [
        [(p.instance_id, p.model_patch) for p in load_predictions(tmp_path / name)]
        for name in ("p.jsonl", "p.json", "k.json")
    ]
    assert got[0] == got[1] == got[2] == [("a", PRED["model_patch"]), ("b", None)]


def test_repeated_ids_and_empty_files_are_refused(tmp_path: Path) -> None:
    twice = tmp_path / "twice.jsonl"
    twice.write_text(
        json.dumps({"instance_id": "a", **PRED})
        + "\n"
        + json.dumps({"instance_id": "a", **PRED})
        + "\n"
    )
    with pytest.raises(InvalidInput, match=r"twice\.jsonl:2: instance 'a' repeats"):
        load_predictions(twice)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(InvalidInput, match="no predictions"):
        load_predictions(empty)
