"""``megaflow dashboard``: serve the web dashboard over the configured stores.

The stores are those of ``--config`` (a run config's ``storage`` section, or
a cluster config's scheduler storage) or, without it, the SQLite file
``--db`` and the artifact directory ``--artifacts``. The bearer token comes
from ``--token-file`` (created with mode 0600 if absent); the command prints
a one-time link that signs a browser in. ``--metrics URL`` (repeatable) names
the Prometheus endpoints the sandboxes and scheduler pages read (a run's
``--metrics-port``; ``--metrics-token-file`` for a cluster's, behind its
token); ``--train-dir`` and ``--checkpoint-prefix`` where ``megaflow train``
leaves its curves.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from megaflow.cli.common import DEFAULT_DB, ConfigOption, console, fail, metadata_config, storage_of
from megaflow.core.errors import MegaFlowError


def dashboard(
    db: str = typer.Option(DEFAULT_DB, "--db", help="Metadata database (SQLite file)."),
    artifacts: str = typer.Option(
        ".megaflow/artifacts", "--artifacts", help="Artifact directory (without --config)."
    ),
    config: Path | None = ConfigOption,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(20080, "--port", min=0, max=65535, help="Port; 0 picks a free one."),
    token_file: Path = typer.Option(
        Path(".megaflow/dashboard-token"),
        "--token-file",
        help="Bearer token every request must carry; generated (mode 0600) if absent.",
    ),
    interval: float = typer.Option(
        1.0, "--interval", min=0.1, help="Seconds between live updates."
    ),
    metrics: list[str] = typer.Option(
        [], "--metrics", help="A Prometheus /metrics URL to read sandboxes and scheduler from."
    ),
    metrics_token_file: Path | None = typer.Option(
        None, "--metrics-token-file", help="Bearer token for the --metrics URLs (a cluster's)."
    ),
    train_dir: Path = typer.Option(
        Path(".megaflow/train"), "--train-dir", help="Where megaflow train writes its curves."
    ),
    checkpoint_prefix: str = typer.Option(
        "train/checkpoints", "--checkpoint-prefix", help="Artifact prefix of train checkpoints."
    ),
) -> None:
    """Serve the web dashboard: runs, tasks, grades and trajectories, updated live."""
    from megaflow.dashboard.auth import DashboardAuth
    from megaflow.dashboard.live import LiveMetrics, MetricsSource
    from megaflow.dashboard.server import serve
    from megaflow.rpc.auth import load_or_create_token, read_token
    from megaflow.storage.config import LocalArtifactsConfig
    from megaflow.storage.factory import make_artifact_store, make_metadata_store

    meta_cfg = metadata_config(db, config)
    try:
        art_cfg = storage_of(config).artifacts if config else LocalArtifactsConfig(root=artifacts)
        auth = DashboardAuth(load_or_create_token(token_file))
        meta, store = make_metadata_store(meta_cfg), make_artifact_store(art_cfg)
        mtoken = read_token(metrics_token_file) if metrics_token_file else None
        for url in metrics:
            if not url.startswith(("http://", "https://")):
                fail(f"--metrics {url!r} is not an http(s):// URL")
        live = LiveMetrics([MetricsSource(name=u, url=u, token=mtoken) for u in metrics])
    except MegaFlowError as exc:
        fail(str(exc))

    def ready(bound: int) -> None:
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        console.print(f"dashboard on http://{shown}:{bound}/ (token in {token_file})")
        console.print(f"sign in once with: http://{shown}:{bound}/login?code={auth.new_code()}")

    try:
        asyncio.run(
            serve(
                meta,
                store,
                auth,
                host=host,
                port=port,
                interval=interval,
                live=live,
                train_dir=train_dir,
                checkpoint_prefix=checkpoint_prefix,
                on_ready=ready,
            )
        )
    except KeyboardInterrupt:
        pass
    except (MegaFlowError, OSError) as exc:
        fail(str(exc))
