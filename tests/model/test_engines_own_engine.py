"""Item 2's check: MegaFlow's own engine speaks vLLM's token-level API.

``megaflow serve model`` (the ``transformers`` backend in its own process) is
driven by the ``vllm`` model type, the same adapter that drives a real vLLM:
token-id prompts on ``/v1/completions`` with ``return_token_ids`` and
``logprobs``. The ids it feeds must be the trainer's rendering, later turns
token-in, and its logprobs the model's own for the tokens it sampled.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM

from megaflow.app.training.probe import check_tokenizer, trainer_ids
from megaflow.model.config import VLLMModelConfig
from megaflow.model.factory import make_model_client
from megaflow.model.transformers_lm import build_tiny_model
from megaflow.rpc.config import ClusterConfig
from megaflow.rpc.health import check_health
from tests.fixtures.servers import free_port

pytestmark = pytest.mark.slow
CLI = [sys.executable, "-c", "from megaflow.cli.main import main; main()"]
TOKEN = "own-engine-token-0123456789abcdef"
USER = {"role": "user", "content": "fix the bug in the code"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("own-engine-model"), seed=0)


@contextlib.asynccontextmanager
async def serve_model(model: Path, tmp_path: Path) -> AsyncIterator[str]:
    """``megaflow serve model`` in its own process; yields its gateway's root URL."""
    raw = {
        "auth": {"token": TOKEN},
        "model": {
            "port": free_port(), "http_port": free_port(),
            "config": {"type": "transformers", "model": str(model), "max_new_tokens": 6},
        },
    }  # fmt: skip
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(raw))
    log = tmp_path / "engine.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*CLI, "serve", "model", "-c", str(tmp_path / "cluster.yaml")],
            cwd=tmp_path, stdout=out, stderr=out,
        )  # fmt: skip
    try:
        try:
            await check_health(ClusterConfig.model_validate(raw), "model", TOKEN, timeout=120)
        except Exception:
            print(log.read_text(errors="replace"))
            raise
        yield f"http://127.0.0.1:{raw['model']['http_port']}"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def model_logprobs(model_dir: Path, prompt: list[int], tokens: list[int]) -> list[float]:
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    with torch.no_grad():
        logits = model(torch.tensor([prompt + tokens])).logits[0].float()
    lp = torch.log_softmax(logits, dim=-1)
    return [float(lp[len(prompt) - 1 + i, t]) for i, t in enumerate(tokens)]


async def test_the_vllm_adapter_drives_megaflows_engine_token_in(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OWN_ENGINE_TOKEN", TOKEN)
    async with serve_model(tiny, tmp_path) as root:
        cfg = VLLMModelConfig(
            base_url=root, model="default", tokenizer=str(tiny), api_key_env="OWN_ENGINE_TOKEN"
        )
        async with make_model_client(cfg) as client:
            await check_tokenizer(client, tiny)  # megaflow train's start probe
            first = await client.chat([USER], trajectory_id="t", temperature=0, max_tokens=6)
            turn2 = [USER, first.message, {"role": "user", "content": "submit the patch"}]
            await client.chat(turn2, trajectory_id="t", temperature=0, max_tokens=6)
            calls = await client.calls("t")
        async with httpx.AsyncClient(base_url=root, timeout=60) as http:
            text = await http.post(
                "/v1/completions",
                json={"model": "default", "prompt": "fix the bug", "max_tokens": 2},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            anonymous = await http.post(
                "/v1/completions", json={"model": "default", "prompt": [5, 6], "max_tokens": 2}
            )
    assert calls[0].prompt_token_ids == trainer_ids(tiny, [USER])
    a, b = calls
    assert a.token_ids
    assert b.token_ids
    assert b.prompt_token_ids is not None
    assert a.prompt_token_ids is not None
    assert b.prompt_token_ids[: len(a.prompt_token_ids) + len(a.token_ids)] == (
        a.prompt_token_ids + a.token_ids
    )  # token-in: the second prompt extends what was fed and sampled
    for call in calls:
        assert call.logprobs is not None
        assert call.token_ids is not None
        assert call.prompt_token_ids is not None
        want = model_logprobs(tiny, call.prompt_token_ids, call.token_ids)
        assert call.logprobs == pytest.approx(want, abs=1e-4)
    assert text.status_code == 400
    assert "prompt must be a non-empty list of token ids" in text.text
    assert anonymous.status_code == 401
