"""The Model Service interface: backends answer chat requests; clients call the service.

Everything above this layer (agents, the app) talks to a :class:`ModelClient`:
the in-process client and the HTTP client (the OpenAI-compatible gateway)
implement it alike and share one recording path, so a trajectory looks the
same whichever way the call travelled. Backends (``openai``, ``transformers``,
``replay``, ``scripted``) implement :class:`Backend`. All request and response
types of the service live here.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from megaflow.core.errors import ModelError
from megaflow.core.lifecycle import Lifecycle
from megaflow.core.trajectory import ModelCall

TRAJECTORY_HEADER = "X-MegaFlow-Trajectory"
"""HTTP header carrying the trajectory id; ``model@trajectory-id`` works too."""

UNASSIGNED = "unassigned"
"""Trajectory id under which calls without one are recorded."""

Weights = Mapping[str, Any] | str
"""New weights for a backend: a state dict (parameter name -> full, unsharded torch
tensor) handed over in-process, or a path to a safetensors file or a Hugging Face
model directory, read where the backend runs."""


class ChatRequest(BaseModel):
    """An OpenAI chat-completions request. Unknown fields are kept and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = "default"
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int = Field(1, ge=1, le=1, description="Only one choice per request is supported.")
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    logprobs: bool | None = None
    metadata: dict[str, Any] | None = Field(
        None, description="Free-form; a 'megaflow_task' key registers the task payload."
    )

    @property
    def token_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    @property
    def tool_names(self) -> list[str]:
        return [str(t.get("function", {}).get("name", "")) for t in self.tools or []]


class Completion(BaseModel):
    """One answer of a backend: an assistant message and what it cost."""

    model_config = ConfigDict(extra="forbid")

    message: dict[str, Any] = Field(description="The assistant message, OpenAI format.")
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    weights_version: int | None = None
    segments: list[tuple[int, int]] | None = None
    """(tokens, weights version) of each part of an answer that an update cut and the new
    weights finished (:mod:`megaflow.model.partial`); None for an answer of one version."""
    model: str = ""

    @property
    def content(self) -> str:
        return str(self.message.get("content") or "")

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return list(self.message.get("tool_calls") or [])


class WeightsUpdate(BaseModel):
    """The body of the gateway's ``POST /v1/weights``."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        min_length=1,
        description="A safetensors file or model directory, as the serving side sees it.",
    )
    version: int = Field(ge=1, description="The new weights version; above the served one.")


class CallContext(BaseModel):
    """What a backend may know about the call besides the request."""

    model_config = ConfigDict(extra="forbid")

    trajectory_id: str = UNASSIGNED
    task: dict[str, Any] | None = Field(None, description="The task payload, if registered.")


def estimate_tokens(text: str) -> int:
    """A rough count (4 characters a token) for backends that report no usage."""
    return math.ceil(len(text) / 4)


def message_text(messages: list[dict[str, Any]]) -> str:
    """All text of a message list, for token estimates."""
    parts: list[str] = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(c.get("text", "")) for c in content if isinstance(c, dict))
        for call in m.get("tool_calls") or []:
            parts.append(str(call.get("function", {}).get("arguments", "")))
    return "\n".join(parts)


class Backend(abc.ABC):
    """One inference backend replica. ``complete`` raises ModelError,
    TransportError (retried by the router) or MegaFlowTimeout."""

    name: str = "backend"
    weights_version: int = 0
    """The version of the weights this replica serves; 0 until the first update."""

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Open connections or load weights."""

    async def stop(self) -> None:  # noqa: B027 - optional hook
        """Release connections and memory."""

    @abc.abstractmethod
    async def complete(self, request: ChatRequest, ctx: CallContext) -> Completion: ...

    async def update_weights(self, weights: Weights, version: int) -> None:
        """Serve ``weights`` as ``version`` from now on; calls in flight finish on the
        weights they started with. Backends that cannot take weights raise ModelError."""
        raise ModelError(f"{self.name} cannot take new weights")

    def release(self, trajectory_id: str) -> None:  # noqa: B027 - optional hook
        """Forget what the backend keeps for a trajectory (its token state)."""

    async def probe(self) -> None:  # noqa: B027 - optional hook
        """Raise if the replica cannot answer now (a health check); one in this
        process always can."""


class ModelClient(Lifecycle, abc.ABC):
    """What an agent uses: chat, register a trajectory's task, fetch its recorded calls."""

    base_url: str | None = None
    """The gateway's OpenAI base URL (``.../v1``) when the client speaks HTTP."""

    @abc.abstractmethod
    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        trajectory_id: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> Completion:
        """One chat completion, recorded under ``trajectory_id``."""

    @abc.abstractmethod
    async def register(self, trajectory_id: str, task: dict[str, Any] | None) -> None:
        """Attach a task payload to a trajectory (the replay backend plays from it)."""

    @abc.abstractmethod
    async def calls(self, trajectory_id: str, *, release: bool = True) -> list[ModelCall]:
        """The recorded calls of a trajectory; ``release`` forgets them afterwards."""

    async def openai_base_url(self) -> str:
        """An OpenAI base URL (``.../v1``) where this client's service answers and
        records, for agent frameworks that make their own HTTP calls (the trajectory
        id goes in the ``X-MegaFlow-Trajectory`` header)."""
        if self.base_url is None:
            raise ModelError(f"{type(self).__name__} serves no OpenAI-compatible URL")
        return self.base_url

    async def start(self) -> None:
        """Open connections (HTTP) or start the service (in-process)."""

    async def stop(self) -> None:
        """Close what ``start`` opened."""
