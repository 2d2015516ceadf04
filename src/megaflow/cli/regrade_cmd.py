"""``megaflow regrade RUN``: grade a stored run's samples again, without inference."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from megaflow.cli.common import ConfigOption, DbOption, console, fail, metadata_config, storage_of
from megaflow.cli.ids import resolve_run
from megaflow.core.errors import MegaFlowError

if TYPE_CHECKING:
    from megaflow.grading.config import GraderConfig


def _grading(path: Path | None) -> GraderConfig | None:
    """The ``grading`` section of a YAML file (a run config, or the section alone)."""
    if path is None:
        return None
    import yaml
    from pydantic import TypeAdapter, ValidationError

    from megaflow.grading.config import GraderConfig

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        fail(f"--grading {path}: cannot read it: {exc}")
    if isinstance(data, dict) and isinstance(data.get("grading"), dict):
        data = data["grading"]
    try:
        return TypeAdapter(GraderConfig).validate_python(data)
    except ValidationError as exc:
        fail(f"--grading {path}: not a grading section: {exc}")


def regrade(
    run_id: str = typer.Argument(
        ..., help="The run whose samples to grade again (its id or a unique prefix)."
    ),
    grading: Path = typer.Option(
        None,
        "--grading",
        help="A YAML file with a grading section (or a run config): grade with it instead "
        "of the run's own grader.",
    ),
    artifacts: str = typer.Option(
        ".megaflow/artifacts", "--artifacts", help="Without --config: the artifact directory."
    ),
    concurrency: int = typer.Option(4, "--concurrency", min=1, max=256),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per sample."),
    db: str = DbOption,
    config: Path | None = ConfigOption,
) -> None:
    """Grade what a run's attempts took (patches, final files, answers) again, and
    say which rewards changed; the agent does not run."""
    from megaflow.app.regrade import regrade as run_regrade
    from megaflow.storage.config import LocalArtifactsConfig
    from megaflow.storage.factory import make_artifact_store, make_metadata_store

    override = _grading(grading)
    meta_cfg = metadata_config(db, config)
    art_cfg = storage_of(config).artifacts if config else LocalArtifactsConfig(root=artifacts)

    async def go() -> tuple[str, list[object]]:
        async with make_metadata_store(meta_cfg) as md, make_artifact_store(art_cfg) as art:
            rid = await resolve_run(md, run_id)  # a whole id or a unique prefix
            return rid, list(await run_regrade(md, art, rid, override, concurrency))

    try:
        run_id, done = asyncio.run(go())
    except MegaFlowError as exc:
        fail(str(exc))
    from megaflow.app.regrade import Regraded

    rows = [r for r in done if isinstance(r, Regraded)]
    if as_json:
        for r in rows:
            typer.echo(json.dumps({**r.__dict__, "changed": r.changed}))
        return
    table = Table(title=f"regrade {run_id}")
    for col in ("task", "before", "after", "changed", "note"):
        table.add_column(col)
    for r in rows:
        note = r.skipped or r.error or ""
        fmt = [f"{v:.3f}" if v is not None else "-" for v in (r.before, r.after)]
        table.add_row(r.task_id, *fmt, "yes" if r.changed else "", note[:80])
    console.print(table)
    changed = sum(r.changed for r in rows)
    skipped = sum(r.skipped is not None for r in rows)
    console.print(f"{len(rows)} samples: {changed} changed, {skipped} skipped")
