"""The trainer's ranks as Ray actors, and the group the Trainer drives them through.

A :class:`RankActor` is one rank: rank 0's opens the rendezvous store on its
node (a ``TCPStore`` on the node's address, port chosen by the OS: the
group's MASTER_ADDR and MASTER_PORT), every rank joins the gloo (or NCCL)
process group through it and builds its
:class:`~megaflow.train.worker.RankWorker` with
:func:`~megaflow.train.launch.build_worker`, so a rank that cannot load the
model fails every rank with its message. :mod:`megaflow.train.ray_launch`
places and starts them.

The caller's process holds no rank. Its
:class:`~megaflow.train.trainer.Trainer` drives :class:`RayRanks`, which
sends each op to every actor at once (so all ranks enter the same
collectives in the same order) and takes rank 0's answer; a step's samples
go into Ray's object store once, not once per rank. It waits on the ranks'
answers together: the first rank to fail (its actor died, or its op raised)
ends the wait at once, every actor is killed and the placement group
removed, and the caller gets an error naming that rank, instead of the
other ranks hanging in a collective until ``timeout_s``. ``close()`` stops
every rank, kills its actor, removes the placement group, and ends the Ray
connection if the launcher opened it. Actors are not detached, so a driver
that dies takes them with it.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from megaflow.core.errors import ConfigError, InfraError, MegaFlowTimeout
from megaflow.train.checkpoint import FullState
from megaflow.train.config import TrainerConfig
from megaflow.train.samples import TrainingSample
from megaflow.train.stats import StepStats
from megaflow.train.strategy import Resolved
from megaflow.train.worker import RankWorker

log = logging.getLogger(__name__)


class RankActor:
    """One trainer rank inside a Ray actor (made remote by
    :func:`megaflow.train.ray_launch.start_ray`)."""

    def __init__(self, rank: int, world: int, threads: int) -> None:
        self.rank = rank
        self.world = world
        self.worker: RankWorker | None = None
        self._store: Any = None
        os.environ["LOCAL_RANK"] = "0"  # Ray shows each actor only the GPUs of its bundle
        torch.set_num_threads(threads)

    def where(self) -> dict[str, Any]:
        import ray

        return {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    def resolve(self, model_dir: str, config_json: str, backend: str) -> Resolved | str:
        """Rank 0: the strategy every rank applies, or the ConfigError's message."""
        from megaflow.train.launch import resolve_strategy

        config = TrainerConfig.model_validate_json(config_json)
        try:
            return resolve_strategy(Path(model_dir), config, self.world, backend)
        except ConfigError as exc:
            return str(exc)

    def rendezvous(self, timeout_s: float) -> tuple[str, int]:
        """Rank 0: open the group's store on this node; its (address, port)."""
        import ray

        host = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        self._store = dist.TCPStore(  # type: ignore[attr-defined]
            host, 0, self.world, is_master=True, timeout=timedelta(seconds=timeout_s),
            wait_for_workers=False,
        )  # fmt: skip
        return host, int(self._store.port)

    def join(
        self, host: str, port: int, model_dir: str, config_json: str, backend: str, strategy: str
    ) -> None:
        """Join the process group and build this rank's worker (every rank at once)."""
        from megaflow.train.launch import build_worker

        config = TrainerConfig.model_validate_json(config_json)
        timeout = timedelta(seconds=config.timeout_s)
        os.environ.update(MASTER_ADDR=host, MASTER_PORT=str(port))
        store = self._store or dist.TCPStore(  # type: ignore[attr-defined]
            host, port, self.world, is_master=False, timeout=timeout
        )
        dist.init_process_group(
            backend, store=store, rank=self.rank, world_size=self.world, timeout=timeout
        )
        self.worker = build_worker(model_dir, config, self.rank, self.world, backend, strategy)

    def run(self, name: str, *args: Any) -> Any:
        """``RankWorker.<name>(*args)``; rank 0's result (None from the others)."""
        if self.worker is None:
            raise RuntimeError(f"trainer rank {self.rank} has not joined its group")
        result = getattr(self.worker, name)(*args)
        return result if self.rank == 0 else None

    def restore(self, files: dict[str, bytes] | None, *shared: Any) -> None:
        """``RankWorker.restore``; rank 0 gets the checkpoint's files, written here."""
        if files is None:
            self.run("restore", None, *shared)
            return
        with tempfile.TemporaryDirectory(prefix="megaflow-ckpt-") as tmp:
            for rel, data in files.items():
                path = Path(tmp, rel)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            self.run("restore", Path(tmp), *shared)

    def stop(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
        self.worker = None


class RayRanks:
    """Every rank a Ray actor: each method runs on all of them and returns rank 0's
    answer (a :class:`~megaflow.train.trainer.RankGroup`)."""

    def __init__(self, ray: Any, config: TrainerConfig, *, owns_ray: bool) -> None:
        self.ray = ray
        self.config = config
        self.world_size = config.world_size
        self.strategy = "none"
        self.step_count = 0
        self.version = 0
        self.actors: list[Any] = []
        self.where: list[dict[str, Any]] = []
        """Node id and pid of each rank's actor, in rank order."""
        self.placement_group: Any = None
        self._owns_ray = owns_ray
        self._closed = False

    # -- the RankGroup interface -------------------------------------------------------
    def step(self, groups: Sequence[Sequence[TrainingSample]]) -> StepStats:
        batch = self.ray.put([list(g) for g in groups])
        stats: StepStats = self.each("step", [("run", "step", batch)] * self.world_size)[0]
        self.step_count, self.version = stats.step, stats.weights_version
        return stats

    def inference_state(self) -> dict[str, torch.Tensor]:
        calls = [("run", "inference_state")] * self.world_size
        state: dict[str, torch.Tensor] = self.each("inference_state", calls)[0]
        return state

    def full_state(self) -> FullState:
        state: FullState = self.each("full_state", [("run", "full_state")] * self.world_size)[0]
        return state

    def restore(
        self,
        local: Path | None,
        has_optim: bool,
        rng: list[dict[str, Any]],
        step: int,
        version: int,
    ) -> None:
        if local is None:
            raise ValueError("the trainer restores from a local checkpoint directory")
        files = {
            p.relative_to(local).as_posix(): p.read_bytes() for p in local.rglob("*") if p.is_file()
        }
        shared = (has_optim, rng, step, version)
        calls = [("restore", files if r == 0 else None, *shared) for r in range(self.world_size)]
        self.each("restore", calls)
        self.step_count, self.version = step, version

    # -- fan-out -------------------------------------------------------------------------
    def each(
        self, what: str, calls: Sequence[tuple[Any, ...]], timeout: float | None = None
    ) -> list[Any]:
        """Call ``calls[r] = (method, *args)`` on rank r's actor (ranks 0 to
        ``len(calls) - 1``), all at once; their results in rank order. The first
        rank to fail, or no answer within ``timeout``, tears everything down and
        raises."""
        if self._closed:
            raise InfraError(f"the trainer's Ray ranks are gone; cannot run {what}")
        refs = {
            getattr(actor, call[0]).remote(*call[1:]): rank
            for rank, (actor, call) in enumerate(zip(self.actors, calls, strict=False))
        }
        results: list[Any] = [None] * len(refs)
        pending = list(refs)
        deadline = None if timeout is None else time.monotonic() + timeout
        while pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, pending = self.ray.wait(pending, num_returns=1, timeout=left)
            if not ready:
                self.close(graceful=False)
                ranks = sorted(refs[r] for r in pending)
                raise MegaFlowTimeout(
                    f"trainer ranks {ranks} on Ray gave no answer to {what} within "
                    f"{timeout or 0:.0f} s; every rank was stopped (train.launcher.start_timeout_s)"
                )
            for ref in ready:
                try:
                    value = self.ray.get(ref)
                except Exception as exc:
                    self.close(graceful=False)
                    raise self._failure(refs[ref], what, exc) from None
                results[refs[ref]] = value
        return results

    def _failure(self, rank: int, what: str, exc: Exception) -> Exception:
        where = self.where[rank] if rank < len(self.where) else {}
        at = f" (node {str(where.get('node', '?'))[:12]}, pid {where.get('pid', '?')})"
        at = at if where else ""
        from ray.exceptions import RayActorError, RayTaskError

        if isinstance(exc, RayTaskError):
            cause = exc.cause if exc.cause is not None else exc
            return RuntimeError(
                f"trainer rank {rank}{at} failed in {what}: {type(cause).__name__}: {cause}"
            )
        kind = "died" if isinstance(exc, RayActorError) else "failed"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return InfraError(
            f"trainer rank {rank}'s Ray actor{at} {kind} in {what}: {first}; every rank "
            "was stopped (train.launcher: type ray)"
        )

    def close(self, graceful: bool = True) -> None:
        """Stop every rank, kill its actor, remove the placement group; idempotent."""
        if self._closed:
            return
        self._closed = True
        ray = self.ray
        if graceful and self.actors:
            try:
                ray.get([a.stop.remote() for a in self.actors], timeout=10)
            except Exception as exc:  # a rank already gone: it is killed below
                log.warning("trainer on Ray: a rank did not stop cleanly: %s", exc)
        for actor in self.actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception as exc:
                log.warning("trainer on Ray: could not kill a rank's actor: %s", exc)
        if self.placement_group is not None:
            from ray.util.placement_group import remove_placement_group

            try:
                remove_placement_group(self.placement_group)
            except Exception as exc:
                log.warning("trainer on Ray: could not remove the placement group: %s", exc)
        if self._owns_ray:
            ray.shutdown()
