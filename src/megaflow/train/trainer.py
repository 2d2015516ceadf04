"""The trainer as the loop sees it: one object on rank 0 that drives every rank.

Build it with :func:`megaflow.train.launch.start`, which also starts the
other ranks (local processes; or, with ``launcher: {type: ray}``, every rank
a Ray actor, the Trainer then in the caller's process outside the process
group). ``step(groups)`` takes one GRPO optimizer step on every rank and
returns :class:`~megaflow.train.stats.StepStats`;
``state_dict_for_inference()`` gives the full, unsharded CPU weights for the
rollout backends; ``weights_version`` counts the updates. Checkpoints go to
an :class:`~megaflow.storage.abstract.ArtifactStore`
(:mod:`megaflow.train.checkpoint`): ``save_checkpoint(store, extra)`` and
``resume(store)``, which restores model, optimizer, step, version and random
state and returns the ``extra`` saved with them.

With ``async_checkpoint`` the save returns once the state is gathered and
copied; writing and uploading go on in an asyncio task, at most one at a
time: the next save, ``resume`` and ``wait_checkpoint()`` wait for it (and
raise its error). ``checkpoint_due`` says whether ``checkpoint_every`` steps
or ``checkpoint_every_s`` seconds call for a save. ``strategy`` and
``strategy_reasons`` report how the ranks share the model (the planner's
reasons under ``auto``); with ``metrics_path`` every step's statistics go
to a JSON-lines log (:mod:`megaflow.train.metrics_log`).

The blocking methods run the model on the calling thread; an asyncio
caller runs them in a worker thread (``asyncio.to_thread``). Calls must not
overlap: each one is a sequence of collectives on every rank.
"""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, Self

import torch

from megaflow.storage.abstract import ArtifactStore
from megaflow.train import checkpoint, protocol
from megaflow.train.config import TrainerConfig
from megaflow.train.metrics_log import MetricsLog
from megaflow.train.samples import TrainingSample
from megaflow.train.stats import StepStats
from megaflow.train.strategy import Resolved
from megaflow.train.worker import RankWorker

log = logging.getLogger(__name__)


class RankGroup(Protocol):
    """What the Trainer drives: rank 0's own :class:`RankWorker` (which drives the
    other ranks through the rank protocol), or ranks that all run elsewhere
    (:class:`megaflow.train.ray_ranks.RayRanks`), where each method runs on every
    rank and returns rank 0's answer."""

    config: TrainerConfig
    world_size: int
    strategy: str
    step_count: int
    version: int

    def step(self, groups: Sequence[Sequence[TrainingSample]]) -> StepStats: ...

    def inference_state(self) -> dict[str, torch.Tensor]: ...

    def full_state(self) -> checkpoint.FullState: ...

    def restore(
        self,
        local: Path | None,
        has_optim: bool,
        rng: list[dict[str, Any]],
        step: int,
        version: int,
    ) -> None: ...


