"""Loading task sets: a JSON file, a JSONL file, or a task-set directory.

A task-set directory holds ``instances.jsonl`` (or ``instances.json``) next to
the repositories its instances point to. Every problem is reported with the
file, the line (for JSONL), the instance id and the field, so a broken
instance is fixed in one look.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from megaflow.core.errors import InvalidInput, NotFound
from megaflow.datasets.instance import SWEInstance

INSTANCE_FILES = ("instances.jsonl", "instances.json")


def find_instance_file(path: Path) -> Path:
    """The instance file for ``path``: the file itself, or the one in a task-set directory."""
    if path.is_dir():
        for name in INSTANCE_FILES:
            if (path / name).is_file():
                return path / name
        raise NotFound(f"task set {path}: no {' or '.join(INSTANCE_FILES)} in it")
    if not path.exists():
        raise NotFound(f"task set {path} does not exist")
    return path


def _records(file: Path) -> list[tuple[str, Any]]:
    text = file.read_text(encoding="utf-8")
    if file.suffix == ".jsonl":
        out = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                out.append((f"{file}:{n}", json.loads(line)))
            except json.JSONDecodeError as e:
                raise InvalidInput(f"{file}:{n}: not valid JSON: {e.msg}") from None
        return out
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidInput(f"{file}:{e.lineno}: not valid JSON: {e.msg}") from None
    items = data if isinstance(data, list) else [data]
    return [(f"{file}[{i}]", item) for i, item in enumerate(items)]


def _describe(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        field = ".".join(str(x) for x in e["loc"]) or "(instance)"
        parts.append(f"field {field!r}: {e['msg']}")
    return "; ".join(parts)


def parse_instance(record: Any, where: str, base: Path) -> SWEInstance:
    """Validate one record; relative source paths are resolved against ``base``."""
    if not isinstance(record, dict):
        raise InvalidInput(
            f"{where}: an instance must be a JSON object, got {type(record).__name__}"
        )
    iid = record.get("instance_id", "?")
    try:
        inst = SWEInstance.model_validate(record)
    except ValidationError as e:
        raise InvalidInput(f"{where}: instance {iid!r}: {_describe(e)}") from None
    inst.megaflow_source = inst.megaflow_source.resolved(base)
    return inst


def load_instances(path: str | Path) -> list[SWEInstance]:
    """Read every instance of a task set, in file order. Ids must be unique."""
    file = find_instance_file(Path(path))
    out: list[SWEInstance] = []
    seen: dict[str, str] = {}
    for where, record in _records(file):
        inst = parse_instance(record, where, file.parent)
        if inst.instance_id in seen:
            first = seen[inst.instance_id]
            raise InvalidInput(f"{where}: instance {inst.instance_id!r} repeats the one at {first}")
        seen[inst.instance_id] = where
        out.append(inst)
    return out
