"""The sharding planner: its choices, and its memory predictions against real steps.

The measured half runs one training step of each strategy that runs on CPU
ranks (ddp, zero2, zero3, hsdp) on two gloo ranks with a tiny GPT-2 and
compares the peak resident memory the step added with the prediction.
"""

from __future__ import annotations

import ctypes
import gc
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from megaflow.train.local_ranks import run_ranks
from megaflow.train.plan_config import GB, PlanConfig
from megaflow.train.planner import plan

LLAMA_70B = {
    "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn": 28672,
    "vocab": 128256, "tied_embeddings": False,
}  # fmt: skip
QWEN_05B = {
    "layers": 24, "hidden": 896, "heads": 14, "kv_heads": 2, "ffn": 4864,
    "vocab": 151936, "tied_embeddings": True,
}  # fmt: skip
MEASURED = ("ddp", "zero2", "zero3", "hsdp")


def _nodes(n: int, gb: float = 80) -> dict[str, Any]:
    return {"device_memory_gb": gb, "devices_per_node": 8, "nodes": n, "inter_node_gbps": 50}


def _plan(model: dict[str, Any], hardware: dict[str, Any], **kw: Any) -> Any:
    batch = {"micro_batch": 1, "seq_len": 4096}
    return plan(PlanConfig(model=model, hardware=hardware, batch=batch, **kw))


@pytest.mark.parametrize("nodes", [4, 16])
def test_seventy_billion_on_nodes_of_eight_80gb_gpus_is_zero3(nodes: int) -> None:
    p = _plan(LLAMA_70B, _nodes(nodes), activation_checkpointing=True)
    assert 69e9 < p.params < 72e9
    assert p.choice is not None
    assert p.choice.strategy == "zero3"
    assert p.choice.device_bytes < 80 * 0.9 * GB
    assert any("> 50B" in r for r in p.reasons)


def test_over_fifty_billion_never_gets_ddp_or_zero2_even_if_it_fits() -> None:
    p = _plan(LLAMA_70B, _nodes(1, gb=4000), activation_checkpointing=True)
    ddp = next(e for e in p.estimates if e.strategy == "ddp")
    assert ddp.fits  # it would fit in 4 TB ...
    assert p.choice is not None
    assert p.choice.strategy not in ("ddp", "zero2")  # ... and is still not taken


def test_a_model_that_fits_gets_ddp() -> None:
    p = _plan(QWEN_05B, _nodes(1))
    assert p.choice is not None
    assert p.choice.strategy == "ddp"
    assert "chosen" in p.reasons[-1]


@pytest.mark.parametrize("nodes", [1, 2])
def test_seventy_billion_on_one_or_two_nodes_offloads(nodes: int) -> None:
    hardware = {**_nodes(nodes), "host_memory_gb": 2048}
    p = _plan(LLAMA_70B, hardware, activation_checkpointing=True)
    zero3 = next(e for e in p.estimates if e.strategy == "zero3")
    assert not zero3.fits  # 16 bytes x 70B over 8 or 16 devices: 141 or 71 GB of state alone
    assert p.choice is not None
    assert p.choice.strategy == "zero3_offload"
    assert p.choice.host_bytes == pytest.approx(16 * p.params / nodes)


def test_nothing_fits_says_so() -> None:
    p = _plan(LLAMA_70B, {"device_memory_gb": 1, "devices_per_node": 1, "host_memory_gb": 8})
    assert p.choice is None
    assert "nothing fits" in p.reasons[-1]


def test_a_model_directory_gives_the_exact_parameter_count(tiny_lm: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_lm)
    cfg = PlanConfig(model={"path": str(tiny_lm)}, hardware={"device_memory_gb": 1})
    assert cfg.model.architecture == "gpt2"
    assert cfg.model.param_count() == sum(p.numel() for p in model.parameters())


