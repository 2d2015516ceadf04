"""The trainer's operating defaults: learning rate by batch, batch-size warm-up,
checkpoints by time and in the background, the metrics log."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
import torch

from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.train.config import TrainerConfig
from megaflow.train.launch import start
from megaflow.train.metrics_log import MetricsLog
from megaflow.train.schedule import scaled_lr, warmup_groups
from tests.train.test_fsdp import groups


def test_learning_rate_scales_linearly_or_by_the_square_root_and_is_off_by_default() -> None:
    assert TrainerConfig().lr_scaling == "none"
    assert scaled_lr(TrainerConfig(lr=1e-3), 256) == 1e-3
    linear = TrainerConfig(lr=1e-3, lr_scaling="linear", lr_base_batch=64)
    assert scaled_lr(linear, 256) == pytest.approx(4e-3)
    sqrt = TrainerConfig(lr=1e-3, lr_scaling="sqrt", lr_base_batch=64)
    assert scaled_lr(sqrt, 256) == pytest.approx(2e-3)
    assert scaled_lr(sqrt, 0) == 1e-3  # nothing trained: the base rate


def test_batch_warm_up_grows_the_groups_trained_to_all_of_them() -> None:
    cfg = TrainerConfig(batch_warmup_steps=4)
    assert [warmup_groups(cfg, s, 8) for s in (1, 2, 3, 4, 5)] == [2, 4, 6, 8, 8]
    assert warmup_groups(cfg, 1, 1) == 1  # never less than one group
    assert warmup_groups(TrainerConfig(), 1, 8) == 8


def test_a_step_applies_the_schedules(tiny_lm: Path) -> None:
    cfg = TrainerConfig(lr=1e-3, lr_scaling="sqrt", lr_base_batch=2, batch_warmup_steps=2)
    trainer = start(tiny_lm, cfg)
    assert trainer is not None
    with trainer:
        first = trainer.step(groups(0))  # 2 groups of 3 and 2 samples
        second = trainer.step(groups(0))
    assert (first.groups, first.warmup_skipped_groups, first.samples) == (2, 1, 3)
    assert first.lr == pytest.approx(1e-3 * math.sqrt(3 / 2))
    assert (second.warmup_skipped_groups, second.samples) == (0, 5)
    assert second.lr == pytest.approx(1e-3 * math.sqrt(5 / 2))


def test_the_time_interval_makes_a_checkpoint_due(tiny_lm: Path, tmp_path: Path) -> None:
    trainer = start(tiny_lm, TrainerConfig(checkpoint_every=0, checkpoint_every_s=0.2))
    assert trainer is not None

    async def run() -> tuple[bool, bool, bool]:
        store = LocalArtifactStore(tmp_path)
        await store.start()
        early = trainer.checkpoint_due
        await asyncio.sleep(0.25)
        late = trainer.checkpoint_due
        await trainer.save_checkpoint(store, {})
        return early, late, trainer.checkpoint_due

    with trainer:
        assert asyncio.run(run()) == (False, True, False)
    assert not TrainerConfig().checkpoint_every_s  # by steps only, by default


async def test_an_async_checkpoint_holds_the_state_at_save_time(
    tiny_lm: Path, tmp_path: Path
) -> None:
    store = LocalArtifactStore(tmp_path)
    await store.start()
    cfg = TrainerConfig(lr=1e-2, async_checkpoint=True)
    trainer = start(tiny_lm, cfg)
    assert trainer is not None
    with trainer:
        trainer.step(groups(0))
        saved = trainer.state_dict_for_inference()
        key = await trainer.save_checkpoint(store, {"at": 1})
        trainer.step(groups(1))  # while the save may still be running
        assert await trainer.wait_checkpoint() == key
        moved = trainer.state_dict_for_inference()
    assert any(not torch.equal(saved[k], moved[k]) for k in saved)
    pointer = json.loads(await store.get(f"{cfg.checkpoint_prefix}/latest"))
    assert f"{cfg.checkpoint_prefix}/{pointer['dir']}" == key
    fresh = start(tiny_lm, cfg)
    assert fresh is not None
    with fresh:
        assert await fresh.resume(store) == {"at": 1}
        assert fresh.step_count == 1
        for name, w in fresh.state_dict_for_inference().items():
            assert torch.equal(w, saved[name]), name


def test_the_metrics_log_writes_every_queued_line(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "metrics.jsonl"
    log = MetricsLog(path)
    for step in range(1, 201):
        log.log({"step": step})
    log.close()
    assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == list(range(1, 201))
