"""The trainer's edges in one process: bad input before anything starts, and
a step with nothing to train."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from megaflow.core.errors import ConfigError
from megaflow.train.config import TrainerConfig
from megaflow.train.launch import start
from tests.train.conftest import sample


def test_a_missing_model_directory_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no config\.json") as err:
        start(tmp_path / "nowhere", TrainerConfig(world_size=2))
    assert err.value.errors == [("model_dir", "no config.json")]


def test_nccl_without_cuda_is_a_config_error(
    tiny_lm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"train\.backend"):
        start(tiny_lm, TrainerConfig(backend="nccl"))


def test_a_step_without_trainable_tokens_changes_nothing(tiny_lm: Path) -> None:
    trainer = start(tiny_lm, TrainerConfig(lr=1e-2, checkpoint_every=1))
    assert trainer is not None
    with trainer:
        before = trainer.state_dict_for_inference()
        groups = [
            [sample("a", 1.0, masked=True), sample("b", 0.0, mask=[0, 0])],
            [sample("c", 1.0, masked=True)],
        ]
        stats = trainer.step(groups)
        assert not stats.updated
        assert (stats.step, stats.weights_version, stats.tokens, stats.samples) == (0, 0, 0, 0)
        assert (stats.masked_samples, stats.zero_advantage_groups, stats.groups) == (2, 2, 2)
        assert not trainer.checkpoint_due
        for name, w in trainer.state_dict_for_inference().items():
            assert torch.equal(w, before[name]), name
        # the copies handed out are not the live parameters
        before["lm_head.weight"].zero_()
        assert trainer.state_dict_for_inference()["lm_head.weight"].abs().sum() > 0
        stats = trainer.step([[sample("d", 1.0), sample("e", 0.0)]])
        assert stats.updated
        assert stats.weights_version == 1
        assert trainer.checkpoint_due
