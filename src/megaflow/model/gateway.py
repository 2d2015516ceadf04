"""The OpenAI-compatible HTTP gateway (FastAPI), and a server to run it in-process.

Endpoints: ``POST /v1/chat/completions`` (plain or streamed as server-sent
events, with tool calls), ``GET /v1/models``, and MegaFlow's own
``/v1/trajectories/{id}`` (PUT registers a task payload, GET reads the
recorded calls, DELETE reads and forgets them) and the weight routes of
:mod:`megaflow.model.weight_routes` (``POST /v1/weights`` with a checkpoint
path, and the broadcast sync's ``/v1/weights/group...``), and vLLM's token-level
``POST /v1/completions`` (:mod:`megaflow.model.completions_route`). The trajectory id
comes from the ``X-MegaFlow-Trajectory`` header or a ``model@trajectory-id``
suffix.

The weight routes check the bearer token themselves, with the ``authorize``
callable the server is given (``megaflow.rpc.auth.check_bearer`` bound to the
token, which also guards the whole app where it is deployed); without one they
refuse every update, so a gateway started without a token never takes weights.

A streamed answer is produced from the backend's complete answer, chunked as
OpenAI does (role, content pieces, tool-call deltas, finish reason, usage):
clients that stream work unchanged, and the call is recorded whole.

This module needs the ``model`` extra (FastAPI, uvicorn); nothing else in
:mod:`megaflow.model` imports it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from megaflow.core.errors import (
    AuthError,
    InvalidInput,
    MegaFlowTimeout,
    ModelError,
    NotFound,
    TransportError,
)
from megaflow.core.lifecycle import Lifecycle
from megaflow.model.abstract import TRAJECTORY_HEADER, ChatRequest, Completion
from megaflow.model.body_limit import DEFAULT_MAX_BODY_MB, BodyLimitMiddleware
from megaflow.model.completions_route import add_completions_route
from megaflow.model.service import ModelService
from megaflow.model.weight_routes import Authorize, add_weight_routes

_STATUS: list[tuple[type[Exception], int, str]] = [
    (AuthError, 401, "unauthorized"),
    (InvalidInput, 400, "invalid_request_error"),
    (NotFound, 404, "not_found"),
    (TransportError, 502, "transport_error"),
    (MegaFlowTimeout, 504, "timeout"),
    (ModelError, 500, "model_error"),
]


def _error_status(exc: Exception) -> tuple[int, str]:
    for kind, status, name in _STATUS:
        if isinstance(exc, kind):
            return status, name
    return 500, "internal_error"


def completion_body(completion: Completion, request_model: str) -> dict[str, Any]:
    """The OpenAI ``chat.completion`` object, plus a ``megaflow`` extension holding
    the prompt and completion token ids, logprobs and weights version when the
    backend gave them."""
    body: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request_model,
        "choices": [
            {
                "index": 0,
                "message": {"content": None, **completion.message},
                "finish_reason": completion.finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
            "total_tokens": completion.prompt_tokens + completion.completion_tokens,
        },
    }
    ext: dict[str, Any] = {
        "prompt_token_ids": completion.prompt_token_ids,
        "token_ids": completion.token_ids,
        "logprobs": completion.logprobs,
        "weights_version": completion.weights_version,
    }
    if completion.segments is not None:  # a partial rollout: each part's version
        ext["segments"] = completion.segments
    if any(v is not None for v in ext.values()):
        body["megaflow"] = ext
    return body


def stream_chunks(
    completion: Completion, request_model: str, include_usage: bool, piece: int = 16
) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a streamed answer, in order."""
    cid = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": request_model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    out = [chunk({"role": "assistant", "content": ""})]
    text = completion.content
    out += [chunk({"content": text[i : i + piece]}) for i in range(0, len(text), piece)]
    for i, call in enumerate(completion.tool_calls):
        fn = call.get("function", {})
        args = str(fn.get("arguments", ""))
        head = {"index": i, "id": call.get("id"), "type": "function"}
        out.append(chunk({"tool_calls": [{**head, "function": {"name": fn.get("name")}}]}))
        for j in range(0, len(args), piece):
            out.append(
                chunk(
                    {"tool_calls": [{"index": i, "function": {"arguments": args[j : j + piece]}}]}
                )
            )
    out.append(chunk({}, completion.finish_reason))
    if include_usage:
        last = chunk({})
        last["choices"] = []
        last["usage"] = completion_body(completion, request_model)["usage"]
        out.append(last)
    return out


