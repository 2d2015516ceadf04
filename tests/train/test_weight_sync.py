"""Weight syncs with engines faked in process: configs, fan-out, refusals, timeouts."""

from __future__ import annotations

import asyncio
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from megaflow.core.errors import ConfigError, InvalidInput, MegaFlowTimeout, ModelError
from megaflow.model.control import BackendStatus
from megaflow.model.transformers_lm import build_tiny_model
from megaflow.rpc.model_client import GrpcModelControl
from megaflow.train.loop_config import TrainingConfig
from megaflow.train.weight_sync.config import (
    DiskSyncConfig,
    InProcessSyncConfig,
    WeightSyncConfig,
)
from megaflow.train.weight_sync.disk import DiskWeightSync
from megaflow.train.weight_sync.in_process import InProcessWeightSync
from tests.fixtures.servers import free_port


class FakeEngine:
    """Takes every update, or refuses (``refuse``), or never answers (``hang``)."""

    def __init__(self, refuse: Exception | None = None, hang: bool = False) -> None:
        self.version = 0
        self.refuse = refuse
        self.hang = hang
        self.seen: list[tuple[Any, int]] = []

    async def update_weights(self, weights: Any, version: int) -> Sequence[BackendStatus]:
        self.seen.append((weights, version))
        if self.hang:
            await asyncio.Event().wait()
        if self.refuse is not None:
            raise self.refuse
        self.version = version
        return [BackendStatus(name="r/0", type="fake", weights_version=version)]


def test_every_sync_config_has_its_tag() -> None:
    members = typing.get_args(typing.get_args(WeightSyncConfig)[0])
    tags = set()
    for m in members:
        assert issubclass(m, BaseModel)
        tags.update(typing.get_args(m.model_fields["type"].annotation))
        assert m.model_fields["type"].default in tags
        assert all(f.description for f in m.model_fields.values()), m
    assert tags == {"in_process", "disk", "broadcast"}
    adapter: TypeAdapter[Any] = TypeAdapter(WeightSyncConfig)
    assert isinstance(adapter.validate_python({"type": "disk"}), DiskSyncConfig)
    with pytest.raises(ValidationError, match="root_dir"):
        adapter.validate_python({"type": "disk", "root_dir": "x"})


def test_in_process_is_the_default() -> None:
    tc = TrainingConfig.model_validate({"held_out": {"path": "h.jsonl"}})
    assert isinstance(tc.weight_sync, InProcessSyncConfig)
    with pytest.raises(ValidationError, match="weight_sync"):
        TrainingConfig.model_validate({"held_out": {}, "weight_sync": {"type": "carrier-pigeon"}})


async def test_in_process_hands_over_the_tensors() -> None:
    engine = FakeEngine()
    sync = InProcessSyncConfig().build({"in-process": engine}, base_model=Path("."), run_id="r")
    assert isinstance(sync, InProcessWeightSync)
    result = await sync.push({"w": 1}, 1)
    assert (engine.seen, result.served, result.path) == (
        [({"w": 1}, 1)],
        {"in-process/r/0": 1},
        None,
    )
    engine.refuse = ModelError("replay cannot take new weights")
    with pytest.raises(ConfigError, match="replay cannot take"):
        await sync.push({"w": 2}, 2)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    from transformers import AutoModelForCausalLM

    path = build_tiny_model(tmp_path_factory.mktemp("sync-model"))
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    return path, model.state_dict()


async def test_disk_names_the_engine_that_refused_and_what_each_serves(
    tiny: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    base, weights = tiny
    good, bad = FakeEngine(), FakeEngine(refuse=InvalidInput("no room for v1"))
    sync = DiskSyncConfig(root=str(tmp_path)).build(
        {"host-a": good, "host-b": bad}, base_model=base, run_id="r"
    )
    with pytest.raises(
        ModelError, match=r"did not reach 1 of 2 engines: host-b: no room for v1"
    ) as e:
        await sync.push(weights, 1)
    assert "versions reported: {'host-a/r/0': 1}" in str(e.value)
    assert good.seen == [(str(tmp_path / "r" / "v1"), 1)]
    assert (tmp_path / "r" / "v1" / "model.safetensors").is_file()
    assert (tmp_path / "r" / "v1" / "config.json").is_file()
    assert not [p for p in (tmp_path / "r").iterdir() if p.name.startswith(".")]


async def test_disk_times_out_naming_the_engine(
    tiny: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    base, weights = tiny
    sync = DiskSyncConfig(root=str(tmp_path), timeout_s=0.3).build(
        {"slow-host": FakeEngine(hang=True)}, base_model=base, run_id="r"
    )
    with pytest.raises(ModelError, match="slow-host: engine slow-host did not load weights v1"):
        await asyncio.wait_for(sync.push(weights, 1), 30)
    assert isinstance(sync, DiskWeightSync)
    assert issubclass(MegaFlowTimeout, TimeoutError)


async def test_disk_names_an_engine_that_does_not_answer(
    tiny: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    base, weights = tiny
    target = f"127.0.0.1:{free_port()}"  # nothing listens there
    async with GrpcModelControl(target, "token-0123456789abcdef") as control:
        sync = DiskSyncConfig(root=str(tmp_path), timeout_s=20).build(
            {target: control}, base_model=base, run_id="r"
        )
        with pytest.raises(ModelError, match=f"did not reach 1 of 1 engines: {target}"):
            await asyncio.wait_for(sync.push(weights, 1), 60)
