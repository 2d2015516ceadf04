"""The trainer's ranks as Ray actors, on a real Ray cluster on loopback.

A head with no CPUs and two worker nodes (one CPU each) started with
``ray start``; the two ranks are placed STRICT_SPREAD, so each runs on its
own raylet and they meet over gloo through rank 0's store. They take the
same update as the local launcher's two spawned ranks for the same batch,
move checkpoints to and from it, and a rank whose actor is SIGKILLed is an
error naming it within seconds, every actor and the placement group gone.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from megaflow.app.training.loop import TrainLoop
from megaflow.config import parse_config
from megaflow.core.errors import ConfigError, InfraError, TransportError
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.train.config import TrainerConfig
from megaflow.train.launch import start
from megaflow.train.ray_ranks import RayRanks
from megaflow.train.trainer import Trainer
from tests.fixtures.ray_cluster import RayCluster
from tests.train.test_fsdp import groups
from tests.train_loop.conftest import policy, train_config  # noqa: F401 (policy: a fixture)

BASE: dict[str, Any] = {
    "lr": 1e-2, "grad_clip": 0.5, "weight_decay": 0.01, "kl_coef": 0.1,
    "micro_batch": 1, "world_size": 2, "backend": "gloo",
}  # fmt: skip


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    import ray

    c = RayCluster()
    try:
        c.start_head()
        c.add_nodes(["rank_a", "rank_b"], slots=1)
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.stop()


def on_ray(address: str | None, **extra: Any) -> TrainerConfig:
    launcher = {"type": "ray", "address": address, "placement": "STRICT_SPREAD"}
    return TrainerConfig(**{**BASE, **extra}, launcher=launcher)


def started(model_dir: Path, cfg: TrainerConfig) -> Trainer:
    trainer = start(model_dir, cfg)
    assert trainer is not None
    return trainer


def close_to(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert set(a) == set(b)
    for name, w in a.items():
        assert torch.allclose(w, b[name], atol=2e-5, rtol=1e-4), name


@pytest.mark.ray
@pytest.mark.slow
async def test_rank_actors_take_the_local_launchers_update(
    cluster: RayCluster, tiny_lm: Path, tmp_path: Path
) -> None:
    import ray

    store = LocalArtifactStore(tmp_path / "a")
    await store.start()
    with started(tiny_lm, TrainerConfig(**BASE)) as local:
        first = local.step(groups(0))
        after_one = local.state_dict_for_inference()
        await local.save_checkpoint(store, {"at": 1})
        local.step(groups(1))
        after_two = local.state_dict_for_inference()

    with started(tiny_lm, on_ray(cluster.address)) as trainer:
        ranks = trainer.ranks
        assert isinstance(ranks, RayRanks)
        nodes = {n["NodeID"]: n["Resources"] for n in ray.nodes() if n["Alive"]}  # type: ignore[no-untyped-call]
        placed = [nodes[w["node"]] for w in ranks.where]
        assert {("rank_a" in r, "rank_b" in r) for r in placed} == {(True, False), (False, True)}
        stats = trainer.step(groups(0))
        close_to(after_one, trainer.state_dict_for_inference())
        assert [stats.loss, stats.grad_norm, stats.tokens] == pytest.approx(
            [first.loss, first.grad_norm, first.tokens], rel=1e-4
        )
        assert len(stats.ranks) == 2
        trainer.step(groups(0))  # somewhere else, so the restore below has work to do
        assert await trainer.resume(store) == {"at": 1}
        assert trainer.weights_version == 1
        close_to(after_one, trainer.state_dict_for_inference())
        trainer.step(groups(1))  # the restored optimizer state gives the local second step
        on_ray_two = trainer.state_dict_for_inference()
        close_to(after_two, on_ray_two)
        await trainer.save_checkpoint(store, {"at": 2})
    assert not ray.is_initialized(), "the launcher opened the connection, so it closes it"

    initial = started(tiny_lm, TrainerConfig(lr=1e-2)).state_dict_for_inference()
    assert sum(not torch.equal(initial[k], on_ray_two[k]) for k in initial) > len(initial) // 2
    with started(tiny_lm, TrainerConfig(lr=1e-2)) as back:
        assert await back.resume(store) == {"at": 2}
        assert back.weights_version == 2
        for name, w in back.state_dict_for_inference().items():
            assert torch.equal(w, on_ray_two[name]), name


def free_cpus() -> float:
    import ray

    return float(ray.available_resources().get("CPU", 0))  # type: ignore[no-untyped-call]


def gone(pid: int, within_s: float = 15.0) -> bool:
    deadline = time.monotonic() + within_s
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.ray
@pytest.mark.slow
def test_a_killed_rank_is_an_error_naming_it_not_a_hang(cluster: RayCluster, tiny_lm: Path) -> None:
    import ray
    from ray.util import placement_group_table

    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    try:
        cpus = free_cpus()
        # collectives would wait 10 minutes: the error must come from the dead actor
        trainer = started(tiny_lm, on_ray(None, timeout_s=600))
        ranks = trainer.ranks
        assert isinstance(ranks, RayRanks)
        pids = [int(w["pid"]) for w in ranks.where]
        trainer.step(groups(0))
        os.kill(pids[1], signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(InfraError, match=r"trainer rank 1's Ray actor .* died in step"):
            trainer.step(groups(1))
        assert time.monotonic() - t0 < 30
        assert gone(pids[0]), "rank 0's actor outlived the failure"
        assert placement_group_table(ranks.placement_group)["state"] == "REMOVED"
        with pytest.raises(InfraError, match="gone"):
            trainer.step(groups(1))
        trainer.close()
        deadline = time.monotonic() + 15
        while free_cpus() != cpus and time.monotonic() < deadline:
            time.sleep(0.2)
        assert free_cpus() == cpus == 2, "the ranks' CPUs were not freed"
        assert ray.is_initialized(), "a connection the launcher did not open stays open"
    finally:
        ray.shutdown()


@pytest.mark.ray
@pytest.mark.slow
async def test_megaflow_train_on_a_ray_fleet_with_ray_ranks(
    cluster: RayCluster,
    policy: Path,  # noqa: F811 (the train loop's fixture, imported above)
    tmp_path: Path,
) -> None:
    """One cluster for both: rollouts on the node agents' sandboxes, the two ranks
    in a placement group on the same nodes, through the connection the fleet opened."""
    raw = train_config(
        tmp_path, policy, steps=1, world_size=2, backend="gloo",
        launcher={"type": "ray", "placement": "STRICT_SPREAD"},
    )  # fmt: skip
    raw["fleet"] = {"type": "ray", "address": cluster.address}
    raw["scheduler"]["max_concurrency"] = 2
    loop = TrainLoop(parse_config(raw), run_id="tl-ray", printer=lambda _: None)
    curve = await loop.run()
    ranks = loop.trainer.ranks
    assert isinstance(ranks, RayRanks)
    assert len({w["node"] for w in ranks.where}) == 2
    assert [p.samples for p in curve.steps] == [4]
    # the rollout model sampled with each version the Ray ranks' weights gave it
    recorded = {
        step["weights_version"]
        for f in (tmp_path / "art").rglob("trajectory.json")
        for step in json.loads(f.read_text())["steps"]
        if step["kind"] == "model_call"
    }
    assert recorded == set(range(curve.steps[0].weights_version + 1))
    assert [e.samples + e.masked for e in curve.evals] == [2, 2]


@pytest.mark.ray
def test_no_cluster_at_the_address_names_the_field(tiny_lm: Path) -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    t0 = time.monotonic()
    with pytest.raises(TransportError, match=r"train\.launcher\.address: no Ray cluster answers"):
        start(tiny_lm, on_ray(f"127.0.0.1:{port}"))
    assert time.monotonic() - t0 < 10
    assert not ray.is_initialized()


def test_nccl_without_gpus_per_rank_names_the_field(tiny_lm: Path) -> None:
    with pytest.raises(ConfigError, match=r"gpus_per_rank is 0") as err:
        start(tiny_lm, on_ray("127.0.0.1:1", backend="nccl"))
    assert err.value.errors[0][0] == "train.launcher.gpus_per_rank"
