"""The openai backend's weight sync against a local server that checks the request shape.

The server stands in for vLLM (dev-mode ``/collective_rpc`` and
``/reset_prefix_cache``) and SGLang (``/update_weights_from_disk``); no real
vLLM or SGLang runs here.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from megaflow.core.errors import InvalidInput, ModelError
from megaflow.model.config import OpenAIModelConfig
from megaflow.model.factory import make_model_client
from megaflow.rpc.metrics_http import serve_asgi


class Upstream:
    """Records every request; answers chat completions the way vLLM does with
    ``return_token_ids``."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, Any, str | None]] = []
        self.sglang_success = True
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self.chat)
        self.app.post("/collective_rpc")(self.native)
        self.app.post("/reset_prefix_cache")(self.native)
        self.app.post("/update_weights_from_disk")(self.sglang)

    async def _record(self, request: Request) -> Any:
        raw = await request.body()
        body = await request.json() if raw else None
        self.requests.append((request.url.path, body, request.headers.get("authorization")))
        return body

    async def chat(self, request: Request) -> dict[str, Any]:
        await self._record(request)
        return {
            "model": "policy",
            "prompt_token_ids": [5, 6, 7],
            "choices": [
                {
                    "message": {"role": "assistant", "content": "hi"},
                    "finish_reason": "stop",
                    "token_ids": [8, 9],
                    "logprobs": {"content": [{"logprob": -0.5}, {"logprob": -1.5}]},
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        }

    async def native(self, request: Request) -> Response:
        await self._record(request)
        return JSONResponse({"results": [None]})

    async def sglang(self, request: Request) -> Response:
        await self._record(request)
        status = 200 if self.sglang_success else 400
        answer = {"success": self.sglang_success, "message": "loaded" if status == 200 else "no"}
        return JSONResponse(answer, status_code=status)


@pytest.fixture
async def upstream(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Upstream, str]]:
    monkeypatch.setenv("WEIGHT_SYNC_TEST_KEY", "server-key")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = Upstream()
    async with contextlib.AsyncExitStack() as stack:
        await serve_asgi(stack, server.app, "127.0.0.1", port, None, "fake inference server")
        yield server, f"http://127.0.0.1:{port}/v1"


def _cfg(url: str, sync: str) -> OpenAIModelConfig:
    return OpenAIModelConfig.model_validate(
        {
            "base_url": url,
            "model": "policy",
            "weight_sync": sync,
            "request_logprobs": True,
            "api_key_env": "WEIGHT_SYNC_TEST_KEY",
        }
    )


async def test_vllm_reload_from_disk(upstream: tuple[Upstream, str]) -> None:
    server, url = upstream
    async with make_model_client(_cfg(url, "vllm")) as client:
        before = await client.chat([{"role": "user", "content": "x"}], trajectory_id="t")
        (status,) = await client.control.update_weights("/ckpt/step-1", 1)
        after = await client.chat([{"role": "user", "content": "x"}], trajectory_id="t")
        calls = await client.calls("t")
    assert status.weights_version == 1
    assert (before.weights_version, after.weights_version) == (0, 1)
    assert [c.weights_version for c in calls] == [0, 1]
    assert calls[0].prompt_token_ids == [5, 6, 7]
    assert calls[0].token_ids == [8, 9]
    assert calls[0].logprobs == [-0.5, -1.5]
    chat_body = server.requests[0][1]
    assert chat_body["return_token_ids"] is True
    assert chat_body["logprobs"] is True
    update = server.requests[1:4]
    assert update == [
        (
            "/collective_rpc",
            {"method": "update_config", "args": [{"model_config": {"model": "/ckpt/step-1"}}]},
            "Bearer server-key",
        ),
        ("/collective_rpc", {"method": "reload_weights"}, "Bearer server-key"),
        ("/reset_prefix_cache", None, "Bearer server-key"),
    ]


async def test_sglang_update_from_disk_and_a_refusal(upstream: tuple[Upstream, str]) -> None:
    server, url = upstream
    async with make_model_client(_cfg(url, "sglang")) as client:
        await client.control.update_weights("/ckpt/step-1", 1)
        assert server.requests[-1][:2] == (
            "/update_weights_from_disk",
            {"model_path": "/ckpt/step-1", "weight_version": "1"},
        )
        server.sglang_success = False
        with pytest.raises(ModelError, match="answered 400"):
            await client.control.update_weights("/ckpt/step-2", 2)
        (status,) = await client.control.list_backends()
        assert status.weights_version == 1
        with pytest.raises(InvalidInput, match="not newer"):
            await client.control.update_weights("/ckpt/step-0", 1)


async def test_without_weight_sync_or_with_tensors_nothing_is_sent(
    upstream: tuple[Upstream, str],
) -> None:
    server, url = upstream
    async with make_model_client(_cfg(url, "none")) as client:
        with pytest.raises(ModelError, match="cannot take new weights"):
            await client.control.update_weights("/ckpt/step-1", 1)
        out = await client.chat([{"role": "user", "content": "x"}])
    assert out.weights_version is None  # an unmanaged server's weights have no version
    async with make_model_client(_cfg(url, "sglang")) as client:
        with pytest.raises(InvalidInput, match="not tensors"):
            await client.control.update_weights({"w": object()}, 1)
    assert [path for path, _, _ in server.requests] == ["/v1/chat/completions"]
