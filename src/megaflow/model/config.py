"""Model backend configs, tagged by ``type``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReplayModelConfig(_Cfg):
    """Plays a task's reference solution (or an empty patch, as a control)."""

    type: Literal["replay"] = "replay"
    play: Literal["gold", "empty"] = "gold"


class OpenAIModelConfig(_Cfg):
    """Any OpenAI-compatible server: vLLM, SGLang, a hosted API."""

    type: Literal["openai"] = "openai"
    base_url: str
    model: str
    api_key_env: str = Field("OPENAI_API_KEY", description="Variable holding the API key.")
    max_concurrency: int = Field(64, ge=1)
    timeout_s: float = Field(120, gt=0)


class TransformersModelConfig(_Cfg):
    """A local Hugging Face causal LM on CPU."""

    type: Literal["transformers"] = "transformers"
    model: str = Field(description="A local model directory.")
    max_new_tokens: int = Field(256, ge=1)


ModelConfig = Annotated[
    ReplayModelConfig | OpenAIModelConfig | TransformersModelConfig, Field(discriminator="type")
]
