"""The openai backend against real HTTP servers, replay, and the config factory."""

from __future__ import annotations

import asyncio
import json
import socket
import typing
from collections.abc import AsyncIterator

import pytest
from pydantic import TypeAdapter

from megaflow.core.errors import MegaFlowTimeout, ModelError, TransportError
from megaflow.model.config import (
    GatewayConfig,
    ModelConfig,
    OpenAIModelConfig,
    ReplayModelConfig,
)
from megaflow.model.factory import make_model_client
from megaflow.model.gateway import GatewayServer
from megaflow.model.routing import Router
from megaflow.model.scripted import ScriptedBackend, tool_call
from megaflow.model.service import ModelService

TASK = {"instance_id": "demo-1", "patch": "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n"}
TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": {}}}
    for n in ("bash", "write_file", "submit")
]


@pytest.fixture
async def upstream() -> AsyncIterator[GatewayServer]:
    """A real OpenAI-compatible server on loopback (our gateway over a scripted model)."""
    script = [tool_call("bash", {"command": "pwd"}), {"content": "done"}]
    service = ModelService("upstream-model", Router([ScriptedBackend(script)]))
    async with GatewayServer(service, port=0) as gw:
        yield gw


async def _raw_server(handler: typing.Any) -> tuple[asyncio.Server, int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_openai_backend_through_two_gateways(upstream: GatewayServer) -> None:
    cfg = OpenAIModelConfig(base_url=upstream.base_url, model="upstream-model", name="front")
    async with make_model_client(cfg) as client, GatewayServer(client.service, port=0) as front:
        import openai

        oa = openai.AsyncOpenAI(base_url=front.base_url, api_key="x", max_retries=0)
        out = await oa.chat.completions.create(
            model="front@t-chain", messages=[{"role": "user", "content": "where?"}]
        )
        await oa.close()
        assert out.choices[0].message.tool_calls[0].function.name == "bash"  # type: ignore[index,union-attr]
        (call,) = await client.calls("t-chain")
        assert call.prompt_tokens > 0
        assert call.response["finish_reason"] == "tool_calls"
    # the upstream recorded the call too, unassigned (no trajectory id was forwarded)
    assert len(upstream.service.recorder.calls("unassigned")) == 1


async def test_openai_backend_error_answer_is_model_error() -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await r.readuntil(b"\r\n\r\n")
        body = b'{"error": {"message": "model overloaded with nonsense"}}'
        w.write(
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
        )
        await w.drain()
        w.close()

    server, port = await _raw_server(handler)
    cfg = OpenAIModelConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", retries=3)
    try:
        async with make_model_client(cfg) as client:
            with pytest.raises(ModelError, match=r"answered 500.*overloaded"):
                await client.chat([{"role": "user", "content": "x"}], trajectory_id="t")
            (call,) = await client.calls("t")
            assert call.response["error_type"] == "ModelError"
    finally:
        server.close()
        await server.wait_closed()


async def test_openai_backend_hanging_server_times_out() -> None:
    held: list[asyncio.StreamWriter] = []

    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        held.append(w)  # read nothing, answer nothing

    server, port = await _raw_server(handler)
    cfg = OpenAIModelConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout_s=0.3)
    try:
        async with make_model_client(cfg) as client:
            with pytest.raises(MegaFlowTimeout):
                await client.chat([{"role": "user", "content": "x"}], trajectory_id="t")
    finally:
        for w in held:
            w.close()
        server.close()
        await server.wait_closed()


async def test_unreachable_backend_is_transport_error_after_retries() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = OpenAIModelConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", retries=2)
    async with make_model_client(cfg) as client:
        with pytest.raises(TransportError, match="after 3 tries"):
            await client.chat([{"role": "user", "content": "x"}])


