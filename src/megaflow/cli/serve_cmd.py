"""``megaflow serve | up | down | submit``, ``status --cluster`` and ``cancel --cluster``:
distributed mode.

``serve`` runs services of a cluster config in this process; ``up`` starts a
local development cluster with one process per service; ``submit`` and
``status --cluster`` talk to a running Scheduler service. The bearer token
comes from the cluster config (``auth``), or ``--token-file``, or the
``MEGAFLOW_TOKEN`` variable.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

import typer
from rich.table import Table

from megaflow.app.gc_tuning import tuned_gc
from megaflow.cli.common import EXIT_FAILED, console, fail
from megaflow.core.errors import MegaFlowError
from megaflow.core.states import TaskState
from megaflow.rpc.config import (
    SERVABLE,
    SERVICES,
    ClusterConfig,
    Service,
    TlsConfig,
    load_cluster_config,
)
from megaflow.scheduler.control import RunStatus

T = TypeVar("T")
DEFAULT_CLUSTER = Path("cluster.yaml")
TOKEN_ENV = "MEGAFLOW_TOKEN"
TokenFileOption = typer.Option(
    None, "--token-file", help=f"Bearer token file; default: ${TOKEN_ENV}, then the cluster's."
)
CaOption = typer.Option(None, "--ca-file", help="CA to verify a grpcs:// cluster with.")


def _run(coro: Awaitable[T]) -> T:
    try:
        return asyncio.run(coro)  # type: ignore[arg-type]
    except MegaFlowError as exc:
        fail(str(exc), EXIT_FAILED if not isinstance(exc, ValueError) else 2)


def _config(path: Path | None) -> ClusterConfig:
    if path is None:
        return ClusterConfig()
    try:
        return load_cluster_config(path)
    except MegaFlowError as exc:
        fail(str(exc))


def serve(
    service: str = typer.Argument(..., help="scheduler, environment, agent, model or all."),
    config: Path | None = typer.Option(None, "--config", "-c", help="Cluster config (YAML)."),
) -> None:
    """Run one service (or all) of a cluster in this process, until SIGTERM or Ctrl-C."""
    from megaflow.cli.cluster_dashboard import serve_cluster

    if service not in (*SERVICES, "all"):
        fail(f"unknown service {service!r}; choose from {', '.join(SERVICES)} or all")
    chosen: list[Service] = list(SERVABLE) if service == "all" else [service]  # type: ignore[list-item]
    cfg = _config(config)

    async def go() -> None:
        token = cfg.auth.resolve(create=False)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)

        def ready(name: str, target: str) -> None:
            tls = "TLS" if cfg.tls else "plaintext"
            console.print(f"{name} service listening on {target} ({tls})", highlight=False)

        def dashboard(link: str) -> None:
            console.print(f"dashboard: sign in once with {link}", highlight=False, soft_wrap=True)

        await serve_cluster(chosen, cfg, token, stop, ready, dashboard)

    with tuned_gc():  # a long-lived process from here on
        _run(go())


def up(
    config: Path = typer.Argument(DEFAULT_CLUSTER, help="Cluster config (YAML)."),
    timeout: float = typer.Option(60.0, help="Seconds to wait for every service to be healthy."),
) -> None:
    """Start a local cluster: each service in its own process, health-checked."""
    from megaflow.app import launcher

    cfg = _config(config)

    try:
        token = cfg.auth.resolve(create=True)  # generated and stored 0600 when absent
        started = launcher.up(cfg, config, token, timeout)
    except MegaFlowError as exc:
        fail(str(exc), EXIT_FAILED)
    table = Table(title="megaflow cluster")
    for col in ("service", "address", "pid", "log"):
        table.add_column(col)
    for m in started:
        table.add_row(m.service, m.target, str(m.pid), m.log)
    console.print(table)
    if cfg.auth.token is None:
        console.print(f"token: {cfg.auth.token_file} (mode 0600)", highlight=False)
    if cfg.dashboard is not None:
        url = f"{'https' if cfg.tls else 'http'}://{cfg.dashboard.host}:{cfg.dashboard.port}/"
        console.print(f"dashboard: {url} (sign in with the token)", highlight=False)


def down(
    config: Path = typer.Argument(DEFAULT_CLUSTER, help="Cluster config (YAML)."),
) -> None:
    """Stop the local cluster that `megaflow up` started from CONFIG."""
    from megaflow.app import launcher

    cfg = _config(config if config.exists() else None)
    stopped = launcher.down(Path(cfg.state_dir))
    if not stopped:
        console.print("no cluster was running")
    for m in stopped:
        console.print(f"stopped {m.service} (pid {m.pid})", highlight=False)


def _token(token_file: Path | None, cluster_config: Path | None) -> str:
    if token_file is not None:
        from megaflow.rpc.auth import read_token

        return read_token(token_file)
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV]
    return _config(cluster_config).auth.resolve(create=False)


def _target(url: str, ca_file: Path | None) -> tuple[str, TlsConfig | None]:
    """``host:port``, ``grpc://host:port`` or ``grpcs://host:port`` (TLS)."""
    if url.startswith("grpcs://"):
        tls = TlsConfig(ca_file=str(ca_file) if ca_file else None)
        return url.removeprefix("grpcs://"), tls
    return url.removeprefix("grpc://"), None


