"""The SGLang adapter against recorded SGLang exchanges, over a real local HTTP server.

No SGLang runs here (no GPU): the server replays exchanges whose request and
answer shapes were read from SGLang's own source
(``tests/fixtures/engines/sglang/``, each file names the files and commits)
and checks every request the adapter sends against the recorded shape.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from megaflow.app.training.probe import trainer_ids
from megaflow.core.errors import ModelError
from megaflow.core.weight_group import WeightGroup, plan_buckets
from megaflow.model.client import InProcessModelClient
from megaflow.model.config import SGLangModelConfig
from megaflow.model.engines.backend import EngineBackend
from megaflow.model.engines.sglang import SGLangEngine
from megaflow.model.factory import make_model_client
from megaflow.model.transformers_lm import build_tiny_model
from megaflow.train.weight_sync.abstract import GroupEngineControl
from tests.fixtures.engines.replay import ReplayServer, load, replay_server

GEN, WEIGHTS, CONTROL = (load("sglang", n) for n in ("generate", "weights", "control"))
USER = {"role": "user", "content": "fix the bug"}
METAS = plan_buckets(
    [("w.a", "float32", [4, 8]), ("w.b", "float32", [8]), ("w.c", "float32", [16, 8])], 256
)
GROUP = WeightGroup(
    master_address="10.0.0.5", master_port=29555, rank_offset=1, world_size=2,
    group_name="megaflow_weights", backend="nccl",
)  # fmt: skip


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("sglang-tok"))


@pytest.fixture
async def engine(tiny: Path) -> AsyncIterator[tuple[ReplayServer, InProcessModelClient]]:
    async with replay_server() as server:
        cfg = SGLangModelConfig(base_url=server.url, tokenizer=str(tiny))
        server.expect(WEIGHTS["weight_version_default"])  # checked at start: the base model
        async with make_model_client(cfg) as client:
            assert server.received.pop(0)[0] == "/get_weight_version"
            yield server, client
        server.check_done()


def backend_of(client: InProcessModelClient) -> EngineBackend:
    backend = client.service.router.replicas[0].backend
    assert isinstance(backend, EngineBackend)
    return backend


async def test_token_in_generation_records_ids_logprobs_and_the_served_version(
    engine: tuple[ReplayServer, InProcessModelClient], tiny: Path
) -> None:
    server, client = engine
    server.expect(GEN["generate_v0"], GEN["generate_v0"])
    first = await client.chat([USER], trajectory_id="t1", max_tokens=16, temperature=1.0)
    turn2 = [USER, first.message, {"role": "user", "content": "submit the patch"}]
    await client.chat(turn2, trajectory_id="t1", max_tokens=16, temperature=1.0)
    calls = await client.calls("t1")
    sent = [body["input_ids"] for _, body in server.received]
    assert sent[0] == trainer_ids(tiny, [USER])
    assert sent[1][: len(sent[0]) + 4] == sent[0] + [22, 44, 13, 2]  # token-in
    assert [c.prompt_token_ids for c in calls] == sent
    assert calls[0].token_ids == [22, 44, 13, 2]
    assert calls[0].logprobs == [-0.25, -1.5, -0.125, -0.0625]
    assert [c.weights_version for c in calls] == [0, 0]  # 'default': a fresh server
    assert first.content == "fix the bug"


async def test_sampling_parameters_and_an_aborted_generation(
    engine: tuple[ReplayServer, InProcessModelClient],
) -> None:
    server, client = engine
    server.expect(GEN["generate_sampled"], GEN["generate_aborted"])
    out = await client.chat(
        [USER], max_tokens=8, temperature=0.7, top_p=0.9, seed=3, stop=["submit"], top_k=5
    )
    assert (out.finish_reason, out.token_ids) == ("length", [44, 17])
    cut = await client.chat([USER], max_tokens=16, temperature=1.0)
    assert cut.finish_reason == "abort"  # the tokens it has are kept
    assert cut.logprobs == [-0.75, -2.0]


async def test_disk_update_then_a_refusal_keeps_the_old_version_serving(
    engine: tuple[ReplayServer, InProcessModelClient],
) -> None:
    server, client = engine
    server.expect(WEIGHTS["update_from_disk"], WEIGHTS["weight_version_1"], GEN["generate_v1"])
    (status,) = await client.control.update_weights("/ckpt/v1", 1)
    assert status.weights_version == 1
    assert server.received[0][1] == {"model_path": "/ckpt/v1", "weight_version": "1"}
    await client.chat([USER], trajectory_id="t2")
    server.expect(WEIGHTS["update_from_disk_refused"], GEN["generate_v1"])
    with pytest.raises(
        ModelError,
        match=r"sglang http://127\.0\.0\.1:\d+ refused weights v2 \(/update_weights_from_disk "
        r"answered 400\): Failed to get weights iterator",
    ):
        await client.control.update_weights("/ckpt/v2", 2)
    (status,) = await client.control.list_backends()
    assert status.weights_version == 1
    await client.chat([USER], trajectory_id="t2")
    assert [c.weights_version for c in await client.calls("t2")] == [1, 1]


async def test_broadcast_in_buckets_and_a_refused_bucket_rolled_back(
    engine: tuple[ReplayServer, InProcessModelClient], tiny: Path
) -> None:
    server, client = engine
    backend = backend_of(client)
    assert isinstance(backend, GroupEngineControl)
    server.expect(WEIGHTS["init_weights_update_group"], WEIGHTS["update_from_distributed_bucket0"])
    server.expect(WEIGHTS["update_from_distributed_bucket1"], WEIGHTS["weight_version_2"])
    server.expect(GEN["generate_v2"])
    await backend.init_weight_group(GROUP)
    (served,) = await backend.update_weights_from_group(METAS, 2)
    assert served.weights_version == 2
    init, bucket0, bucket1 = (body for _, body in server.received[:3])
    assert init == {
        "master_address": "10.0.0.5", "master_port": 29555, "rank_offset": 1,
        "world_size": 2, "group_name": "megaflow_weights", "backend": "nccl",
    }  # fmt: skip
    assert (bucket0["names"], bucket1["names"]) == (["w.a", "w.b"], ["w.c"])
    assert bucket1["weight_version"] == "2"
    assert (await client.chat([USER])).weights_version == 2
    # bucket 1 of v3 refused: SGLang's weights are partly v3, so the base is loaded again
    server.expect(WEIGHTS["update_from_distributed_bucket0"])
    server.expect(WEIGHTS["update_from_distributed_bucket1_refused"])
    server.expect(WEIGHTS["update_from_disk"], WEIGHTS["weight_version_0"])
    server.expect(WEIGHTS["destroy_weights_update_group"])
    with pytest.raises(ModelError, match=r"sglang http://\S+ refused bucket 1 of v3") as err:
        await backend.update_weights_from_group(METAS, 3)
    assert "rolled back to v0" in str(err.value)
    assert server.received[-2][1] == {"model_path": str(tiny), "weight_version": "0"}
    assert backend.weights_version == 0
    await backend.close_weight_group()


async def test_pause_continue_and_abort(
    engine: tuple[ReplayServer, InProcessModelClient],
) -> None:
    server, client = engine
    backend = backend_of(client)
    server.expect(CONTROL["pause_in_place"], CONTROL["continue"], CONTROL["pause_abort"])
    server.expect(CONTROL["continue"], CONTROL["abort_one"], CONTROL["abort_all"])
    server.expect(WEIGHTS["weight_version_default"])
    await backend.pause("keep")
    await backend.resume()
    await backend.pause("abort")
    await backend.resume()
    assert isinstance(backend.engine, SGLangEngine)
    await backend.engine.abort("rid-1")
    await backend.abort_all()
    assert await backend.engine.served_version() == 0


async def test_an_engine_left_on_other_weights_is_refused_at_start(tiny: Path) -> None:
    async with replay_server() as server:
        server.expect(WEIGHTS["weight_version_2"])
        cfg = SGLangModelConfig(base_url=server.url, tokenizer=str(tiny))
        with pytest.raises(ModelError, match=r"sglang http://\S+ serves weights v2, not the base"):
            async with make_model_client(cfg):
                pass
        server.check_done()
