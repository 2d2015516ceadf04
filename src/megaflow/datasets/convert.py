"""SWE-bench-format rows, as published, to a MegaFlow task set.

SWE-bench and its relatives (SWE-Gym, SWE-bench Verified/Lite) are published
as JSONL, JSON or parquet rows with ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` as
JSON text; they say which repository and commit, not where its files are.
:func:`convert_rows` adds ``megaflow_source`` from a path template over a
folder of clones, git bundles or tarballs, or from an image-name template
(one container image per instance, the repository inside it at
``repo_path``), decodes the JSON-text lists,
validates every row as an :class:`SWEInstance` and returns the records to
write; any problem names the row, the instance and the field.
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from megaflow.core.errors import InvalidInput
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.loader import describe, read_records

SourceKind = Literal["dir", "git_bundle", "tarball", "image"]
IMAGE_REPO_PATH = "/testbed"
"""Where SWE-bench's instance images hold the repository."""
TEMPLATES: dict[SourceKind, str] = {
    "dir": "{owner}__{name}",
    "git_bundle": "{owner}__{name}.bundle",
    "tarball": "{instance_id}.tar.gz",
}
"""Default path of an instance's source under the repositories folder."""
FIELDS = ("instance_id", "repo", "owner", "name", "base_commit")
"""Placeholders a path template may use."""
LIST_FIELDS = ("FAIL_TO_PASS", "PASS_TO_PASS")


def read_rows(file: Path) -> list[tuple[str, Any]]:
    """The rows of a JSONL, JSON or parquet file, each with where it is."""
    if file.suffix != ".parquet":
        return read_records(file)
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InvalidInput(f"{file}: reading parquet needs the 'parquet' extra") from None
    try:
        rows = pq.read_table(file).to_pylist()
    except Exception as e:  # pyarrow raises its own ArrowInvalid, OSError...
        raise InvalidInput(f"{file}: not a readable parquet file: {e}") from None
    return [(f"{file} row {i}", row) for i, row in enumerate(rows)]


def check_template(template: str) -> None:
    """Refuse a template with placeholders other than :data:`FIELDS`."""
    try:
        names = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as e:
        raise InvalidInput(f"source template {template!r}: {e}") from None
    unknown = names - set(FIELDS)
    if unknown:
        raise InvalidInput(
            f"source template {template!r}: unknown placeholder {sorted(unknown)[0]!r}; "
            f"use {', '.join('{' + f + '}' for f in FIELDS)}"
        )


def _plain(value: Any) -> Any:
    """JSON-ready: parquet gives datetimes and the like."""
    return json.loads(json.dumps(value, default=str))


def _lists(row: dict[str, Any], where: str, iid: str) -> None:
    for key in LIST_FIELDS:
        value = row.get(key)
        if isinstance(value, str):
            try:
                row[key] = json.loads(value)
            except json.JSONDecodeError as e:
                raise InvalidInput(
                    f"{where}: instance {iid!r}: field {key!r}: not a JSON list of test ids: "
                    f"{e.msg} (column {e.colno})"
                ) from None


def source_path(row: dict[str, Any], template: str, where: str) -> str:
    """Where the template puts this row's source, relative to the repositories folder."""
    iid = row.get("instance_id", "?")
    repo = row.get("repo")
    if not isinstance(repo, str) or repo.count("/") != 1:
        raise InvalidInput(f"{where}: instance {iid!r}: field 'repo': expected 'owner/name'")
    owner, name = repo.split("/")
    return template.format(
        instance_id=iid, repo=repo, owner=owner, name=name, base_commit=row.get("base_commit", "")
    )


def convert_rows(
    rows: Iterable[tuple[str, Any]],
    *,
    kind: SourceKind,
    repos: Path | None,
    out_dir: Path,
    template: str | None = None,
    test_cmd: str | None = None,
    require_sources: bool = True,
    repo_path: str = IMAGE_REPO_PATH,
) -> list[dict[str, Any]]:
    """Each row as a MegaFlow instance record, its source at ``repos/<template>``
    (for ``kind="image"``: the image ``template`` names, no folder).

    The source path is written relative to ``out_dir`` when it lies inside it
    (the task set travels with its repositories), else absolute. With
    ``require_sources`` a missing source is an error (images are not checked:
    they are found when a sandbox starts).
    """
    if kind == "image" and not template:
        raise InvalidInput("an image source needs an image template, e.g. 'registry/{instance_id}'")
    if kind != "image" and repos is None:
        raise InvalidInput(f"a {kind} source needs the folder of repositories (--repos)")
    pattern = template or TEMPLATES[kind]
    check_template(pattern)
    out: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for where, raw in rows:
        if not isinstance(raw, dict):
            raise InvalidInput(f"{where}: a row must be an object, got {type(raw).__name__}")
        row = _plain(raw)
        iid = str(row.get("instance_id", "?"))
        if "megaflow_source" in row:
            raise InvalidInput(f"{where}: instance {iid!r}: already has a megaflow_source")
        _lists(row, where, iid)
        if kind == "image" or repos is None:
            image = source_path(row, pattern, where)
            row["megaflow_source"] = {"type": "image", "image": image, "path": repo_path}
            out.append(_checked(row, where, iid, seen, test_cmd))
            continue
        path = (repos / source_path(row, pattern, where)).absolute()
        if require_sources and not path.exists():
            raise InvalidInput(
                f"{where}: instance {iid!r}: field 'megaflow_source.path': {path} does not "
                "exist (clone or fetch it there, or convert with --allow-missing)"
            )
        shown = os.path.relpath(path, out_dir) if path.is_relative_to(out_dir) else str(path)
        row["megaflow_source"] = {"type": kind, "path": shown}
        out.append(_checked(row, where, iid, seen, test_cmd))
    if not out:
        raise InvalidInput("no rows to convert")
    return out


def _checked(
    row: dict[str, Any], where: str, iid: str, seen: dict[str, str], test_cmd: str | None
) -> dict[str, Any]:
    """The row with its test command, validated as an instance and not a repeat."""
    if test_cmd:
        row["megaflow_test_cmd"] = test_cmd
    try:
        SWEInstance.model_validate(row)
    except ValidationError as e:
        raise InvalidInput(f"{where}: instance {iid!r}: {describe(e)}") from None
    if iid in seen:
        raise InvalidInput(f"{where}: instance {iid!r} repeats the one at {seen[iid]}")
    seen[iid] = where
    return row


def write_jsonl(records: list[dict[str, Any]], path: Path, *, overwrite: bool = False) -> None:
    """Write ``records`` one per line, through a temporary file (never half a set)."""
    if path.exists() and not overwrite:
        raise InvalidInput(f"{path} exists; choose another --out or pass --force")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    tmp.replace(path)
