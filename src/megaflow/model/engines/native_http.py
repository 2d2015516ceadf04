"""The HTTP client the engine adapters share: JSON to an engine's native routes.

Errors name the engine and the route: a connection failure (and a 502 or 503
from a proxy in front of a dead engine) is a TransportError, so the router
retries the call on another replica; any other error status is an
:class:`EngineRefused` carrying the engine's own message; no answer within
the timeout is a MegaFlowTimeout.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from megaflow.core.errors import MegaFlowTimeout, ModelError, TransportError


class EngineRefused(ModelError):
    """An engine answered a native route with an error status."""

    def __init__(self, message: str, status: int, body: Any) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


def engine_message(body: Any) -> str:
    """The reason inside an engine's error body: SGLang's ``message``, vLLM's
    ``error`` or FastAPI's ``detail``; else the body itself, cut short."""
    if isinstance(body, dict):
        for key in ("message", "error", "detail"):
            value = body.get(key)
            if isinstance(value, dict):
                value = value.get("message", value)
            if value:
                return str(value)[:500]
    return str(body)[:500]


class NativeHTTP:
    """One pooled connection set to an engine server's root URL."""

    def __init__(
        self,
        root: str,
        engine: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_connections: int = 64,
    ) -> None:
        self.root = root.rstrip("/")
        self.engine = engine
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        self._http: httpx.AsyncClient | None = None

    @property
    def name(self) -> str:
        return f"{self.engine} {self.root}"

    async def start(self) -> None:
        if self._http is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._http = httpx.AsyncClient(
                base_url=self.root,
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

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """Send ``body`` as JSON (none if None); the JSON answer, or None if it has none."""
        if self._http is None:
            await self.start()
        assert self._http is not None
        wait = self.timeout_s if timeout_s is None else timeout_s
        kw: dict[str, Any] = {"params": params, "timeout": wait}
        if body is not None:
            kw["json"] = body
        try:
            response = await self._http.request(method, path, **kw)
        except httpx.TimeoutException as exc:
            raise MegaFlowTimeout(f"{self.name} gave no answer to {path} in {wait:g}s") from exc
        except httpx.TransportError as exc:
            raise TransportError(f"cannot reach {self.name} ({path}): {exc!r}") from exc
        if response.status_code in (502, 503):
            raise TransportError(f"{self.name} answered {response.status_code} to {path}")
        try:
            answer = response.json() if response.content else None
        except json.JSONDecodeError:
            answer = response.text
        if response.status_code >= 400:
            raise EngineRefused(
                f"{self.name} answered {response.status_code} to {path}: {engine_message(answer)}",
                response.status_code,
                answer,
            )
        return answer

    async def post(self, path: str, body: Any = None, **kw: Any) -> Any:
        return await self.call("POST", path, body, **kw)

    async def get(self, path: str, **kw: Any) -> Any:
        return await self.call("GET", path, **kw)


class NativeEngine:
    """What every engine adapter shares: its HTTP client, its name and lifecycle."""

    def __init__(
        self,
        root: str,
        engine: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        weights_timeout_s: float = 600.0,
        max_connections: int = 64,
    ) -> None:
        self.http = NativeHTTP(
            root, engine, api_key=api_key, timeout_s=timeout_s, max_connections=max_connections
        )
        self.weights_timeout_s = weights_timeout_s

    @property
    def name(self) -> str:
        return self.http.name

    async def start(self) -> None:
        await self.http.start()

    async def stop(self) -> None:
        await self.http.stop()
