"""``megaflow serve-model``: run the OpenAI-compatible model gateway standalone."""

from __future__ import annotations

import asyncio
import functools
import signal
from pathlib import Path

import typer
import yaml
from pydantic import ValidationError

from megaflow.cli.common import console, fail
from megaflow.model.config import GatewayConfig, OpenAIModelConfig, ReplayModelConfig


def _load(config: Path | None) -> GatewayConfig:
    if config is None:
        return GatewayConfig()
    try:
        data = yaml.safe_load(config.read_text()) or {}
        return GatewayConfig.model_validate(data)
    except OSError as exc:
        fail(f"cannot read {config}: {exc}")
    except (yaml.YAMLError, ValidationError, RecursionError, UnicodeDecodeError) as exc:
        fail(f"{config} is not a gateway config: {exc}")


async def _serve(cfg: GatewayConfig, token: str, token_file: Path) -> None:
    from megaflow.model.factory import make_model_service
    from megaflow.model.gateway import GatewayServer
    from megaflow.rpc.auth import BearerAuthMiddleware, check_bearer

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    service = make_model_service(cfg.model)
    wrap = functools.partial(BearerAuthMiddleware, token=token)
    authorize = functools.partial(check_bearer, token=token)
    limit = cfg.max_body_mb * 1024 * 1024
    async with GatewayServer(
        service, cfg.host, cfg.port, wrap=wrap, max_body_bytes=limit, authorize=authorize
    ) as gw:
        console.print(
            f"model gateway serving [bold]{service.name}[/] ({cfg.model.type}) at {gw.base_url}",
            highlight=False,
        )
        console.print(f"clients send `Authorization: Bearer <token>`; the token is in {token_file}")
        await stop.wait()
    console.print(f"stopped after {service.calls_total} calls ({service.errors_total} errors)")


def serve_model(
    config: Path | None = typer.Argument(None, help="Gateway config YAML (host, port, model)."),
    host: str | None = typer.Option(None, help="Address to bind (overrides the config)."),
    port: int | None = typer.Option(None, help="Port to bind; 0 picks a free one."),
    base_url: str | None = typer.Option(
        None, help="Front an OpenAI-compatible server at this base URL (with --model)."
    ),
    model: str | None = typer.Option(None, help="Upstream model name for --base-url."),
    play: str | None = typer.Option(None, help="Replay backend: 'gold' or 'empty'."),
    token_file: Path = typer.Option(
        Path(".megaflow/model-token"),
        help="Bearer token every request must carry; generated (mode 0600) if absent.",
    ),
) -> None:
    """Run the OpenAI-compatible, recording model gateway until interrupted."""
    cfg = _load(config)
    if base_url:
        if not model:
            fail("--base-url needs --model (the upstream model name)")
        cfg.model = OpenAIModelConfig(base_url=base_url, model=model)
    elif play:
        if play not in ("gold", "empty"):
            fail(f"--play must be 'gold' or 'empty', not {play!r}")
        cfg.model = ReplayModelConfig(play=play)
    if host is not None:
        cfg.host = host
    if port is not None:
        cfg.port = port
    from megaflow.core.errors import ConfigError
    from megaflow.rpc.auth import load_or_create_token

    try:
        token = load_or_create_token(token_file)
    except ConfigError as exc:
        fail(str(exc))
    asyncio.run(_serve(cfg, token, token_file))
