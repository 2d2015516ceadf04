"""The ``disk`` weight sync against an engine in another OS process.

``megaflow serve model`` runs the ``transformers`` backend and its ModelControl
service in a child process; the sync writes each new version as a safetensors
checkpoint and tells the engine, over gRPC, to load it. The engine's answers
over its HTTP gateway must then carry the new version and the logprobs the
trainer's own model gives the same tokens; a checkpoint the engine refuses
must leave the old version serving and fail the push naming the engine.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM

from megaflow.core.errors import ModelError
from megaflow.model.abstract import CallContext, ChatRequest
from megaflow.model.control import LocalModelControl
from megaflow.model.openai_compat import OpenAIBackend
from megaflow.model.routing import Router
from megaflow.model.transformers_lm import build_tiny_model
from megaflow.rpc.config import ClusterConfig
from megaflow.rpc.health import check_health
from megaflow.rpc.model_client import GrpcModelControl
from megaflow.train.weight_sync.config import DiskSyncConfig
from megaflow.train.weight_sync.disk import DiskWeightSync
from tests.fixtures.servers import free_port

pytestmark = pytest.mark.slow
CLI = [sys.executable, "-c", "from megaflow.cli.main import main; main()"]
TOKEN = "weight-sync-engine-token-0123456789"
CHAT = {"model": "default", "messages": [{"role": "user", "content": "fix the bug in the code"}]}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("engine-model"), seed=0)


@contextlib.asynccontextmanager
async def running_engine(model: Path, tmp_path: Path) -> AsyncIterator[ClusterConfig]:
    """``megaflow serve model`` on ``model`` in its own process, healthy; stopped
    (SIGTERM, then SIGKILL) when the block ends. Its token is ``TOKEN``."""
    raw = {
        "auth": {"token": TOKEN},
        "model": {
            "port": free_port(), "http_port": free_port(),
            "config": {"type": "transformers", "model": str(model), "max_new_tokens": 6},
        },
    }  # fmt: skip
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(raw))
    log = tmp_path / "engine.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*CLI, "serve", "model", "-c", str(path)], cwd=tmp_path, stdout=out, stderr=out
        )
    try:
        cfg = ClusterConfig.model_validate(raw)
        try:
            await check_health(cfg, "model", TOKEN, timeout=120)
        except Exception:
            print(log.read_text(errors="replace"))
            raise
        yield cfg
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


@pytest.fixture
async def engine(base: Path, tmp_path: Path) -> AsyncIterator[ClusterConfig]:
    async with running_engine(base, tmp_path) as cfg:
        yield cfg


async def answer(http: httpx.AsyncClient, url: str) -> dict[str, Any]:
    reply = await http.post(
        f"{url}/chat/completions",
        json={**CHAT, "temperature": 0, "max_tokens": 6},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert reply.status_code == 200, reply.text
    ext: dict[str, Any] = reply.json()["megaflow"]
    return ext


def assert_same_logprobs(model: Any, ext: dict[str, Any]) -> None:
    """The engine's logprobs of its tokens are the trainer's model's for them."""
    prompt, tokens = ext["prompt_token_ids"], ext["token_ids"]
    assert tokens
    assert len(ext["logprobs"]) == len(tokens)
    with torch.no_grad():
        logits = model(torch.tensor([prompt + tokens])).logits[0]
    lp = torch.log_softmax(logits.float(), dim=-1)
    mine = [float(lp[len(prompt) + i - 1, t]) for i, t in enumerate(tokens)]
    assert mine == pytest.approx(ext["logprobs"], abs=1e-4)


def perturb(model: Any, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.2)


