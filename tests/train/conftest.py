"""Fixtures of the trainer tests: a tiny random GPT-2 and sample builders."""

from __future__ import annotations

from pathlib import Path

import pytest

from megaflow.train.samples import TrainingSample


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from megaflow.model.transformers_lm import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-lm"))


def sample(
    sid: str,
    reward: float,
    *,
    prompt: list[int] | None = None,
    completion: list[int] | None = None,
    mask: list[int] | None = None,
    logprobs: list[float] | None = None,
    group: str = "g",
    masked: bool = False,
    weight: float = 1.0,
) -> TrainingSample:
    completion = completion if completion is not None else [5, 6]
    return TrainingSample(
        sample_id=sid,
        group_id=group,
        run_id="r",
        prompt_ids=prompt if prompt is not None else [3, 4],
        completion_ids=completion,
        logprobs=logprobs if logprobs is not None else [-1.0] * len(completion),
        loss_mask=mask if mask is not None else [1] * len(completion),
        reward=reward,
        masked=masked,
        weight=weight,
    )
