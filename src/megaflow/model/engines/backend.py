"""A model backend made of an engine adapter and the trainer's tokenizer.

:class:`EngineBackend` answers chat requests through an
:class:`~megaflow.model.engines.abstract.EngineAPI` token-in (the chat is
rendered here, the engine gets ids) and records prompt ids, completion ids,
logprobs and the weights version of every answer. It takes new weights from
disk (``update_weights(path, version)``) or over a broadcast group (the
``GroupEngineControl`` of :mod:`megaflow.train.weight_sync.abstract`:
``init_weight_group`` once, then ``update_weights_from_group`` while the
trainer's rank 0 broadcasts); either way the version it reports changes only
once the engine took the update and reports it, so an engine that refuses
keeps serving, and reporting, the version it had, and the error names the
engine. An update that failed halfway (:class:`WeightsMixed`: vLLM loads
tensor by tensor, SGLang says a failed broadcast left the weights partly
updated) is rolled back by loading the checkpoint of the version served
before; if that fails too, the backend answers nothing (ModelError) until a
full update succeeds, so no answer is recorded with mixed weights.

The version an answer is recorded with is the one the engine reports (SGLang)
or, for an engine that reports none (vLLM), the one this backend installed
last when the call was sent; an answer that races an update is recorded
with the older version.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from megaflow.core.errors import InvalidInput, MegaFlowTimeout, ModelError, TransportError
from megaflow.model.abstract import Backend, CallContext, ChatRequest, Completion, Weights
from megaflow.model.engines.abstract import (
    EngineAPI,
    PauseMode,
    Sampling,
    TensorMeta,
    TokenOutput,
    WeightGroup,
    WeightsMixed,
)
from megaflow.model.engines.chat_tokens import ChatTokens


@dataclass(frozen=True)
class ServedVersion:
    """One engine's answer to a broadcast update: the version it serves."""

    name: str
    weights_version: int


