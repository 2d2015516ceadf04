"""``train.algorithm``: which advantage estimator and policy loss a step uses.

One pydantic config per algorithm, tagged by ``type``; the union is the list
of algorithms, and each config builds its :class:`Algorithm` (importing torch
only then)::

    algorithm: {type: grpo}                                  # the default
    algorithm: {type: dr_grpo, max_tokens: 1024}
    algorithm: {type: dapo, overlong_penalty: {max_tokens: 1024, cache_tokens: 256}}
    algorithm: {type: gspo}
    algorithm: {type: rloo}
    algorithm: {type: reinforce_pp, baseline: group}
    algorithm: {type: custom, advantage: rloo, policy_loss: gspo}

Every algorithm shares the PPO-style knobs (``clip_eps``, ``clip_eps_high``,
``dual_clip``, ``log_ratio_clamp``), the sampler/trainer mismatch
``correction`` (none, TIS or IcePop) and the sample filters
(``dynamic_sampling``, ``overlong_filter``, ``overlong_penalty``); the
members differ in their advantage, their loss aggregation and their
defaults. See ``docs/train-loop.md`` (Algorithms).

This module imports neither torch nor transformers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from megaflow.train.algorithms.options import (
    CorrectionConfig,
    NoCorrectionConfig,
    OverlongPenalty,
)

if TYPE_CHECKING:
    from megaflow.train.algorithms.algorithm import Algorithm


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Algo(_Cfg):
    """What every algorithm shares: the clipped policy term, the mismatch
    correction and the sample filters."""

    clip_eps: float = Field(
        0.2, gt=0, description="Lower clip of the importance ratio: 1 - clip_eps."
    )
    clip_eps_high: float | None = Field(
        None, gt=0, description="Upper clip of the ratio: 1 + clip_eps_high; None: clip_eps."
    )
    dual_clip: float | None = Field(
        None,
        gt=1,
        description="Dual clip: with a negative advantage A a token's loss is at most "
        "dual_clip * |A|, however large its ratio (3 is usual); None: off.",
    )
    log_ratio_clamp: float = Field(
        20.0,
        gt=0,
        description="The log importance ratio is clamped to [-x, x] before exp, so a "
        "stale or mismatched token cannot overflow the loss.",
    )
    correction: CorrectionConfig = Field(
        default_factory=NoCorrectionConfig,
        description="Sampler/trainer mismatch correction: none, tis or icepop.",
    )
    dynamic_sampling: bool = Field(
        False,
        description="Leave groups whose advantages are all 0 out of the step entirely (they "
        "no longer count in the loss normaliser); the loop refills the batch.",
    )
    refill_rounds: int = Field(
        3,
        ge=0,
        le=100,
        description="With dynamic_sampling, at most this many extra rollout rounds of "
        "prompts_per_step new prompts the loop runs to bring a step's groups with signal "
        "up to prompts_per_step; 0: no refill.",
    )
    overlong_filter: bool = Field(
        False,
        description="Leave samples cut off at the token limit out of the loss (they still "
        "count in their group's advantage statistics).",
    )
    overlong_penalty: OverlongPenalty | None = Field(
        None, description="DAPO's soft overlong punishment; None: off."
    )

    @property
    def clip_high(self) -> float:
        return self.clip_eps if self.clip_eps_high is None else self.clip_eps_high

    def _build(
        self,
        advantage: str,
        policy_loss: str,
        agg: str,
        *,
        kl_coef: float,
        max_tokens: int | None = None,
        **adv_params: object,
    ) -> Algorithm:
        from megaflow.train.algorithms.algorithm import Algorithm, Clip
        from megaflow.train.algorithms.registry import advantage_estimator, policy_loss_fn

        return Algorithm(
            advantage=advantage_estimator(advantage, adv_params),
            policy_loss=policy_loss_fn(policy_loss),
            clip=Clip(self.clip_eps, self.clip_high, self.dual_clip, self.log_ratio_clamp),
            agg=agg,
            max_tokens=max_tokens,
            correction=self.correction.build(),
            kl_coef=kl_coef,
            dynamic_sampling=self.dynamic_sampling,
            overlong_filter=self.overlong_filter,
            overlong_penalty=self.overlong_penalty.penalty if self.overlong_penalty else None,
        )


def _need_max_tokens(agg: str, max_tokens: int | None) -> None:
    if agg == "constant" and max_tokens is None:
        raise ValueError("loss_agg 'constant' divides by max_tokens: set max_tokens")


class GrpoConfig(_Algo):
    """GRPO: advantage = (reward - group mean) / (group std + std_eps), PPO's clipped
    ratio per token."""

    type: Literal["grpo"] = Field("grpo", description="This algorithm's tag.")
    scale_std: bool = Field(
        True, description="Divide each advantage by its group's reward standard deviation."
    )
    std_eps: float = Field(
        1e-6, gt=0, description="Added to the standard deviation before dividing by it."
    )
    loss_agg: Literal["token", "sequence", "constant"] = Field(
        "token",
        description="'token': mean over every trained token of the step; 'sequence': mean "
        "over each sequence's tokens, then over sequences (the GRPO paper); 'constant': "
        "token sum / (samples * max_tokens).",
    )
    max_tokens: int | None = Field(None, ge=1, description="The 'constant' normaliser.")

    @model_validator(mode="after")
    def _constant(self) -> GrpoConfig:
        _need_max_tokens(self.loss_agg, self.max_tokens)
        return self

    def build(self, *, kl_coef: float = 0.0) -> Algorithm:
        return self._build(
            "grpo", "ppo", self.loss_agg, kl_coef=kl_coef, max_tokens=self.max_tokens,
            scale_std=self.scale_std, std_eps=self.std_eps,
        )  # fmt: skip


class DrGrpoConfig(_Algo):
    """Dr. GRPO: advantage = reward - group mean (no std scaling), loss = token sum
    over the step / (samples * max_tokens), a constant, so no length bias."""

    type: Literal["dr_grpo"] = Field("dr_grpo", description="This algorithm's tag.")
    max_tokens: int = Field(
        ge=1, description="The constant normaliser: the generation budget of a sample."
    )

    def build(self, *, kl_coef: float = 0.0) -> Algorithm:
        return self._build(
            "grpo", "ppo", "constant", kl_coef=kl_coef, max_tokens=self.max_tokens,
            scale_std=False, std_eps=1.0,
        )  # fmt: skip


class DapoConfig(_Algo):
    """DAPO: GRPO's advantage, clip-higher (0.2 / 0.28), token-level mean over the
    step, and dynamic sampling (zero-advantage groups left out) on by default."""

    type: Literal["dapo"] = Field("dapo", description="This algorithm's tag.")
    clip_eps_high: float | None = Field(0.28, gt=0, description="Upper clip: 1 + this.")
    dynamic_sampling: bool = Field(
        True, description="Leave groups whose advantages are all 0 out of the step."
    )
    std_eps: float = Field(1e-6, gt=0, description="Added to the group's reward std.")

    def build(self, *, kl_coef: float = 0.0) -> Algorithm:
        return self._build(
            "grpo", "ppo", "token", kl_coef=kl_coef, scale_std=True, std_eps=self.std_eps
        )


class GspoConfig(_Algo):
    """GSPO: GRPO's advantage; one ratio per sequence, exp of the mean token
    log-ratio (length-normalised), clipped at 1 -/+ (3e-4, 4e-4); mean over
    sequences."""

    type: Literal["gspo"] = Field("gspo", description="This algorithm's tag.")
    clip_eps: float = Field(3e-4, gt=0, description="Lower clip of the sequence ratio.")
    clip_eps_high: float | None = Field(4e-4, gt=0, description="Upper clip of it.")
    scale_std: bool = Field(True, description="Divide advantages by the group's std.")
    std_eps: float = Field(1e-6, gt=0, description="Added to the group's reward std.")

    def build(self, *, kl_coef: float = 0.0) -> Algorithm:
        return self._build(
            "grpo", "gspo", "sequence", kl_coef=kl_coef,
            scale_std=self.scale_std, std_eps=self.std_eps,
        )  # fmt: skip


class RlooConfig(_Algo):
    """RLOO: advantage = reward - mean of the other samples of the group
    (leave-one-out baseline), PPO's clipped ratio per token."""

    type: Literal["rloo"] = Field("rloo", description="This algorithm's tag.")
    loss_agg: Literal["token", "sequence"] = Field(
        "token", description="'token' or 'sequence' mean, as for grpo."
    )

    def build(self, *, kl_coef: float = 0.0) -> Algorithm:
        return self._build("rloo", "ppo", self.loss_agg, kl_coef=kl_coef)


