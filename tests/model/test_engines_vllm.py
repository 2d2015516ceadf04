"""The vLLM adapter against recorded vLLM exchanges, over a real local HTTP server.

No vLLM runs here (no GPU): the server replays exchanges whose request and
answer shapes were read from vLLM's own source (``tests/fixtures/engines/vllm/``,
each file names the files and commits) and checks every request the adapter
sends against the recorded shape.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from megaflow.app.training.probe import PROBE, check_tokenizer, trainer_ids
from megaflow.core.errors import ConfigError, InvalidInput, ModelError
from megaflow.core.weight_group import WeightGroup, plan_buckets
from megaflow.model.client import InProcessModelClient
from megaflow.model.config import VLLMModelConfig
from megaflow.model.control import WeightGroupMember
from megaflow.model.engines.backend import EngineBackend
from megaflow.model.factory import make_model_client
from megaflow.model.transformers_lm import build_tiny_model
from megaflow.train.weight_sync.abstract import GroupEngineControl
from tests.fixtures.engines.replay import ReplayServer, load, replay_server

GEN, WEIGHTS, CONTROL = load("vllm", "generate"), load("vllm", "weights"), load("vllm", "control")
DISK = [WEIGHTS["update_config"], WEIGHTS["reload_weights"], WEIGHTS["reset_prefix_cache"]]
USER = {"role": "user", "content": "fix the bug"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("vllm-tok"))


@pytest.fixture
async def engine(tiny: Path) -> AsyncIterator[tuple[ReplayServer, InProcessModelClient]]:
    async with replay_server() as server:
        cfg = VLLMModelConfig(base_url=server.url, model="policy", tokenizer=str(tiny))
        async with make_model_client(cfg) as client:
            yield server, client
        server.check_done()


def backend_of(client: InProcessModelClient) -> EngineBackend:
    backend = client.service.router.replicas[0].backend
    assert isinstance(backend, EngineBackend)
    return backend


async def test_token_in_completions_record_ids_logprobs_and_the_version(
    engine: tuple[ReplayServer, InProcessModelClient], tiny: Path
) -> None:
    server, client = engine
    server.expect(GEN["completion"], GEN["completion"])
    first = await client.chat([USER], trajectory_id="t1", max_tokens=16, temperature=1.0)
    reply = {"role": "assistant", "content": first.content}
    second = [USER, reply, {"role": "user", "content": "submit the patch"}]
    await client.chat(second, trajectory_id="t1", max_tokens=16, temperature=1.0)
    calls = await client.calls("t1")
    sent = [body["prompt"] for path, body in server.received]
    assert sent[0] == trainer_ids(tiny, [USER])  # the trainer's own rendering, as ids
    assert calls[0].prompt_token_ids == sent[0]
    assert calls[0].token_ids == [22, 44, 13, 2]
    assert calls[0].logprobs == [-0.25, -1.5, -0.125, -0.0625]
    assert first.content == "fix the bug"
    assert first.finish_reason == "stop"
    # token-in: the second prompt extends the first prompt and the sampled ids exactly
    assert sent[1][: len(sent[0]) + 4] == sent[0] + [22, 44, 13, 2]
    assert calls[1].prompt_token_ids == sent[1]
    assert [c.weights_version for c in calls] == [0, 0]


async def test_sampling_parameters_reach_vllm_as_recorded(
    engine: tuple[ReplayServer, InProcessModelClient],
) -> None:
    server, client = engine
    server.expect(GEN["completion_sampled"])
    out = await client.chat(
        [USER], max_tokens=8, temperature=0.7, top_p=0.9, seed=3, stop="submit", top_k=5
    )
    assert out.finish_reason == "length"
    assert out.logprobs == [-0.75, -2.0]


async def test_the_start_probe_passes_with_the_trainers_tokenizer(
    engine: tuple[ReplayServer, InProcessModelClient], tiny: Path
) -> None:
    server, client = engine
    server.expect(GEN["completion"])
    await check_tokenizer(client, tiny)
    assert server.received[0][1]["prompt"] == trainer_ids(tiny, list(PROBE))


async def test_an_engine_that_fed_other_prompt_ids_is_an_error(
    engine: tuple[ReplayServer, InProcessModelClient],
) -> None:
    server, client = engine
    server.expect(GEN["completion_other_prompt"])
    with pytest.raises(ModelError, match=r"vllm http://127\.0\.0\.1:\d+ fed 3 prompt ids"):
        await client.chat([USER], trajectory_id="t2")
    assert await client.calls("t2") == [] or all(
        c.token_ids is None for c in await client.calls("t2")
    )


async def test_disk_reload_then_a_failed_reload_rolls_back_and_names_the_engine(
    engine: tuple[ReplayServer, InProcessModelClient],
) -> None:
    server, client = engine
    server.expect(*DISK, GEN["completion"])
    (status,) = await client.control.update_weights("/ckpt/v1", 1)
    assert status.weights_version == 1
    await client.chat([USER], trajectory_id="t3")
    assert server.received[0][1]["args"] == [{"model_config": {"model": "/ckpt/v1"}}]
    # v2 fails inside reload_weights: vLLM may hold part of it, so v1 is loaded again
    server.expect(WEIGHTS["update_config"], WEIGHTS["reload_weights_fails"], *DISK)
    server.expect(GEN["completion"])
    with pytest.raises(ModelError, match=r"vllm http://127\.0\.0\.1:\d+ answered 500") as err:
        await client.control.update_weights("/ckpt/v2", 2)
    assert "rolled back to v1 (/ckpt/v1)" in str(err.value)
    rollback = server.received[-3][1]
    assert rollback["args"] == [{"model_config": {"model": "/ckpt/v1"}}]
    (status,) = await client.control.list_backends()
    assert status.weights_version == 1
    await client.chat([USER], trajectory_id="t3")
    assert [c.weights_version for c in await client.calls("t3")] == [1, 1]
    with pytest.raises(InvalidInput, match="not newer"):
        await client.control.update_weights("/ckpt/v1", 1)


async def test_broadcast_group_calls_the_worker_extension(
    engine: tuple[ReplayServer, InProcessModelClient],
) -> None:
    server, client = engine
    backend = backend_of(client)
    assert isinstance(backend, GroupEngineControl)
    assert isinstance(backend, WeightGroupMember)
    assert await client.control.weight_group_ranks() == 1
    metas = plan_buckets(
        [("w.a", "float32", [4, 8]), ("w.b", "float32", [8]), ("w.c", "float32", [16, 8])], 256
    )
    group = WeightGroup(
        master_address="10.0.0.5", master_port=29555, rank_offset=1, world_size=2,
        group_name="megaflow_weights", backend="nccl",
    )  # fmt: skip
    server.expect(WEIGHTS["init_weight_update_group"], WEIGHTS["update_weights_bucket0"])
    server.expect(WEIGHTS["update_weights_bucket1"], WEIGHTS["reset_prefix_cache"])
    server.expect(GEN["completion"])
    await client.control.init_weight_group(group)  # the broadcast sync's way in
    (status,) = await client.control.update_weights_from_group(metas, 1)
    assert status.weights_version == 1
    assert server.received[0][1]["args"] == [
        "10.0.0.5", 29555, 1, 2, "megaflow_weights", "nccl", 120.0,
    ]  # fmt: skip
    assert [m["name"] for m in server.received[1][1]["args"][0]] == ["w.a", "w.b"]
    assert [m["name"] for m in server.received[2][1]["args"][0]] == ["w.c"]
    out = await client.chat([USER])
    assert out.weights_version == 1
    # a failed receive is rolled back to the last whole checkpoint: the base model
    server.expect(WEIGHTS["update_weights_bucket0"], WEIGHTS["update_weights_bucket1_fails"])
    server.expect(*DISK, WEIGHTS["close_weight_update_group"])
    with pytest.raises(ModelError, match=r"vllm http://.* answered 500 .* rolled back to v0"):
        await backend.update_weights_from_group(metas, 2)
    assert backend.weights_version == 0
    await backend.close_weight_group()


async def test_pause_resume_and_abort_all(
    engine: tuple[ReplayServer, InProcessModelClient],
) -> None:
    server, client = engine
    backend = backend_of(client)
    server.expect(CONTROL["pause_keep"], CONTROL["resume"])
    server.expect(CONTROL["pause_abort"], CONTROL["resume"])
    await backend.pause("keep")
    await backend.resume()
    await backend.abort_all()
    assert await backend.engine.served_version() is None  # vLLM keeps no version


def test_the_fixture_tokenizer_knows_the_recorded_ids(tiny: Path) -> None:
    tok = AutoTokenizer.from_pretrained(tiny)
    assert tok.decode([22, 44, 13]) == "fix the bug"
    assert tok.eos_token_id == 2


async def test_a_missing_tokenizer_is_a_config_error_naming_the_field(tmp_path: Path) -> None:
    cfg = VLLMModelConfig(
        base_url="http://127.0.0.1:1", model="policy", tokenizer=str(tmp_path / "none")
    )
    with pytest.raises(ConfigError, match=r"^model\.tokenizer: .* is not a directory") as err:
        async with make_model_client(cfg):
            pass
    assert err.value.errors == [("model.tokenizer", "no such directory")]
