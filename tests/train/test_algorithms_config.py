"""``train.algorithm`` as a user writes it: the tags, the moved knobs, bad values."""

from __future__ import annotations

import typing
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.core.errors import ConfigError, PluginError
from megaflow.train.algorithms import config as algo_config
from megaflow.train.algorithms.registry import registered
from megaflow.train.config import MOVED, TrainerConfig
from tests.train.conftest import sample
from tests.train_loop.conftest import train_config, write_config


def _members() -> tuple[type, ...]:
    union = typing.get_args(algo_config.AlgorithmConfig)[0]
    return typing.get_args(union)


def test_every_algorithm_has_its_tag_and_builds() -> None:
    tags = set()
    for member in _members():
        tag = member.model_fields["type"].default
        tags.add(tag)
        extra = {"dr_grpo": {"max_tokens": 8}, "custom": {"advantage": "rloo"}}.get(tag, {})
        cfg = TrainerConfig.model_validate({"algorithm": {"type": tag, **extra}})
        assert type(cfg.algorithm) is member
        assert cfg.algorithm.build(kl_coef=0.0) is not None
    assert tags == {"grpo", "dr_grpo", "dapo", "gspo", "rloo", "reinforce_pp", "custom"}
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


def doubled(rewards: Sequence[torch.Tensor], *, factor: float = 2.0) -> list[torch.Tensor]:
    """A plug-in estimator: the reward minus the group mean, times ``factor``."""
    return [(r - r.mean()) * factor for r in rewards]


def test_custom_combines_registered_names_and_plug_ins_by_dotted_path() -> None:
    cfg = TrainerConfig.model_validate(
        {"algorithm": {"type": "custom", "advantage": "rloo", "policy_loss": "gspo"}}
    )
    algo = cfg.algorithm.build()
    assert algo.prepare([[sample("a", 1.0), sample("b", 0.0)]]).scored[0].advantage == 1.0
    plug = TrainerConfig.model_validate(
        {"algorithm": {"type": "custom", "advantage": f"{__name__}.doubled",
                       "advantage_options": {"factor": 3.0}}}
    )  # fmt: skip
    got = plug.algorithm.build().prepare([[sample("a", 1.0), sample("b", 0.0)]])
    assert [s.advantage for s in got.scored] == [1.5, -1.5]


@pytest.mark.parametrize(
    ("algorithm", "field"),
    [
        ({"advantage": "nope"}, "train.algorithm.advantage"),
        ({"advantage": "grpo", "policy_loss": "nope"}, "train.algorithm.policy_loss"),
        ({"advantage": "grpo", "advantage_options": {"bogus": 1}}, "train.algorithm.advantage"),
    ],
)
def test_a_bad_custom_algorithm_is_a_config_error(algorithm: dict[str, object], field: str) -> None:
    cfg = TrainerConfig.model_validate({"algorithm": {"type": "custom", **algorithm}})
    with pytest.raises(ConfigError, match=field):
        cfg.algorithm.build()
    with pytest.raises(PluginError):
        TrainerConfig.model_validate(
            {"algorithm": {"type": "custom", "advantage": "no_such_module.fn"}}
        ).algorithm.build()
