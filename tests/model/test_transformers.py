"""The transformers backend generating from a tiny random-weights model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from megaflow.core.errors import ModelError
from megaflow.model.config import TransformersModelConfig
from megaflow.model.factory import make_model_client
from megaflow.model.transformers_lm import build_tiny_model, parse_tool_calls


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-lm"))


@pytest.mark.slow
async def test_generates_and_records_token_ids_and_logprobs(tiny_model: Path) -> None:
    cfg = TransformersModelConfig(model=str(tiny_model), max_new_tokens=8)
    async with make_model_client(cfg) as client:
        messages = [{"role": "user", "content": "fix the bug in the python code"}]
        out = await client.chat(messages, trajectory_id="t")
        again = await client.chat(messages, trajectory_id="t")
        (c1, c2) = await client.calls("t")
    assert out.completion_tokens == 8
    assert out.finish_reason == "length"
    assert out.prompt_tokens > 0
    assert out.token_ids is not None
    assert len(out.token_ids) == 8
    assert out.logprobs is not None
    assert all(lp <= 0 for lp in out.logprobs)
    assert again.token_ids == out.token_ids  # greedy decoding is deterministic
    assert c1.token_ids == out.token_ids
    assert c1.logprobs == out.logprobs
    assert c2.request["messages"] == messages


@pytest.mark.slow
async def test_sampling_with_a_seed_and_a_token_limit(tiny_model: Path) -> None:
    cfg = TransformersModelConfig(model=str(tiny_model), temperature=1.0)
    async with make_model_client(cfg) as client:
        msgs = [{"role": "user", "content": "write a test"}]
        a = await client.chat(msgs, seed=3, max_tokens=5)
        b = await client.chat(msgs, seed=3, max_tokens=5)
    assert a.token_ids == b.token_ids
    assert len(a.token_ids or []) == 5


async def test_missing_model_directory_is_a_model_error(tmp_path: Path) -> None:
    cfg = TransformersModelConfig(model=str(tmp_path / "absent"))
    client = make_model_client(cfg)
    with pytest.raises(ModelError, match="does not exist"):
        await client.start()


def test_tool_calls_are_parsed_from_text() -> None:
    text = 'Let me look.<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>'
    content, calls = parse_tool_calls(text)
    assert content == "Let me look."
    assert calls[0]["function"]["name"] == "bash"
    assert json.loads(calls[0]["function"]["arguments"]) == {"command": "ls"}
    assert parse_tool_calls("<tool_call>{not json}</tool_call>") == (
        "<tool_call>{not json}</tool_call>",
        [],
    )


@pytest.mark.slow
async def test_token_data_travels_through_the_http_gateway(tiny_model: Path) -> None:
    import httpx

    from megaflow.model.client import HttpModelClient
    from megaflow.model.factory import make_model_service
    from megaflow.model.gateway import GatewayServer

    cfg = TransformersModelConfig(model=str(tiny_model), max_new_tokens=4)
    async with GatewayServer(make_model_service(cfg)) as gw:
        body = {"model": "default", "messages": [{"role": "user", "content": "test the code"}]}
        async with httpx.AsyncClient() as http:
            raw = (await http.post(f"{gw.base_url}/chat/completions", json=body)).json()
        assert len(raw["megaflow"]["token_ids"]) == 4
        async with HttpModelClient(gw.base_url) as client:
            out = await client.chat(body["messages"], trajectory_id="t-http")  # type: ignore[arg-type]
            (call,) = await client.calls("t-http")
    assert out.token_ids == raw["megaflow"]["token_ids"]
    assert out.prompt_token_ids == raw["megaflow"]["prompt_token_ids"]
    assert out.prompt_token_ids
    assert out.weights_version == 0
    assert call.token_ids == out.token_ids
    assert call.logprobs == out.logprobs
    assert call.prompt_token_ids == out.prompt_token_ids


@pytest.mark.slow
async def test_sampling_varies_and_records_the_sampled_distributions_logprobs(
    tiny_model: Path,
) -> None:
    """Sampled at temperature 0.7 with top-p, the recorded logprobs are those of
    the model's logits divided by 0.7 (no top-p cut), as the trainer computes them
    with train.temperature 0.7; greedy ones are the plain model's."""
    import torch
    from transformers import AutoModelForCausalLM

    cfg = TransformersModelConfig(model=str(tiny_model), max_new_tokens=8)
    msgs = [{"role": "user", "content": "fix the bug in the python code"}]
    async with make_model_client(cfg) as client:
        a = await client.chat(msgs, temperature=0.7, top_p=0.9, seed=1)
        b = await client.chat(msgs, temperature=0.7, top_p=0.9, seed=2)
        unseeded = [await client.chat(msgs, temperature=1.0) for _ in range(2)]
        greedy = await client.chat(msgs)
    assert a.token_ids != b.token_ids
    assert unseeded[0].token_ids != unseeded[1].token_ids
    model = AutoModelForCausalLM.from_pretrained(tiny_model, local_files_only=True).eval()
    for out, temperature in ((a, 0.7), (greedy, 1.0)):
        prompt, new = out.prompt_token_ids or [], out.token_ids or []
        with torch.no_grad():
            logits = model(torch.tensor([prompt + new])).logits[0, len(prompt) - 1 : -1]
        scaled = (logits / temperature).log_softmax(-1)
        expected = scaled.gather(-1, torch.tensor(new)[:, None])[:, 0]
        assert out.logprobs == pytest.approx(expected.tolist(), abs=1e-4)
