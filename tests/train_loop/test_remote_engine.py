"""`megaflow train` through an engine in another process at an address: the rollout
model is an ``openai`` client of ``megaflow serve model``, new weights go as ``disk``
checkpoints. The loop through two engines it starts itself, with ``disk`` and with
``broadcast`` sync, is ``test_remote_parity.py``; the run's own engines and their end,
``test_remote_launch.py``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from megaflow.app.training.loop import TrainLoop
from megaflow.config import parse_config
from megaflow.core.errors import ConfigError
from megaflow.model.transformers_lm import build_tiny_model
from megaflow.rpc.model_client import GrpcModelControl
from tests.fixtures.servers import free_port
from tests.train.test_weight_sync_engine import TOKEN, running_engine
from tests.train_loop.conftest import train_config, write_config

pytestmark = pytest.mark.slow


def remote(tmp_path: Path, policy: Path, base_url: str, **train: object) -> dict[str, object]:
    raw = train_config(tmp_path, policy, steps=2, checkpoint_every=0, policy=str(policy), **train)
    raw["model"] = {
        "type": "openai", "base_url": base_url, "model": "default",
        "api_key_env": "ENGINE_TOKEN", "weight_sync": "megaflow",
    }  # fmt: skip
    raw["agent"]["temperature"] = 1.0
    return raw


def test_a_sync_the_rollout_model_cannot_take_is_a_config_error(
    tmp_path: Path, policy: Path
) -> None:
    raw = remote(tmp_path, policy, "http://127.0.0.1:9/v1")  # weight_sync: in_process
    with pytest.raises(ConfigError, match=r"train\.weight_sync\.type 'in_process' sends tensors"):
        TrainLoop(parse_config(raw), run_id="tl-bad", printer=lambda _: None)
    raw = remote(tmp_path, policy, "http://127.0.0.1:9/v1", weight_sync={"type": "disk"})
    del raw["train"]["policy"]  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"train\.policy is not set"):
        TrainLoop(parse_config(raw), run_id="tl-bad", printer=lambda _: None)
    raw = remote(tmp_path, policy, "http://127.0.0.1:9/v1", weight_sync={"type": "disk"})
    del raw["agent"]["temperature"]  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"agent\.temperature is not set"):
        TrainLoop(parse_config(raw), run_id="tl-bad", printer=lambda _: None)


def train_cli(config: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "ENGINE_TOKEN": TOKEN}
    return subprocess.run(
        [sys.executable, "-m", "megaflow.cli.main", "train", str(config)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip


async def test_megaflow_train_through_an_engine_and_its_config_errors(
    tmp_path: Path, policy: Path
) -> None:
    async with running_engine(policy, tmp_path / "engine") as engine:
        url = engine.model.base_url()
        sync = {"type": "disk", "root": str(tmp_path / "weights")}
        ok = write_config(tmp_path, remote(tmp_path, policy, url, weight_sync=sync))
        done = await asyncio.to_thread(train_cli, ok)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "step 2/2" in done.stdout
        assert "(weights v2)" in done.stdout
        bad = write_config(tmp_path, remote(tmp_path, policy, url))  # in_process: tensors
        refused = await asyncio.to_thread(train_cli, bad)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "train.weight_sync.type" in refused.stdout + refused.stderr
        async with GrpcModelControl(engine.model.target, TOKEN) as control:
            assert [b.weights_version for b in await control.list_backends()] == [2]


async def test_an_engine_with_another_tokenizer_or_none_at_all_is_refused_at_start(
    tmp_path: Path, policy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENGINE_TOKEN", TOKEN)
    sync = {"type": "disk", "root": str(tmp_path / "weights")}
    nobody = remote(tmp_path / "a", policy, f"http://127.0.0.1:{free_port()}/v1", weight_sync=sync)
    with pytest.raises(ConfigError, match="did not answer the start probe"):
        await TrainLoop(parse_config(nobody), run_id="tl-none", printer=lambda _: None).run()
    other = build_tiny_model(tmp_path / "other")  # another vocabulary
    async with running_engine(other, tmp_path / "engine") as engine:
        raw = remote(tmp_path / "b", policy, engine.model.base_url(), weight_sync=sync)
        loop = TrainLoop(parse_config(raw), run_id="tl-other", printer=lambda _: None)
        with pytest.raises(ConfigError, match="tokenizer differs") as e:
            await loop.run()
    assert e.value.errors[0][0] == "train.policy"
