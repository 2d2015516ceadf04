"""Starting the trainer ranks: spawned processes, under ``torchrun``, or on Ray.

:func:`start` returns the :class:`~megaflow.train.trainer.Trainer` on rank
0, the process of the caller (the loop), and runs the protocol of
:mod:`megaflow.train.protocol` on every other rank:

* **One rank** (``world_size: 1``): no process group; the model trains in
  the caller's process (on CUDA when the backend resolves to NCCL).
* **Spawned** (``world_size: N`` and no torchrun environment): the caller's
  process is rank 0. It opens a ``TCPStore`` on a free loopback port, spawns
  ranks 1..N-1 (``torch.multiprocessing``, start method ``spawn``, daemonic,
  so they die with the caller), and all N join one process group through
  that store. Each rank builds its :class:`~megaflow.train.worker.RankWorker`;
  the ranks then exchange whether that worked, so a rank that cannot load the
  model fails every rank with its message instead of a hang. Ranks > 0 run
  :func:`megaflow.train.protocol.serve` until ``Trainer.close()``.
* **torchrun** (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` set):
  every process calls :func:`start` with the same arguments; the process
  group is joined through ``env://``; rank 0 gets the Trainer and every other
  rank serves inside :func:`start` and gets ``None`` once rank 0 closes, so a
  script does ``trainer = start(...); if trainer is None: return``.

* **Ray** (``launcher: {type: ray}``): every rank is an actor of a Ray
  cluster, started by :mod:`megaflow.train.ray_ranks`; the Trainer stays in
  the caller's process and sends each op to every rank's actor.

The backend is gloo on CPU and NCCL with one GPU per rank (``LOCAL_RANK``);
``auto`` picks NCCL when CUDA is available. Only gloo on CPU is tested here.
The sharding strategy is resolved once, before any rank starts
(:mod:`megaflow.train.strategy`; under torchrun every rank takes rank 0's),
and the Trainer reports it (``Trainer.strategy``).
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from megaflow.core.errors import ConfigError
from megaflow.train import protocol
from megaflow.train.config import TrainerConfig
from megaflow.train.plan_config import GB
from megaflow.train.strategy import Resolved, resolve
from megaflow.train.trainer import Trainer
from megaflow.train.worker import RankWorker, check_model_dir

_HOST = "127.0.0.1"


def resolve_backend(config: TrainerConfig) -> str:
    """``gloo`` or ``nccl``; raises ConfigError when NCCL is asked for without CUDA."""
    if config.backend == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    if config.backend == "nccl" and not torch.cuda.is_available():
        raise ConfigError(
            "train.backend is 'nccl' but CUDA is not available; use 'gloo' or 'auto'",
            [("train.backend", "nccl needs CUDA")],
        )
    return config.backend


def _device(backend: str, local_rank: int) -> torch.device:
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def resolve_strategy(model_dir: Path, config: TrainerConfig, world: int, backend: str) -> Resolved:
    """The strategy of ``world`` ranks, with this process's GPU memory under NCCL."""
    gpu_gb = None
    if backend == "nccl":
        gpu_gb = torch.cuda.get_device_properties(0).total_memory / GB
    return resolve(model_dir, config, world, gpu_gb)


def _agree(model_dir: Path, config: TrainerConfig, world: int, backend: str) -> Resolved:
    """Under torchrun: every rank applies rank 0's strategy, or fails with its error."""
    try:
        mine: Resolved | str = resolve_strategy(model_dir, config, world, backend)
    except ConfigError as exc:
        mine = str(exc)
    agreed: list[Any] = [mine]
    dist.broadcast_object_list(agreed, src=0)
    if isinstance(agreed[0], str):
        dist.destroy_process_group()
        raise ConfigError(agreed[0], [("train.strategy", "rank 0 could not resolve it")])
    return agreed[0]  # type: ignore[no-any-return]


