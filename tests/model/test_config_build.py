"""Every model config builds its own backends and names its model; no type switch."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from megaflow.model import config, factory
from megaflow.model.abstract import Backend

MEMBERS = typing.get_args(typing.get_args(config.ModelConfig)[0])
REQUIRED: dict[str, dict[str, object]] = {
    "OpenAIModelConfig": {"base_url": "http://a/v1", "model": "m", "replicas": ["http://b/v1"]},
    "TransformersModelConfig": {"model": "/models/tiny-lm"},
    "VLLMModelConfig": {"base_url": "http://a:8000", "model": "m", "tokenizer": "/models/tiny-lm"},
    "SGLangModelConfig": {"base_url": "http://a:30000", "tokenizer": "/models/tiny-lm"},
}
NAMES = {
    "ReplayModelConfig": "replay-gold",
    "OpenAIModelConfig": "m",
    "TransformersModelConfig": "tiny-lm",
    "ScriptedModelConfig": "scripted",
    "VLLMModelConfig": "m",
    "SGLangModelConfig": "tiny-lm",
}


@pytest.mark.parametrize("cls", MEMBERS, ids=lambda c: c.__name__)
def test_each_member_builds_through_its_own_method(cls: type) -> None:
    assert "backends" in vars(cls)
    assert "default_name" in vars(cls)
    cfg = cls(**REQUIRED.get(cls.__name__, {}))
    backends = cfg.backends()  # loads and connects nothing until start()
    assert backends
    assert all(isinstance(b, Backend) for b in backends)
    assert len(backends) == (2 if cls.__name__ == "OpenAIModelConfig" else 1)
    assert factory.served_name(cfg) == NAMES[cls.__name__]
    assert cls(**REQUIRED.get(cls.__name__, {}), name="served").served_name() == "served"


def test_factory_has_no_type_switch() -> None:
    assert "isinstance" not in Path(factory.__file__).read_text()
