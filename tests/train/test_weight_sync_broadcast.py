"""The ``broadcast`` weight sync into replicas of MegaFlow's engine in this process.

Each ``transformers`` replica behind a router is one rank of a real gloo group
with the trainer's rank 0; what it serves after a push must be the trainer's
tensors exactly. An update the engine cannot take whole (a shape that does not
fit its model, a broadcast that stops half-way) must leave every replica on
the weights it served, bit for bit, and fail the push naming the replica.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM

from megaflow.core.errors import ConfigError, ModelError
from megaflow.core.weight_group import Member, TensorMeta
from megaflow.model.control import LocalModelControl
from megaflow.model.routing import Router
from megaflow.model.transformers_lm import TransformersBackend, build_tiny_model
from megaflow.rpc.model_client import GrpcModelControl
from megaflow.train.weight_sync.broadcast import BroadcastWeightSync
from megaflow.train.weight_sync.config import BroadcastSyncConfig

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("bcast-model"), seed=0)


@pytest.fixture
async def replicas(base: Path) -> AsyncIterator[list[TransformersBackend]]:
    backends = [TransformersBackend(str(base)), TransformersBackend(str(base))]
    for b in backends:
        await b.start()
    yield backends
    for b in backends:
        await b.stop()


def perturbed(base: Path, seed: int) -> dict[str, torch.Tensor]:
    model = AutoModelForCausalLM.from_pretrained(base, local_files_only=True)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.2)
    return {k: v.clone() for k, v in model.state_dict().items()}


def served(backend: TransformersBackend) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in backend._model.state_dict().items()}


def same(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def sync_of(replicas: list[TransformersBackend], **cfg: Any) -> BroadcastWeightSync:
    control = LocalModelControl(Router(list(replicas), retries=0))
    config = BroadcastSyncConfig(bucket_mb=0.01, timeout_s=5, **cfg)
    sync = config.build({"rollout": control}, base_model=Path("."), run_id="r")
    assert isinstance(sync, BroadcastWeightSync)
    return sync


async def test_every_replica_serves_the_trainers_tensors_exactly(
    base: Path, replicas: list[TransformersBackend]
) -> None:
    sync = sync_of(replicas)
    for version in (1, 2):
        weights = perturbed(base, version)
        result = await sync.push(weights, version)
        assert result.served == {"rollout/transformers:bcast-model0/0": version,
                                 "rollout/transformers:bcast-model0/1": version}  # fmt: skip
        for r in replicas:
            assert r.weights_version == version
            assert same(served(r), weights)
        if version == 1:
            first_group = sync._member
    assert sync._member is first_group  # one group serves every push
    await sync.close()


async def test_a_shape_the_model_cannot_take_leaves_the_old_weights_serving(
    base: Path, replicas: list[TransformersBackend]
) -> None:
    sync = sync_of(replicas)
    good = perturbed(base, 1)
    await sync.push(good, 1)
    bad = perturbed(base, 2)
    bad["transformer.h.1.mlp.c_fc.weight"] = bad["transformer.h.1.mlp.c_fc.weight"][:, :-1]
    with pytest.raises(ModelError, match="did not reach 1 of 1 engines: rollout") as e:
        await sync.push(bad, 2)
    for r in replicas:  # every tensor as it was: nothing of the refused update copied
        assert r.weights_version == 1
        assert same(served(r), good)
    message = str(e.value)
    for n in (0, 1):  # both replicas named, each with the reason
        assert f"transformers:bcast-model0/{n}: " in message
    assert "weight 'transformer.h.1.mlp.c_fc.weight' has shape (32, 127)" in message
    again = perturbed(base, 3)
    await sync.push(again, 2)  # a new group forms and the next update goes through
    assert all(same(served(r), again) for r in replicas)
    await sync.close()


async def test_a_broadcast_that_stops_half_way_changes_nothing(
    base: Path, replicas: list[TransformersBackend], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trainer sends only the first half of the tensors (as if it died): each
    replica times out waiting for the rest and keeps serving what it had."""
    sync = sync_of(replicas)
    good = perturbed(base, 1)
    await sync.push(good, 1)
    send = sync._send

    def half(member: Member, weights: Mapping[str, Any], metas: list[TensorMeta]) -> None:
        send(member, weights, metas[: len(metas) // 2])

    monkeypatch.setattr(sync, "_send", half)
    with pytest.raises(ModelError, match="did not arrive") as e:
        await sync.push(perturbed(base, 2), 2)
    assert "transformers:bcast-model0/0: " in str(e.value)
    for r in replicas:
        assert r.weights_version == 1
        assert same(served(r), good)
    await sync.close()


def test_an_engine_that_cannot_join_a_group_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"engines \['127.0.0.1:1'\] cannot join"):
        BroadcastSyncConfig().build(
            {"127.0.0.1:1": GrpcModelControl("127.0.0.1:1", "t")}, base_model=Path("."), run_id="r"
        )
