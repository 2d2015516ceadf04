"""``POST /v1/completions`` with token-id prompts: vLLM's token-level API, served by MegaFlow.

The route takes vLLM's completion request with ``prompt`` (or
``prompt_token_ids``) as a list of token ids, ``max_tokens``, ``temperature``,
``top_p``, ``top_k``, ``seed``, ``stop``, ``logprobs`` and ``return_token_ids``,
and answers vLLM's ``text_completion`` object: ``choices[0].token_ids`` and
``prompt_token_ids`` (with ``return_token_ids``), ``logprobs.token_logprobs``
(with ``logprobs``; ``tokens`` as ``token_id:N``, vLLM's form for ids), the
finish reason and usage, plus the ``megaflow`` extension with the weights
version that answered. So a client written for vLLM (MegaFlow's own ``vllm``
model type among them) drives MegaFlow's engine token-in.

The ids reach the backend as the chat request's ``prompt_token_ids``
extension; a backend that takes them (``transformers``) feeds them as they
are. One that does not would answer some other prompt, so an answer whose
prompt ids are not the ones sent is an error, never passed off as theirs.
Text prompts are refused (400): rendering is the caller's business here.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from megaflow.core.errors import InvalidInput, ModelError
from megaflow.model.abstract import TRAJECTORY_HEADER, ChatRequest, Completion
from megaflow.model.service import ModelService

_SAMPLING = ("max_tokens", "temperature", "top_p", "seed", "stop", "top_k")


def token_request(body: Any) -> ChatRequest:
    """The chat request carrying a completion request's prompt ids."""
    if not isinstance(body, dict):
        raise InvalidInput("a completion request is a JSON object")
    ids = body.get("prompt_token_ids", body.get("prompt"))
    if (
        not isinstance(ids, list)
        or not ids
        or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids)
    ):
        raise InvalidInput(
            "prompt must be a non-empty list of token ids (MegaFlow's engine renders no "
            "text prompts on /v1/completions; use /v1/chat/completions for text)"
        )
    fields = {k: body[k] for k in _SAMPLING if body.get(k) is not None}
    return ChatRequest.model_validate(
        {
            "model": body.get("model") or "default",
            "messages": [{"role": "user", "content": ""}],
            "prompt_token_ids": ids,
            **fields,
        }
    )


def completion_body(completion: Completion, body: dict[str, Any], ids: list[int]) -> dict[str, Any]:
    """vLLM's ``text_completion`` object for ``completion``."""
    token_ids = completion.token_ids or []
    logprobs = None
    if body.get("logprobs") is not None:
        logprobs = {
            "text_offset": [],
            "token_logprobs": completion.logprobs or [],
            "tokens": [f"token_id:{t}" for t in token_ids],
            "top_logprobs": [],
        }
    choice: dict[str, Any] = {
        "index": 0,
        "text": completion.content,
        "logprobs": logprobs,
        "finish_reason": completion.finish_reason,
        "stop_reason": None,
    }
    if body.get("return_token_ids"):
        choice["token_ids"] = token_ids
        choice["prompt_token_ids"] = ids
    return {
        "id": f"cmpl-{uuid.uuid4().hex[:24]}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": body.get("model") or completion.model,
        "choices": [choice],
        "usage": {
            "prompt_tokens": len(ids),
            "completion_tokens": len(token_ids),
            "total_tokens": len(ids) + len(token_ids),
        },
        "megaflow": {"weights_version": completion.weights_version},
    }


def add_completions_route(
    app: FastAPI, service: ModelService, error: Callable[[Exception], JSONResponse]
) -> None:
    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        try:
            body = await request.json()
            chat = token_request(body)
        except ValueError as exc:
            return error(exc if isinstance(exc, InvalidInput) else InvalidInput(str(exc)))
        ids = [int(t) for t in chat.model_extra["prompt_token_ids"]]  # type: ignore[index]
        try:
            completion, _ = await service.complete(chat, request.headers.get(TRAJECTORY_HEADER))
            if completion.prompt_token_ids != ids:
                raise ModelError(
                    "the backend does not take token-id prompts (it fed other ids); serve a "
                    "transformers backend for /v1/completions"
                )
        except Exception as exc:
            return error(exc)
        return completion_body(completion, body, ids)
