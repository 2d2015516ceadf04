"""Model backend configs, tagged by ``type``.

Each config describes one backend: its replicas, and how the gateway routes
to them (concurrency cap, token bucket, timeout, retries on transport errors).
Each config builds its own backends (``backends()``), importing the backend's
module only then, and names the model it serves (``served_name()``).
"""

from __future__ import annotations

import abc
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from megaflow.core.errors import ConfigError
from megaflow.model.launch_config import EngineLaunchConfig

if TYPE_CHECKING:
    from megaflow.model.abstract import Backend


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HealthCheckConfig(_Cfg):
    """Periodic probes of each replica (:mod:`megaflow.model.health`)."""

    interval_s: float = Field(5.0, gt=0, description="Seconds between two probes of a replica.")
    timeout_s: float = Field(
        5.0, gt=0, description="Longest wait for a probe's answer; past it the probe failed."
    )
    failures: int = Field(
        2, ge=1, le=100, description="Failed probes in a row that take a replica out of rotation."
    )


class _Routed(_Cfg):
    max_concurrency: int = Field(64, ge=1, description="Requests in flight to this backend.")
    requests_per_s: float | None = Field(
        None, gt=0, description="Token-bucket rate of requests; None means unlimited."
    )
    burst: int = Field(16, ge=1, description="Token-bucket size: requests allowed at once.")
    timeout_s: float = Field(120, gt=0, description="Longest wait for one backend answer.")
    retries: int = Field(2, ge=0, le=10, description="Extra tries after a transport error.")
    name: str | None = Field(None, description="Model name served by the gateway.")
    health: HealthCheckConfig | None = Field(
        None,
        description="Probe every replica and take a dead or hung one out of rotation; "
        "None sends no probes.",
    )

    @abc.abstractmethod
    def backends(self) -> list[Backend]:
        """One backend per replica of the configured model."""

    @abc.abstractmethod
    def default_name(self) -> str:
        """The served name when ``name`` is not set."""

    def served_name(self) -> str:
        return self.name or self.default_name()

    def weight_forms(self) -> frozenset[str]:
        """How this backend takes new weights: ``tensors`` (a state dict in this
        process), ``path`` (a checkpoint it reads); none if it cannot."""
        return frozenset()


class ReplayModelConfig(_Routed):
    """Plays a task's reference solution (or an empty patch, as a control)."""

    type: Literal["replay"] = "replay"
    play: Literal["gold", "empty"] = Field(
        "gold", description="'gold' applies the reference patch; 'empty' submits no change."
    )
    workdir: str = Field("/workspace", description="Repository directory in the sandbox.")
    patch_path: str = Field("/tmp/megaflow-gold.patch", description="Where the patch is written.")

    def backends(self) -> list[Backend]:
        from megaflow.model.replay import ReplayBackend

        return [ReplayBackend(self.play, self.workdir, self.patch_path)]

    def default_name(self) -> str:
        return f"replay-{self.play}"


