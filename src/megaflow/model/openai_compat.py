"""The ``openai`` backend: any OpenAI-compatible server (vLLM, SGLang, a hosted API).

One pooled ``httpx.AsyncClient`` per replica. Connection failures (and 502 or
503 answers, which proxies give when the server behind them is down) raise
TransportError, so the router retries them; other error answers raise
ModelError; a read timeout raises MegaFlowTimeout. Logprobs are read from the
standard ``choices[0].logprobs.content``; with ``request_logprobs`` the request
also carries vLLM's ``return_token_ids``, and the completion ids
(``choices[0].token_ids``) and prompt ids (``prompt_token_ids``) are recorded
when the server sends them. The server renders the chat itself, so those
prompt ids are a re-rendering, not token-in: a trainer's
``sample_from_trajectory`` refuses the episode if they drifted.

New weights (``weight_sync``) are a path the inference server reads from its
own disk; tensors cannot travel this way:

- ``vllm`` and ``sglang``: the engines' own disk-reload calls, made by their
  adapters in :mod:`megaflow.model.engines` (vLLM's dev-mode
  ``/collective_rpc`` ``update_config`` + ``reload_weights`` and
  ``/reset_prefix_cache``; SGLang's ``/update_weights_from_disk``). The chat is
  still rendered by the server, so recorded prompt ids are a re-rendering: the
  ``vllm`` and ``sglang`` model types (:mod:`megaflow.model.engines.backend`)
  are the token-in path, with broadcast weights and roll-back of a failed update.
- ``megaflow``: MegaFlow's own engine (``megaflow serve model`` or
  ``megaflow serve-model``): ``POST /v1/weights`` with ``path`` and ``version``
  behind the gateway's token; the answer lists the version every replica
  serves, and each must be the new one. Its completions carry a ``megaflow``
  extension (prompt and completion token ids, logprobs, the version that
  answered), which is recorded in place of the standard fields; the call's
  trajectory id goes along (``X-MegaFlow-Trajectory``), so the engine feeds
  later turns token-in, and a released trajectory is released there too.

No real vLLM or SGLang ran against this here (no GPU); the tests check the
requests against a local server. An answer in flight during an update is
recorded with the version it was sent under, the older one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence
from typing import Any, Literal

import httpx

from megaflow.core.errors import InvalidInput, MegaFlowTimeout, ModelError, TransportError
from megaflow.core.weight_group import TensorMeta, WeightGroup
from megaflow.model import remote_group
from megaflow.model.abstract import (
    TRAJECTORY_HEADER,
    UNASSIGNED,
    Backend,
    CallContext,
    ChatRequest,
    Completion,
    Weights,
    estimate_tokens,
    message_text,
)
from megaflow.model.engines.sglang import SGLangEngine
from megaflow.model.engines.vllm import VLLMEngine

_PASS = ("tools", "tool_choice", "temperature", "top_p", "stop", "seed", "logprobs")

WeightSync = Literal["none", "vllm", "sglang", "megaflow"]


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
        weight_sync: WeightSync = "none",
        weight_sync_timeout_s: float = 600.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = f"openai:{self.base_url}"
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        self.request_logprobs = request_logprobs
        self.weight_sync = weight_sync
        self.weight_sync_timeout_s = weight_sync_timeout_s
        self._http: httpx.AsyncClient | None = None
        self._updating = asyncio.Lock()
        self._forgetting: set[asyncio.Task[None]] = set()
        self._weights_api: VLLMEngine | SGLangEngine | None = None

    @property
    def server_url(self) -> str:
        """The server's root, where the native (non-OpenAI) routes live."""
        url = self.base_url
        return url[: -len("/v1")] if url.endswith("/v1") else url

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
        for task in list(self._forgetting):
            task.cancel()
        await asyncio.gather(*self._forgetting, return_exceptions=True)
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        if self._weights_api is not None:
            await self._weights_api.stop()
            self._weights_api = None

    def _engine(self) -> VLLMEngine | SGLangEngine:
        """The engine adapter that makes vLLM's or SGLang's weight calls."""
        if self._weights_api is None:
            kw: dict[str, Any] = {
                "api_key": self.api_key,
                "weights_timeout_s": self.weight_sync_timeout_s,
            }
            if self.weight_sync == "vllm":
                self._weights_api = VLLMEngine(self.server_url, self.model, **kw)
            else:
                self._weights_api = SGLangEngine(self.server_url, **kw)
        return self._weights_api

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
        version = self.weights_version if self.weight_sync != "none" else None
        try:
            response = await self._http.post(
                "/chat/completions", json=self._body(request), headers=self._headers(ctx)
            )
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
            return self._parse(response.json(), request, version)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ModelError(f"{self.base_url} sent no usable chat completion: {exc!r}") from exc

    def _headers(self, ctx: CallContext) -> dict[str, str]:
        """MegaFlow's engine feeds a trajectory's later turns token-in, by its id."""
        if self.weight_sync == "megaflow" and ctx.trajectory_id != UNASSIGNED:
            return {TRAJECTORY_HEADER: ctx.trajectory_id}
        return {}

    async def probe(self) -> None:
        """``GET /models`` on a connection of its own: a pool full of long
        generations must not read as a dead server (the caller bounds the wait)."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            async with httpx.AsyncClient(headers=headers, timeout=None) as http:
                response = await http.get(f"{self.base_url}/models")
        except httpx.HTTPError as exc:
            raise TransportError(f"cannot reach {self.base_url}: {exc!r}") from exc
        if response.status_code >= 400:
            raise TransportError(f"{self.base_url}/models answered {response.status_code}")

    def release(self, trajectory_id: str) -> None:
        """Have MegaFlow's engine forget the trajectory too (in the background)."""
        if self.weight_sync != "megaflow" or self._http is None:
            return
        try:
            task = asyncio.get_running_loop().create_task(self._forget(trajectory_id))
        except RuntimeError:  # no loop: the engine's own bound drops it later
            return
        self._forgetting.add(task)
        task.add_done_callback(self._forgetting.discard)

    async def _forget(self, trajectory_id: str) -> None:
        if self._http is None:
            return
        with contextlib.suppress(httpx.HTTPError):
            await self._http.delete(f"/trajectories/{trajectory_id}", timeout=10)

    def _parse(self, data: dict[str, Any], request: ChatRequest, version: int | None) -> Completion:
        choice = data["choices"][0]
        message = {k: v for k, v in choice["message"].items() if v is not None}
        message["role"] = "assistant"
        usage = data.get("usage") or {}
        logprobs = None
        content = (choice.get("logprobs") or {}).get("content")
        if content:
            logprobs = [float(t["logprob"]) for t in content]
        token_ids = choice.get("token_ids")
        prompt_ids = data.get("prompt_token_ids")
        ext = data.get("megaflow") if self.weight_sync == "megaflow" else None
        if isinstance(ext, dict):  # MegaFlow's engine: what it fed and the version it served
            token_ids, prompt_ids = ext.get("token_ids"), ext.get("prompt_token_ids")
            logprobs = [float(x) for x in ext["logprobs"]] if ext.get("logprobs") else None
            if ext.get("weights_version") is not None:
                version = int(ext["weights_version"])
        segments = ext.get("segments") if isinstance(ext, dict) else None
        return Completion(
            message=message,
            finish_reason=choice.get("finish_reason") or "stop",
            prompt_tokens=int(
                usage.get("prompt_tokens", estimate_tokens(message_text(request.messages)))
            ),
            completion_tokens=int(
                usage.get("completion_tokens", estimate_tokens(message_text([message])))
            ),
            prompt_token_ids=[int(t) for t in prompt_ids] if prompt_ids else None,
            token_ids=[int(t) for t in token_ids] if token_ids else None,
            logprobs=logprobs,
            weights_version=version,
            segments=[(int(n), int(v)) for n, v in segments] if segments else None,
            model=str(data.get("model", self.model)),
        )

    async def update_weights(self, weights: Weights, version: int) -> None:
        if self.weight_sync == "none":
            raise ModelError(
                f"{self.name} cannot take new weights; set weight_sync to 'vllm', 'sglang' "
                "or 'megaflow'"
            )
        if not isinstance(weights, str):
            raise InvalidInput(
                f"{self.name} takes new weights as a path on the inference server, not tensors"
            )
        async with self._updating:
            if version <= self.weights_version:
                raise InvalidInput(
                    f"{self.name}: weights version {version} is not newer than the served "
                    f"version {self.weights_version}"
                )
            if self.weight_sync == "megaflow":
                answer = await self._native("/v1/weights", {"path": weights, "version": version})
                served = [b.get("weights_version") for b in (answer or {}).get("backends", [])]
                if not served or any(v != version for v in served):
                    raise ModelError(f"{self.server_url} serves {served} after weights v{version}")
            else:
                await self._engine().load_from_disk(weights, version)
            self.weights_version = version

    # The broadcast weight sync: MegaFlow's engine joins the group (remote_group).

    async def weight_group_ranks(self) -> int:
        return await remote_group.ranks(self._group_route())

    async def init_weight_group(self, group: WeightGroup) -> None:
        await remote_group.init(self._group_route(), group)

    async def update_weights_from_group(self, metas: Sequence[TensorMeta], version: int) -> None:
        async with self._updating:
            await remote_group.update(self._group_route(), metas, version)
            self.weights_version = version

    async def close_weight_group(self) -> None:
        await remote_group.close(self._group_route())

    async def served_version(self) -> int | None:
        """The version MegaFlow's engine serves now (None for other servers); one below
        what this client installed means the engine restarted, and is adopted."""
        if self.weight_sync != "megaflow":
            return None
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        async with httpx.AsyncClient(headers=headers, timeout=None) as http:  # as probe()

            async def native(path: str, body: dict[str, Any] | None, method: str) -> Any:
                try:
                    response = await http.request(method, self.server_url + path, json=body)
                except httpx.HTTPError as exc:
                    raise TransportError(f"cannot reach {self.server_url}: {exc!r}") from exc
                if response.status_code >= 400:
                    raise ModelError(f"{self.server_url}{path} answered {response.status_code}")
                return response.json()

            served = await remote_group.served(native)
        self.weights_version = min(self.weights_version, served)
        return served

    async def weight_digests(self) -> dict[str, str]:
        """What MegaFlow's engine serves, tensor by tensor (every replica of it alike)."""
        return await remote_group.digests(self._group_route())

    def _group_route(self) -> remote_group.Native:
        if self.weight_sync != "megaflow":
            raise ModelError(
                f"{self.name} cannot join a weight-update group (broadcast weight sync): "
                f"weight_sync is {self.weight_sync!r}; use 'megaflow' for MegaFlow's engine"
            )
        return self._native

    async def _native(self, path: str, body: dict[str, Any] | None, method: str = "POST") -> Any:
        """Call one of the server's native routes; its JSON answer, if any."""
        if self._http is None:
            await self.start()
        assert self._http is not None
        url = self.server_url + path
        try:
            response = await self._http.request(
                method, url, json=body, timeout=self.weight_sync_timeout_s
            )
        except httpx.TimeoutException as exc:
            raise MegaFlowTimeout(
                f"{url} did not answer within {self.weight_sync_timeout_s:g}s"
            ) from exc
        except httpx.TransportError as exc:
            raise TransportError(f"cannot reach {url}: {exc!r}") from exc
        if response.status_code >= 400:
            raise ModelError(
                f"{url} answered {response.status_code} to a weights update: {response.text[:500]}"
            )
        try:
            return response.json()
        except ValueError:
            return None
