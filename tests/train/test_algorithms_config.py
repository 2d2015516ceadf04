"""``train.algorithm`` as a user writes it: the tags, the moved knobs, bad values."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.train.algorithms import config as algo_config
from megaflow.train.algorithms.registry import registered
from megaflow.train.config import MOVED, TrainerConfig
from tests.train_loop.conftest import train_config, write_config


def _members() -> tuple[type, ...]:
    union = typing.get_args(algo_config.AlgorithmConfig)[0]
    return typing.get_args(union)


def test_every_algorithm_has_its_tag_and_builds() -> None:
    tags = set()
    for member in _members():
        tag = member.model_fields["type"].default
        tags.add(tag)
        extra = {"max_tokens": 8} if tag == "dr_grpo" else {}
        cfg = TrainerConfig.model_validate({"algorithm": {"type": tag, **extra}})
        assert type(cfg.algorithm) is member
        assert cfg.algorithm.build(kl_coef=0.0) is not None
    assert tags == {"grpo", "dr_grpo", "dapo", "gspo", "rloo", "reinforce_pp"}
    assert TrainerConfig().algorithm.type == "grpo"  # the default
    assert registered() == {
        "advantages": ["grpo", "reinforce_pp", "rloo"],
        "policy_losses": ["gspo", "ppo"],
    }


@pytest.mark.parametrize("knob", MOVED)
def test_a_moved_knob_names_its_new_place(knob: str) -> None:
    value = "token" if knob == "loss_agg" else (True if knob == "scale_std" else 0.3)
    with pytest.raises(ValidationError, match=f"train.{knob} moved to train.algorithm.{knob}"):
        TrainerConfig.model_validate({knob: value})


@pytest.mark.parametrize(
    ("algorithm", "field", "words"),
    [
        ({"type": "dr_grpo"}, "max_tokens", "required"),
        ({"type": "ppo"}, "algorithm", "grpo"),
        ({"type": "grpo", "loss_agg": "constant"}, "algorithm", "max_tokens"),
        ({"type": "grpo", "dual_clip": 0.5}, "dual_clip", "greater than 1"),
        (
            {"type": "grpo", "correction": {"type": "icepop", "low": 2, "high": 1}},
            "correction",
            "below",
        ),
        (
            {"type": "dapo", "overlong_penalty": {"max_tokens": 4, "cache_tokens": 8}},
            "overlong",
            "exceeds",
        ),
    ],
)
def test_bad_algorithm_configs_name_the_field(
    algorithm: dict[str, object], field: str, words: str
) -> None:
    with pytest.raises(ValidationError) as err:
        TrainerConfig.model_validate({"algorithm": algorithm})
    text = str(err.value)
    assert field in text
    assert words in text


def test_the_cli_exits_2_on_a_moved_knob(tmp_path: Path) -> None:
    path = write_config(tmp_path, train_config(tmp_path, tmp_path, clip_eps=0.3))
    done = CliRunner().invoke(app, ["train", str(path)])
    assert done.exit_code == 2, done.output
    assert "train.clip_eps moved to train.algorithm.clip_eps" in done.output
    assert "Traceback" not in done.output