class Trainer:
    """Rank 0's handle on the trainer ranks (also the whole trainer with one rank)."""

    def __init__(
        self,
        worker: RankGroup,
        *,
        on_close: Callable[[], None] | None = None,
        resolved: Resolved | None = None,
    ) -> None:
        self._worker = worker
        # rank 0 in the process group sends every op; remote ranks get theirs from the group
        self._drives = isinstance(worker, RankWorker) and worker.distributed
        self._on_close = on_close
        self._closed = False
        self.resolved = resolved or Resolved(worker.strategy)
        log.info(
            "trainer: %d rank(s), %s, optimizer %s; %s",
            worker.world_size,
            self.resolved.describe(),
            worker.config.optimizer,
            "; ".join(self.resolved.reasons),
        )
        path = worker.config.metrics_path
        self._metrics = MetricsLog(path) if path else None
        self._last_save = time.monotonic()
        self._saving: asyncio.Task[str] | None = None

    @property
    def strategy(self) -> str:
        """How the ranks share the model: a strategy of ``sharding.STRATEGIES``, or
        ``none`` with one rank."""
        return self.resolved.strategy

    @property
    def strategy_reasons(self) -> list[str]:
        """Why: the config asked for it, or the planner's reasons under ``auto``."""
        return list(self.resolved.reasons)

    @property
    def ranks(self) -> RankGroup:
        """What this Trainer drives: rank 0's worker, or the group of remote ranks."""
        return self._worker

    @property
    def config(self) -> TrainerConfig:
        return self._worker.config

    @property
    def world_size(self) -> int:
        return self._worker.world_size

    @property
    def step_count(self) -> int:
        """Optimizer steps taken (restored by ``resume``)."""
        return self._worker.step_count

    @property
    def weights_version(self) -> int:
        """The version of the current weights: 0 as loaded, +1 per update."""
        return self._worker.version

    @property
    def checkpoint_due(self) -> bool:
        """Whether ``checkpoint_every`` says the step just taken is checkpointed, or
        ``checkpoint_every_s`` has passed since the last save."""
        every = self.config.checkpoint_every
        by_steps = every > 0 and self.step_count > 0 and self.step_count % every == 0
        return by_steps or self.checkpoint_time_due

    @property
    def checkpoint_time_due(self) -> bool:
        """Whether ``checkpoint_every_s`` seconds passed since the last save (or the start)."""
        every_s = self.config.checkpoint_every_s
        return every_s is not None and time.monotonic() - self._last_save >= every_s

    def _op(self, name: str, *args: Any, local: tuple[Any, ...] | None = None) -> Any:
        if self._closed:
            raise RuntimeError("the trainer is closed")
        if self._drives:
            protocol.send(name, args)
        return getattr(self._worker, name)(*(args if local is None else local))

    def step(self, groups: Sequence[Sequence[TrainingSample]]) -> StepStats:
        """One optimizer step on ``groups`` (each a GRPO group of samples)."""
        stats: StepStats = self._op("step", [list(g) for g in groups])
        if self._metrics is not None:
            self._metrics.log({"time": time.time(), "strategy": self.strategy, **stats.as_dict()})
        return stats

    def state_dict_for_inference(self) -> dict[str, torch.Tensor]:
        """The full model weights on CPU, by parameter name, for weight sync."""
        return self._op("inference_state")  # type: ignore[no-any-return]

    async def save_checkpoint(self, store: ArtifactStore, extra: dict[str, Any]) -> str:
        """Checkpoint model, optimizer and trainer state with ``extra`` (plain
        JSON data); returns the checkpoint's key prefix. With ``async_checkpoint``
        it returns once the state is copied, before the checkpoint is published."""
        extra = json.loads(checkpoint.check_extra(extra))  # the caller may change its own
        await self.wait_checkpoint()
        state: checkpoint.FullState = await asyncio.to_thread(self._op, "full_state")
        self._last_save = time.monotonic()
        if not self.config.async_checkpoint:
            return await self._publish(store, state, extra)
        state = await asyncio.to_thread(checkpoint.owned, state)
        self._saving = asyncio.create_task(self._publish(store, state, extra))
        return checkpoint.checkpoint_key(self.config.checkpoint_prefix, state.step)

    async def _publish(
        self, store: ArtifactStore, state: checkpoint.FullState, extra: dict[str, Any]
    ) -> str:
        with tempfile.TemporaryDirectory(prefix="megaflow-ckpt-") as tmp:
            local = Path(tmp)
            await asyncio.to_thread(checkpoint.write_local, state, extra, self.world_size, local)
            return await checkpoint.publish(
                store,
                self.config.checkpoint_prefix,
                local,
                state.step,
                self.config.keep_checkpoints,
            )

    async def wait_checkpoint(self) -> str | None:
        """Wait for the save in flight, if any; its key. Raises what it raised."""
        task, self._saving = self._saving, None
        return None if task is None else await task

    async def resume(self, store: ArtifactStore) -> dict[str, Any] | None:
        """Restore the latest complete checkpoint; its ``extra``, or None (and
        nothing changed) when there is none."""
        await self.wait_checkpoint()
        with tempfile.TemporaryDirectory(prefix="megaflow-ckpt-") as tmp:
            local = Path(tmp)
            if await checkpoint.fetch_latest(store, self.config.checkpoint_prefix, local) is None:
                return None
            info = checkpoint.read_info(local)
            rng = checkpoint.read_rng(local)
            shared = (info.has_optim, rng, info.step, info.version)
            await asyncio.to_thread(self._op, "restore", None, *shared, local=(local, *shared))
            return info.extra

    def close(self) -> None:
        """Stop the other ranks and leave the process group."""
        if self._closed:
            return
        self._closed = True
        if self._saving is not None and not self._saving.done():
            log.warning("trainer closed with a checkpoint still being written; it is lost")
        try:
            if self._drives:
                protocol.send(protocol.STOP, ())
                protocol.leave()
        finally:
            try:
                if self._metrics is not None:
                    self._metrics.close()
            finally:
                if self._on_close is not None:
                    self._on_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