def test_bad_input_names_the_field_or_file(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=r"config\.json"):
        PlanConfig(model={"path": str(tmp_path)}, hardware={"device_memory_gb": 1})
    with pytest.raises(ValidationError, match="layers and hidden"):
        PlanConfig(model={"vocab": 10}, hardware={"device_memory_gb": 1})
    with pytest.raises(ValidationError, match="device_memory_gb"):
        PlanConfig(model=QWEN_05B, hardware={})


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key} in /proc/self/status")


def _measure_rank(rank: int, world: int, model_dir: str) -> dict[str, float]:
    """Peak resident memory a training step adds, per strategy, on this rank."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from megaflow.train.sharding import shard

    # every allocation of 64 KiB or more gets its own mapping, returned on free, so the
    # resident size follows the live tensors instead of what the heap once held
    ctypes.CDLL("libc.so.6").mallopt(-3, 65536)  # M_MMAP_THRESHOLD
    config = AutoConfig.from_pretrained(model_dir)
    with torch.device("meta"):
        AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]  # imports the model's code outside the count
    peaks = {}
    for strategy in MEASURED:
        gc.collect()
        base = _status("VmRSS")
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config).eval()  # type: ignore[no-untyped-call]  # anonymous memory, no mmap
        wrapped = shard(model, strategy, devices_per_node=1 if strategy == "hsdp" else world)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(3, config.vocab_size, (2, 64))
        for _ in range(2):  # the second step has every buffer and optimizer state
            gc.collect()
            Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM)
            opt.zero_grad(set_to_none=True)
            wrapped(input_ids=ids, labels=ids).loss.backward()
            opt.step()
        peaks[strategy] = float(_status("VmHWM") - base)
        del wrapped, model, opt
    return peaks


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, float]]]:
    from megaflow.model.transformers_lm import build_tiny_model

    model_dir = build_tiny_model(tmp_path_factory.mktemp("lm512"), dim=512, layers=4)
    return model_dir, run_ranks(_measure_rank, 2, str(model_dir))


@pytest.mark.slow
@pytest.mark.parametrize("strategy", MEASURED)
def test_measured_peak_is_within_25_percent_of_the_prediction(
    measured: tuple[Path, list[dict[str, float]]], strategy: str
) -> None:
    model_dir, ranks = measured
    nodes, per_node = (2, 1) if strategy == "hsdp" else (1, 2)
    hardware = {
        "device_memory_gb": 64, "nodes": nodes, "devices_per_node": per_node,
        "overhead_gb": 0,
    }  # fmt: skip
    cfg = PlanConfig(
        model={"path": str(model_dir)},
        hardware=hardware,
        batch={"micro_batch": 2, "seq_len": 64},
        precision="fp32",
        strategy=strategy,
    )
    predicted = plan(cfg).choice
    assert predicted is not None
    for peak in ranks:
        assert abs(peak[strategy] - predicted.device_bytes) <= 0.25 * predicted.device_bytes, (
            f"{strategy}: measured {peak[strategy] / 2**20:.0f} MiB, predicted "
            f"{predicted.device_bytes / 2**20:.0f} MiB"
        )


def test_the_plan_command_prints_the_choice_and_writes_a_deepspeed_config(
    tmp_path: Path,
) -> None:
    import json

    import yaml
    from typer.testing import CliRunner

    from megaflow.cli.main import app

    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(yaml.safe_dump({"plan": {"model": QWEN_05B, "hardware": _nodes(1)}}))
    ds = tmp_path / "ds.json"
    done = CliRunner().invoke(app, ["plan", str(plan_file), "--deepspeed", str(ds)])
    assert done.exit_code == 0, done.output
    assert "plan: ddp" in done.output
    assert json.loads(ds.read_text())["zero_optimization"] == {"stage": 0}

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"model": {"layers": "many"}, "hardware": _nodes(1)}))
    done = CliRunner().invoke(app, ["plan", str(bad)])
    assert done.exit_code == 2
    assert "model.layers" in done.output
    assert "Traceback" not in done.output
