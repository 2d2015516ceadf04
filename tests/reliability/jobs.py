"""Run configs for the reliability tests: small real jobs on local sandboxes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def inline_job(tmp: Path, model: dict[str, Any], n: int = 1, **over: Any) -> dict[str, Any]:
    """``n`` inline tasks (no grading: a clean submit is a success) on local sandboxes."""
    cfg: dict[str, Any] = {
        "name": "rel",
        "max_attempts": 2,
        "tasks": {
            "type": "inline",
            "tasks": [
                {"id": f"t{i}", "payload": {"problem_statement": "say hello"}} for i in range(n)
            ],
        },
        "agent": {"type": "builtin", "max_steps": 6, "max_format_errors": 2},
        "model": model,
        "environment": {
            "runtime": {"type": "local", "root": str(tmp / "sb")},
            "pool": {"warm_share": 0},
        },
        "scheduler": {"max_concurrency": 2, "retry": {"base_s": 0.05, "max_s": 0.2}},
        "storage": {
            "metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
            "artifacts": {"type": "local", "root": str(tmp / "art")},
        },
    }
    cfg.update(over)
    return cfg


def openai_model(base_url: str, **over: Any) -> dict[str, Any]:
    return {"type": "openai", "base_url": base_url, "model": "flaky", "timeout_s": 5, **over}
