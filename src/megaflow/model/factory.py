"""Build a model service and its client from a config; backends import lazily."""

from __future__ import annotations

from pathlib import Path

from megaflow.model.abstract import Backend
from megaflow.model.client import InProcessModelClient
from megaflow.model.config import (
    ModelConfig,
    OpenAIModelConfig,
    ReplayModelConfig,
    ScriptedModelConfig,
    TransformersModelConfig,
)
from megaflow.model.routing import Router
from megaflow.model.service import CallRecorder, ModelService


def make_backends(cfg: ModelConfig) -> list[Backend]:
    """One backend per replica of the configured model."""
    if isinstance(cfg, ReplayModelConfig):
        from megaflow.model.replay import ReplayBackend

        return [ReplayBackend(cfg.play, cfg.workdir, cfg.patch_path)]
    if isinstance(cfg, OpenAIModelConfig):
        from megaflow.model.openai_compat import OpenAIBackend

        return [
            OpenAIBackend.from_env(
                url,
                cfg.model,
                cfg.api_key_env,
                timeout_s=cfg.timeout_s,
                max_connections=cfg.max_concurrency,
                request_logprobs=cfg.request_logprobs,
            )
            for url in [cfg.base_url, *cfg.replicas]
        ]
    if isinstance(cfg, TransformersModelConfig):
        from megaflow.model.transformers_lm import TransformersBackend

        return [
            TransformersBackend(
                cfg.model, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature
            )
        ]
    if isinstance(cfg, ScriptedModelConfig):
        from megaflow.model.scripted import ScriptedBackend, tool_call

        steps = [tool_call("bash", {"command": c}, f"call_{n}") for n, c in enumerate(cfg.bash)]
        return [ScriptedBackend([*steps, tool_call("submit", {}, "call_submit")])]
    raise TypeError(f"unknown model config {type(cfg).__name__}")


def served_name(cfg: ModelConfig) -> str:
    if cfg.name:
        return cfg.name
    if isinstance(cfg, ReplayModelConfig):
        return f"replay-{cfg.play}"
    if isinstance(cfg, OpenAIModelConfig):
        return cfg.model
    if isinstance(cfg, ScriptedModelConfig):
        return "scripted"
    return Path(cfg.model).name or "transformers"


def make_model_service(cfg: ModelConfig, recorder: CallRecorder | None = None) -> ModelService:
    router = Router(
        make_backends(cfg),
        max_concurrency=cfg.max_concurrency,
        requests_per_s=cfg.requests_per_s,
        burst=cfg.burst,
        timeout_s=cfg.timeout_s,
        retries=cfg.retries,
    )
    return ModelService(served_name(cfg), router, recorder)


def make_model_client(cfg: ModelConfig) -> InProcessModelClient:
    """An in-process client owning its service: ``async with make_model_client(cfg) as c``."""
    return InProcessModelClient(make_model_service(cfg))
