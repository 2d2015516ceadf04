"""Trajectories: what an agent saw and did, step by step, with timings.

A trajectory is recorded for every task attempt. Model calls come from the
model gateway (so any OpenAI-speaking agent is recorded), actions and
observations from the agent loop. Token ids and logprobs are kept when the
backend returns them and the task type asks for them (``train``).
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, SerializeAsAny

from megaflow.core.tasks import Model

# Non-finite floats (a logprob of -inf, a NaN in a tool's arguments) written as
# Infinity / NaN, as json.dumps writes them, and read back as such; pydantic's
# default writes null, which a float field then refuses.
_JSON_FLOATS = ConfigDict(ser_json_inf_nan="constants")


class ModelCall(Model):
    model_config = _JSON_FLOATS

    kind: Literal["model_call"] = "model_call"
    request: dict[str, Any] = Field(default_factory=dict)
    response: dict[str, Any] = Field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_token_ids: list[int] | None = Field(
        None, description="The prompt's token ids exactly as fed to the model."
    )
    token_ids: list[int] | None = Field(None, description="The completion's token ids.")
    logprobs: list[float] | None = Field(None, description="Logprob of each completion token.")
    weights_version: int | None = Field(None, description="Weights version that answered.")
    segments: list[tuple[int, int]] | None = Field(
        None,
        description="(tokens, weights version) of each part of a completion an update cut "
        "short and the new weights finished, in order; weights_version is the oldest.",
    )
    started_at: float = Field(default_factory=time.time)
    duration_s: float = 0.0


class Action(Model):
    model_config = _JSON_FLOATS

    kind: Literal["action"] = "action"
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    started_at: float = Field(default_factory=time.time)
    duration_s: float = 0.0


class Observation(Model):
    model_config = _JSON_FLOATS

    kind: Literal["observation"] = "observation"
    content: str = ""
    exit_code: int | None = None
    truncated: bool = False
    started_at: float = Field(default_factory=time.time)
    duration_s: float = 0.0


Step = Annotated[ModelCall | Action | Observation, Field(discriminator="kind")]


class Trajectory(Model):
    model_config = _JSON_FLOATS

    id: str
    task_id: str
    run_id: str
    attempt: int = 1
    # Validated by the "kind" tag; written by each step's own type. pydantic's
    # serializer matches every item of a union list against the members (a
    # 21 KB trajectory of 18 steps: 206 us against 58 us; the same JSON).
    steps: list[SerializeAsAny[Step]] = Field(default_factory=list)
    started_at: float = Field(default_factory=time.time)
    ended_at: float | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    def add(self, step: Step) -> None:
        self.steps.append(step)

    @property
    def model_calls(self) -> list[ModelCall]:
        return [s for s in self.steps if isinstance(s, ModelCall)]

    @property
    def tokens(self) -> int:
        return sum(c.prompt_tokens + c.completion_tokens for c in self.model_calls)
