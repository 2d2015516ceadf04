"""The sandboxes' and the scheduler's live figures, read from Prometheus metrics.

The figures a run keeps only in memory (live sandboxes and their cgroup CPU
and memory, the scheduler's queue depth, fragmentation and decision count)
reach the dashboard through the metrics the services already export
(:mod:`megaflow.monitoring.environment`, :mod:`megaflow.monitoring.scheduler`):
a :class:`MetricsSource` is a ``/metrics`` URL (``megaflow run --metrics-port``,
or a cluster service's ``metrics_port`` behind the cluster token) or, when the
dashboard runs inside the control plane, that process's own registry. Each
call scrapes every source afresh; the only thing kept between calls is the
previous reading of each counter, so that rates (decisions per second, a
sandbox's CPU share) are the change since the last call. With no source, or
none answering, the views say so and show no figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

Samples = list[tuple[str, dict[str, str], float]]
NO_SOURCE = (
    "no metrics source: an embedded run in another process exposes its sandboxes and "
    "scheduler only as Prometheus metrics; start it with `megaflow run --metrics-port N` and "
    "the dashboard with `--metrics http://127.0.0.1:N/metrics` (in cluster mode, set the "
    "services' metrics_port)"
)


@dataclass(frozen=True)
class MetricsSource:
    """Where one process's metrics are read: ``url`` (with the bearer ``token`` if it needs
    one) or an in-process ``registry``."""

    name: str
    url: str | None = None
    token: str | None = None
    verify: str | bool = True
    registry: CollectorRegistry | None = field(default=None, compare=False)

    async def read(self, client: httpx.AsyncClient) -> str:
        if self.registry is not None:
            return generate_latest(self.registry).decode()
        assert self.url is not None
        headers = {"authorization": f"Bearer {self.token}"} if self.token else {}
        resp = await client.get(self.url, headers=headers)
        resp.raise_for_status()
        return resp.text


def parse(text: str) -> Samples:
    """Every sample of a Prometheus text exposition as (name, labels, value)."""
    return [
        (s.name, dict(s.labels), float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


class LiveMetrics:
    """Scrapes its sources on each call and turns the samples into the pages' views."""

    def __init__(
        self,
        sources: list[MetricsSource],
        timeout_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sources = sources
        self.timeout_s = timeout_s
        self._clock = clock
        self._last: dict[tuple[str, ...], tuple[float, float]] = {}

    async def _scrape(self) -> tuple[list[tuple[str, Samples]], list[dict[str, object]]]:
        read: list[tuple[str, Samples]] = []
        status: list[dict[str, object]] = []
        for src in self.sources:
            verify = src.verify
            async with httpx.AsyncClient(timeout=self.timeout_s, verify=verify) as client:
                try:
                    read.append((src.name, parse(await src.read(client))))
                    status.append({"name": src.name, "url": src.url, "ok": True, "error": None})
                except (httpx.HTTPError, ValueError) as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    status.append({"name": src.name, "url": src.url, "ok": False, "error": error})
        return read, status

    def _rate(self, key: tuple[str, ...], value: float) -> float | None:
        """Change of a counter per second since the previous call (None the first time)."""
        now = self._clock()
        before = self._last.get(key)
        self._last[key] = (now, value)
        if before is None or now <= before[0] or value < before[1]:
            return None
        return (value - before[1]) / (now - before[0])

    @staticmethod
    def _reason(status: list[dict[str, object]], found: bool, what: str) -> str | None:
        if not status:
            return NO_SOURCE
        if not any(s["ok"] for s in status):
            return "no metrics source answered"
        return None if found else f"the metrics read export no {what}"

    async def sandboxes(self) -> dict[str, Any]:
        """Live sandboxes by runtime and state (``live`` in all) and each one's CPU time, CPU
        share and memory; ``measured`` counts those with a cgroup reading so far (a runtime
        reads them every ``reap_interval_s``, so a new sandbox is live before it is measured)."""
        read, status = await self._scrape()
        by_id: dict[tuple[str, str, str], dict[str, object]] = {}
        states: dict[tuple[str, str], dict[str, float]] = {}
        for src, samples in read:
            for name, labels, value in samples:
                if name == "megaflow_sandboxes":
                    states.setdefault((labels["runtime"], src), {})[labels["state"]] = value
                elif name in ("megaflow_sandbox_cpu_seconds", "megaflow_sandbox_memory_bytes"):
                    key = (src, labels["runtime"], labels["sandbox"])
                    row = by_id.setdefault(
                        key, {"source": src, "runtime": key[1], "sandbox": key[2]}
                    )
                    if name.endswith("cpu_seconds"):
                        row["cpu_seconds"] = value
                        share = self._rate(("cpu", *key), value)
                        row["cpu_percent"] = None if share is None else 100 * share
                    else:
                        row["memory_bytes"] = value
        found = bool(states) or bool(by_id)
        return {
            "sources": status,
            "reason": self._reason(status, found, "sandbox metrics"),
            "states": [
                {"runtime": rt, "source": src, "states": by}
                for (rt, src), by in sorted(states.items())
            ],
            "live": int(sum(v for by in states.values() for v in by.values())),
            "measured": len(by_id),
            "sandboxes": sorted(by_id.values(), key=lambda r: str(r["sandbox"])),
        }

    async def scheduler(self) -> dict[str, Any]:
        """Queue depth, fragmentation, decisions (total and per second), tasks by state."""
        read, status = await self._scrape()
        rows: list[dict[str, object]] = []
        for src, samples in read:
            values = {n: v for n, labels, v in samples if not labels}
            if "megaflow_scheduler_queue_depth" not in values:
                continue
            decisions = values.get("megaflow_scheduler_decisions_total")
            rows.append({
                "source": src,
                "queue_depth": values["megaflow_scheduler_queue_depth"],
                "fragmentation": values.get("megaflow_scheduler_fragmentation_ratio"),
                "decisions": decisions,
                "decisions_per_s": None
                if decisions is None
                else self._rate(("decisions", src), decisions),
                "tasks": {
                    labels["state"]: v
                    for n, labels, v in samples
                    if n == "megaflow_scheduler_tasks" and "state" in labels
                },
            })  # fmt: skip
        return {
            "sources": status,
            "reason": self._reason(status, bool(rows), "scheduler metrics"),
            "schedulers": rows,
        }
