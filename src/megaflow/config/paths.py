"""Where a relative path in a run config points: one rule for every path field.

A path is taken as given when it is absolute or exists from the current
directory (``make run`` from the repository root names
``.megaflow/models/...``); otherwise beside the config file, so
``megaflow train path/to/run.yaml`` from another directory finds the task
sets, policy and tokenizer its config names relative to its own folder.
The task paths go through :func:`resolve_path` where they are read; the
model directories are rewritten once, when the config is loaded
(:func:`model_paths_beside`), so every consumer (the rollout engine, the
trainer, the stored run config the dashboard decodes tokens with) sees the
same directory. :func:`missing_model_dirs` names each directory field that
points nowhere, for a command to refuse with exit 2 before it starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from megaflow.config.models import RunConfig


def resolve_path(path: str, config_dir: Path | None) -> Path:
    """``path`` as given if it is absolute or exists; else beside the config when it
    exists there; else as given (the caller's error then names what was written)."""
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists() or config_dir is None:
        return p
    beside = config_dir / p
    return beside if beside.exists() else p


def _model_dirs(cfg: RunConfig) -> list[tuple[str, str]]:
    """(field, value) of each model directory the config names."""
    out = []
    if cfg.model.type == "transformers":  # elsewhere model.model is a served model's name
        out.append(("model.model", str(getattr(cfg.model, "model", ""))))
    tokenizer = getattr(cfg.model, "tokenizer", None)  # an engine's: the served directory
    if isinstance(tokenizer, str):
        out.append(("model.tokenizer", tokenizer))
    if cfg.train is not None and cfg.train.policy is not None:
        out.append(("train.policy", cfg.train.policy))
    return out


def model_paths_beside(cfg: RunConfig, config_dir: Path) -> RunConfig:
    """``cfg`` with each relative model directory found beside the config made absolute."""
    found = {
        field: str(config_dir / value)
        for field, value in _model_dirs(cfg)
        if resolve_path(value, config_dir) != Path(value).expanduser()
    }
    if not found:
        return cfg
    model = cfg.model.model_copy(
        update={f.split(".", 1)[1]: v for f, v in found.items() if f.startswith("model.")}
    )
    update: dict[str, object] = {"model": model}
    if "train.policy" in found and cfg.train is not None:
        update["train"] = cfg.train.model_copy(update={"policy": found["train.policy"]})
    return cfg.model_copy(update=update)


def missing_model_dirs(cfg: RunConfig, config_dir: Path | None) -> list[tuple[str, str]]:
    """(field, problem) for each model directory the config names that is not one."""
    return [
        (field, f"{value} is not a directory (looked from here and beside the config)")
        for field, value in _model_dirs(cfg)
        if not resolve_path(value, config_dir).is_dir()
    ]
