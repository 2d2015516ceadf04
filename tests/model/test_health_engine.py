"""Health checks against real engines: two ``megaflow serve model`` processes.

A router with health checks fronts both through the ``openai`` backend (weight
sync ``megaflow``: token-in, versions reported). A SIGSTOPped engine accepts
connections but never answers: it is taken out after its probes time out, its
call in flight is aborted, and it comes back after SIGCONT. A SIGKILLed engine
is taken out too, and the trajectory pinned to it is lost (ReplicaLost), not
continued on the other engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from megaflow.core.errors import ReplicaLost
from megaflow.model.abstract import ChatRequest
from megaflow.model.config import HealthCheckConfig, OpenAIModelConfig
from megaflow.model.factory import make_model_service
from megaflow.model.service import ModelService
from megaflow.model.transformers_lm import build_tiny_model
from megaflow.rpc.config import ClusterConfig
from megaflow.rpc.health import check_health
from tests.fixtures.servers import free_port

pytestmark = pytest.mark.slow
CLI = [sys.executable, "-c", "from megaflow.cli.main import main; main()"]
TOKEN = "health-engine-token-0123456789abcdef"
PROBES = HealthCheckConfig(interval_s=0.5, timeout_s=2.0, failures=2)


@dataclass
class Engine:
    """A ``megaflow serve model`` process and where it answers."""

    proc: subprocess.Popen[bytes]
    cluster: ClusterConfig
    log: Path

    @property
    def base_url(self) -> str:
        return self.cluster.model.base_url()

    def signal(self, sig: signal.Signals) -> None:
        os.kill(self.proc.pid, sig)


@contextlib.asynccontextmanager
async def engine_process(
    model: Path, tmp_path: Path, max_new_tokens: int = 6
) -> AsyncIterator[Engine]:
    """``megaflow serve model`` on ``model`` in its own process, healthy; killed
    (after SIGCONT, in case a test stopped it) when the block ends."""
    raw = {
        "auth": {"token": TOKEN},
        "model": {
            "port": free_port(), "http_port": free_port(),
            "config": {"type": "transformers", "model": str(model),
                       "max_new_tokens": max_new_tokens},
        },
    }  # fmt: skip
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(raw))
    log = tmp_path / "engine.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*CLI, "serve", "model", "-c", "cluster.yaml"], cwd=tmp_path, stdout=out, stderr=out
        )
    try:
        cluster = ClusterConfig.model_validate(raw)
        try:
            await check_health(cluster, "model", TOKEN, timeout=120)
        except Exception:
            print(log.read_text(errors="replace"))
            raise
        yield Engine(proc, cluster, log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)


@contextlib.asynccontextmanager
async def two_engines(model: Path, tmp_path: Path) -> AsyncIterator[tuple[Engine, Engine]]:
    async with (
        engine_process(model, tmp_path / "a") as a,
        engine_process(model, tmp_path / "b") as b,
    ):
        yield a, b


@pytest.fixture(autouse=True)
def token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEALTH_ENGINE_TOKEN", TOKEN)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("health-model"), seed=0)


def fleet(a: Engine, b: Engine, **kw: object) -> ModelService:
    """A router with health checks over both engines (``HEALTH_ENGINE_TOKEN`` set)."""
    cfg = OpenAIModelConfig(
        base_url=a.base_url, replicas=[b.base_url], model="default",
        api_key_env="HEALTH_ENGINE_TOKEN", weight_sync="megaflow", health=PROBES,
        retries=2, **kw,
    )  # fmt: skip
    return make_model_service(cfg)


async def turn(service: ModelService, tid: str, n: int = 1, version: int = 0) -> str:
    """Turn ``n`` of trajectory ``tid``; the base URL of the engine that answered."""
    messages = [{"role": "user", "content": "fix the bug"}]
    for i in range(1, n):
        messages += [
            {"role": "assistant", "content": f"step {i}"},
            {"role": "user", "content": "ok"},
        ]
    request = ChatRequest(messages=messages, temperature=1.0, max_tokens=4)
    _, call = await service.complete(request, tid)
    assert call.token_ids
    assert call.weights_version == version
    replica = service.router._affinity[tid][0]
    return replica.backend.name


async def wait_until(check: Callable[[], bool], timeout_s: float) -> float:
    """Seconds until ``check()`` is true; fails after ``timeout_s``."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    while not check():
        assert loop.time() - t0 < timeout_s, f"not true within {timeout_s}s"
        await asyncio.sleep(0.05)
    return loop.time() - t0


async def test_a_hung_engine_is_taken_out_after_its_probe_timeout_and_comes_back(
    model: Path, tmp_path: Path
) -> None:
    async with two_engines(model, tmp_path) as (a, b):
        service = fleet(a, b, timeout_s=60)
        await service.start()
        try:
            first = await turn(service, "t1")
            hung = a if first.endswith(a.base_url) else b
            other = b if hung is a else a
            hung.signal(signal.SIGSTOP)
            in_flight = asyncio.ensure_future(turn(service, "t1", 2))  # pinned to the hung one
            replica = next(r for r in service.router.replicas if r.backend.name == first)
            took = await wait_until(lambda: not replica.healthy, 20)
            # two probes, each waits its 2 s timeout, 0.5 s apart (plus this machine's load)
            assert took < 2 * (PROBES.timeout_s + PROBES.interval_s) + 3
            with pytest.raises(ReplicaLost, match="taken out of rotation"):
                await asyncio.wait_for(in_flight, 5)  # aborted, not left to the 60 s timeout
            statuses = await service.control.list_backends()
            assert {s.type: s.healthy for s in statuses} == {
                f"openai:{hung.base_url}": False, f"openai:{other.base_url}": True,
            }  # fmt: skip
            for i in range(3):  # the new episodes all go to the live engine
                assert (await turn(service, f"n{i}")).endswith(other.base_url)
            took = await service.control.update_weights(str(model), 1)  # a checkpoint path
            assert [(s.type, s.weights_version) for s in took] == [(f"openai:{other.base_url}", 1)]
            hung.signal(signal.SIGCONT)
            await wait_until(lambda: replica.healthy, 60)  # after it loaded v1 itself
            statuses = await service.control.list_backends()
            assert [(s.healthy, s.weights_version) for s in statuses] == [(True, 1), (True, 1)]
            answered = {await turn(service, f"m{i}", version=1) for i in range(4)}
            assert answered == {first, f"openai:{other.base_url}"}  # both in rotation
        finally:
            await service.stop()


async def test_a_killed_engine_is_taken_out_and_its_pinned_episode_lost(
    model: Path, tmp_path: Path
) -> None:
    async with two_engines(model, tmp_path) as (a, b):
        service = fleet(a, b)
        await service.start()
        try:
            first = await turn(service, "t1")
            dead = a if first.endswith(a.base_url) else b
            other = b if dead is a else a
            dead.signal(signal.SIGKILL)
            dead.proc.wait(10)
            with pytest.raises(ReplicaLost, match="t1"):
                await turn(service, "t1", 2)  # its first turn's tokens died with the engine
            replica = next(r for r in service.router.replicas if r.backend.name == first)
            await wait_until(lambda: not replica.healthy, 10)
            assert "cannot reach" in (replica.problem or "")
            assert (await turn(service, "t1")).endswith(other.base_url)  # started again
            assert (await turn(service, "t1", 2)).endswith(other.base_url)
        finally:
            await service.stop()