async def test_disk_sync_to_an_engine_in_another_process(
    base: Path, engine: ClusterConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target, url = engine.model.target, engine.model.base_url()
    trainer_model = AutoModelForCausalLM.from_pretrained(base, local_files_only=True).eval()
    control = GrpcModelControl(target, TOKEN)
    sync = DiskSyncConfig(root=str(tmp_path / "weights"), keep=1, timeout_s=60).build(
        {target: control}, base_model=base, run_id="run-1"
    )
    assert isinstance(sync, DiskWeightSync)
    async with control, httpx.AsyncClient(timeout=60) as http:
        last = await answer(http, url)
        assert last["weights_version"] == 0
        assert_same_logprobs(trainer_model, last)
        for version in (1, 2):
            perturb(trainer_model, seed=version)
            result = await sync.push(trainer_model.state_dict(), version)
            assert result.path == str(tmp_path / "weights" / "run-1" / f"v{version}")
            assert list(result.served.values()) == [version]
            assert [b.weights_version for b in await control.list_backends()] == [version]
            now = await answer(http, url)
            assert now["weights_version"] == version
            assert now["logprobs"] != last["logprobs"]
            assert_same_logprobs(trainer_model, now)
            last = now
        # keep=1: the previous checkpoint is gone once every engine took the new one.
        assert [p.name for p in (tmp_path / "weights" / "run-1").iterdir()] == ["v2"]

        good_weights = trainer_model.state_dict()
        write = sync.write

        def corrupt(weights: Mapping[str, Any], version: int) -> Path:
            path = write(weights, version)
            shard = path / "model.safetensors"
            shard.write_bytes(shard.read_bytes()[:1000])
            return path

        partial = {k: v for k, v in good_weights.items() if "h.0.mlp" not in k}
        bad: list[tuple[str, Any, Mapping[str, Any], int]] = [
            ("corrupt", corrupt, good_weights, 3),
            ("missing", lambda w, v: tmp_path / "nowhere", good_weights, 3),
            ("partial", write, partial, 3),
            ("stale", write, good_weights, 2),
        ]
        for what, writer, weights, version in bad:
            monkeypatch.setattr(sync, "write", writer)
            with pytest.raises(ModelError, match=f"did not reach 1 of 1 engines: {target}") as e:
                await sync.push(weights, version)
            assert f"v{version}" in str(e.value), what
            assert [b.weights_version for b in await control.list_backends()] == [2], what
            still = await answer(http, url)
            assert (still["weights_version"], still["logprobs"]) == (2, last["logprobs"]), what


async def test_an_openai_client_of_the_engine_takes_disk_weights(
    base: Path, engine: ClusterConfig, tmp_path: Path
) -> None:
    """The rollout side as `megaflow train` would hold it for a remote engine: an
    ``openai`` backend (``weight_sync: megaflow``) behind this process's router."""
    url = engine.model.base_url()
    backend = OpenAIBackend(url, "default", api_key=TOKEN, weight_sync="megaflow")
    control = LocalModelControl(Router([backend], retries=0))
    sync = DiskSyncConfig(root=str(tmp_path / "weights"), timeout_s=60).build(
        {"rollout": control}, base_model=base, run_id="run-2"
    )
    trainer_model = AutoModelForCausalLM.from_pretrained(base, local_files_only=True).eval()
    request = ChatRequest(messages=CHAT["messages"], temperature=0, max_tokens=6)
    await backend.start()
    try:
        before = await backend.complete(request, CallContext())
        perturb(trainer_model, seed=7)
        result = await sync.push(trainer_model.state_dict(), 1)
        assert list(result.served.values()) == [1]
        after = await backend.complete(request, CallContext())
        assert (before.weights_version, after.weights_version) == (0, 1)
        assert after.logprobs != before.logprobs
        assert_same_logprobs(trainer_model, after.model_dump())
        with pytest.raises(
            ModelError, match=f"rollout: .*{url}/weights answered 400.*no \\*.safetensors file"
        ):
            await sync.push({}, 2)  # nothing to save: an empty checkpoint directory
        again = await backend.complete(request, CallContext())
        assert (again.weights_version, again.logprobs) == (1, after.logprobs)
    finally:
        await backend.stop()
