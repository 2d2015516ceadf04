"""One RL algorithm, built from its config: what the trainer calls each step.

The worker knows two calls and nothing of which algorithm it runs:

* :meth:`Algorithm.prepare` turns the step's groups into scored samples:
  rewards (plus the overlong penalty, if any) go through the advantage
  estimator group by group; masked samples (infrastructure failures) are out
  of the statistics and of the loss; a sample's staleness ``weight`` scales
  its advantage (which scales its policy term exactly); zero-advantage groups
  are dropped under ``dynamic_sampling`` and truncated samples under
  ``overlong_filter``; each kept sample gets the loss weight of one of its
  tokens under the aggregation (:func:`loss_weights`).
* :meth:`Algorithm.loss` gives a micro-batch's share of the step loss and
  the sums of :data:`STAT_FIELDS` over its trained tokens.

Per token, the loss is the registered policy loss of the log ratio (against
the sampler's logprobs, or the trainer's own under a mismatch correction,
whose weight then multiplies it), plus ``kl_coef`` times the k3 estimate
``exp(ref - logp) - (ref - logp) - 1`` when a reference model is given.
Only tokens with loss mask 1 (what the model generated) count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from megaflow.train.algorithms.batch import PaddedBatch, Scored
from megaflow.train.algorithms.correction import Correction
from megaflow.train.samples import TrainingSample

if TYPE_CHECKING:
    from megaflow.train.algorithms.registry import AdvantageFn, PolicyLossFn

#: Order of the summed statistics :meth:`Algorithm.loss` returns. ``ratio`` is
#: pi_trainer / pi_sampler, ``mismatch`` the k3 estimate of KL(sampler || trainer),
#: ``corrected`` the tokens whose importance weight was capped or masked.
STAT_FIELDS = ("ratio", "clipped", "kl", "tokens", "loss", "entropy", "mismatch", "corrected")


@dataclass(frozen=True, slots=True)
class Clip:
    """How the importance ratio is bounded (:mod:`.losses`)."""

    low: float
    high: float
    dual: float | None = None
    log_ratio_max: float = 20.0


@dataclass(frozen=True, slots=True)
class Prepared:
    """The trainable samples of a step and what the filters and statistics left out."""

    scored: list[Scored]
    zero_advantage_groups: int  # groups none of whose live samples has an advantage
    masked_samples: int  # left out as infrastructure failures
    groups_with_signal: int  # groups with a trained sample of non-zero advantage
    filtered_groups: int = 0  # zero-advantage groups dropped by dynamic sampling
    overlong_filtered: int = 0  # truncated samples dropped by the overlong filter
    response_length: float = 0.0  # mean generated tokens of the live samples
    truncation_rate: float = 0.0  # share of live samples cut off at the token limit

    @property
    def has_signal(self) -> bool:
        return self.groups_with_signal > 0


def loss_weights(scored: Sequence[Scored], agg: str, max_tokens: int | None = None) -> list[Scored]:
    """Give each sample the weight of one of its tokens in the step's loss:
    ``1 / all trained tokens`` ('token'), ``1 / (its tokens * samples)``
    ('sequence'), or ``1 / (max_tokens * samples)`` ('constant', Dr. GRPO)."""
    if not scored:
        return []
    n = len(scored)
    total = sum(s.sample.generated for s in scored)

    def weight(s: TrainingSample) -> float:
        if agg == "token":
            return 1.0 / total
        if agg == "sequence":
            return 1.0 / (s.generated * n)
        if agg == "constant" and max_tokens:
            return 1.0 / (max_tokens * n)
        raise ValueError(f"unknown loss aggregation {agg!r} (max_tokens {max_tokens})")

    return [Scored(s.sample, s.advantage, weight(s.sample)) for s in scored]


class Algorithm:
    """An advantage estimator, a policy loss and how both are applied."""

    def __init__(
        self,
        *,
        advantage: AdvantageFn,
        policy_loss: PolicyLossFn,
        clip: Clip,
        agg: str = "token",
        max_tokens: int | None = None,
        correction: Correction | None = None,
        kl_coef: float = 0.0,
        dynamic_sampling: bool = False,
        overlong_filter: bool = False,
        overlong_penalty: Callable[[int], float] | None = None,
    ) -> None:
        self.advantage = advantage
        self.policy_loss = policy_loss
        self.clip = clip
        self.agg = agg
        self.max_tokens = max_tokens
        self.correction = correction
        self.kl_coef = kl_coef
        self.dynamic_sampling = dynamic_sampling
        self.overlong_filter = overlong_filter
        self.overlong_penalty = overlong_penalty

    def reward(self, s: TrainingSample) -> float:
        """The reward the advantage sees: the grade, plus the overlong penalty."""
        pen = self.overlong_penalty
        return s.reward + (pen(s.generated) if pen is not None else 0.0)

    def prepare(self, groups: Sequence[Sequence[TrainingSample]]) -> Prepared:
        """Advantages, filters and loss weights of a step's groups."""
        lives = [[s for s in g if not s.masked] for g in groups]
        masked = sum(len(g) - len(live) for g, live in zip(groups, lives, strict=True))
        rewards = [
            torch.tensor([self.reward(s) for s in live], dtype=torch.float64) for live in lives
        ]
        advs = self.advantage(rewards)
        kept: list[Scored] = []
        zero = signal = filtered = overlong = 0
        for live, adv in zip(lives, advs, strict=True):
            values = adv.tolist()
            if not any(values):
                zero += 1
                if self.dynamic_sampling:
                    filtered += 1
                    continue
            items = [Scored(s, a * s.weight) for s, a in zip(live, values, strict=True)]
            items = [i for i in items if i.sample.generated]
            if self.overlong_filter:
                overlong += sum(1 for i in items if i.sample.truncated)
                items = [i for i in items if not i.sample.truncated]
            signal += any(i.advantage != 0 for i in items)
            kept += items
        every = [s for live in lives for s in live]
        n = max(len(every), 1)
        return Prepared(
            scored=loss_weights(kept, self.agg, self.max_tokens),
            zero_advantage_groups=zero,
            masked_samples=masked,
            groups_with_signal=signal,
            filtered_groups=filtered,
            overlong_filtered=overlong,
            response_length=sum(s.generated for s in every) / n,
            truncation_rate=sum(1 for s in every if s.truncated) / n,
        )

    def loss(
        self,
        batch: PaddedBatch,
        logp: torch.Tensor,
        *,
        ref_logp: torch.Tensor | None = None,
        entropy: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch's share of the step loss (to backpropagate) and the sums of
        :data:`STAT_FIELDS` over its trained tokens (detached); ``logp`` are the
        policy's logprobs ``[B, T-1]`` at the step's weights."""
        mask = batch.loss_mask
        adv = batch.advantages.unsqueeze(-1)
        bound = self.clip.log_ratio_max
        with torch.no_grad():  # log(pi_trainer / pi_sampler): the mismatch (and staleness)
            log_w = (logp.detach() - batch.old_logprobs).clamp(-bound, bound)
        weight = touched = None
        if self.correction is None:
            log_ratio = logp - batch.old_logprobs
        else:  # the ratio against the trainer's own logprobs; the weight corrects the rest
            log_ratio = logp - logp.detach()
            weight, touched = self.correction.weights(log_w, mask)
        per_token, clipped = self.policy_loss(log_ratio, adv, mask, self.clip)
        if weight is not None:
            per_token = per_token * weight
        kl = torch.zeros_like(logp)
        if ref_logp is not None and self.kl_coef > 0:
            diff = ref_logp - logp
            kl = torch.exp(diff) - diff - 1.0
            per_token = per_token + self.kl_coef * kl
        loss = (per_token * mask * batch.weights.unsqueeze(-1)).sum()
        with torch.no_grad():
            w = torch.exp(log_w)
            ent = entropy if entropy is not None else torch.zeros_like(logp)
            sums = torch.stack(
                [
                    (w * mask).sum(),
                    (clipped.float() * mask).sum(),
                    (kl.detach() * mask).sum(),
                    mask.sum(),
                    loss.detach(),
                    (ent * mask).sum(),
                    ((w - 1.0 - log_w) * mask).sum(),
                    (touched.float() * mask).sum() if touched is not None else mask.new_zeros(()),
                ]
            )
        return loss, sums
