"""Environment metrics, fed by a real local runtime and pool, on a private registry."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.config import LocalRuntimeConfig, PoolConfig
from megaflow.environment.local import LocalRuntime
from megaflow.environment.pool import SandboxPool
from megaflow.monitoring.environment import EnvironmentMetrics
from tests.environment.conftest import leak_check  # noqa: F401 - autouse leak check


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[LocalRuntime, CollectorRegistry]]:
    registry = CollectorRegistry()
    metrics = EnvironmentMetrics(registry)
    rt = LocalRuntime(LocalRuntimeConfig(root=str(tmp_path / "local")), metrics=metrics)
    async with rt:
        yield rt, registry


def value(reg: CollectorRegistry, name: str, **labels: str) -> float:
    got = reg.get_sample_value(name, labels)
    return 0.0 if got is None else got


async def test_runtime_and_pool_report_metrics(
    setup: tuple[LocalRuntime, CollectorRegistry],
) -> None:
    rt, reg = setup
    assert rt.metrics is not None
    pool = SandboxPool(rt, "persistent", PoolConfig(min=1, max=1), metrics=rt.metrics)
    async with pool:
        await pool.prewarm(EnvironmentSpec())
        sb = await pool.acquire(EnvironmentSpec(), owner="t1")
        await sb.exec("true")
        await sb.exec("sleep 5", timeout=0.2)
        await rt.collect_stats()
        assert value(reg, "megaflow_sandbox_memory_bytes", runtime="local", sandbox=sb.id) > 0
        assert value(reg, "megaflow_sandbox_cpu_seconds", runtime="local", sandbox=sb.id) > 0
        assert value(reg, "megaflow_sandboxes", runtime="local", state="ready") == 1
        await pool.release(sb)
    with pytest.raises(Exception, match="setup"):
        await rt.create(EnvironmentSpec(setup=["exit 1"]))
    cold = value(reg, "megaflow_sandbox_start_seconds_count", runtime="local", kind="cold")
    assert cold == 1  # the spare; a failed start is not counted
    assert value(reg, "megaflow_sandbox_start_seconds_count", runtime="local", kind="warm") == 1
    assert value(reg, "megaflow_sandbox_exec_seconds_count", runtime="local") >= 2
    assert value(reg, "megaflow_sandbox_teardown_seconds_count", runtime="local") == 2
    assert value(reg, "megaflow_sandbox_failures_total", runtime="local", kind="timeout") == 1
    assert value(reg, "megaflow_sandbox_failures_total", runtime="local", kind="start") == 1
    assert (
        reg.get_sample_value(
            "megaflow_sandbox_memory_bytes", {"runtime": "local", "sandbox": sb.id}
        )
        is None
    )  # forgotten once destroyed
    for state in ("starting", "ready", "busy", "stopped"):
        assert value(reg, "megaflow_sandboxes", runtime="local", state=state) == 0