def submit(
    config: Path = typer.Argument(..., help="A run config (YAML)."),
    cluster: str = typer.Option(..., "--cluster", help="Scheduler address: host:port."),
    wait: bool = typer.Option(False, "--wait", help="Wait until every task is terminal."),
    token_file: Path | None = TokenFileOption,
    ca_file: Path | None = CaOption,
    cluster_config: Path | None = typer.Option(None, "--cluster-config", help="For its token."),
) -> None:
    """Submit the run described by CONFIG to a running cluster."""
    from megaflow.app.assembly import runs_of
    from megaflow.config.loader import load_config
    from megaflow.rpc.scheduler_client import GrpcControlPlane

    try:
        runs = runs_of(load_config(config), config.parent)
    except MegaFlowError as exc:
        fail(str(exc))
    target, tls = _target(cluster, ca_file)

    async def go() -> list[RunStatus]:
        async with GrpcControlPlane(target, _token(token_file, cluster_config), tls) as cp:
            for run, tasks in runs:
                await cp.submit_run(run, tasks)
            return [await cp.wait(run.id) for run, _ in runs] if wait else []

    final = _run(go())
    for run, tasks in runs:
        console.print(f"submitted run {run.id}: {len(tasks)} tasks", highlight=False)
    if final:
        _print_runs(final, cluster_config)


_ENDED = {
    TaskState.SUCCEEDED: "graded",
    TaskState.FAILED: "failed",
    TaskState.TIMED_OUT: "timed out",
    TaskState.CANCELLED: "cancelled",
}


def _by_state(counts: dict[TaskState, int]) -> dict[str, int]:
    """What the control plane's counts alone tell: a graded task, not whether it resolved."""
    return {_ENDED.get(s, s.value): n for s, n in counts.items()}


def _store_outcomes(cluster_config: Path, run_ids: list[str]) -> dict[str, dict[str, int]]:
    """Tasks by outcome (resolved, unresolved, error kinds) from the metadata store the
    cluster config names, for the runs it holds; empty when it cannot be read here."""
    from megaflow.app.summary import outcome_counts
    from megaflow.storage.config import SqliteMetadataConfig
    from megaflow.storage.factory import make_metadata_store

    meta = _config(cluster_config).scheduler.storage.metadata
    if meta.type == "memory" or (
        isinstance(meta, SqliteMetadataConfig) and not Path(meta.path).exists()
    ):
        return {}

    async def go() -> dict[str, dict[str, int]]:
        out = {}
        async with make_metadata_store(meta) as store:
            known = {r.id for r in await store.list_runs()}
            for rid in run_ids:
                if rid in known:
                    out[rid] = await outcome_counts(store, rid)
        return out

    try:
        return asyncio.run(go())
    except (MegaFlowError, OSError) as exc:
        console.print(f"cannot read the cluster's metadata store: {exc}", highlight=False)
        return {}


def _print_runs(rows: list[RunStatus], cluster_config: Path | None = None) -> None:
    from megaflow.cli.tables import outcome_table

    stored = _store_outcomes(cluster_config, [r.run.id for r in rows]) if cluster_config else {}
    table_rows = [(r.run.id, r.run.name, stored.get(r.run.id) or _by_state(r.counts)) for r in rows]
    console.print(outcome_table("runs: tasks by outcome", table_rows, console.width))
    if any(r.counts.get(TaskState.SUCCEEDED) and r.run.id not in stored for r in rows):
        console.print(
            "graded: ran and was graded; --cluster-config CLUSTER.yaml reads its metadata "
            "store to split resolved from unresolved and errors by kind",
            highlight=False,
        )


def cluster_status(
    cluster: str,
    run_id: str | None,
    token_file: Path | None = None,
    ca_file: Path | None = None,
    cluster_config: Path | None = None,
) -> None:
    """``megaflow status --cluster URL``: runs by state, from a running Scheduler service."""
    from megaflow.rpc.scheduler_client import GrpcControlPlane

    target, tls = _target(cluster, ca_file)

    async def go() -> list[RunStatus]:
        async with GrpcControlPlane(target, _token(token_file, cluster_config), tls) as cp:
            return [await cp.get_run(run_id)] if run_id else await cp.list_runs()

    rows = _run(go())
    if not rows:
        console.print("no runs yet")
        return
    _print_runs(rows, cluster_config)


def cluster_cancel(
    ident: str,
    cluster: str,
    token_file: Path | None = None,
    ca_file: Path | None = None,
    cluster_config: Path | None = None,
) -> None:
    """``megaflow cancel ID --cluster URL``: a run (or one task, ``<run>/<task>/<n>``)
    cancelled through the Scheduler service's ``ControlPlane.cancel``."""
    from megaflow.core.errors import InvalidInput, NotFound
    from megaflow.rpc.scheduler_client import GrpcControlPlane

    target, tls = _target(cluster, ca_file)

    async def go() -> tuple[str, str | None, int]:
        async with GrpcControlPlane(target, _token(token_file, cluster_config), tls) as cp:
            try:
                await cp.get_run(ident)
                run_id, task_id = ident, None
            except NotFound:  # a task id names its run first
                run_id, task_id = ident.split("/", 1)[0], ident
            try:
                return run_id, task_id, await cp.cancel(run_id, task_id)
            except NotFound as exc:  # bad input: exit 2
                raise InvalidInput(f"no run or task {ident!r} on {cluster}: {exc}") from None

    run_id, task_id, n = _run(go())
    what = f"task {task_id}" if task_id else f"run {run_id}"
    console.print(f"cancelled {n} task(s) of {what}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``serve``, ``up``, ``down`` and ``submit`` to the ``megaflow`` app."""
    for name, fn in (("serve", serve), ("up", up), ("down", down), ("submit", submit)):
        app.command(name)(fn)
