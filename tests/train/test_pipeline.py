"""Pipeline parallelism on two gloo ranks: loss and gradients equal the unsplit model's."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from megaflow.core.errors import ConfigError
from megaflow.train.local_ranks import run_ranks

SCHEDULES = ("gpipe", "1f1b", "interleaved")


def _reference_name(stage: Any, name: str) -> str:
    """The unsplit model's name of a stage parameter."""
    if name.startswith("blocks."):
        j, rest = name.removeprefix("blocks.").split(".", 1)
        return f"transformer.h.{stage.lo + int(j)}.{rest}"
    if name == "head.weight":
        return "transformer.wte.weight"  # tied: the whole gradient of the shared matrix
    return "transformer." + name


def _rank(rank: int, world: int, model_dir: str) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM

    from megaflow.train.pipeline import Pipeline

    def load() -> Any:
        return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()

    ids = torch.randint(3, 60, (8, 16), generator=torch.Generator().manual_seed(3))
    ref = load()
    loss = ref(input_ids=ids, labels=ids).loss
    loss.backward()
    ref_grads = {n: p.grad for n, p in ref.named_parameters() if p.grad is not None}
    out: dict[str, Any] = {"reference": float(loss)}
    for schedule in SCHEDULES:
        pipe = Pipeline(load(), schedule=schedule, micro_batches=4)
        step = pipe.step(ids)
        worst = 0.0
        for module in pipe.modules:
            for name, p in module.named_parameters():
                want = ref_grads[_reference_name(module, name)]
                assert p.grad is not None, name
                worst = max(worst, float((p.grad - want).abs().max()))
        out[schedule] = {"loss": step.loss, "grad_diff": worst, "bubble": step.bubble}
    try:
        Pipeline(load(), schedule="1f1b", micro_batches=1)
    except ConfigError as e:
        out["refused"] = str(e)
    return out


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    from megaflow.model.transformers_lm import build_tiny_model

    model_dir = build_tiny_model(tmp_path_factory.mktemp("lm4"), layers=4)
    return run_ranks(_rank, 2, str(model_dir))


@pytest.mark.slow
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_pipeline_loss_equals_the_unsplit_loss(ranks: list[dict[str, Any]], schedule: str) -> None:
    first, last = ranks
    assert first[schedule]["loss"] is None  # only the last stage sees the loss
    assert last[schedule]["loss"] == pytest.approx(last["reference"], rel=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_pipeline_gradients_equal_the_unsplit_ones(
    ranks: list[dict[str, Any]], schedule: str
) -> None:
    for r in ranks:
        assert r[schedule]["grad_diff"] < 1e-5


@pytest.mark.slow
def test_fewer_micro_batches_than_ranks_is_refused(ranks: list[dict[str, Any]]) -> None:
    assert "micro_batches" in ranks[0]["refused"]
