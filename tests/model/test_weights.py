"""New weights into a live transformers backend: in place, checked, versioned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from megaflow.core.errors import InvalidInput, ModelError
from megaflow.model.client import InProcessModelClient
from megaflow.model.config import TransformersModelConfig
from megaflow.model.factory import make_model_client
from megaflow.model.routing import Router
from megaflow.model.scripted import ScriptedBackend
from megaflow.model.service import ModelService
from megaflow.model.transformers_lm import build_tiny_model
from megaflow.model.weights import read_weights

MSGS = [{"role": "user", "content": "fix the bug in the python code"}]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two tiny models with the same shapes and different random weights."""
    return (
        build_tiny_model(tmp_path_factory.mktemp("tiny-a"), seed=0),
        build_tiny_model(tmp_path_factory.mktemp("tiny-b"), seed=1),
    )


def _client(model: Path) -> InProcessModelClient:
    return make_model_client(TransformersModelConfig(model=str(model), max_new_tokens=8))


async def _greedy(model: Path) -> list[int]:
    async with _client(model) as client:
        return (await client.chat(MSGS)).token_ids or []


@pytest.mark.slow
async def test_state_dict_and_paths_swap_in_place_and_bump_the_version(
    models: tuple[Path, Path],
) -> None:
    a, b = models
    want_a, want_b = await _greedy(a), await _greedy(b)
    assert want_a != want_b
    async with _client(a) as client:
        model = client.service.router.replicas[0].backend._model  # type: ignore[attr-defined]
        (status,) = await client.control.update_weights(read_weights(b), 1)
        assert status.weights_version == 1
        out = await client.chat(MSGS, trajectory_id="t")
        assert out.token_ids == want_b
        assert out.weights_version == 1
        (call,) = await client.calls("t")
        assert call.weights_version == 1
        await client.control.update_weights(str(a / "model.safetensors"), 2)  # a file
        assert (await client.chat(MSGS)).token_ids == want_a
        await client.control.update_weights(str(b), 3)  # a model directory
        last = await client.chat(MSGS)
        assert (last.token_ids, last.weights_version) == (want_b, 3)
        assert client.service.router.replicas[0].backend._model is model  # type: ignore[attr-defined]
        assert [s.weights_version for s in await client.control.list_backends()] == [3]


@pytest.mark.slow
async def test_wrong_weights_are_refused_and_nothing_changes(
    models: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = models
    want_a = await _greedy(a)
    wider = build_tiny_model(tmp_path / "wider", dim=48)
    weights = read_weights(b)
    name = "transformer.h.0.ln_1.weight"
    wrong_name = {**weights, "transformer.h.9.extra": weights[name]}
    no_tensor: dict[str, Any] = {**weights, name: [1.0, 2.0]}
    missing = {k: v for k, v in weights.items() if k != name}
    async with _client(a) as client:
        for bad, match in [
            (read_weights(wider), "has shape"),
            (wrong_name, "names the model does not"),
            (no_tensor, "not a tensor"),
            (missing, "lack 1 of the model's tensors"),
            (str(tmp_path / "absent"), "does not exist"),
            (str(tmp_path), r"no \*\.safetensors file"),
        ]:
            with pytest.raises(InvalidInput, match=match):
                await client.control.update_weights(bad, 1)
        assert (await client.chat(MSGS)).token_ids == want_a
        (status,) = await client.control.list_backends()
        assert status.weights_version == 0
        await client.control.update_weights(weights, 2)
        with pytest.raises(InvalidInput, match="not newer than the served version 2"):
            await client.control.update_weights(weights, 2)


async def test_a_backend_without_weights_refuses_them() -> None:
    service = ModelService("scripted", Router([ScriptedBackend([{"content": "x"}])]))
    async with InProcessModelClient(service) as client:
        with pytest.raises(ModelError, match="cannot take new weights"):
            await client.control.update_weights("/nowhere", 1)
        (status,) = await client.control.list_backends()
    assert status.weights_version == 0
