"""A health probe for a service running in this pod or host: ``python -m megaflow.rpc.probe``.

Kubernetes' exec probes run it (``deploy/kubernetes/``)::

    python -m megaflow.rpc.probe environment --config /etc/megaflow/cluster.yaml

It reads the service's port and TLS settings from the cluster config, calls
the authenticated Health service on ``127.0.0.1`` (the server in this pod,
whatever address clients use), and exits 0 when the server answers and
names the service, 1 when it does not (the reason on stderr), 2 for bad
input (no such service, a bad config, no token). The bearer token comes from
the config's ``auth`` (the manifests name the Secret's env var in
``auth.token_env``). It imports only the transport and the config, not the
CLI, so a probe costs a fraction of a second of CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import grpc

from megaflow.core.errors import MegaFlowError
from megaflow.rpc.config import SERVICES, ClusterConfig, Service, TlsConfig, load_cluster_config
from megaflow.rpc.server import check_once, open_channel


async def probe(cfg: ClusterConfig, service: Service, token: str, timeout: float) -> str | None:
    """None when the local server of ``service`` answers Health naming it; else why not."""
    ep = cfg.endpoint(service)
    tls = cfg.tls
    if tls is not None and tls.server_name is None:  # the certificate names the service's host
        tls = TlsConfig(**{**tls.model_dump(), "server_name": ep.host})
    async with open_channel(f"127.0.0.1:{ep.port}", tls, cfg.max_message_bytes) as channel:
        try:
            services = await check_once(channel, token, timeout=timeout)
        except grpc.aio.AioRpcError as err:
            return f"{service} on port {ep.port}: {err.code().name}: {err.details()}"
    if service not in services:
        return f"port {ep.port} serves {services}, not {service}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m megaflow.rpc.probe", description=__doc__)
    parser.add_argument("service", choices=SERVICES)
    parser.add_argument("--config", "-c", type=Path, required=True, help="Cluster config (YAML).")
    parser.add_argument("--timeout", type=float, default=3.0, help="Seconds to wait for it.")
    args = parser.parse_args(argv)
    try:
        cfg = load_cluster_config(args.config)
        token = cfg.auth.resolve(create=False)
    except MegaFlowError as exc:
        print(f"megaflow probe: {exc}", file=sys.stderr)
        return 2
    why = asyncio.run(probe(cfg, args.service, token, args.timeout))
    if why is not None:
        print(f"megaflow probe: not healthy: {why}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
