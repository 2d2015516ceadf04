"""Starting the trainer's ranks on a Ray cluster: ``train: {launcher: {type: ray}}``.

:func:`start_ray` (which :func:`megaflow.train.launch.start` calls for this
launcher) joins the cluster: the one this process is already connected to,
as a run with ``fleet: {type: ray}`` is, or ``launcher.address``, where a
``host:port`` that accepts no connection fails at once, naming the field.
It reserves one bundle per rank in a placement group (``cpus_per_rank``,
``gpus_per_rank``, custom ``resources``, strategy ``placement``; a group the
cluster cannot place within ``start_timeout_s`` is an error saying what it
asked and what the cluster has), starts a
:class:`~megaflow.train.ray_ranks.RankActor` in each bundle, has rank 0
resolve the strategy and open the rendezvous store on its node, and lets
every rank join the process group. It returns a
:class:`~megaflow.train.trainer.Trainer` over the
:class:`~megaflow.train.ray_ranks.RayRanks`. Whatever fails on the way
kills the actors started so far and removes the placement group.

The backend: ``auto`` is NCCL when ranks get GPUs (``gpus_per_rank``),
else gloo (the driver's own devices say nothing about the ranks' nodes).
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Any

from megaflow.core.errors import ConfigError, InfraError, TransportError
from megaflow.train.config import TrainerConfig
from megaflow.train.launcher_config import RayLauncherConfig
from megaflow.train.ray_ranks import RankActor, RayRanks
from megaflow.train.trainer import Trainer

log = logging.getLogger(__name__)


def ray_backend(config: TrainerConfig, cfg: RayLauncherConfig) -> str:
    if config.backend == "auto":
        return "nccl" if cfg.gpus_per_rank > 0 else "gloo"
    if config.backend == "nccl" and cfg.gpus_per_rank == 0:
        raise ConfigError(
            "train.backend is 'nccl' but train.launcher.gpus_per_rank is 0",
            [("train.launcher.gpus_per_rank", "nccl needs a GPU per rank")],
        )
    return config.backend


def _reachable(address: str, timeout: float = 5.0) -> None:
    """A ``host:port`` address must accept a connection (``ray.init`` would wait
    for minutes on one that does not)."""
    host, _, port = address.rpartition(":")
    if address == "auto" or "://" in address or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise TransportError(
            f"train.launcher.address: no Ray cluster answers at {address!r} ({exc}); "
            "start one with `ray start --head` or fix the address"
        ) from None


def connect(ray: Any, cfg: RayLauncherConfig) -> bool:
    """Join the cluster; True if this call opened the connection (so closes it)."""
    if ray.is_initialized():
        gcs = str(ray.get_runtime_context().gcs_address)
        given = cfg.address
        if given and given != "auto" and "://" not in given and given != gcs:
            raise ConfigError(
                f"train.launcher.address is {given!r} but this process is connected to "
                f"the Ray cluster at {gcs!r}; a process joins one cluster",
                [("train.launcher.address", f"leave it out, or {gcs!r}")],
            )
        return False
    address = cfg.address or "auto"
    _reachable(address)
    try:
        ray.init(
            address=address, namespace="megaflow", include_dashboard=False,
            log_to_driver=False, logging_level=logging.ERROR,
        )  # fmt: skip
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise TransportError(
            f"train.launcher.address: cannot connect to Ray at {address!r}: {exc}"
        ) from None
    return True


def _place(ray: Any, ranks: RayRanks, cfg: RayLauncherConfig, world: int) -> None:
    from ray.exceptions import GetTimeoutError
    from ray.util.placement_group import placement_group

    bundle = {"CPU": cfg.cpus_per_rank, **cfg.resources}
    if cfg.gpus_per_rank:
        bundle["GPU"] = cfg.gpus_per_rank
    pg = ranks.placement_group = placement_group([bundle] * world, strategy=cfg.placement)
    try:
        ray.get(pg.ready(), timeout=cfg.start_timeout_s)
    except GetTimeoutError:
        have = {k: v for k, v in ray.available_resources().items() if "node:" not in k}
        raise InfraError(
            f"train.launcher: Ray could not place {world} bundle(s) of {bundle} "
            f"({cfg.placement}) within {cfg.start_timeout_s:.0f} s; the cluster has "
            f"{have} available"
        ) from None


def _start_actors(ray: Any, ranks: RayRanks, cfg: RayLauncherConfig, world: int) -> None:
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    remote = ray.remote(RankActor)
    threads = max(1, int(cfg.cpus_per_rank))
    for rank in range(world):
        strategy = PlacementGroupSchedulingStrategy(
            ranks.placement_group, placement_group_bundle_index=rank
        )
        ranks.actors.append(
            remote.options(
                num_cpus=cfg.cpus_per_rank, num_gpus=cfg.gpus_per_rank,
                resources=dict(cfg.resources), scheduling_strategy=strategy,
                max_restarts=0, max_task_retries=0,
            ).remote(rank, world, threads)
        )  # fmt: skip
    ranks.where = ranks.each("start", [("where",)] * world, cfg.start_timeout_s)


def start_ray(model_dir: Path, config: TrainerConfig) -> Trainer:
    """The Trainer over ``config.world_size`` rank actors on the Ray cluster."""
    cfg = config.launcher
    if not isinstance(cfg, RayLauncherConfig):
        raise ConfigError("start_ray needs train.launcher.type ray", [("train.launcher", "")])
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "train.launcher.type ray needs Ray: pip install -e '.[ray]'",
            [("train.launcher.type", "Ray is not installed")],
        ) from None
    backend = ray_backend(config, cfg)
    world = config.world_size
    ranks = RayRanks(ray, config, owns_ray=connect(ray, cfg))
    try:
        _place(ray, ranks, cfg, world)
        _start_actors(ray, ranks, cfg, world)
        config_json = config.model_dump_json()
        ask = ("resolve", str(model_dir), config_json, backend)
        [resolved] = ranks.each("resolve", [ask], cfg.start_timeout_s)
        if isinstance(resolved, str):
            raise ConfigError(resolved, [("train.strategy", "rank 0 could not resolve it")])
        meet = ("rendezvous", config.timeout_s)
        [(host, port)] = ranks.each("rendezvous", [meet], cfg.start_timeout_s)
        join = ("join", host, port, str(model_dir), config_json, backend, resolved.strategy)
        ranks.each("start", [join] * world)
    except BaseException:
        ranks.close(graceful=False)
        raise
    ranks.strategy = resolved.strategy
    nodes = [str(w["node"])[:12] for w in ranks.where]
    log.info("trainer on Ray: %d rank(s) on nodes %s", world, nodes)
    return Trainer(ranks, on_close=ranks.close, resolved=resolved)
