"""The trainer as the loop sees it: one object on rank 0 that drives every rank.

Build it with :func:`megaflow.train.launch.start`, which also starts the
other ranks. ``step(groups)`` takes one GRPO optimizer step on every rank
and returns :class:`~megaflow.train.stats.StepStats`;
``state_dict_for_inference()`` gives the full, unsharded CPU weights for the
rollout backends; ``weights_version`` counts the updates. Checkpoints go to
an :class:`~megaflow.storage.abstract.ArtifactStore`
(:mod:`megaflow.train.checkpoint`): ``save_checkpoint(store, extra)`` and
``resume(store)``, which restores model, optimizer, step, version and random
state and returns the ``extra`` saved with them.

The blocking methods run the model on the calling thread; an asyncio
caller runs them in a worker thread (``asyncio.to_thread``). Calls must not
overlap: each one is a sequence of collectives on every rank.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Self

import torch
import torch.distributed as dist

from megaflow.storage.abstract import ArtifactStore
from megaflow.train import checkpoint, protocol
from megaflow.train.config import TrainerConfig
from megaflow.train.samples import TrainingSample
from megaflow.train.stats import StepStats
from megaflow.train.worker import RankWorker


class Trainer:
    """Rank 0's handle on the trainer ranks (also the whole trainer with one rank)."""

    def __init__(self, worker: RankWorker, *, on_close: Callable[[], None] | None = None) -> None:
        self._worker = worker
        self._on_close = on_close
        self._closed = False

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
        """Whether ``checkpoint_every`` says the step just taken is checkpointed."""
        every = self.config.checkpoint_every
        return every > 0 and self.step_count > 0 and self.step_count % every == 0

    def _op(self, name: str, *args: Any, local: tuple[Any, ...] | None = None) -> Any:
        if self._closed:
            raise RuntimeError("the trainer is closed")
        if self._worker.distributed:
            protocol.send(name, args)
        return getattr(self._worker, name)(*(args if local is None else local))

    def step(self, groups: Sequence[Sequence[TrainingSample]]) -> StepStats:
        """One optimizer step on ``groups`` (each a GRPO group of samples)."""
        return self._op("step", [list(g) for g in groups])  # type: ignore[no-any-return]

    def state_dict_for_inference(self) -> dict[str, torch.Tensor]:
        """The full model weights on CPU, by parameter name, for weight sync."""
        return self._op("inference_state")  # type: ignore[no-any-return]

    async def save_checkpoint(self, store: ArtifactStore, extra: dict[str, Any]) -> str:
        """Checkpoint model, optimizer and trainer state with ``extra`` (plain
        JSON data); returns the checkpoint's key prefix."""
        checkpoint.check_extra(extra)
        state: checkpoint.FullState = await asyncio.to_thread(self._op, "full_state")
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

    async def resume(self, store: ArtifactStore) -> dict[str, Any] | None:
        """Restore the latest complete checkpoint; its ``extra``, or None (and
        nothing changed) when there is none."""
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
        try:
            if self._worker.distributed:
                protocol.send(protocol.STOP, ())
                dist.destroy_process_group()
        finally:
            if self._on_close is not None:
                self._on_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
