"""Load and validate a run config, turning every problem into a field path and a reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from megaflow.config.models import RunConfig
from megaflow.config.paths import model_paths_beside
from megaflow.core.errors import ConfigError

MAX_CONFIG_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 64
"""Deepest nesting of mappings and lists a config may have (aliases included)."""
MAX_VALUES = 1_000_000
"""Most values (scalars, mappings, lists) a config may hold once YAML aliases are expanded."""
_TOO_DEEP = object()
_MISSING = {
    "tasks": "required field is missing: the tasks to run (a train run may name its "
    "train.sets instead)",
}
"""A clearer reason than pydantic's for a required field that is missing."""


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _user_loc(loc: tuple[int | str, ...], data: Any) -> tuple[int | str, ...]:
    """Drop the tag elements pydantic adds for tagged unions.

    pydantic reports ``runtime.local.bogus`` where the user wrote
    ``runtime: {type: local, bogus: 1}``; walk the input to find such tags. A tag
    that tells forms of a field apart by their shape rather than by a ``type``
    (``train.held_out``) starts with ``~``, which no field name does.
    """
    out: list[int | str] = []
    node = data
    for part in loc:
        if isinstance(part, str) and part.startswith("~"):
            continue  # a union tag of a field's shape
        if isinstance(node, dict) and isinstance(part, str) and part not in node:
            if node.get("type") == part:
                continue  # a union tag, not a field the user wrote
            out.append(part)
            node = None
        elif isinstance(node, dict):
            out.append(part)
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            out.append(part)
            node = node[part]
        else:
            out.append(part)
            node = None
    return tuple(out)


def errors_from_validation(exc: ValidationError, data: Any = None) -> list[tuple[str, str]]:
    """One (field path, reason) pair per pydantic error, in the user's terms."""
    out = []
    for err in exc.errors(include_url=False):
        loc = _user_loc(tuple(err["loc"]), data)
        reason = err["msg"]
        if err["type"] == "extra_forbidden":
            reason = "unknown field (check the spelling; see docs/configuration.md)"
        elif err["type"] == "missing":
            reason = _MISSING.get(_path(loc), "required field is missing")
        out.append((_path(loc), reason))
    return out


def _shape(data: Any, limit: int) -> tuple[int, int]:
    """How deep ``data`` nests and how many values it holds once aliases are
    expanded, each aliased (shared) part measured once; a structure that
    contains itself counts as deeper than ``limit``."""
    memo: dict[int, tuple[int, int]] = {}  # id -> (height, size); (-1, 0) while on the path
    stack: list[tuple[Any, int, bool]] = [(data, 1, False)]
    while stack:
        node, level, done = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        items = list(node.values()) if isinstance(node, dict) else node
        kids = [k for k in items if isinstance(k, (dict, list))]
        if done:
            height = 1 + max((memo[id(k)][0] for k in kids), default=0)
            size = 1 + len(items) - len(kids) + sum(memo[id(k)][1] for k in kids)
            memo[id(node)] = (height, size)
            continue
        seen = memo.get(id(node))
        if level > limit or (seen is not None and (seen[0] == -1 or level - 1 + seen[0] > limit)):
            return limit + 1, 0  # too deep, or contains itself
        if seen is None:
            memo[id(node)] = (-1, 0)
            stack.append((node, level, True))
            stack.extend((k, level + 1, False) for k in kids)
    return memo.get(id(data), (0, 1))


def _too_deep(source: str, text: str | None) -> ConfigError:
    where = _deep_line(text, MAX_DEPTH) if text is not None else ""
    return ConfigError(
        f"{source}: nested deeper than {MAX_DEPTH} levels{where}",
        [(f"(yaml){where}", f"nested deeper than {MAX_DEPTH} levels")],
    )


def _check_shape(data: Any, source: str, text: str | None = None) -> None:
    depth, size = _shape(data, MAX_DEPTH)
    if depth > MAX_DEPTH:
        raise _too_deep(source, text)
    if size > MAX_VALUES:
        raise ConfigError(
            f"{source}: holds {size} values once its aliases are expanded; the limit is "
            f"{MAX_VALUES}",
            [("(yaml)", "too many values (aliases expand too far)")],
        )


def _deep_line(text: str, limit: int) -> str:
    """Where the YAML text first nests deeper than ``limit`` (" at line N"), if it does."""
    depth = 0
    try:
        for ev in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > limit:
                    mark = ev.start_mark
                    return f" at line {mark.line + 1}" if mark is not None else ""
            elif isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
    except (yaml.YAMLError, RecursionError):
        pass
    return ""


def is_run_config(data: object) -> bool:
    """Whether parsed YAML is a run config rather than a cluster or plan file: it has
    ``tasks``, or a ``train:`` section (whose ``sets`` may stand in for ``tasks``)."""
    return isinstance(data, dict) and ("tasks" in data or "train" in data)


def parse_config(data: Any, source: str = "<config>") -> RunConfig:
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: a run config must be a mapping at the top level, got {type(data).__name__}",
            [("(top level)", "expected a mapping")],
        )
    _check_shape(data, source)
    try:
        return RunConfig.model_validate(data)
    except RecursionError:
        raise ConfigError(
            f"{source}: nested too deeply", [("(top level)", "nested too deeply")]
        ) from None
    except ValidationError as exc:
        errors = errors_from_validation(exc, data)
        lines = "\n".join(f"  {p}: {r}" for p, r in errors)
        raise ConfigError(f"{source}: {len(errors)} error(s)\n{lines}", errors) from None


def load_config(path: str | Path) -> RunConfig:
    """Read a YAML (or JSON) run config; raise ``ConfigError`` with every problem found."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read config {p}: {exc.strerror}", [("(file)", str(exc))]
        ) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{p}: config is {len(raw)} bytes; the limit is {MAX_CONFIG_BYTES}",
            [("(file)", "too large")],
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{p}: not valid UTF-8 at line {line} (byte {exc.start})",
            [(f"(file) at line {line}", "invalid UTF-8")],
        ) from None
    try:
        data = yaml.safe_load(text)
    except RecursionError:
        data = _TOO_DEEP
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(
            f"{p}: malformed YAML{where}: {problem}", [(f"(yaml){where}", str(problem))]
        ) from None
    if data is _TOO_DEEP:
        raise _too_deep(str(p), text)
    _check_shape(data, str(p), text)
    return model_paths_beside(parse_config(data, str(p)), p.resolve().parent)
