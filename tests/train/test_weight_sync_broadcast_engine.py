"""The ``broadcast`` weight sync into two ``megaflow serve model`` engines, each in
its own OS process, through the trainer's ``openai`` clients of them.

The trainer's rank 0 and both engines form one gloo group; after each push
both engines answer with the new version and the logprobs the trainer's own
model gives their tokens. When an engine is SIGKILLed, the next push finds it
gone before it broadcasts, takes it out of rotation, and sends the update to
the engine still alive over a group formed without it
(``test_weight_sync_rotation.py`` follows the dead engine back in).
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from transformers import AutoModelForCausalLM

from megaflow.model.control import LocalModelControl
from megaflow.model.openai_compat import OpenAIBackend
from megaflow.model.routing import Router
from megaflow.model.transformers_lm import build_tiny_model
from megaflow.rpc.config import ClusterConfig
from megaflow.rpc.health import check_health
from megaflow.train.weight_sync.config import BroadcastSyncConfig
from tests.fixtures.servers import free_port
from tests.train.test_weight_sync_engine import CLI, TOKEN, answer, assert_same_logprobs, perturb

pytestmark = pytest.mark.slow


@contextlib.asynccontextmanager
async def engines(
    model: Path, tmp_path: Path, n: int
) -> AsyncIterator[list[tuple[subprocess.Popen[bytes], ClusterConfig]]]:
    """``n`` engines (``megaflow serve model``), each its own process; their process
    and config (``cfg.model.base_url()``, ``cfg.model.target``). Stopped when the
    block ends."""
    procs: list[tuple[subprocess.Popen[bytes], ClusterConfig, Path]] = []
    try:
        for i in range(n):
            raw = {
                "auth": {"token": TOKEN},
                "model": {
                    "port": free_port(), "http_port": free_port(),
                    "config": {"type": "transformers", "model": str(model), "max_new_tokens": 6},
                },
            }  # fmt: skip
            where = tmp_path / f"engine-{i}"
            where.mkdir(parents=True)
            (where / "cluster.yaml").write_text(yaml.safe_dump(raw))
            with (where / "engine.log").open("wb") as log:
                proc = subprocess.Popen(
                    [*CLI, "serve", "model", "-c", "cluster.yaml"],
                    cwd=where,
                    stdout=log,
                    stderr=log,
                )
            procs.append((proc, ClusterConfig.model_validate(raw), where))
        for _, cfg, where in procs:
            try:
                await check_health(cfg, "model", TOKEN, timeout=120)
            except Exception:
                print((where / "engine.log").read_text(errors="replace"))
                raise
        yield [(p, cfg) for p, cfg, _ in procs]
    finally:
        for proc, _, _ in procs:
            proc.terminate()
        for proc, _, _ in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)


async def test_broadcast_to_two_engine_processes_and_one_killed(tmp_path: Path) -> None:
    base = build_tiny_model(tmp_path / "model", seed=0)
    trainer_model = AutoModelForCausalLM.from_pretrained(base, local_files_only=True).eval()
    async with engines(base, tmp_path, 2) as running:
        (_, cfg_a), (proc_b, cfg_b) = running
        url_a, url_b = cfg_a.model.base_url(), cfg_b.model.base_url()
        clients = [
            OpenAIBackend(u, "default", api_key=TOKEN, weight_sync="megaflow")
            for u in (url_a, url_b)
        ]
        control = LocalModelControl(Router(list(clients), retries=0))
        sync = BroadcastSyncConfig(bucket_mb=0.01, timeout_s=10).build(
            {"rollout": control}, base_model=base, run_id="r"
        )
        async with httpx.AsyncClient(timeout=60) as http:
            for u in (url_a, url_b):
                assert (await answer(http, u))["weights_version"] == 0
            last: dict[str, Any] = {}
            for version in (1, 2):
                perturb(trainer_model, seed=version)
                result = await sync.push(dict(trainer_model.state_dict()), version)
                assert sorted(result.served.values()) == [version, version]
                for u in (url_a, url_b):
                    now = await answer(http, u)
                    assert now["weights_version"] == version
                    assert_same_logprobs(trainer_model, now)
                    assert now["logprobs"] != last.get(u, {}).get("logprobs")
                    last[u] = now
            proc_b.send_signal(signal.SIGKILL)
            proc_b.wait(30)
            perturb(trainer_model, seed=3)
            result = await sync.push(dict(trainer_model.state_dict()), 3)
            assert list(result.served.values()) == [3]  # the live engine alone
            dead = control.router.replicas[1]
            assert not dead.healthy
            assert "did not answer before a weight update" in (dead.problem or "")
            now = await answer(http, url_a)
            assert now["weights_version"] == 3
            assert_same_logprobs(trainer_model, now)
        for c in clients:
            await c.stop()
