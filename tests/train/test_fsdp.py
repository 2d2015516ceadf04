"""FSDP2 on two real gloo ranks takes the same update as one process."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from megaflow.train.config import TrainerConfig
from megaflow.train.launch import start
from megaflow.train.samples import TrainingSample
from tests.train.conftest import sample


def groups(seed: int = 0) -> list[list[TrainingSample]]:
    """Two groups of uneven lengths: five samples do not split evenly over two ranks."""
    rng = random.Random(seed)
    out = []
    for g, rewards in enumerate([(1.0, 0.0, 0.5), (0.0, 1.0)]):
        group = []
        for i, r in enumerate(rewards):
            n = rng.randint(2, 6)
            group.append(
                sample(
                    f"g{g}s{i}",
                    r,
                    group=f"g{g}",
                    prompt=[rng.randint(3, 60) for _ in range(rng.randint(1, 4))],
                    completion=[rng.randint(3, 60) for _ in range(n)],
                    mask=[1] + [rng.randint(0, 1) for _ in range(n - 1)],
                    logprobs=[-rng.uniform(2, 6) for _ in range(n)],
                )
            )
        out.append(group)
    return out


def _run(model_dir: Path, cfg: TrainerConfig) -> tuple[dict[str, torch.Tensor], list[float]]:
    trainer = start(model_dir, cfg)
    assert trainer is not None
    with trainer:
        first = trainer.step(groups(0))
        second = trainer.step(groups(1))
        assert trainer.weights_version == 2
        weights = trainer.state_dict_for_inference()
    return weights, [first.loss, first.grad_norm, second.loss, first.tokens, first.clip_fraction]


@pytest.mark.slow
def test_two_gloo_ranks_match_one_process(tiny_lm: Path) -> None:
    base = {"lr": 1e-2, "grad_clip": 0.5, "weight_decay": 0.01, "kl_coef": 0.1}
    one, one_stats = _run(tiny_lm, TrainerConfig(**base, micro_batch=2))
    two, two_stats = _run(
        tiny_lm, TrainerConfig(**base, micro_batch=1, world_size=2, backend="gloo")
    )
    assert set(one) == set(two)
    moved = 0
    for name, w in one.items():
        assert torch.allclose(w, two[name], atol=2e-5, rtol=1e-4), name
    from transformers import AutoModelForCausalLM

    initial = AutoModelForCausalLM.from_pretrained(tiny_lm, local_files_only=True).state_dict()
    moved = sum(not torch.allclose(initial[k], one[k]) for k in one)
    assert moved > len(one) // 2  # the update is real, not a no-op on both sides
    assert one_stats == pytest.approx(two_stats, rel=1e-4, abs=1e-6)


@pytest.mark.slow
async def test_checkpoints_move_between_one_process_and_two_ranks(
    tiny_lm: Path, tmp_path: Path
) -> None:
    """A checkpoint holds the full state, so the world size may change on resume:
    two ranks restore one process's checkpoint (broadcast from rank 0) and
    continue with the same update; one process restores theirs (gathered)."""
    from megaflow.storage.local_artifacts import LocalArtifactStore

    store = LocalArtifactStore(tmp_path)
    await store.start()
    cfg = TrainerConfig(lr=1e-2)
    one = start(tiny_lm, cfg)
    assert one is not None
    with one:
        one.step(groups(0))
        await one.save_checkpoint(store, {"at": 1})
        one.step(groups(1))
        expected = one.state_dict_for_inference()
    two = start(tiny_lm, cfg.model_copy(update={"world_size": 2, "backend": "gloo"}))
    assert two is not None
    with two:
        assert await two.resume(store) == {"at": 1}
        two.step(groups(1))
        got = two.state_dict_for_inference()
        await two.save_checkpoint(store, {"at": 2})
    for name, w in expected.items():
        assert torch.allclose(w, got[name], atol=2e-5, rtol=1e-4), name
    back = start(tiny_lm, cfg)
    assert back is not None
    with back:
        assert await back.resume(store) == {"at": 2}
        assert back.weights_version == 2
        for name, w in back.state_dict_for_inference().items():
            assert torch.equal(w, got[name]), name
