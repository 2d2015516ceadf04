"""Loading task sets: a JSON file, a JSONL file, or a task-set directory.

A task-set directory holds ``instances.jsonl`` (or ``instances.json``) next to
the repositories its instances point to. Every problem is reported with the
file, the line (for JSONL), the instance id and the field, so a broken
instance is fixed in one look.

Every ``megaflow_source`` path must resolve (symlinks resolved) inside the
task set's folder (the directory of the instances file) or one of the
``source_roots`` given; a row without one whose ``repo_path`` names a folder
takes it as its ``dir`` source. Each source must be under the size cap; both are
checked here, before anything is copied. A file that is not UTF-8, nests
deeper than :data:`MAX_DEPTH` or holds no instance is refused too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from megaflow.core.errors import InvalidInput, NotFound
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.sources import DEFAULT_MAX_SOURCE_BYTES, check_source_size

INSTANCE_FILES = ("instances.jsonl", "instances.json")
MAX_DEPTH = 100
"""Deepest nesting of arrays and objects an instances file may have."""
_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"|[\[\]{}\n]')


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


def _too_deep(text: str, limit: int) -> int | None:
    """The line where arrays and objects first nest deeper than ``limit``, if any."""
    depth, line = 0, 1
    for m in _TOKENS.finditer(text):
        tok = m.group()
        if tok == "\n":
            line += 1
        elif tok in "[{":
            depth += 1
            if depth > limit:
                return line
        elif tok in "]}":
            depth -= 1
    return None


def _text(file: Path) -> str:
    try:
        raw = file.read_bytes()
    except OSError as e:
        raise InvalidInput(f"{file}: cannot be read: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise InvalidInput(f"{file}:{line}: not valid UTF-8 (byte {e.start})") from None
    deep = _too_deep(text, MAX_DEPTH)
    if deep is not None:
        raise InvalidInput(f"{file}:{deep}: nested deeper than {MAX_DEPTH} levels")
    return text


def _loads(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidInput(f"{where}: not valid JSON: {e.msg}") from None
    except RecursionError:
        raise InvalidInput(f"{where}: nested too deeply") from None


def read_records(file: Path) -> list[tuple[str, Any]]:
    """The JSON records of a JSONL or JSON file, each with where it is (``file:line``
    or ``file[index]``); bad UTF-8, bad JSON and deep nesting name their line."""
    text = _text(file)
    if file.suffix == ".jsonl":
        out = []
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                out.append((f"{file}:{n}", _loads(line, f"{file}:{n}")))
        return out
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidInput(f"{file}:{e.lineno}: not valid JSON: {e.msg}") from None
    except RecursionError:
        raise InvalidInput(f"{file}: nested too deeply") from None
    items = data if isinstance(data, list) else [data]
    return [(f"{file}[{i}]", item) for i, item in enumerate(items)]


def describe(err: ValidationError) -> str:
    """A pydantic error as ``field 'a.b': reason; ...``."""
    parts = []
    for e in err.errors():
        field = ".".join(str(x) for x in e["loc"]) or "(instance)"
        parts.append(f"field {field!r}: {e['msg']}")
    return "; ".join(parts)


def _source_from_repo_path(record: dict[str, Any], base: Path) -> dict[str, Any]:
    """A record without ``megaflow_source`` whose ``repo_path`` names a folder
    (relative paths against ``base``) takes that folder as its ``dir`` source; the
    usual confinement applies to it. Any other record is returned as it is."""
    repo_path = record.get("repo_path")
    if "megaflow_source" in record or not isinstance(repo_path, str) or not repo_path:
        return record
    try:
        p = Path(repo_path).expanduser()
        is_dir = (p if p.is_absolute() else base / p).is_dir()
    except (OSError, ValueError):  # ValueError: a NUL in the path
        is_dir = False
    if not is_dir:
        return record
    return {**record, "megaflow_source": {"type": "dir", "path": repo_path}}


def parse_instance(
    record: Any, where: str, base: Path, source_roots: Sequence[str | Path] = ()
) -> SWEInstance:
    """Validate one record; relative source paths are resolved against ``base``, and
    the source must lie inside ``base`` or one of ``source_roots``."""
    if not isinstance(record, dict):
        raise InvalidInput(
            f"{where}: an instance must be a JSON object, got {type(record).__name__}"
        )
    iid = record.get("instance_id", "?")
    try:
        inst = SWEInstance.model_validate(_source_from_repo_path(record, base))
    except ValidationError as e:
        raise InvalidInput(f"{where}: instance {iid!r}: {describe(e)}") from None
    try:
        inst.megaflow_source = inst.megaflow_source.resolved(base, [Path(r) for r in source_roots])
    except ValueError as e:
        raise InvalidInput(
            f"{where}: instance {iid!r}: field 'megaflow_source.path': {e}"
        ) from None
    return inst


def load_instances(
    path: str | Path,
    *,
    source_roots: Sequence[str | Path] = (),
    max_source_bytes: int | None = DEFAULT_MAX_SOURCE_BYTES,
) -> list[SWEInstance]:
    """Read every instance of a task set, in file order. Ids must be unique, the
    set must not be empty, and every source must lie inside the task set's folder
    or one of ``source_roots`` and be at most ``max_source_bytes`` (``None``: no cap)."""
    file = find_instance_file(Path(path))
    out: list[SWEInstance] = []
    seen: dict[str, str] = {}
    sized: set[tuple[str, str]] = set()
    for where, record in read_records(file):
        inst = parse_instance(record, where, file.parent, source_roots)
        if inst.instance_id in seen:
            first = seen[inst.instance_id]
            raise InvalidInput(f"{where}: instance {inst.instance_id!r} repeats the one at {first}")
        seen[inst.instance_id] = where
        src = inst.megaflow_source
        if (src.type, src.path) not in sized:
            try:
                check_source_size(src, max_source_bytes)
            except InvalidInput as e:
                raise InvalidInput(
                    f"{where}: instance {inst.instance_id!r}: field 'megaflow_source.path': {e}"
                ) from None
            sized.add((src.type, src.path))
        out.append(inst)
    if not out:
        raise InvalidInput(f"{file}: the task set holds no instances")
    return out
