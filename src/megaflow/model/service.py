"""The Model Service: routes chat requests to a backend and records every call.

Both clients (in-process and the HTTP gateway) end in
:meth:`ModelService.complete`, so a call is recorded the same way whichever
path it took: under its trajectory id, as a :class:`ModelCall` with the request
messages, the response, token counts, latency, and the prompt and completion
token ids, logprobs and weights version when the backend gives them. A
failed call is recorded too, with its error. Releasing a trajectory from the
recorder also releases what the backends keep for it (token-in state).

A service has one :class:`~megaflow.model.control.LocalModelControl` over its
router (``service.control``), which the gateway's weights route and in-process
code share, so both see the same replica names and versions.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from megaflow.core.errors import InvalidInput
from megaflow.core.trajectory import ModelCall
from megaflow.model.abstract import UNASSIGNED, CallContext, ChatRequest, Completion
from megaflow.model.control import LocalModelControl
from megaflow.model.routing import Router

log = logging.getLogger(__name__)

_REQUEST_KEYS = ("model", "messages", "tools", "tool_choice", "temperature", "max_tokens", "stop")


class CallRecorder:
    """Recorded calls and registered task payloads, by trajectory id."""

    def __init__(self, max_trajectories: int = 100_000) -> None:
        self.max_trajectories = max_trajectories
        self._calls: dict[str, list[ModelCall]] = {}
        self._tasks: dict[str, dict[str, Any]] = {}
        self.on_release: list[Callable[[str], None]] = []
        """Called with the trajectory id whenever a trajectory is released or dropped."""

    def register(self, trajectory_id: str, task: dict[str, Any] | None) -> None:
        if task is not None:
            self._tasks[trajectory_id] = task
        self._calls.setdefault(trajectory_id, [])

    def task(self, trajectory_id: str) -> dict[str, Any] | None:
        return self._tasks.get(trajectory_id)

    def record(self, trajectory_id: str, call: ModelCall) -> None:
        calls = self._calls.get(trajectory_id)
        if calls is None:
            if len(self._calls) >= self.max_trajectories:
                # Oldest first: dicts keep insertion order. A caller that never
                # releases its trajectories must not grow memory without bound.
                oldest = next(iter(self._calls))
                log.warning("recorder full; dropping trajectory %s", oldest)
                self.release(oldest)
            calls = self._calls[trajectory_id] = []
        calls.append(call)

    def calls(self, trajectory_id: str) -> list[ModelCall]:
        return list(self._calls.get(trajectory_id, []))

    def release(self, trajectory_id: str) -> list[ModelCall]:
        self._tasks.pop(trajectory_id, None)
        for hook in self.on_release:
            hook(trajectory_id)
        return self._calls.pop(trajectory_id, [])

    def __len__(self) -> int:
        return len(self._calls)


def _snapshot(request: ChatRequest) -> dict[str, Any]:
    """The recorded part of a request, as plain data.

    A new list of new message dicts, so what a backend or the caller does to
    the request's messages afterwards does not change the record; what the
    messages hold (strings, tool calls) and the tool schemas are shared, not
    walked: ``model_dump`` of a 12-message history with five tool schemas took
    10.1 us, this 1.5 us (``benchmarks/RESULTS.md``)."""
    req: dict[str, Any] = {}
    for key in _REQUEST_KEYS:
        value = getattr(request, key)
        if value is not None:
            req[key] = value
    req["messages"] = [dict(m) for m in request.messages]
    return req


def split_model_name(model: str) -> tuple[str, str | None]:
    """``'name@trajectory-id'`` -> ``('name', 'trajectory-id')``."""
    name, sep, trajectory = model.partition("@")
    return name, (trajectory if sep and trajectory else None)


class ModelService:
    """One named model: a router over backend replicas, and a recorder."""

    def __init__(self, name: str, router: Router, recorder: CallRecorder | None = None) -> None:
        self.name = name
        self.router = router
        self.recorder = recorder or CallRecorder()
        self.recorder.on_release.append(router.release)
        self.control = LocalModelControl(router)
        self.calls_total = 0
        self.errors_total = 0

    async def start(self) -> None:
        await self.router.start()

    async def stop(self) -> None:
        await self.router.stop()

    def models(self) -> list[str]:
        return [self.name]

    def register(self, trajectory_id: str, task: dict[str, Any] | None) -> None:
        self.recorder.register(trajectory_id, task)

    def resolve(self, request: ChatRequest, header_trajectory: str | None) -> str:
        """The trajectory id of a request: the header wins over a model-name suffix."""
        name, suffix = split_model_name(request.model)
        if name not in ("", "default", self.name):
            raise InvalidInput(
                f"model {name!r} is not served here; this gateway serves {self.name!r}"
            )
        trajectory = header_trajectory or suffix or UNASSIGNED
        meta = request.metadata or {}
        task = meta.get("megaflow_task")
        if isinstance(task, dict):
            self.recorder.register(trajectory, task)
        return trajectory

    async def complete(
        self, request: ChatRequest, trajectory_id: str | None = None
    ) -> tuple[Completion, ModelCall]:
        """Answer one request and record it. Errors are recorded, then raised."""
        trajectory = self.resolve(request, trajectory_id)
        ctx = CallContext(trajectory_id=trajectory, task=self.recorder.task(trajectory))
        started = time.time()
        t0 = time.perf_counter()
        req = _snapshot(request)
        self.calls_total += 1
        try:
            completion = await self.router.complete(request, ctx)
        except Exception as exc:
            self.errors_total += 1
            self.recorder.record(
                trajectory,
                ModelCall(
                    request=req,
                    response={"error": str(exc), "error_type": type(exc).__name__},
                    started_at=started,
                    duration_s=time.perf_counter() - t0,
                ),
            )
            raise
        completion.model = completion.model or self.name
        call = ModelCall(
            request=req,
            response={
                "message": completion.message,
                "finish_reason": completion.finish_reason,
                "model": completion.model,
            },
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            prompt_token_ids=completion.prompt_token_ids,
            token_ids=completion.token_ids,
            logprobs=completion.logprobs,
            weights_version=completion.weights_version,
            segments=completion.segments,
            started_at=started,
            duration_s=time.perf_counter() - t0,
        )
        self.recorder.record(trajectory, call)
        return completion, call
