"""``megaflow cancel RUN|TASK``: stop a run, or one task of it.

On a cluster (``--cluster``) it goes through the control plane's
``ControlPlane.cancel``: queued tasks leave the queue, running attempts are
interrupted, each ends CANCELLED with a result of kind ``cancelled``.

Without ``--cluster`` it works on the metadata store (``--db`` or
``--config``) of an embedded run, which only its own process drives. That
run is cancelled with Ctrl-C in that process; from here only a run whose
process is gone is cancelled, by recording its unfinished tasks as CANCELLED
(one guarded batch: a task that moved meanwhile fails the whole batch). A
run is known to be gone when its lock (:mod:`megaflow.cli.run_lock`) is
free. Where that cannot be told (a server store), only a run with nothing in
flight is cancelled: a task in flight may belong to a live process.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from megaflow.cli.common import (
    EXIT_BAD_INPUT,
    ConfigOption,
    DbOption,
    console,
    fail,
    metadata_config,
    with_store,
)
from megaflow.cli.ids import resolve_run, resolve_task
from megaflow.cli.run_lock import Liveness, driver_liveness
from megaflow.core.errors import NotFound
from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind, TaskRecord, TaskResult
from megaflow.storage.abstract import MetadataStore, Transition

_CTRL_C = "an embedded run is cancelled with Ctrl-C in its own process"


async def _targets(store: MetadataStore, ident: str) -> tuple[str, str | None, list[TaskRecord]]:
    """(run id, task id or None, the tasks concerned) for a run id or a task id, each
    whole or as :mod:`megaflow.cli.ids` takes it (a run prefix, a relative task id)."""
    if "/" not in ident:
        run_id = await resolve_run(store, ident)
        return run_id, None, await store.list_tasks(run_id)
    try:
        task_id = await resolve_task(store, ident)
    except NotFound:
        raise NotFound(f"no run or task {ident!r} in the metadata store") from None
    rec = await store.get_task(task_id)
    return rec.spec.run_id, task_id, [rec]


async def _record_cancelled(store: MetadataStore, tasks: list[TaskRecord], why: str) -> None:
    """Every task CANCELLED in one guarded batch, then its result and open attempt."""
    await store.transition_many(
        [Transition(r.id, TaskState.CANCELLED, expect=r.state, error=why) for r in tasks]
    )
    now = time.time()
    await store.put_results(
        [TaskResult(task_id=r.id, error_kind=ErrorKind.CANCELLED, error=why) for r in tasks]
    )
    for r in tasks:
        if not r.state.active:
            continue
        attempts = await store.list_attempts(r.id)
        if attempts and attempts[-1].ended_at is None:
            a = attempts[-1]
            closed = a.model_copy(update={"ended_at": now, "error_kind": ErrorKind.CANCELLED})
            await store.put_attempt(closed.model_copy(update={"error": why}))


def _cancel_in_store(ident: str, db: str, config: Path | None) -> None:
    meta = metadata_config(db, config)

    async def go(store: MetadataStore) -> str:
        run_id, task_id, records = await _targets(store, ident)
        what = f"task {task_id}" if task_id else f"run {run_id}"
        live = await driver_liveness(store, meta, run_id)  # the job's lock or lease
        if live is Liveness.ALIVE:
            fail(
                f"{what}: its `megaflow run` process is still running; "
                f"{_CTRL_C} (or submit it to a cluster to cancel it from elsewhere)",
                EXIT_BAD_INPUT,
            )
        unfinished = [r for r in records if not r.state.terminal]
        if not unfinished:
            return f"nothing to cancel: every task of {what} has finished"
        in_flight = [r for r in unfinished if r.state.active]
        if in_flight and live is Liveness.UNKNOWN:
            fail(
                f"{what}: {len(in_flight)} task(s) are in flight ({in_flight[0].state.value}) "
                f"and whether the run's process is alive cannot be told from this {meta.type} "
                f"store; {_CTRL_C}; if that process is gone, finish the run with "
                f"`megaflow run --resume {run_id}` or cancel it once it is resumed",
                EXIT_BAD_INPUT,
            )
        await _record_cancelled(store, unfinished, "cancelled with megaflow cancel")
        lost = f", {len(in_flight)} of them in flight when its process ended" if in_flight else ""
        return f"cancelled {len(unfinished)} task(s) of {what} in the metadata store{lost}"

    console.print(with_store(db, go, config), highlight=False)


def cancel(
    ident: str = typer.Argument(..., metavar="RUN|TASK", help="A run id or a task id."),
    cluster: str | None = typer.Option(
        None, "--cluster", help="Cancel through a running cluster's scheduler (host:port)."
    ),
    token_file: Path | None = typer.Option(None, "--token-file", help="With --cluster."),
    ca_file: Path | None = typer.Option(None, "--ca-file", help="With a grpcs:// --cluster."),
    cluster_config: Path | None = typer.Option(
        None, "--cluster-config", help="With --cluster: its config, for the token."
    ),
    db: str = DbOption,
    config: Path | None = ConfigOption,
) -> None:
    """Cancel a run's unfinished tasks, or one task."""
    if cluster is not None:
        from megaflow.cli import serve_cmd

        serve_cmd.cluster_cancel(ident, cluster, token_file, ca_file, cluster_config)
    else:
        _cancel_in_store(ident, db, config)
