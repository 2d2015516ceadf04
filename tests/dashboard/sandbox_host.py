"""A process holding live sandboxes for the dashboard's sandboxes page: ``python -m
tests.dashboard.sandbox_host ROOT PORT``.

It starts the ``local`` runtime (bubblewrap, cgroups) with its metrics on a
registry served at ``127.0.0.1:PORT/metrics``, as ``megaflow run
--metrics-port`` serves a run's; creates two sandboxes, keeps one busy with a
CPU-bound loop and one idle, prints ``ready`` and waits for SIGTERM. The
quickstart's tasks end in seconds, too fast to watch a sandbox's CPU; this
holds real sandboxes long enough.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from prometheus_client import CollectorRegistry, start_http_server

from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import LocalRuntimeConfig
from megaflow.monitoring.environment import EnvironmentMetrics


async def main(root: str, port: int) -> None:
    registry = CollectorRegistry()
    server, _ = start_http_server(port, addr="127.0.0.1", registry=registry)
    runtime = LocalRuntimeConfig(root=root, reap_interval_s=0.3).build(
        metrics=EnvironmentMetrics(registry)
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await runtime.start()
    try:
        busy = await runtime.create(EnvironmentSpec())
        await runtime.create(EnvironmentSpec())
        burn = asyncio.create_task(busy.exec("while :; do :; done", timeout=120))
        print("ready", flush=True)
        await stop.wait()
        burn.cancel()
    finally:
        await runtime.stop()
        server.shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