def create_app(
    service: ModelService,
    max_body_bytes: int = DEFAULT_MAX_BODY_MB << 20,
    *,
    authorize: Authorize | None = None,
) -> FastAPI:
    """The FastAPI application serving ``service``; a request body over
    ``max_body_bytes`` is answered with 413 before it is read; ``POST /v1/weights``
    needs ``authorize`` to accept the request's ``Authorization`` header."""
    app = FastAPI(title="MegaFlow model gateway", docs_url=None, redoc_url=None)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)

    def error(exc: Exception) -> JSONResponse:
        status, kind = _error_status(exc)
        return JSONResponse(
            {"error": {"message": str(exc), "type": kind, "code": status}}, status_code=status
        )

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        data = [{"id": m, "object": "model", "owned_by": "megaflow"} for m in service.models()]
        return {"object": "list", "data": data}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        try:
            body = await request.json()
            chat_request = ChatRequest.model_validate(body)
        except ValueError as exc:
            return error(InvalidInput(f"not a chat completion request: {exc}"))
        try:
            completion, _ = await service.complete(
                chat_request, request.headers.get(TRAJECTORY_HEADER)
            )
        except Exception as exc:
            return error(exc)
        if not chat_request.stream:
            # Serialised here: FastAPI's generic encoder costs more than the call.
            return Response(
                json.dumps(completion_body(completion, chat_request.model)),
                media_type="application/json",
            )
        opts = chat_request.stream_options or {}
        chunks = stream_chunks(completion, chat_request.model, bool(opts.get("include_usage")))

        async def events() -> AsyncIterator[bytes]:
            for c in chunks:
                yield f"data: {json.dumps(c)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.put("/v1/trajectories/{trajectory_id:path}")
    async def register(trajectory_id: str, request: Request) -> dict[str, Any]:
        body = await request.json()
        task = body.get("task") if isinstance(body, dict) else None
        service.register(trajectory_id, task if isinstance(task, dict) else None)
        return {"trajectory_id": trajectory_id}

    @app.get("/v1/trajectories/{trajectory_id:path}")
    async def read(trajectory_id: str) -> dict[str, Any]:
        calls = service.recorder.calls(trajectory_id)
        return {"trajectory_id": trajectory_id, "calls": [c.model_dump() for c in calls]}

    @app.delete("/v1/trajectories/{trajectory_id:path}")
    async def release(trajectory_id: str) -> dict[str, Any]:
        calls = service.recorder.release(trajectory_id)
        return {"trajectory_id": trajectory_id, "calls": [c.model_dump() for c in calls]}

    add_weight_routes(app, service.control, authorize, error)
    add_completions_route(app, service, error)
    return app


class GatewayServer(Lifecycle):
    """Runs the gateway with uvicorn inside the current event loop.

    ``async with GatewayServer(service, port=0) as gw:`` binds a loopback port
    (0 picks a free one), serves until the block ends, and stops the service.
    """

    def __init__(
        self,
        service: ModelService,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        owns_service: bool = True,
        wrap: Callable[[Any], Any] | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_MB << 20,
        authorize: Authorize | None = None,
    ) -> None:
        self.service = service
        self.authorize = authorize
        """Checks the token of ``POST /v1/weights``; None refuses every update."""
        self.max_body_bytes = max_body_bytes
        """Largest request body accepted; a larger one gets HTTP 413."""
        self.host = host
        self.port = port
        self.owns_service = owns_service
        self.wrap = wrap
        """Wraps the ASGI app, e.g. in a bearer-token check."""
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None
        self._sock: socket.socket | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    async def start(self) -> None:
        import uvicorn

        if self.owns_service:
            await self.service.start()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((self.host, self.port))
        self.port = self._sock.getsockname()[1]
        app = create_app(self.service, self.max_body_bytes, authorize=self.authorize)
        config = uvicorn.Config(
            self.wrap(app) if self.wrap is not None else app,
            log_level="warning",
            lifespan="off",
            access_log=False,
            timeout_keep_alive=30,  # agents pause between calls while tools run
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[self._sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises the start error
                raise TransportError(f"gateway on {self.host}:{self.port} stopped at start")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
            self._server = self._task = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.owns_service:
            await self.service.stop()
