"""Build a model service and its client from a config; backends import lazily."""

from __future__ import annotations

from megaflow.model.abstract import Backend
from megaflow.model.client import InProcessModelClient
from megaflow.model.config import ModelConfig
from megaflow.model.routing import Router
from megaflow.model.service import CallRecorder, ModelService


def make_backends(cfg: ModelConfig) -> list[Backend]:
    """One backend per replica of the configured model."""
    return cfg.backends()


def served_name(cfg: ModelConfig) -> str:
    return cfg.served_name()


def make_model_service(cfg: ModelConfig, recorder: CallRecorder | None = None) -> ModelService:
    router = Router(
        make_backends(cfg),
        max_concurrency=cfg.max_concurrency,
        requests_per_s=cfg.requests_per_s,
        burst=cfg.burst,
        timeout_s=cfg.timeout_s,
        retries=cfg.retries,
        health=cfg.health,
    )
    return ModelService(served_name(cfg), router, recorder)


def make_model_client(cfg: ModelConfig) -> InProcessModelClient:
    """An in-process client owning its service: ``async with make_model_client(cfg) as c``."""
    return InProcessModelClient(make_model_service(cfg))
