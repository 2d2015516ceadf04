"""Load and validate a run config, turning every problem into a field path and a reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from megaflow.config.models import RunConfig
from megaflow.core.errors import ConfigError

MAX_CONFIG_BYTES = 8 * 1024 * 1024


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
    ``runtime: {type: local, bogus: 1}``; walk the input to find such tags.
    """
    out: list[int | str] = []
    node = data
    for part in loc:
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
            reason = "required field is missing"
        out.append((_path(loc), reason))
    return out


def parse_config(data: Any, source: str = "<config>") -> RunConfig:
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: a run config must be a mapping at the top level, got {type(data).__name__}",
            [("(top level)", "expected a mapping")],
        )
    try:
        return RunConfig.model_validate(data)
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
        raise ConfigError(
            f"{p}: not valid UTF-8 at byte {exc.start}", [("(file)", "invalid UTF-8")]
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(
            f"{p}: malformed YAML{where}: {problem}", [(f"(yaml){where}", str(problem))]
        ) from None
    return parse_config(data, str(p))