async def test_replay_plays_gold_then_submits() -> None:
    async with make_model_client(ReplayModelConfig()) as client:
        await client.register("t", TASK)
        messages: list[dict[str, typing.Any]] = [{"role": "user", "content": "fix"}]
        tools = []
        for _ in range(3):
            out = await client.chat(messages, trajectory_id="t", tools=TOOLS)
            (call,) = out.tool_calls
            tools.append((call["function"]["name"], json.loads(call["function"]["arguments"])))
            messages += [out.message, {"role": "tool", "tool_call_id": call["id"], "content": ""}]
        assert tools[0] == (
            "write_file",
            {"path": "/tmp/megaflow-gold.patch", "content": TASK["patch"]},
        )
        assert tools[1] == (
            "bash",
            {"command": "cd /workspace && git apply /tmp/megaflow-gold.patch"},
        )
        assert tools[2] == ("submit", {})
        assert len(await client.calls("t")) == 3


async def test_replay_bash_only_and_empty_and_missing_task() -> None:
    bash_only = [TOOLS[0]]
    async with make_model_client(ReplayModelConfig()) as client:
        out = await client.chat(
            [{"role": "user", "content": "x"}],
            tools=bash_only,
            metadata={"megaflow_task": TASK},
            trajectory_id="t2",
        )
        command = json.loads(out.tool_calls[0]["function"]["arguments"])["command"]
        assert command.startswith("cat > /tmp/megaflow-gold.patch <<'MEGAFLOW_PATCH_EOF'\n")
        with pytest.raises(ModelError, match="no task for trajectory 'nope'"):
            await client.chat([{"role": "user", "content": "x"}], trajectory_id="nope")
    async with make_model_client(ReplayModelConfig(play="empty")) as client:
        out = await client.chat([{"role": "user", "content": "x"}], tools=TOOLS)
        assert out.tool_calls[0]["function"]["name"] == "submit"


def test_every_model_config_has_its_tag() -> None:
    members = typing.get_args(typing.get_args(ModelConfig)[0])
    tags = {m.model_fields["type"].default for m in members}
    assert tags == {"replay", "openai", "vllm", "sglang", "transformers", "scripted"}
    adapter: TypeAdapter[ModelConfig] = TypeAdapter(ModelConfig)
    cfg = adapter.validate_python({"type": "openai", "base_url": "http://h/v1", "model": "m"})
    assert isinstance(cfg, OpenAIModelConfig)
    with pytest.raises(ValueError, match="extra"):
        adapter.validate_python({"type": "replay", "bogus": 1})
    assert GatewayConfig().model.type == "replay"


def test_eval_openai_example_is_a_valid_run_config() -> None:
    from pathlib import Path

    from megaflow.config.loader import load_config

    root = Path(__file__).resolve().parents[2]
    cfg = load_config(root / "examples" / "eval-openai.yaml")
    assert isinstance(cfg.model, OpenAIModelConfig)
    assert cfg.agent.type == "builtin"
    assert cfg.samples == 4


async def test_openai_replicas_share_the_load() -> None:
    slow = [0.05, {"content": "ok"}]
    ups = [ModelService("m", Router([ScriptedBackend(slow)])) for _ in range(2)]
    async with GatewayServer(ups[0]) as a, GatewayServer(ups[1]) as b:
        cfg = OpenAIModelConfig(base_url=a.base_url, replicas=[b.base_url], model="m")
        async with make_model_client(cfg) as client:
            msgs = [{"role": "user", "content": "x"}]
            outs = await asyncio.gather(*(client.chat(msgs) for _ in range(10)))
            replicas = client.service.router.replicas
            assert [r.served for r in replicas] == [5, 5]
    assert all(o.content == "ok" for o in outs)
    assert [u.calls_total for u in ups] == [5, 5]


def test_recorder_forgets_the_oldest_unreleased_trajectory() -> None:
    from megaflow.core.trajectory import ModelCall
    from megaflow.model.service import CallRecorder, split_model_name

    rec = CallRecorder(max_trajectories=2)
    for t in ("a", "b", "c"):
        rec.record(t, ModelCall())
    assert (rec.calls("a"), len(rec.calls("c")), len(rec)) == ([], 1, 2)
    assert split_model_name("m@run/t/0") == ("m", "run/t/0")
    assert split_model_name("m") == ("m", None)
