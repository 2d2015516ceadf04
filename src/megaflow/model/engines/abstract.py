"""What MegaFlow needs of an inference engine server, and the types it exchanges.

An :class:`EngineAPI` is one engine server (vLLM or SGLang) seen through its
own routes, below the OpenAI layer: prompts go in as token ids and come back
as completion ids with one logprob per id, so the trainer learns from exactly
the tokens that were sampled. New weights reach it from disk (a checkpoint
path the engine reads) or over a broadcast group the trainer's rank 0 joins
with every engine worker (``init_weight_group``, then ``receive_weights``
while the trainer broadcasts; the group and tensor descriptions are
:mod:`megaflow.core.weight_group`'s, shared with the trainer's sync).

Versions: MegaFlow numbers weights 1, 2, ... and each update names the
version it installs. SGLang stores it (``weight_version``) and reports it
with every answer; vLLM has no such field, so for vLLM the adapter's own count
is the version (:meth:`EngineAPI.served_version` answers None).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from megaflow.core.errors import ModelError
from megaflow.core.weight_group import TensorMeta, WeightGroup

__all__ = [
    "EngineAPI",
    "PauseMode",
    "Sampling",
    "TensorMeta",
    "TokenOutput",
    "WeightGroup",
    "WeightsMixed",
]

PauseMode = Literal["abort", "keep"]
"""``abort``: in-flight requests end now (finish reason ``abort``) with the tokens
they have; ``keep``: they stay in the engine, frozen, and go on after ``resume``."""


class WeightsMixed(ModelError):
    """An update failed after the engine may have changed some of its tensors: it
    no longer serves any one version until a complete checkpoint is loaded."""


@dataclass(frozen=True)
class Sampling:
    """How to sample one completion."""

    max_tokens: int
    temperature: float
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    stop: list[str] | None = None


@dataclass(frozen=True)
class TokenOutput:
    """One completion as the engine reports it."""

    token_ids: list[int]
    logprobs: list[float]
    """The logprob of each sampled id, one per id."""
    finish_reason: str
    """``stop``, ``length`` or ``abort``."""
    prompt_ids: list[int] | None = None
    """The prompt ids the engine says it fed (vLLM echoes them); None if it does not say."""
    prompt_tokens: int | None = None
    """How many prompt ids the engine counted."""
    weights_version: int | None = None
    """The version the engine says answered (SGLang); None if it reports none (vLLM)."""


class EngineAPI(Protocol):
    """One engine server's native routes. Every method raises ModelError naming the
    engine when it answers with an error, TransportError when it cannot be
    reached and MegaFlowTimeout when it does not answer in time."""

    @property
    def name(self) -> str:
        """``vllm http://host:port`` or ``sglang http://host:port``, for errors."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def generate(self, prompt_ids: list[int], sampling: Sampling, rid: str) -> TokenOutput:
        """Sample a completion of ``prompt_ids`` (fed as they are, token-in)."""

    async def load_from_disk(self, path: str, version: int) -> None:
        """Load the checkpoint at ``path`` (as the engine's machine sees it) as ``version``."""

    async def init_weight_group(self, group: WeightGroup) -> None:
        """Have every worker join the broadcast group; returns once they joined,
        so the trainer's rank 0 must be joining at the same time."""

    async def receive_weights(self, metas: Sequence[TensorMeta], version: int) -> None:
        """Receive the tensors ``metas`` describe from rank 0 and serve them as
        ``version``; returns once loaded. Raises :class:`WeightsMixed` if the
        engine may have loaded some of them before it failed."""

    async def close_weight_group(self) -> None:
        """Leave the broadcast group."""

    async def pause(self, mode: PauseMode) -> None:
        """Stop generating (see :data:`PauseMode`)."""

    async def resume(self) -> None:
        """Generate again after :meth:`pause`."""

    async def abort_all(self) -> None:
        """End every request in flight now."""

    async def served_version(self) -> int | None:
        """The weights version the engine reports serving; None if it keeps none."""
