"""Model backend configs, tagged by ``type``.

Each config describes one backend: its replicas, and how the gateway routes
to them (concurrency cap, token bucket, timeout, retries on transport errors).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Routed(_Cfg):
    max_concurrency: int = Field(64, ge=1, description="Requests in flight to this backend.")
    requests_per_s: float | None = Field(
        None, gt=0, description="Token-bucket rate of requests; None means unlimited."
    )
    burst: int = Field(16, ge=1, description="Token-bucket size: requests allowed at once.")
    timeout_s: float = Field(120, gt=0, description="Longest wait for one backend answer.")
    retries: int = Field(2, ge=0, le=10, description="Extra tries after a transport error.")
    name: str | None = Field(None, description="Model name served by the gateway.")


class ReplayModelConfig(_Routed):
    """Plays a task's reference solution (or an empty patch, as a control)."""

    type: Literal["replay"] = "replay"
    play: Literal["gold", "empty"] = Field(
        "gold", description="'gold' applies the reference patch; 'empty' submits no change."
    )
    workdir: str = Field("/workspace", description="Repository directory in the sandbox.")
    patch_path: str = Field("/tmp/megaflow-gold.patch", description="Where the patch is written.")


class OpenAIModelConfig(_Routed):
    """Any OpenAI-compatible server: vLLM, SGLang, a hosted API."""

    type: Literal["openai"] = "openai"
    base_url: str = Field(description="Base URL including /v1, e.g. http://host:8000/v1.")
    model: str = Field(description="Model name sent upstream.")
    replicas: list[str] = Field(
        default_factory=list, description="More base URLs serving the same model."
    )
    api_key_env: str = Field("OPENAI_API_KEY", description="Variable holding the API key.")
    request_logprobs: bool = Field(
        False, description="Ask upstream for logprobs (and token ids, on vLLM)."
    )


class TransformersModelConfig(_Routed):
    """A local Hugging Face causal LM on CPU."""

    type: Literal["transformers"] = "transformers"
    model: str = Field(description="A local model directory (weights, config, tokenizer).")
    max_new_tokens: int = Field(256, ge=1, description="Default generation length.")
    temperature: float = Field(0.0, ge=0, description="0 means greedy decoding.")
    max_concurrency: int = Field(1, ge=1, description="Generations at once.")


class ScriptedModelConfig(_Routed):
    """Answers every task with the same tool calls: each command through the
    ``bash`` tool, then ``submit``. A scripted agent for smoke tests and for
    attacking the sandbox and the grader on purpose."""

    type: Literal["scripted"] = "scripted"
    bash: list[str] = Field(
        default_factory=list, description="Shell commands, run one per turn, in order."
    )


ModelConfig = Annotated[
    ReplayModelConfig | OpenAIModelConfig | TransformersModelConfig | ScriptedModelConfig,
    Field(discriminator="type"),
]


class GatewayConfig(_Cfg):
    """The standalone gateway: where it listens and which backend it fronts."""

    host: str = Field("127.0.0.1", description="Address to bind.")
    port: int = Field(8000, ge=0, le=65535, description="Port to bind; 0 picks a free one.")
    model: ModelConfig = Field(default_factory=ReplayModelConfig)
    max_body_mb: int = Field(
        16, ge=1, le=4096, description="Largest request body in MiB; a larger one gets HTTP 413."
    )