class ReinforcePPConfig(_Algo):
    """REINFORCE++: advantages normalised over the whole batch (minus the batch mean,
    divided by the batch std), after subtracting a baseline: the batch mean
    ('batch', REINFORCE++) or each group's mean ('group', REINFORCE++-baseline)."""

    type: Literal["reinforce_pp"] = Field("reinforce_pp", description="This algorithm's tag.")
    baseline: Literal["batch", "group"] = Field(
        "batch", description="Subtracted before the batch normalisation."
    )
    std_eps: float = Field(1e-6, gt=0, description="Added to the batch std.")
    loss_agg: Literal["token", "sequence"] = Field(
        "token", description="'token' or 'sequence' mean, as for grpo."
    )

    def build(self, *, kl_coef: float = 0.0) -> Algorithm:
        return self._build(
            "reinforce_pp", "ppo", self.loss_agg, kl_coef=kl_coef,
            baseline=self.baseline, std_eps=self.std_eps,
        )  # fmt: skip


class CustomAlgorithmConfig(_Algo):
    """Any estimator with any policy loss, each a registered name or a plug-in's
    function by dotted path (``megaflow.train.algorithms.registry``)."""

    type: Literal["custom"] = Field("custom", description="This algorithm's tag.")
    advantage: str = Field(
        description="A registered estimator (grpo, rloo, reinforce_pp) or a dotted path."
    )
    advantage_options: dict[str, object] = Field(
        default_factory=dict,
        description="Keyword arguments of the estimator (grpo: scale_std, std_eps).",
    )
    policy_loss: str = Field(
        "ppo", description="A registered policy loss (ppo, gspo) or a dotted path."
    )
    loss_agg: Literal["token", "sequence", "constant"] = Field(
        "token", description="'token', 'sequence' or 'constant', as for grpo."
    )
    max_tokens: int | None = Field(None, ge=1, description="The 'constant' normaliser.")

    @model_validator(mode="after")
    def _constant(self) -> CustomAlgorithmConfig:
        _need_max_tokens(self.loss_agg, self.max_tokens)
        return self

    def build(self, *, kl_coef: float = 0.0) -> Algorithm:
        return self._build(
            self.advantage, self.policy_loss, self.loss_agg, kl_coef=kl_coef,
            max_tokens=self.max_tokens, **self.advantage_options,
        )  # fmt: skip


AlgorithmConfig = Annotated[
    GrpoConfig
    | DrGrpoConfig
    | DapoConfig
    | GspoConfig
    | RlooConfig
    | ReinforcePPConfig
    | CustomAlgorithmConfig,
    Field(discriminator="type"),
]