class OpenAIModelConfig(_Routed):
    """Any OpenAI-compatible server: vLLM, SGLang, a hosted API. The chat is rendered
    by the server; for token-in rollouts from vLLM or SGLang use the ``vllm`` or
    ``sglang`` model types."""

    type: Literal["openai"] = "openai"
    base_url: str | None = Field(
        None,
        description="Base URL including /v1, e.g. http://host:8000/v1; required unless "
        "launch is set.",
    )
    model: str = Field(description="Model name sent upstream.")
    replicas: list[str] = Field(
        default_factory=list, description="More base URLs serving the same model."
    )
    api_key_env: str = Field("OPENAI_API_KEY", description="Variable holding the API key.")
    request_logprobs: bool = Field(
        False, description="Ask upstream for logprobs (and token ids, on vLLM)."
    )
    weight_sync: Literal["none", "vllm", "sglang", "megaflow"] = Field(
        "none",
        description="How new weights reach the server: 'vllm' (dev-mode /collective_rpc "
        "reload), 'sglang' (/update_weights_from_disk), 'megaflow' (MegaFlow's own engine, "
        "/v1/weights), or 'none' (it cannot take them).",
    )
    weight_sync_timeout_s: float = Field(
        600, gt=0, description="Longest wait for the server to load new weights."
    )
    launch: EngineLaunchConfig | None = Field(
        None,
        description="`megaflow train` starts these engines of the train policy itself, "
        "with a token of its own, and stops them when the run ends (needs weight_sync "
        "megaflow; base_url, replicas and api_key_env are then its own).",
    )
    _api_key: str | None = PrivateAttr(None)
    """The token of launched engines, kept in memory only (``launched``)."""

    @model_validator(mode="after")
    def _address_or_launch(self) -> OpenAIModelConfig:
        if self.launch is None and self.base_url is None:
            raise ValueError("base_url is required unless launch starts the engines")
        if self.launch is not None and (self.base_url is not None or self.replicas):
            raise ValueError(
                "base_url and replicas name engines already running, launch starts them: "
                "give one or the other"
            )
        if self.launch is not None and self.weight_sync != "megaflow":
            raise ValueError(
                f"launch starts MegaFlow's own engines, which take weight_sync 'megaflow', "
                f"not {self.weight_sync!r}"
            )
        return self

    def launched(self, urls: list[str], token: str) -> OpenAIModelConfig:
        """This config pointed at engines the run started, with their token (in memory)."""
        out = self.model_copy(update={"base_url": urls[0], "replicas": urls[1:], "launch": None})
        out._api_key = token
        return out

    def backends(self) -> list[Backend]:
        from megaflow.model.openai_compat import OpenAIBackend

        if self.base_url is None:
            raise ConfigError(
                "model.launch: the engines are started by `megaflow train` only; give "
                "model.base_url to use engines that are already running",
                [("model.launch", "engines not started")],
            )
        key = self._api_key or os.environ.get(self.api_key_env)
        return [
            OpenAIBackend(
                url,
                self.model,
                api_key=key,
                timeout_s=self.timeout_s,
                max_connections=self.max_concurrency,
                request_logprobs=self.request_logprobs,
                weight_sync=self.weight_sync,
                weight_sync_timeout_s=self.weight_sync_timeout_s,
            )
            for url in [self.base_url, *self.replicas]
        ]

    def default_name(self) -> str:
        return self.model

    def weight_forms(self) -> frozenset[str]:
        if self.weight_sync == "megaflow":
            return frozenset({"path", "broadcast"})  # MegaFlow's engine joins the group too
        return frozenset() if self.weight_sync == "none" else frozenset({"path"})


class _EngineCfg(_Routed):
    """An inference engine driven token-in through its own routes (``model/engines/``)."""

    base_url: str = Field(description="The server's root URL, e.g. http://host:8000 (no /v1).")
    replicas: list[str] = Field(
        default_factory=list, description="More root URLs of servers serving the same model."
    )
    tokenizer: str = Field(
        description="Directory of the served model (its tokenizer and chat template render "
        "the prompts here, token-in); the trainer's train.policy. Also the checkpoint a "
        "failed update at version 0 is rolled back to, so the engine must read it too."
    )
    api_key_env: str = Field("OPENAI_API_KEY", description="Variable holding the API key.")
    max_new_tokens: int = Field(256, ge=1, description="Default generation length.")
    temperature: float = Field(
        1.0, ge=0, description="Sampling temperature when a request sets none; 0 is greedy."
    )
    max_token_states: int = Field(
        1024, ge=1, description="Trajectories whose tokens are kept for token-in prompts."
    )
    weight_sync_timeout_s: float = Field(
        600, gt=0, description="Longest wait for the server to load new weights."
    )
    workers: int = Field(
        1,
        ge=1,
        description="GPU workers of each server (its tensor x pipeline parallel size); each "
        "joins a broadcast weight group as one rank.",
    )

    def roots(self) -> list[str]:
        return [u.rstrip("/") for u in [self.base_url, *self.replicas]]

    def _backend(self, engine: Any) -> Backend:
        from megaflow.model.engines.backend import EngineBackend
        from megaflow.model.engines.chat_tokens import ChatTokens

        return EngineBackend(
            engine,
            ChatTokens(self.tokenizer, max_states=self.max_token_states),
            base_path=self.tokenizer,
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            workers=self.workers,
        )

    def weight_forms(self) -> frozenset[str]:
        return frozenset({"path", "broadcast"})


