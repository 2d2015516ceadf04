"""``megaflow results | export``: look at runs in the metadata store
(``--db`` a SQLite file, or ``--config`` a run or cluster config naming any store).

Each result row names the sample's type (as its attempt ran it), its group
and whether it is *ungraded*: its task ended without a graded result
(failed, timed out, cancelled), so it has no reward (``null``, never 0).
``export --training`` writes the token-level training rows instead
(:mod:`megaflow.app.training_export`), whose *masked* means left out of
training (ungraded, or without a token-exact episode). Both words are
defined once in :mod:`megaflow.core.outcomes`.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from megaflow.app.assembly import task_type
from megaflow.app.training_data import StoredSample, load_samples
from megaflow.app.training_export import Format, write_training
from megaflow.cli.common import (
    ConfigOption,
    DbOption,
    console,
    err_console,
    fail,
    storage_of,
    with_store,
)
from megaflow.cli.ids import resolve_run
from megaflow.cli.tables import id_width, relative_id
from megaflow.core.errors import MegaFlowError
from megaflow.core.outcomes import outcome, ungraded
from megaflow.core.tasks import group_id
from megaflow.storage.abstract import MetadataStore
from megaflow.storage.config import ArtifactsConfig, LocalArtifactsConfig


async def _rows(store: MetadataStore, given: str) -> tuple[str, list[dict[str, Any]]]:
    """The run ``given`` names (a whole id or a unique prefix), and its rows."""
    run_id = await resolve_run(store, given)
    results = {r.task_id: r for r in await store.list_results(run_id)}
    out = []
    for rec in await store.list_tasks(run_id):
        res = results.get(rec.id)
        kind, source = task_type(rec.spec)
        lost = ungraded(rec.state)
        out.append(
            {
                "task_id": rec.id,
                "run_id": run_id,
                "group_id": group_id(rec.spec),
                "type": kind.value,
                "type_source": source,
                "state": rec.state.value,
                "outcome": outcome(rec.state, res),
                "ungraded": lost,
                "attempts": rec.attempts,
                "preemptions": rec.preemptions,
                "success": res.success if res else None,
                "reward": res.reward if res and not lost else None,
                "error_kind": res.error_kind.value if res and res.error_kind else None,
                "error": (res.error if res else None) or rec.error,
                "metrics": res.metrics if res else {},
                "artifacts": res.artifacts if res else {},
                "payload": rec.spec.payload,
            }
        )
    return run_id, out


def results(
    run_id: str = typer.Argument(..., help="A run id or a unique prefix of one."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    db: str = DbOption,
    config: Path | None = ConfigOption,
) -> None:
    """Per-task results of a run."""
    run_id, rows = with_store(db, lambda s: _rows(s, run_id), config)
    if as_json:
        for row in rows:
            row.pop("payload")
        print(json.dumps(rows, indent=2))
        return
    types = sorted({r["type"] for r in rows})
    kind = f"{types[0]} tasks; " if len(types) == 1 else ""
    console.print(
        f"results of run [bold]{run_id}[/] ({kind}task ids relative to the run, "
        "as `megaflow logs TASK --run RUN` takes them)",
        highlight=False,
    )
    console.print(_results_table(rows, run_id, by_type=len(types) > 1))
    for t in types if len(types) > 1 else [None]:  # a train run's held-out samples apart
        these = [r for r in rows if t is None or r["type"] == t]
        console.print(f"{t}: " * (t is not None) + _tally(these), highlight=False)


def _tally(rows: list[dict[str, Any]]) -> str:
    done = [r for r in rows if r["success"] is not None]
    solved = sum(1 for r in done if r["success"])
    lost = sum(1 for r in rows if r["ungraded"])
    return f"{len(rows)} tasks, {len(done)} with results, {solved} resolved, {lost} ungraded"


_OUTCOME_WIDTH = 11  # "infra error", "unresolved"; "(ungraded)" goes on a second line


def _results_table(rows: list[dict[str, Any]], run_id: str, by_type: bool) -> Table:
    ids = [relative_id(r["task_id"], run_id) for r in rows]
    outcomes = [r["outcome"] + (" (ungraded)" if r["ungraded"] else "") for r in rows]
    # beside the id: type, outcome, attempts, reward and at least 10 of the error
    others = [5] * by_type + [_OUTCOME_WIDTH, 8, 6, 10]
    task_width = id_width(ids, console.width, others)
    error_width = max(10, console.width - 3 * (len(others) + 1) - 1 - task_width - sum(others[:-1]))
    table = Table()
    table.add_column("task", overflow="fold", width=task_width)
    if by_type:
        table.add_column("type")
    table.add_column("outcome", overflow="fold", max_width=_OUTCOME_WIDTH)
    table.add_column("attempts", justify="right")
    table.add_column("reward", justify="right")
    table.add_column("error", overflow="fold", width=error_width)
    for r, rel, out in zip(rows, ids, outcomes, strict=True):
        table.add_row(
            rel,
            *([r["type"]] if by_type else []),
            out,
            str(r["attempts"]),
            "" if r["reward"] is None else f"{r['reward']:.3f}",
            (r["error"] or "")[:160],
        )
    return table


async def _training_samples(
    store: MetadataStore, run_id: str, artifacts: ArtifactsConfig
) -> list[StoredSample]:
    async with artifacts.build() as art:
        return await load_samples(store, art, run_id)


def _report_problems(samples: list[StoredSample]) -> None:
    """Say which samples have no token-exact episode, and why: none is dropped silently."""
    bad = [s for s in samples if s.problem and not s.masked]
    for s in bad[:10]:
        err_console.print(f"[yellow]no token data:[/] {s.sample_id}: {s.problem}", highlight=False)
    if len(bad) > 10:
        err_console.print(f"... and {len(bad) - 10} more samples without token data")
    if bad:
        err_console.print(
            f"{len(bad)} of {len(samples)} samples have no token-exact episode; their rows are "
            "masked with token_error set"
        )


def _export_training(
    run_id: str, fmt: Format, target: Path | None, db: str, config: Path | None, artifacts: str
) -> None:
    try:
        art_cfg = storage_of(config).artifacts if config else LocalArtifactsConfig(root=artifacts)
    except MegaFlowError as exc:
        fail(str(exc))
    if isinstance(art_cfg, LocalArtifactsConfig) and not Path(art_cfg.root).is_dir():
        fail(f"no artifact store at {art_cfg.root}; pass --artifacts DIR or --config FILE")
    samples = with_store(db, lambda s: _training_samples(s, run_id, art_cfg), config)
    try:
        n = _written(lambda path: write_training(samples, path, fmt), target, fmt)
    except ImportError:
        fail("parquet export needs pyarrow: pip install 'megaflow[parquet]'")
    _report_problems(samples)
    masked = sum(1 for s in samples if s.as_training_sample().masked)
    err_console.print(
        f"wrote {n} training rows ({masked} masked: left out of training) to {target or 'stdout'}"
    )


def _written(write: Callable[[Path], int], target: Path | None, fmt: str) -> int:
    """Run ``write`` on ``target``, or, with no target, on a scratch file copied to stdout
    (Parquet only into a pipe or a file: it is binary)."""
    if target is not None:
        try:
            return write(target)
        except OSError as exc:
            fail(f"cannot write {target}: {exc}")
    if fmt == "parquet" and sys.stdout.isatty():
        fail("parquet is binary: pass -o FILE, or pipe stdout into a file")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / f"export.{fmt}"
        n = write(scratch)
        sys.stdout.flush()
        sys.stdout.buffer.write(scratch.read_bytes())
        sys.stdout.flush()
    return n


def export(
    run_id: str = typer.Argument(..., help="A run id."),
    fmt: str = typer.Option("jsonl", "--format", help="jsonl or parquet."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Output file; stdout if omitted."),
    training: bool = typer.Option(
        False, "--training", help="One token-level training row per sample (ids, logprobs, mask)."
    ),
    artifacts: str = typer.Option(
        LocalArtifactsConfig().root,
        "--artifacts",
        help="For --training without --config: the local artifact store's directory.",
    ),
    db: str = DbOption,
    config: Path | None = ConfigOption,
) -> None:
    """Write a run's tasks and results (or, with --training, its training samples)
    as JSONL or Parquet, to FILE or, without -o, to stdout."""
    if fmt not in ("jsonl", "parquet"):
        fail(f"unknown export format {fmt!r}; use jsonl or parquet")
    if training:
        kind: Format = "jsonl" if fmt == "jsonl" else "parquet"
        _export_training(run_id, kind, out, db, config, artifacts)
        return
    _, rows = with_store(db, lambda s: _rows(s, run_id), config)
    _written(lambda path: _write_rows(rows, path, fmt), out, fmt)
    err_console.print(f"wrote {len(rows)} rows to {out or 'stdout'}")


def _write_rows(rows: list[dict[str, Any]], target: Path, fmt: str) -> int:
    if fmt == "jsonl":
        with target.open("w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
        return len(rows)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        fail("parquet export needs pyarrow: pip install 'megaflow[parquet]'")
    flat = [
        {
            **r,
            "metrics": json.dumps(r["metrics"]),
            "artifacts": json.dumps(r["artifacts"]),
            "payload": json.dumps(r["payload"]),
        }
        for r in rows
    ]
    pq.write_table(pa.Table.from_pylist(flat), target)
    return len(rows)
