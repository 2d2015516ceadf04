"""The ``openai`` backend: any OpenAI-compatible server (vLLM, SGLang, a hosted API).

One pooled ``httpx.AsyncClient`` per replica. Connection failures (and 502 or
503 answers, which proxies give when the server behind them is down) raise
TransportError, so the router retries them; other error answers raise
ModelError; a read timeout raises MegaFlowTimeout. Logprobs are read from the
standard ``choices[0].logprobs.content``; token ids from vLLM's ``token_ids``
extension when the server sends them.
"""

from __future__ import annotations

import os
from typing import Any

import httpx

from megaflow.core.errors import MegaFlowTimeout, ModelError, TransportError
from megaflow.model.abstract import (
    Backend,
    CallContext,
    ChatRequest,
    Completion,
    estimate_tokens,
    message_text,
)

_PASS = ("tools", "tool_choice", "temperature", "top_p", "stop", "seed", "logprobs")


class OpenAIBackend(Backend):
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_connections: int = 64,
        request_logprobs: bool = False,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai:{self.base_url}"
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        self.request_logprobs = request_logprobs
        self._http: httpx.AsyncClient | None = None

    @classmethod
    def from_env(cls, base_url: str, model: str, api_key_env: str, **kw: Any) -> OpenAIBackend:
        return cls(base_url, model, api_key=os.environ.get(api_key_env), **kw)

    async def start(self) -> None:
        if self._http is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._http = httpx.AsyncClient(
                base_url=self.base_url,
                headers=headers,
                timeout=httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s)),
                limits=httpx.Limits(
                    max_connections=self.max_connections,
                    max_keepalive_connections=self.max_connections,
                    keepalive_expiry=2.0,  # below common servers' idle timeout (5 s)
                ),
            )

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": request.messages}
        body.update(request.model_dump(include=set(_PASS), exclude_none=True))
        if request.token_limit:
            body["max_tokens"] = request.token_limit
        if self.request_logprobs:
            body["logprobs"] = True
            body["return_token_ids"] = True  # vLLM extension; others ignore it
        return body

    async def complete(self, request: ChatRequest, ctx: CallContext) -> Completion:
        if self._http is None:
            await self.start()
        assert self._http is not None
        try:
            response = await self._http.post("/chat/completions", json=self._body(request))
        except httpx.TimeoutException as exc:
            raise MegaFlowTimeout(f"{self.base_url} gave no answer in {self.timeout_s:g}s") from exc
        except httpx.TransportError as exc:
            raise TransportError(f"cannot reach {self.base_url}: {exc!r}") from exc
        if response.status_code in (502, 503):
            raise TransportError(f"{self.base_url} answered {response.status_code}")
        if response.status_code >= 400:
            raise ModelError(
                f"{self.base_url} answered {response.status_code} for model {self.model!r}: "
                f"{response.text[:500]}"
            )
        try:
            return self._parse(response.json(), request)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ModelError(f"{self.base_url} sent no usable chat completion: {exc!r}") from exc

    def _parse(self, data: dict[str, Any], request: ChatRequest) -> Completion:
        choice = data["choices"][0]
        message = {k: v for k, v in choice["message"].items() if v is not None}
        message["role"] = "assistant"
        usage = data.get("usage") or {}
        logprobs = None
        content = (choice.get("logprobs") or {}).get("content")
        if content:
            logprobs = [float(t["logprob"]) for t in content]
        token_ids = choice.get("token_ids")
        return Completion(
            message=message,
            finish_reason=choice.get("finish_reason") or "stop",
            prompt_tokens=int(
                usage.get("prompt_tokens", estimate_tokens(message_text(request.messages)))
            ),
            completion_tokens=int(
                usage.get("completion_tokens", estimate_tokens(message_text([message])))
            ),
            token_ids=[int(t) for t in token_ids] if token_ids else None,
            logprobs=logprobs,
            model=str(data.get("model", self.model)),
        )
