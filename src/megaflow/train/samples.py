"""Training samples: one sampled episode as the tokens the model saw and produced.

A multi-turn episode is one token sequence. The model service records, for
every call, the prompt token ids exactly as fed (``ModelCall.prompt_token_ids``),
the completion token ids (``token_ids``), their logprobs and the weights
version. A backend that generates token-in makes each call's prompt the
previous call's prompt and completion plus the new observation tokens, so the
whole episode is the last call's prompt followed by its completion, and
nothing was re-tokenized on the way. :func:`sample_from_trajectory` checks
that property call by call and refuses a trajectory that breaks it
(:class:`TokenDrift`): training on re-rendered tokens is training on text the
model never produced.

``loss_mask`` is 1 on tokens the model generated and 0 on everything fed back
(tool observations, user messages, template tokens); ``logprobs`` are the
sampler's, 0.0 where the mask is 0.

This module imports neither torch nor transformers.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from megaflow.core.errors import InvalidInput
from megaflow.core.trajectory import ModelCall, Trajectory


class TokenDrift(InvalidInput):
    """A trajectory's calls are not token-exact continuations of each other."""


class TrainingSample(BaseModel):
    """One sample of a GRPO group, ready for the trainer or an export."""

    model_config = ConfigDict(extra="forbid")

    sample_id: str = Field(description="The task id of the sample (one per task and sample).")
    group_id: str = Field(description="What the samples of one task share.")
    run_id: str
    task_type: str = "train"
    prompt_ids: list[int] = Field(description="Tokens before the first generated token.")
    completion_ids: list[int] = Field(description="Every token after the prompt.")
    logprobs: list[float] = Field(description="Sampler logprob per completion token.")
    loss_mask: list[int] = Field(description="1 on generated tokens, 0 on fed-back ones.")
    reward: float = 0.0
    weights_version: int | None = Field(
        None, description="The oldest weights version that generated any of its tokens."
    )
    masked: bool = Field(
        False, description="An infrastructure failure: left out of its group's statistics."
    )
    weight: float = Field(
        1.0,
        ge=0,
        description="Scales the sample's policy loss; below 1 for a sample generated with "
        "weights older than the loop's staleness bound (``stale: reweight``).",
    )
    truncated: bool = Field(
        False, description="Its last model call stopped at the token limit (cut off)."
    )

    @model_validator(mode="after")
    def _aligned(self) -> TrainingSample:
        n = len(self.completion_ids)
        if len(self.logprobs) != n or len(self.loss_mask) != n:
            raise ValueError(
                f"sample {self.sample_id}: completion_ids ({n}), logprobs "
                f"({len(self.logprobs)}) and loss_mask ({len(self.loss_mask)}) differ in length"
            )
        return self

    @property
    def tokens(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    @property
    def generated(self) -> int:
        return sum(self.loss_mask)


def _token_calls(traj: Trajectory) -> list[ModelCall]:
    calls = [c for c in traj.model_calls if c.token_ids is not None]
    for i, c in enumerate(calls):
        if c.prompt_token_ids is None:
            raise TokenDrift(
                f"trajectory {traj.id}: model call {i} has completion tokens but no prompt "
                "token ids; the backend does not record what it was fed"
            )
        if c.logprobs is None or len(c.logprobs) != len(c.token_ids or []):
            raise TokenDrift(f"trajectory {traj.id}: model call {i} lacks a logprob per token")
    return calls


def sample_from_trajectory(
    traj: Trajectory,
    reward: float,
    *,
    group_id: str,
    task_type: str = "train",
    masked: bool = False,
) -> TrainingSample:
    """The episode of ``traj`` as one token sequence; raises TokenDrift when a call's
    prompt does not begin with the previous call's prompt and completion."""
    calls = _token_calls(traj)
    if not calls:
        raise TokenDrift(f"trajectory {traj.id} has no model call with token data")
    prompt = list(calls[0].prompt_token_ids or [])
    seq: list[int] = []
    mask: list[int] = []
    lps: list[float] = []
    for i, call in enumerate(calls):
        fed = call.prompt_token_ids or []
        done = len(prompt) + len(seq)
        if fed[: len(prompt)] != prompt or fed[len(prompt) : done] != seq:
            raise TokenDrift(
                f"trajectory {traj.id}: the prompt of model call {i} is not the previous "
                "call's prompt and completion followed by new tokens (re-tokenized history)"
            )
        new = fed[done:]
        seq += new
        mask += [0] * len(new)
        lps += [0.0] * len(new)
        seq += call.token_ids or []
        mask += [1] * len(call.token_ids or [])
        lps += call.logprobs or []
    versions = [c.weights_version for c in calls if c.weights_version is not None]
    return TrainingSample(
        sample_id=traj.task_id,
        group_id=group_id,
        run_id=traj.run_id,
        task_type=task_type,
        prompt_ids=prompt,
        completion_ids=seq,
        logprobs=lps,
        loss_mask=mask,
        reward=reward,
        weights_version=min(versions) if versions else None,
        masked=masked,
        truncated=calls[-1].response.get("finish_reason") == "length",
    )