class VLLMModelConfig(_EngineCfg):
    """A vLLM server, token-in through ``/v1/completions``; weights through its
    dev-mode routes (``VLLM_SERVER_DEV_MODE=1``), broadcast through a worker
    extension (``--worker-extension-cls``)."""

    type: Literal["vllm"] = "vllm"
    model: str = Field(description="The served model name (vLLM's --served-model-name).")

    def backends(self) -> list[Backend]:
        from megaflow.model.engines.vllm import VLLMEngine

        key = os.environ.get(self.api_key_env)
        return [
            self._backend(
                VLLMEngine(
                    root,
                    self.model,
                    api_key=key,
                    timeout_s=self.timeout_s,
                    weights_timeout_s=self.weight_sync_timeout_s,
                    max_connections=self.max_concurrency,
                )
            )
            for root in self.roots()
        ]

    def default_name(self) -> str:
        return self.model


class SGLangModelConfig(_EngineCfg):
    """An SGLang server, token-in through its native ``/generate``; weights through
    ``/update_weights_from_disk`` and ``/update_weights_from_distributed``."""

    type: Literal["sglang"] = "sglang"

    def backends(self) -> list[Backend]:
        from megaflow.model.engines.sglang import SGLangEngine

        key = os.environ.get(self.api_key_env)
        return [
            self._backend(
                SGLangEngine(
                    root,
                    api_key=key,
                    timeout_s=self.timeout_s,
                    weights_timeout_s=self.weight_sync_timeout_s,
                    max_connections=self.max_concurrency,
                )
            )
            for root in self.roots()
        ]

    def default_name(self) -> str:
        return Path(self.tokenizer).name or "sglang"


class TransformersModelConfig(_Routed):
    """A local Hugging Face causal LM on CPU."""

    type: Literal["transformers"] = "transformers"
    model: str = Field(description="A local model directory (weights, config, tokenizer).")
    max_new_tokens: int = Field(256, ge=1, description="Default generation length.")
    temperature: float = Field(0.0, ge=0, description="0 means greedy decoding.")
    max_concurrency: int = Field(1, ge=1, description="Generations at once.")
    max_token_states: int = Field(
        1024, ge=1, description="Trajectories whose tokens are kept for token-in prompts."
    )
    update_in_flight: Literal["finish", "resume"] = Field(
        "finish",
        description="A generation in flight when new weights arrive: 'finish' completes it "
        "on the old weights; 'resume' stops it at its next token and finishes it on the new "
        "weights, keeping its tokens and recording each segment's version "
        "(megaflow.model.partial).",
    )

    def backends(self) -> list[Backend]:
        from megaflow.model.transformers_lm import TransformersBackend

        return [
            TransformersBackend(
                self.model,
                max_new_tokens=self.max_new_tokens,
                temperature=self.temperature,
                max_token_states=self.max_token_states,
                update_in_flight=self.update_in_flight,
            )
        ]

    def default_name(self) -> str:
        return Path(self.model).name or "transformers"

    def weight_forms(self) -> frozenset[str]:
        return frozenset({"tensors", "path", "broadcast"})


class ScriptedModelConfig(_Routed):
    """Answers every task with the same tool calls: each command through the
    ``bash`` tool, then ``submit``. A scripted agent for smoke tests and for
    attacking the sandbox and the grader on purpose."""

    type: Literal["scripted"] = "scripted"
    bash: list[str] = Field(
        default_factory=list, description="Shell commands, run one per turn, in order."
    )

    def backends(self) -> list[Backend]:
        from megaflow.model.scripted import ScriptedBackend, tool_call

        steps = [tool_call("bash", {"command": c}, f"call_{n}") for n, c in enumerate(self.bash)]
        return [ScriptedBackend([*steps, tool_call("submit", {}, "call_submit")])]

    def default_name(self) -> str:
        return "scripted"


ModelConfig = Annotated[
    ReplayModelConfig
    | OpenAIModelConfig
    | VLLMModelConfig
    | SGLangModelConfig
    | TransformersModelConfig
    | ScriptedModelConfig,
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
