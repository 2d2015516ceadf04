"""The ``broadcast`` weight sync follows the router's rotation, with real engines.

Two ``megaflow serve model`` processes behind a router with health checks, as
a train run sees them. SIGKILL one: the next broadcast update still succeeds,
on the other (the group is formed again without the dead one). Restart it at
the same address: it serves its base weights (v0) again, so it stays out of
rotation and no call reaches it, until the next update re-forms the group
with it and brings it to the trainer's version; only then does it take calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
import yaml
from transformers import AutoModelForCausalLM

from megaflow.model.abstract import ChatRequest
from megaflow.model.config import HealthCheckConfig, OpenAIModelConfig
from megaflow.model.factory import make_model_service
from megaflow.model.service import ModelService
from megaflow.model.transformers_lm import build_tiny_model
from megaflow.rpc.config import ClusterConfig
from megaflow.rpc.health import check_health
from megaflow.train.weight_sync.config import BroadcastSyncConfig
from tests.fixtures.servers import free_port
from tests.train.test_weight_sync_engine import CLI, TOKEN, answer, assert_same_logprobs, perturb

pytestmark = pytest.mark.slow
PROBES = HealthCheckConfig(interval_s=0.5, timeout_s=3.0, failures=2)


class Engines:
    """Engine processes by name, each restartable at the address it had."""

    def __init__(self, model: Path, root: Path) -> None:
        self.model, self.root = model, root
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.clusters: dict[str, ClusterConfig] = {}

    def url(self, name: str) -> str:
        return self.clusters[name].model.base_url()

    async def start(self, name: str) -> None:
        where = self.root / name
        if name not in self.clusters:
            raw = {
                "auth": {"token": TOKEN},
                "model": {
                    "port": free_port(), "http_port": free_port(),
                    "config": {"type": "transformers", "model": str(self.model),
                               "max_new_tokens": 6},
                },
            }  # fmt: skip
            where.mkdir(parents=True)
            (where / "cluster.yaml").write_text(yaml.safe_dump(raw))
            self.clusters[name] = ClusterConfig.model_validate(raw)
        with (where / "engine.log").open("ab") as log:
            self.procs[name] = subprocess.Popen(
                [*CLI, "serve", "model", "-c", "cluster.yaml"], cwd=where, stdout=log, stderr=log
            )
        try:
            await check_health(self.clusters[name], "model", TOKEN, timeout=120)
        except Exception:
            print((where / "engine.log").read_text(errors="replace"))
            raise

    def kill(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait(30)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)


@contextlib.asynccontextmanager
async def two_engines(model: Path, root: Path) -> AsyncIterator[Engines]:
    engines = Engines(model, root)
    try:
        await asyncio.gather(engines.start("a"), engines.start("b"))
        yield engines
    finally:
        engines.stop()


async def wait_until(check: Callable[[], bool], timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        assert loop.time() < deadline, f"not true within {timeout_s}s"
        await asyncio.sleep(0.05)


async def turn(service: ModelService, tid: str) -> tuple[str, int | None]:
    """A first turn of trajectory ``tid``: the replica that answered, and the version
    the call is recorded with."""
    request = ChatRequest(messages=[{"role": "user", "content": "fix the bug"}], max_tokens=3)
    _, call = await service.complete(request, tid)
    return service.router._affinity[tid][0].backend.name, call.weights_version


async def test_broadcast_skips_a_dead_replica_and_catches_it_up_when_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    monkeypatch.setenv("ROTATION_TOKEN", TOKEN)
    base = build_tiny_model(tmp_path / "model", seed=0)
    trainer = AutoModelForCausalLM.from_pretrained(base, local_files_only=True).eval()
    async with two_engines(base, tmp_path) as engines:
        url_a, url_b = engines.url("a"), engines.url("b")
        cfg = OpenAIModelConfig(
            base_url=url_a, replicas=[url_b], model="default", api_key_env="ROTATION_TOKEN",
            weight_sync="megaflow", health=PROBES, retries=2,
        )  # fmt: skip
        service = make_model_service(cfg)
        await service.start()
        a, b = service.router.replicas
        sync = BroadcastSyncConfig(bucket_mb=0.01, timeout_s=15).build(
            {"rollout": service.control}, base_model=base, run_id="r"
        )
        try:
            async with httpx.AsyncClient(timeout=60) as http:
                perturb(trainer, seed=1)
                first = await sync.push(dict(trainer.state_dict()), 1)
                assert sorted(first.served.values()) == [1, 1]

                engines.kill("b")  # before any probe noticed: the push itself finds it
                perturb(trainer, seed=2)
                second = await sync.push(dict(trainer.state_dict()), 2)
                assert list(second.served.values()) == [2]  # a alone, and it took v2
                assert (a.healthy, b.healthy) == (True, False)
                now = await answer(http, url_a)
                assert now["weights_version"] == 2
                assert_same_logprobs(trainer, now)

                await engines.start("b")  # the same address, its base weights again
                assert (await answer(http, url_b))["weights_version"] == 0
                await wait_until(lambda: b.catching_up, 30)  # answers probes, behind
                assert not b.healthy
                assert "serves weights v0 while the fleet serves v2" in (b.problem or "")
                for i in range(6):  # nothing is routed to the replica behind
                    assert await turn(service, f"behind-{i}") == (a.backend.name, 2)

                perturb(trainer, seed=3)
                third = await sync.push(dict(trainer.state_dict()), 3)
                assert sorted(third.served.values()) == [3, 3]
                assert (a.healthy, b.healthy, b.catching_up) == (True, True, False)
                for url in (url_a, url_b):
                    now = await answer(http, url)
                    assert now["weights_version"] == 3
                    assert_same_logprobs(trainer, now)
                seen = {await turn(service, f"back-{i}") for i in range(6)}
                assert seen == {(a.backend.name, 3), (b.backend.name, 3)}  # both in rotation
        finally:
            await sync.close()
            await service.stop()
    said = caplog.text
    assert f"openai:{url_b} taken out of rotation" in said
    assert f"openai:{url_b} is out until it catches up" in said
    assert f"openai:{url_b} is back in rotation at weights v3 (caught up to weights v3)" in said
