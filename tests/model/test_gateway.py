"""The gateway over a real uvicorn server, driven by the real openai client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import openai
import pytest

from megaflow.core.errors import ModelError
from megaflow.model.client import HttpModelClient
from megaflow.model.gateway import GatewayServer
from megaflow.model.routing import Router
from megaflow.model.scripted import ScriptedBackend, tool_call
from megaflow.model.service import ModelService

SCRIPT = [
    {"content": "Hello from the scripted model, streaming in pieces."},
    tool_call("bash", {"command": "ls -la /workspace"}, "call_1"),
    ModelError("backend refused the request"),
]


@pytest.fixture
async def gateway() -> AsyncIterator[GatewayServer]:
    service = ModelService("scripted", Router([ScriptedBackend(SCRIPT)], retries=0))
    async with GatewayServer(service, port=0) as gw:
        assert not 10002 <= gw.port <= 19999
        yield gw


@pytest.fixture
async def client(gateway: GatewayServer) -> AsyncIterator[openai.AsyncOpenAI]:
    c = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="unused", max_retries=0)
    yield c
    await c.close()


async def test_models_lists_the_served_model(client: openai.AsyncOpenAI) -> None:
    models = await client.models.list()
    assert [m.id for m in models.data] == ["scripted"]


async def test_chat_is_recorded_under_header_trajectory(
    client: openai.AsyncOpenAI, gateway: GatewayServer
) -> None:
    out = await client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"X-MegaFlow-Trajectory": "traj-1"},
    )
    assert out.choices[0].message.content == SCRIPT[0]["content"]  # type: ignore[index]
    assert out.usage is not None
    assert out.usage.completion_tokens > 0
    calls = gateway.service.recorder.calls("traj-1")
    assert len(calls) == 1
    assert calls[0].request["messages"] == [{"role": "user", "content": "hi"}]
    assert calls[0].response["message"]["content"] == out.choices[0].message.content
    assert calls[0].prompt_tokens == out.usage.prompt_tokens
    assert calls[0].duration_s > 0


async def test_tool_calls_and_model_name_suffix(
    client: openai.AsyncOpenAI, gateway: GatewayServer
) -> None:
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    messages = [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "go on"},
    ]
    out = await client.chat.completions.create(
        model="scripted@traj-suffix",
        messages=messages,  # type: ignore[arg-type]
        tools=tools,  # type: ignore[arg-type]
    )
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]  # type: ignore[index]
    assert call.function.name == "bash"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == {"command": "ls -la /workspace"}  # type: ignore[union-attr]
    recorded = gateway.service.recorder.calls("traj-suffix")
    assert recorded[0].request["tools"] == tools
    assert recorded[0].response["message"]["tool_calls"][0]["id"] == "call_1"


async def test_streaming_text_and_tool_calls(client: openai.AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces, usage = [], None
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        usage = chunk.usage or usage
    assert len(pieces) > 1
    assert "".join(pieces) == SCRIPT[0]["content"]  # type: ignore[index]
    assert usage is not None
    assert usage.total_tokens > 0

    stream = await client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
        stream=True,
    )
    args, name, finish = "", None, None
    async for chunk in stream:
        delta = chunk.choices[0].delta
        for tc in delta.tool_calls or []:
            name = name or (tc.function.name if tc.function else None)
            args += (tc.function.arguments or "") if tc.function else ""
        finish = chunk.choices[0].finish_reason or finish
    assert name == "bash"
    assert json.loads(args) == {"command": "ls -la /workspace"}
    assert finish == "tool_calls"


async def test_backend_error_is_a_clear_error_and_recorded(
    client: openai.AsyncOpenAI, gateway: GatewayServer
) -> None:
    messages = [{"role": "assistant", "content": "x"}] * 2 + [{"role": "user", "content": "y"}]
    with pytest.raises(openai.InternalServerError, match="backend refused the request"):
        await client.chat.completions.create(
            model="scripted",
            messages=messages,  # type: ignore[arg-type]
            extra_headers={"X-MegaFlow-Trajectory": "traj-err"},
        )
    (call,) = gateway.service.recorder.calls("traj-err")
    assert call.response["error_type"] == "ModelError"

    async with HttpModelClient(gateway.base_url) as mf:
        with pytest.raises(ModelError, match="backend refused"):
            await mf.chat(messages, trajectory_id="traj-err")
        recorded = await mf.calls("traj-err")
    assert len(recorded) == 2
    assert gateway.service.recorder.calls("traj-err") == []


async def test_unknown_model_and_bad_request_are_400(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="not served here"):
        await client.chat.completions.create(
            model="gpt-unknown", messages=[{"role": "user", "content": "x"}]
        )
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model="scripted", messages=[])


async def test_http_client_registers_and_reads_back(gateway: GatewayServer) -> None:
    async with HttpModelClient(gateway.base_url) as mf:
        await mf.register("run/t1:s0", {"instance_id": "x"})
        assert gateway.service.recorder.task("run/t1:s0") == {"instance_id": "x"}
        out = await mf.chat([{"role": "user", "content": "hi"}], trajectory_id="run/t1:s0")
        assert out.content == SCRIPT[0]["content"]  # type: ignore[index]
        calls = await mf.calls("run/t1:s0", release=False)
        assert len(calls) == 1
        assert calls[0].completion_tokens == out.completion_tokens
    async with httpx.AsyncClient() as h:
        r = await h.get(f"{gateway.base_url}/trajectories/run/t1:s0")
    assert len(r.json()["calls"]) == 1
