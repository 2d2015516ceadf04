"""The ``disk`` weight sync into the run's artifact store on S3 (a real moto_server),
read by an engine in another OS process that downloads each checkpoint.

``store: artifacts`` puts every version under ``weights/<run id>/v<N>/`` in the
store and gives the engine an ``s3://`` URI; the engine (``megaflow serve
model``, with the standard AWS settings in its environment) downloads the
checkpoint, verifies each object's stored SHA-256, and only then swaps. An
object corrupted in the bucket must be refused, leaving the old version
serving and naming the engine. A local artifact store gives the engine the
store's own directory.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from transformers import AutoModelForCausalLM

from megaflow.core.errors import ConfigError, ModelError
from megaflow.model.control import LocalModelControl
from megaflow.model.routing import Router
from megaflow.model.transformers_lm import TransformersBackend, build_tiny_model
from megaflow.rpc.model_client import GrpcModelControl
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.storage.s3_artifacts import S3ArtifactStore
from megaflow.train.weight_sync.config import DiskSyncConfig
from megaflow.train.weight_sync.disk import DiskWeightSync
from tests.storage.test_artifacts_contract import s3_store
from tests.train.test_weight_sync_engine import (
    TOKEN,
    answer,
    assert_same_logprobs,
    perturb,
    running_engine,
)

pytestmark = [pytest.mark.slow, pytest.mark.services]


@pytest.fixture
async def bucket(moto_server: str) -> AsyncIterator[S3ArtifactStore]:
    store = s3_store(moto_server, f"w-{uuid.uuid4().hex[:10]}", prefix="team", create_bucket=True)
    await store.start()
    yield store
    await store.stop()


async def test_checkpoints_in_s3_reach_an_engine_in_another_process(
    bucket: S3ArtifactStore, moto_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {
        "AWS_ENDPOINT_URL": moto_server, "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)  # the engine process inherits them
    base = build_tiny_model(tmp_path / "model", seed=0)
    trainer_model = AutoModelForCausalLM.from_pretrained(base, local_files_only=True).eval()
    async with running_engine(base, tmp_path / "engine") as engine:
        target, url = engine.model.target, engine.model.base_url()
        control = GrpcModelControl(target, TOKEN)
        config = DiskSyncConfig(root=str(tmp_path / "staging"), store="artifacts", keep=1)
        sync = config.build({target: control}, base_model=base, run_id="run-s3", artifacts=bucket)
        assert isinstance(sync, DiskWeightSync)
        async with control, httpx.AsyncClient(timeout=60) as http:
            last: dict[str, Any] = {}
            for version in (1, 2):
                perturb(trainer_model, seed=version)
                result = await sync.push(trainer_model.state_dict(), version)
                uri = f"s3://{bucket.bucket}/team/weights/run-s3/v{version}"
                assert (result.path, list(result.served.values())) == (uri, [version])
                now = await answer(http, url)
                assert now["weights_version"] == version
                assert_same_logprobs(trainer_model, now)
                last = now
            keys = await bucket.list("weights/run-s3/")
            assert "weights/run-s3/v2/model.safetensors" in keys
            assert all(k.startswith("weights/run-s3/v2/") for k in keys)  # keep=1 pruned v1
            assert not list((tmp_path / "staging").rglob("*.safetensors"))  # nothing left locally

            upload = sync._upload

            async def tampered(path: Path, version: int) -> str:
                where = await upload(path, version)
                key = f"team/weights/run-s3/v{version}/model.safetensors"
                s3 = bucket._client()
                head = s3.head_object(Bucket=bucket.bucket, Key=key)
                body = s3.get_object(Bucket=bucket.bucket, Key=key)["Body"].read()
                flipped = body[:-1] + bytes([body[-1] ^ 1])  # one bit, checksum kept
                s3.put_object(
                    Bucket=bucket.bucket, Key=key, Body=flipped, Metadata=head["Metadata"]
                )
                return where

            monkeypatch.setattr(sync, "_upload", tampered)
            perturb(trainer_model, seed=3)
            with pytest.raises(ModelError, match=f"did not reach 1 of 1 engines: {target}") as e:
                await sync.push(trainer_model.state_dict(), 3)
            assert "checksum" in str(e.value).lower() or "sha256" in str(e.value).lower()
            still = await answer(http, url)
            assert (still["weights_version"], still["logprobs"]) == (2, last["logprobs"])


async def test_a_local_artifact_store_gives_the_engine_its_directory(tmp_path: Path) -> None:
    base = build_tiny_model(tmp_path / "model", seed=0)
    store = LocalArtifactStore(tmp_path / "art")
    backend = TransformersBackend(str(base))
    control = LocalModelControl(Router([backend], retries=0))
    trainer_model = AutoModelForCausalLM.from_pretrained(base, local_files_only=True)
    perturb(trainer_model, seed=1)
    config = DiskSyncConfig(root=str(tmp_path / "staging"), store="artifacts")
    async with store:
        sync = config.build({"rollout": control}, base_model=base, run_id="r", artifacts=store)
        result = await sync.push(trainer_model.state_dict(), 1)
    assert result.path == str(tmp_path / "art" / "weights" / "r" / "v1")
    assert (Path(result.path) / "model.safetensors").is_file()
    assert backend.weights_version == 1
    served = backend._model.state_dict()
    assert all((served[k] == v).all() for k, v in trainer_model.state_dict().items())
    with pytest.raises(ConfigError, match=r"train\.weight_sync\.store is 'artifacts'"):
        config.build({"rollout": control}, base_model=base, run_id="r")