class EngineBackend(Backend):
    def __init__(
        self,
        engine: EngineAPI,
        tokens: ChatTokens,
        *,
        base_path: str,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        workers: int = 1,
    ) -> None:
        self.engine = engine
        self.tokens = tokens
        self.name = engine.name
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.workers = workers
        self.weights_version = 0
        self._updating = asyncio.Lock()
        self._grouped = False
        self._partial: int | None = None
        self._checkpoint = (base_path, 0)
        """The last checkpoint the engine loaded whole and its version, to roll back to."""

    async def start(self) -> None:
        """Load the tokenizer and connect; an engine that reports serving other
        weights than the base (a version left from an earlier run) is refused, since
        MegaFlow counts every engine from version 0."""
        await asyncio.to_thread(self.tokens.load)
        await self.engine.start()
        try:
            served = await self.engine.served_version()
        except (TransportError, MegaFlowTimeout):
            return  # not up yet: the first call (megaflow train's start probe) reports it
        if served is not None and served != self.weights_version:
            raise ModelError(
                f"{self.name} serves weights v{served}, not the base model (v0) a run starts "
                f"from; restart it, or load the base model into it, before the run"
            )

    async def stop(self) -> None:
        await self.engine.stop()

    def sampling(self, request: ChatRequest) -> Sampling:
        top_k = (request.model_extra or {}).get("top_k")
        stop = [request.stop] if isinstance(request.stop, str) else request.stop
        return Sampling(
            max_tokens=request.token_limit or self.max_new_tokens,
            temperature=self.temperature if request.temperature is None else request.temperature,
            top_p=request.top_p,
            top_k=top_k if isinstance(top_k, int) and top_k > 0 else None,
            seed=request.seed,
            stop=stop or None,
        )

    async def complete(self, request: ChatRequest, ctx: CallContext) -> Completion:
        if not self.tokens.loaded:
            await asyncio.to_thread(self.tokens.load)
        if self._partial is not None:
            raise ModelError(
                f"{self.name} holds a partial update to weights v{self._partial}; it answers "
                f"again after a full update"
            )
        version = self.weights_version
        prompt = await asyncio.to_thread(self.tokens.prompt_ids, request, ctx)
        out = await self.engine.generate(prompt, self.sampling(request), uuid.uuid4().hex)
        self._check(out, prompt)
        message, called = self.tokens.message(out.token_ids)
        self.tokens.remember(ctx, request, message, prompt, out.token_ids)
        finish = "tool_calls" if called else out.finish_reason
        return Completion(
            message=message,
            finish_reason=finish,
            prompt_tokens=len(prompt),
            completion_tokens=len(out.token_ids),
            prompt_token_ids=prompt,
            token_ids=out.token_ids,
            logprobs=out.logprobs,
            weights_version=version if out.weights_version is None else out.weights_version,
            model=self.name,
        )

    def _check(self, out: TokenOutput, prompt: list[int]) -> None:
        """The engine must have fed the ids it was sent and give one logprob per id."""
        if out.prompt_ids is not None and out.prompt_ids != prompt:
            raise ModelError(
                f"{self.name} fed {len(out.prompt_ids)} prompt ids for the {len(prompt)} it "
                f"was sent; the recorded tokens would not be what the model saw"
            )
        if out.prompt_tokens is not None and out.prompt_tokens != len(prompt):
            raise ModelError(
                f"{self.name} counted {out.prompt_tokens} prompt tokens for the "
                f"{len(prompt)} ids it was sent"
            )
        if len(out.logprobs) != len(out.token_ids):
            raise ModelError(
                f"{self.name} gave {len(out.logprobs)} logprobs for {len(out.token_ids)} ids"
            )

    def _newer(self, version: int) -> None:
        if version <= self.weights_version:
            raise InvalidInput(
                f"{self.name}: weights version {version} is not newer than the served "
                f"version {self.weights_version}"
            )

    async def _confirm(self, version: int) -> None:
        """Take ``version`` as served, unless the engine reports another."""
        try:
            served = await self.engine.served_version()
        except (TransportError, MegaFlowTimeout):
            return  # not up yet: the first call (megaflow train's start probe) reports it
        if served is not None and served != version:
            raise WeightsMixed(f"{self.name} reports weights v{served} after loading v{version}")
        self.weights_version = version
        self._partial = None

    async def _roll_back(self, exc: WeightsMixed, version: int) -> NoReturn:
        """The engine may hold part of ``version``: load the last whole checkpoint
        again (the version served before, unless that came by broadcast: then an
        older one, and the version served says so), else stop answering until a
        full update succeeds."""
        path, old = self._checkpoint
        self._partial = version
        try:
            await self.engine.load_from_disk(path, old)
            await self._confirm(old)
        except Exception as again:
            raise ModelError(
                f"{exc}; rolling {self.name} back to v{old} ({path}) failed too ({again}); "
                f"it answers nothing until a full update succeeds"
            ) from exc
        raise ModelError(
            f"{exc}; {self.name} was rolled back to v{old} ({path}) and serves it"
        ) from exc

    async def update_weights(self, weights: Weights, version: int) -> None:
        """Load the checkpoint at ``weights`` (a path on the engine's machine)."""
        if not isinstance(weights, str):
            raise InvalidInput(
                f"{self.name} takes new weights as a checkpoint path or over a broadcast "
                f"group, not as tensors in this process"
            )
        async with self._updating:
            self._newer(version)
            try:
                await self.engine.load_from_disk(weights, version)
                await self._confirm(version)
            except WeightsMixed as exc:
                await self._roll_back(exc, version)
            self._checkpoint = (weights, version)

    async def weight_group_ranks(self) -> int:
        """The ranks this engine brings to a broadcast group: one per worker."""
        return self.workers

    async def init_weight_group(self, group: WeightGroup) -> None:
        """Have the engine's workers join the trainer's broadcast group."""
        await self.engine.init_weight_group(group)
        self._grouped = True

    async def update_weights_from_group(
        self, metas: Sequence[TensorMeta], version: int
    ) -> list[ServedVersion]:
        """Receive ``version`` over the group (the trainer broadcasts meanwhile).

        A failure after the engine may have loaded some tensors (SGLang says so:
        discard the whole weights) rolls the engine back to the last checkpoint
        it loaded whole (``base_path``, version 0, if none)."""
        if not self._grouped:
            raise ModelError(f"{self.name} has joined no weight group; call init_weight_group")
        async with self._updating:
            self._newer(version)
            try:
                await self.engine.receive_weights(metas, version)
                await self._confirm(version)
            except WeightsMixed as exc:
                await self._roll_back(exc, version)
        return [ServedVersion(self.name, self.weights_version)]

    async def close_weight_group(self) -> None:
        if self._grouped:
            self._grouped = False
            await self.engine.close_weight_group()

    async def pause(self, mode: PauseMode = "abort") -> None:
        await self.engine.pause(mode)

    async def resume(self) -> None:
        await self.engine.resume()

    async def abort_all(self) -> None:
        await self.engine.abort_all()

    def release(self, trajectory_id: str) -> None:
        self.tokens.states.release(trajectory_id)
