"""The options every algorithm shares: mismatch correction and overlong penalty.

``correction`` (``train.algorithm.correction``) is a tagged union like the
algorithms: ``none`` (the default), ``tis`` or ``icepop``, each building
its :class:`~megaflow.train.algorithms.correction.Correction` (importing
torch only then). :class:`OverlongPenalty` is DAPO's soft punishment of a
sample that nears its token limit.

This module imports neither torch nor transformers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

if TYPE_CHECKING:
    from megaflow.train.algorithms.correction import Correction


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoCorrectionConfig(_Cfg):
    """The ratio is taken against the sampler's logprobs directly (the default):
    any sampler/trainer mismatch is part of the ratio and clipped with it."""

    type: Literal["none"] = Field("none", description="This correction's tag.")

    def build(self) -> Correction | None:
        return None


class TisConfig(_Cfg):
    """Truncated importance sampling: the ratio is taken against the trainer's own
    logprobs at the step's weights, and each token's loss is multiplied by
    ``min(pi_trainer / pi_sampler, cap)``."""

    type: Literal["tis"] = Field("tis", description="This correction's tag.")
    cap: float = Field(2.0, gt=0, description="Largest importance weight a token keeps.")
    level: Literal["token", "sequence"] = Field(
        "token",
        description="'token': one weight per token; 'sequence': the product of the "
        "sequence's token ratios, for every token of it.",
    )

    def build(self) -> Correction:
        from megaflow.train.algorithms.correction import Correction

        return Correction("tis", low=0.0, high=self.cap, level=self.level)


class IcePopConfig(_Cfg):
    """IcePop: like TIS, but a token whose weight ``pi_trainer / pi_sampler`` falls
    outside ``[low, high]`` is masked out of the loss (weight 0) instead of capped."""

    type: Literal["icepop"] = Field("icepop", description="This correction's tag.")
    low: float = Field(0.5, gt=0, description="Smallest weight a token keeps.")
    high: float = Field(5.0, gt=0, description="Largest weight a token keeps.")
    level: Literal["token", "sequence"] = Field(
        "token", description="'token' or 'sequence' (the product of the token ratios)."
    )

    @model_validator(mode="after")
    def _ordered(self) -> IcePopConfig:
        if self.low >= self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        return self

    def build(self) -> Correction:
        from megaflow.train.algorithms.correction import Correction

        return Correction("icepop", low=self.low, high=self.high, level=self.level)


CorrectionConfig = Annotated[
    NoCorrectionConfig | TisConfig | IcePopConfig, Field(discriminator="type")
]


class OverlongPenalty(_Cfg):
    """DAPO's soft overlong punishment, added to the reward before the advantages:
    0 up to ``max_tokens - cache_tokens`` generated tokens, then falling linearly
    to ``-factor`` at ``max_tokens``, and ``-factor`` beyond."""

    max_tokens: int = Field(ge=1, description="The generation budget of a sample, in tokens.")
    cache_tokens: int = Field(ge=1, description="Length of the linearly penalised band.")
    factor: float = Field(1.0, gt=0, description="The penalty at max_tokens.")

    @model_validator(mode="after")
    def _band(self) -> OverlongPenalty:
        if self.cache_tokens > self.max_tokens:
            raise ValueError(
                f"cache_tokens ({self.cache_tokens}) exceeds max_tokens ({self.max_tokens})"
            )
        return self

    def penalty(self, length: int) -> float:
        start = self.max_tokens - self.cache_tokens
        if length <= start:
            return 0.0
        if length > self.max_tokens:
            return -self.factor
        return self.factor * (start - length) / self.cache_tokens
