"""The ray fleet on a real multi-node Ray cluster on loopback.

A head (no slots) and two worker nodes started with ``ray start``; a run
spread over both; one worker SIGKILLed mid-run. Every task ends in exactly
one terminal state with one result, the killed node's work re-runs on the
survivor, and no sandbox is left there.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from megaflow.app.job import Job
from megaflow.config import parse_config
from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind
from tests.fixtures.ray_cluster import RayCluster
from tests.reliability.ledger import check_ledger, read_ledger

pytestmark = [pytest.mark.ray, pytest.mark.slow]
N = 8


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    c = RayCluster()
    try:
        c.start_head()
        c.add_nodes(["node_a", "node_b"], slots=2)
        yield c
    finally:
        c.stop()


def ray_job(tmp: Path, address: str) -> dict[str, Any]:
    return {
        "name": "rayfleet",
        "max_attempts": 3,
        "tasks": {
            "type": "inline",
            "tasks": [{"id": f"t{i}", "payload": {"problem_statement": "wait"}} for i in range(N)],
        },
        "agent": {"type": "builtin", "max_steps": 4},
        "model": {"type": "scripted", "bash": ["sleep 2 && echo done"]},
        "environment": {
            "runtime": {"type": "local", "root": str(tmp / "sb")},
            "pool": {"warm_share": 0},
        },
        "scheduler": {"max_concurrency": 4, "retry": {"base_s": 0.05, "max_s": 0.2}},
        "fleet": {"type": "ray", "address": address, "poll_s": 0.5, "lost_after_s": 3.0},
        "storage": {
            "metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
            "artifacts": {"type": "local", "root": str(tmp / "art")},
        },
    }


def node_of(nodes: list[dict[str, Any]], resource: str) -> str:
    return next(str(n["NodeID"]) for n in nodes if n["Alive"] and resource in n["Resources"])


async def test_a_run_survives_a_killed_node(cluster: RayCluster, tmp_path: Path) -> None:
    import ray

    async with Job(parse_config(ray_job(tmp_path, cluster.address))) as job:
        fleet = job.fleet
        assert fleet is not None
        nodes = ray.nodes()  # type: ignore[no-untyped-call]
        a, b = node_of(nodes, "node_a"), node_of(nodes, "node_b")
        assert set(fleet.agents) == {a, b}, "one node agent per worker, none on the head"
        await job.submit()
        # both workers run sandboxes before one of them dies
        deadline = time.monotonic() + 60
        while True:
            stats = {n: await fleet.actor(n).stats.remote() for n in (a, b)}
            if all(s["created"] >= 1 for s in stats.values()):
                break
            assert time.monotonic() < deadline, f"sandboxes never ran on both nodes: {stats}"
            await asyncio.sleep(0.1)
        assert cluster.kill_node(cluster.nodes[1]) > 0
        counts = await asyncio.wait_for(job.wait(), 120)
        ledger = await read_ledger(job.stores.metadata, job.run_id)
        errors = {t: [(x.instance, x.error) for x in atts] for t, atts in ledger.attempts.items()}
        assert counts[job.run_id] == {TaskState.SUCCEEDED: N}, errors
        assert fleet.lost_total == 1
        assert set(fleet.agents) == {a}
        assert await fleet.actor(a).sandboxes.remote() == [], "a sandbox left on the survivor"
    check_ledger(ledger, N)
    on_b = {t for t, atts in ledger.attempts.items() if any(x.instance == b for x in atts)}
    assert on_b, "no task ever ran on the killed node"
    for tid, atts in ledger.attempts.items():
        done = [x for x in atts if x.error_kind is None]
        assert len(done) == 1, (tid, atts)
        assert done[-1] is atts[-1], (tid, atts)
    cut = {t for t in on_b if ledger.attempts[t][-1].instance != b}
    assert cut, "no task of the killed node re-ran elsewhere"
    for tid in cut:
        first, last = ledger.attempts[tid][0], ledger.attempts[tid][-1]
        assert last.instance == a, (tid, ledger.attempts[tid])
        assert any(x.error_kind is ErrorKind.INFRA for x in ledger.attempts[tid] if x.instance == b)
        assert first is not last
