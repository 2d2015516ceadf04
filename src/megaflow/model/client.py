"""The two model clients: in-process (no HTTP) and HTTP (through the gateway).

Both implement :class:`~megaflow.model.abstract.ModelClient`, and both end in
the same :meth:`ModelService.complete`, so recording does not depend on the
path. The HTTP client maps the gateway's error answers back onto the MegaFlow
exception tree: 502 -> TransportError, 504 -> MegaFlowTimeout, 400 ->
InvalidInput, 401 -> AuthError, anything else -> ModelError.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import httpx

from megaflow.core.errors import (
    AuthError,
    InvalidInput,
    MegaFlowTimeout,
    ModelError,
    NotFound,
    TransportError,
)
from megaflow.core.trajectory import ModelCall
from megaflow.model.abstract import TRAJECTORY_HEADER, ChatRequest, Completion, ModelClient
from megaflow.model.control import LocalModelControl
from megaflow.model.service import ModelService

if TYPE_CHECKING:
    from megaflow.model.gateway import GatewayServer


class InProcessModelClient(ModelClient):
    """Calls a :class:`ModelService` in the same process."""

    def __init__(self, service: ModelService, *, owns_service: bool = True) -> None:
        self.service = service
        self.owns_service = owns_service
        self._gateway: GatewayServer | None = None
        self._gateway_lock = asyncio.Lock()

    @property
    def control(self) -> LocalModelControl:
        """The service's model control: ``await client.control.update_weights(sd, v)``
        pushes a trainer's state dict to every replica this client reaches."""
        return self.service.control

    async def start(self) -> None:
        if self.owns_service:
            await self.service.start()

    async def stop(self) -> None:
        if self._gateway is not None:
            await self._gateway.stop()
            self._gateway = None
        if self.owns_service:
            await self.service.stop()

    async def openai_base_url(self) -> str:
        """The service on a loopback gateway, started on first use and stopped with
        the client (needs the ``model`` extra)."""
        async with self._gateway_lock:
            if self._gateway is None:
                from megaflow.model.gateway import GatewayServer

                gateway = GatewayServer(self.service, owns_service=False)
                await gateway.start()
                self._gateway = gateway
        return self._gateway.base_url

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        trajectory_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> Completion:
        try:
            request = ChatRequest(messages=messages, tools=tools, **params)
        except ValueError as exc:
            raise InvalidInput(f"bad chat request: {exc}") from exc
        completion, _ = await self.service.complete(request, trajectory_id)
        return completion

    async def register(self, trajectory_id: str, task: dict[str, Any] | None) -> None:
        self.service.register(trajectory_id, task)

    async def calls(self, trajectory_id: str, *, release: bool = True) -> list[ModelCall]:
        rec = self.service.recorder
        return rec.release(trajectory_id) if release else rec.calls(trajectory_id)


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        err = response.json().get("error", {})
        message = str(err.get("message") or response.text)
    except ValueError:
        message = response.text
    status = response.status_code
    text = f"gateway answered {status}: {message}"
    if status == 400 or status == 422:
        raise InvalidInput(text)
    if status == 401:
        raise AuthError(text)
    if status == 404:
        raise NotFound(text)
    if status == 502:
        raise TransportError(text)
    if status == 504:
        raise MegaFlowTimeout(text)
    raise ModelError(text)


class HttpModelClient(ModelClient):
    """Calls the OpenAI-compatible gateway at ``base_url`` (ending in ``/v1``)."""

    def __init__(self, base_url: str, *, model: str = "default", timeout_s: float = 600.0) -> None:
        self.url = base_url.rstrip("/")
        self.base_url = self.url
        self.model = model
        self.timeout_s = timeout_s
        self._http: httpx.AsyncClient | None = None

    async def start(self) -> None:
        if self._http is None:
            self._http = httpx.AsyncClient(
                base_url=self.url,
                timeout=httpx.Timeout(self.timeout_s, connect=10.0),
                # Idle connections are dropped before a server would close them
                # (uvicorn: 5 s), so a request never races a closing socket.
                limits=httpx.Limits(
                    max_connections=1024, max_keepalive_connections=256, keepalive_expiry=2.0
                ),
            )

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def _send(self, method: str, url: str, **kw: Any) -> httpx.Response:
        if self._http is None:
            await self.start()
        assert self._http is not None
        try:
            response = await self._http.request(method, url, **kw)
        except httpx.TimeoutException as exc:
            raise MegaFlowTimeout(
                f"gateway {self.base_url} gave no answer within {self.timeout_s:g}s"
            ) from exc
        except httpx.TransportError as exc:
            raise TransportError(f"cannot reach gateway {self.base_url}: {exc!r}") from exc
        _raise_for(response)
        return response

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        trajectory_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> Completion:
        body: dict[str, Any] = {"model": self.model, "messages": messages, **params}
        if tools:
            body["tools"] = tools
        headers = {TRAJECTORY_HEADER: trajectory_id} if trajectory_id else {}
        data = (await self._send("POST", "/chat/completions", json=body, headers=headers)).json()
        try:
            choice = data["choices"][0]
            usage = data.get("usage") or {}
            ext = data.get("megaflow") or {}
            return Completion(
                message={k: v for k, v in choice["message"].items() if v is not None},
                finish_reason=choice.get("finish_reason") or "stop",
                prompt_tokens=int(usage.get("prompt_tokens", 0)),
                completion_tokens=int(usage.get("completion_tokens", 0)),
                prompt_token_ids=ext.get("prompt_token_ids"),
                token_ids=ext.get("token_ids"),
                logprobs=ext.get("logprobs"),
                weights_version=ext.get("weights_version"),
                segments=ext.get("segments"),
                model=str(data.get("model", "")),
            )
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ModelError(f"gateway answer is not a chat completion: {exc!r}") from exc

    async def register(self, trajectory_id: str, task: dict[str, Any] | None) -> None:
        await self._send("PUT", f"/trajectories/{trajectory_id}", json={"task": task})

    async def calls(self, trajectory_id: str, *, release: bool = True) -> list[ModelCall]:
        method = "DELETE" if release else "GET"
        data = (await self._send(method, f"/trajectories/{trajectory_id}")).json()
        return [ModelCall.model_validate(c) for c in data.get("calls", [])]