def build_worker(
    model_dir: str | Path,
    config: TrainerConfig,
    rank: int,
    world: int,
    backend: str,
    strategy: str,
) -> RankWorker:
    """Build this rank's worker, then learn whether every rank managed to (a
    collective: every rank of the process group calls it)."""
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    worker: RankWorker | None = None
    error: str | None = None
    try:
        worker = RankWorker(
            model_dir,
            config,
            rank=rank,
            world_size=world,
            device=_device(backend, local_rank),
            strategy=strategy,
        )
    except Exception as exc:
        error = f"rank {rank}: {type(exc).__name__}: {exc}"
    errors: list[Any] = [None] * world
    dist.all_gather_object(errors, error)
    failed = [e for e in errors if e]
    if failed or worker is None:
        dist.destroy_process_group()
        raise RuntimeError("trainer ranks failed to start: " + "; ".join(failed))
    return worker


def _join(backend: str, rank: int, world: int, config: TrainerConfig, port: int) -> None:
    store = dist.TCPStore(  # type: ignore[attr-defined]
        _HOST, port, world, is_master=False, timeout=timedelta(seconds=config.timeout_s)
    )
    dist.init_process_group(
        backend,
        store=store,
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=config.timeout_s),
    )


def _spawned_rank(
    rank: int,
    world: int,
    port: int,
    model_dir: str,
    config_json: str,
    backend: str,
    strategy: str,
) -> None:
    """Entry point of a spawned rank > 0."""
    config = TrainerConfig.model_validate_json(config_json)
    _join(backend, rank, world, config, port)
    try:
        worker = build_worker(model_dir, config, rank, world, backend, strategy)
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return
    protocol.serve(worker)
    protocol.leave()


def _spawn(
    model_dir: str | Path, config: TrainerConfig, backend: str, resolved: Resolved
) -> Trainer:
    world = config.world_size
    strategy = resolved.strategy
    timeout = timedelta(seconds=config.timeout_s)
    store = dist.TCPStore(  # type: ignore[attr-defined]
        _HOST, 0, world, is_master=True, timeout=timeout, wait_for_workers=False
    )
    ctx = mp.get_context("spawn")
    procs = [
        ctx.Process(
            target=_spawned_rank,
            args=(
                r,
                world,
                store.port,
                str(model_dir),
                config.model_dump_json(),
                backend,
                strategy,
            ),
            daemon=True,
        )
        for r in range(1, world)
    ]
    for p in procs:
        p.start()

    def reap() -> None:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()

    try:
        dist.init_process_group(backend, store=store, rank=0, world_size=world, timeout=timeout)
        worker = build_worker(model_dir, config, 0, world, backend, strategy)
    except BaseException:
        for p in procs:
            p.kill()
        reap()
        raise
    return Trainer(worker, on_close=reap, resolved=resolved)


def start(model_dir: str | Path, config: TrainerConfig) -> Trainer | None:
    """The Trainer on rank 0; on another torchrun rank, serve, then None.
    Raises ConfigError, before any process starts, for a bad model directory,
    backend or strategy."""
    path = check_model_dir(model_dir)
    torchrun = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    if config.launcher.type == "ray":
        if torchrun:
            raise ConfigError(
                "train.launcher.type is 'ray' but this process is a torchrun rank",
                [("train.launcher.type", "use 'local' under torchrun")],
            )
        from megaflow.train.ray_launch import start_ray

        return start_ray(path, config)
    backend = resolve_backend(config)
    if torchrun:
        world = int(os.environ["WORLD_SIZE"])
        if config.world_size not in (1, world):
            raise ConfigError(
                f"train.world_size is {config.world_size} but torchrun started {world} ranks",
                [("train.world_size", f"must be {world} under this torchrun")],
            )
        rank = int(os.environ["RANK"])
        dist.init_process_group(backend, timeout=timedelta(seconds=config.timeout_s))
        resolved = _agree(path, config, world, backend)
        worker = build_worker(model_dir, config, rank, world, backend, resolved.strategy)
        if rank == 0:
            return Trainer(worker, resolved=resolved)
        protocol.serve(worker)
        protocol.leave()
        return None
    resolved = resolve_strategy(path, config, config.world_size, backend)
    if config.world_size == 1:
        local = _device(backend, 0) if backend == "nccl" else torch.device("cpu")
        return Trainer(RankWorker(model_dir, config, device=local), resolved=resolved)
    return _spawn(model_dir, config, backend, resolved)
