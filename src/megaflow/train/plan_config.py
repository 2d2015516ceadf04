"""What the sharding planner is told: the model's shape, the batch, the hardware.

A plan file (``megaflow train plan CONFIG``) holds these sections at its top
level or under a ``plan:`` key. The model is given by its shape, or by a
local transformers directory whose ``config.json`` is read (no weights, no
torch); the parameter count is computed from the shape unless given. See
``docs/train-scale.md``.

This module imports neither torch nor transformers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from megaflow.core.errors import ConfigError

GB = 1e9


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelShape(_Cfg):
    """A decoder-only transformer."""

    architecture: Literal["gpt2", "llama"] = Field(
        "llama",
        description="'gpt2': learned positions, GELU MLP (4h); 'llama': RoPE, SwiGLU MLP, "
        "grouped-query attention (Llama, Qwen, Mistral).",
    )
    path: str | None = Field(
        None, description="A local transformers model directory; its config.json gives the shape."
    )
    params: float | None = Field(None, gt=0, description="Parameter count; computed if None.")
    layers: int = Field(0, ge=0, description="Decoder blocks.")
    hidden: int = Field(0, ge=0, description="Hidden size h.")
    heads: int = Field(1, ge=1, description="Attention heads.")
    kv_heads: int | None = Field(None, ge=1, description="Key/value heads; `heads` if None.")
    ffn: int | None = Field(None, ge=1, description="MLP inner size; 4h (gpt2) if None.")
    vocab: int = Field(0, ge=0, description="Vocabulary size.")
    positions: int = Field(0, ge=0, description="Learned position embeddings (gpt2).")
    tied_embeddings: bool = Field(True, description="The output head shares the input embedding.")

    @property
    def ffn_size(self) -> int:
        return self.ffn or 4 * self.hidden

    @property
    def kv_dim(self) -> int:
        return self.hidden * (self.kv_heads or self.heads) // self.heads

    def layer_params(self) -> int:
        h, f, kv = self.hidden, self.ffn_size, self.kv_dim
        if self.architecture == "gpt2":
            return 4 * h * h + 2 * h * f + 9 * h + f  # qkv+proj, fc+proj, biases, 2 norms
        return 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h  # q,o; k,v; gate,up,down; 2 norms

    def param_count(self) -> float:
        if self.params is not None:
            return self.params
        emb = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        emb += self.positions * self.hidden
        return float(emb + self.layers * self.layer_params() + 2 * self.hidden)

    def activation_elements(self) -> int:
        """Elements autograd keeps per token and block, counted on the transformers
        implementations in eval mode (no dropout masks) with fused attention (no
        ``s x s`` scores): gpt2 keeps ~9h around attention and norms plus 5 tensors
        of the MLP width (its GELU is written as separate operations); llama keeps
        ~9h, 4 of the key/value width and 4 of the MLP width."""
        h, f, kv = self.hidden, self.ffn_size, self.kv_dim
        if self.architecture == "gpt2":
            return 9 * h + 5 * f
        return 9 * h + 4 * kv + 4 * f


def _from_path(path: Path, arch_default: str) -> dict[str, Any]:
    file = path / "config.json"
    try:
        cfg = json.loads(file.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"model.path: cannot read {file}: {e}") from None
    if cfg.get("model_type") == "gpt2":
        return {
            "architecture": "gpt2",
            "layers": cfg["n_layer"],
            "hidden": cfg["n_embd"],
            "heads": cfg["n_head"],
            "ffn": cfg.get("n_inner") or 4 * cfg["n_embd"],
            "vocab": cfg["vocab_size"],
            "positions": cfg.get("n_positions", 1024),
            "tied_embeddings": cfg.get("tie_word_embeddings", True),
        }
    try:
        return {
            "architecture": arch_default,
            "layers": cfg["num_hidden_layers"],
            "hidden": cfg["hidden_size"],
            "heads": cfg["num_attention_heads"],
            "kv_heads": cfg.get("num_key_value_heads"),
            "ffn": cfg["intermediate_size"],
            "vocab": cfg["vocab_size"],
            "tied_embeddings": cfg.get("tie_word_embeddings", False),
        }
    except KeyError as e:
        raise ConfigError(
            f"model.path: {file} has no {e.args[0]!r}; give the shape instead"
        ) from None


class BatchShape(_Cfg):
    micro_batch: int = Field(1, ge=1, description="Sequences per forward pass on one device.")
    seq_len: int = Field(2048, ge=1, description="Tokens per sequence.")
    micro_batches: int = Field(
        8, ge=1, description="Micro-batches per step (pipeline schedules fill with these)."
    )


class Hardware(_Cfg):
    device_memory_gb: float = Field(gt=0, description="Memory of one device (GPU, or CPU rank).")
    devices_per_node: int = Field(8, ge=1)
    nodes: int = Field(1, ge=1)
    intra_node_gbps: float = Field(
        300, gt=0, description="GB/s per device between devices of a node (NVLink)."
    )
    inter_node_gbps: float = Field(
        25, gt=0, description="GB/s per device between nodes (its share of the network)."
    )
    host_memory_gb: float = Field(1024, gt=0, description="Host memory of one node.")
    host_link_gbps: float = Field(25, gt=0, description="GB/s per device to host memory (PCIe).")
    usable: float = Field(
        0.9, gt=0, le=1, description="Share of device memory a plan may fill (fragmentation)."
    )
    overhead_gb: float = Field(
        1.0,
        ge=0,
        description="Memory of a device outside tensors (CUDA context, NCCL buffers); "
        "about 0 on CPU ranks.",
    )

    @property
    def world(self) -> int:
        return self.nodes * self.devices_per_node


class PlanConfig(_Cfg):
    """The ``plan:`` input: choose how to spread one model's training."""

    model: ModelShape
    batch: BatchShape = Field(default_factory=BatchShape)  # type: ignore[arg-type]
    hardware: Hardware
    precision: Literal["bf16", "fp32"] = Field(
        "bf16",
        description="Compute dtype of activations and of gathered weights; parameters, "
        "gradients and Adam's moments stay fp32 (16 bytes a parameter).",
    )
    activation_checkpointing: bool = Field(
        False, description="Keep only each block's input; recompute the rest in backward."
    )
    optimizer: Literal["adamw", "onebit_adam"] = Field(
        "adamw", description="onebit_adam needs unsharded gradients: DDP or pipeline only."
    )
    strategy: (
        Literal["auto", "ddp", "zero2", "zero3", "hsdp", "pipeline", "zero3_offload"] | None
    ) = Field("auto", description="'auto': the planner chooses; otherwise this one is evaluated.")

    @model_validator(mode="before")
    @classmethod
    def _read_model_dir(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("model"), dict):
            m = data["model"]
            if m.get("path"):
                shape = _from_path(Path(m["path"]), m.get("architecture", "llama"))
                data = {**data, "model": {**shape, **m}}
        return data

    @model_validator(mode="after")
    def _shape_known(self) -> PlanConfig:
        m = self.model
        if not (m.layers and m.hidden):
            raise ValueError("model: give layers and hidden (or a path to a model directory)")
        if m.params is None and not m.vocab:
            raise ValueError("model: give vocab (or params) to count the parameters")
        return self
