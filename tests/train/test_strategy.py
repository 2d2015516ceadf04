"""The trainer's strategy and optimizer: the planner's choice, 1-bit Adam with DDP.

The config refuses 1-bit Adam under sharding; ``strategy: auto`` resolves
through the planner from the model directory and reports why; on two gloo
ranks a DDP trainer with 1-bit Adam (past its warm-up) moves the weights and
leaves both ranks with identical ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from pydantic import ValidationError

from megaflow.core.errors import ConfigError
from megaflow.train.config import TrainerConfig
from megaflow.train.launch import start
from megaflow.train.local_ranks import run_ranks
from megaflow.train.plan_config import Hardware
from megaflow.train.strategy import resolve
from tests.train.test_fsdp import groups

ONEBIT = {
    "lr": 1e-2,
    "optimizer": "onebit_adam",
    "onebit_warmup_steps": 1,
    "onebit_block": 64,
    "world_size": 2,
    "backend": "gloo",
}


def test_onebit_adam_under_sharding_is_refused_naming_the_fields() -> None:
    with pytest.raises(ValidationError, match="onebit_adam cannot run under strategy 'fsdp'"):
        TrainerConfig(optimizer="onebit_adam", world_size=2)
    with pytest.raises(ValidationError, match="'zero3'"):
        TrainerConfig(optimizer="onebit_adam", world_size=2, strategy="zero3")
    TrainerConfig(optimizer="onebit_adam", world_size=2, strategy="ddp")
    TrainerConfig(optimizer="onebit_adam")  # one rank: nothing is sharded


def test_the_default_strategy_is_fsdp_and_one_rank_shards_nothing(tiny_lm: Path) -> None:
    assert TrainerConfig().strategy == "fsdp"
    assert resolve(tiny_lm, TrainerConfig(), 2).strategy == "fsdp"
    assert resolve(tiny_lm, TrainerConfig(strategy="auto"), 1).strategy == "none"


def test_auto_takes_the_planners_choice_and_says_why(tiny_lm: Path) -> None:
    big = Hardware(device_memory_gb=80, devices_per_node=2, overhead_gb=0)
    got = resolve(tiny_lm, TrainerConfig(strategy="auto", hardware=big), 2)
    assert got.strategy == "ddp"
    assert got.predicted_bytes is not None
    assert got.predicted_bytes > 0
    assert any("ddp: chosen" in r for r in got.reasons)
    # a device too small for a replica but big enough for shards: zero2 or zero3
    small = Hardware(device_memory_gb=0.0012, devices_per_node=2, overhead_gb=0, usable=1)
    got = resolve(tiny_lm, TrainerConfig(strategy="auto", hardware=small, plan_seq_len=8), 2)
    assert got.strategy in ("zero2", "zero3"), got.reasons
    assert any(r.startswith("ddp: ") and "> " in r for r in got.reasons)


def test_auto_refuses_what_the_trainer_cannot_run(tiny_lm: Path) -> None:
    tiny = Hardware(device_memory_gb=1e-6, devices_per_node=2, host_memory_gb=1e-6, overhead_gb=0)
    with pytest.raises(ConfigError, match="auto: nothing fits"):
        resolve(tiny_lm, TrainerConfig(strategy="auto", hardware=tiny), 2)


def _ddp_onebit_rank(rank: int, world: int, model_dir: Path) -> dict[str, Any]:
    from megaflow.train.onebit_adam import OnebitAdam
    from megaflow.train.worker import RankWorker

    cfg = TrainerConfig.model_validate({**ONEBIT, "strategy": "ddp"})
    worker = RankWorker(model_dir, cfg, rank=rank, world_size=world, strategy="ddp")
    assert isinstance(worker.optim, OnebitAdam)
    before = {k: v.clone() for k, v in worker.model.module.state_dict().items()}
    compressing = []
    for seed in range(3):
        compressing.append(worker.optim.compressing)
        worker.step(groups(seed))
    after = worker.model.module.state_dict()
    return {
        "moved": sum(not torch.equal(before[k], after[k]) for k in after),
        "weights": {k: v.clone() for k, v in after.items()},
        "compressing": compressing,
        "sent": worker.optim.sent_bytes,
    }


@pytest.mark.slow
def test_onebit_adam_with_ddp_changes_both_ranks_identically(tiny_lm: Path) -> None:
    r0, r1 = run_ranks(_ddp_onebit_rank, 2, tiny_lm, timeout_s=300)
    assert r0["compressing"] == [False, True, True]  # one warm-up step, then compressed
    assert r0["sent"] > 0  # the compressed momentum went over the wire
    assert r0["moved"] > len(r0["weights"]) // 2
    for name, w in r0["weights"].items():
        assert torch.equal(w, r1["weights"][name]), name


@pytest.mark.slow
def test_trainer_reports_the_planned_strategy_and_logs_rank_timings(
    tiny_lm: Path, tmp_path: Path
) -> None:
    metrics = tmp_path / "metrics.jsonl"
    cfg = TrainerConfig.model_validate(
        {**ONEBIT, "strategy": "auto", "metrics_path": str(metrics), "micro_batch": 1}
    )
    trainer = start(tiny_lm, cfg)
    assert trainer is not None
    with trainer:
        assert trainer.strategy == "ddp"  # a 1-bit Adam plan for a tiny model on this host
        assert any("chosen" in r for r in trainer.strategy_reasons)
        initial = trainer.state_dict_for_inference()
        stats = [trainer.step(groups(seed)) for seed in range(2)]
        final = trainer.state_dict_for_inference()
    assert any(not torch.equal(initial[k], final[k]) for k in final)
    lines = [json.loads(x) for x in metrics.read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2]
    assert lines[0]["strategy"] == "ddp"
    for st, line in zip(stats, lines, strict=True):
        assert len(st.ranks) == 2
        assert all(r.compute_s > 0 and r.idle_s >= 0 and r.comm_s >= 0 for r in st.ranks)
        assert line["ranks"][1]["compute_s"] == pytest.approx(st.ranks[1].compute_s)
    assert stats[1].ranks[0].comm_s > 0  # the compressed exchange of the second step
