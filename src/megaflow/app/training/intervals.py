"""95% intervals for held-out figures: pass@1 over prompts, and a paired difference.

A held-out round draws ``k`` samples of each of ``n`` prompts. Samples of one
prompt are not independent (an easy prompt is solved by all four), so the
unit of the interval is the prompt: each prompt's mean reward is one
observation, pass@1 is their mean, and its interval is Student's t with
``n - 1`` degrees of freedom on their spread. A round whose prompts all
score alike (every prompt 0, say) has no spread; a zero-width interval would
claim certainty that 32 prompts cannot give, so the interval is never
narrower than the Wilson score interval for ``n`` independent trials, which
is what ``n`` prompts are worth when every prompt's samples agree.

Two arms evaluated on the same prompts are compared by the paired
difference of their per-prompt means (t interval again): the trained policy
beats the control when the lower end of that interval is above 0.

Pure Python, no numpy or scipy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Student's t, 97.5th percentile, by degrees of freedom (1..30); beyond, the
# normal quantile is within 2% and the table's last entries bracket it.
_T975 = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
]  # fmt: skip
_Z975 = 1.959964


def t975(df: int) -> float:
    """The 97.5th percentile of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError("a t interval needs at least 2 observations")
    if df <= len(_T975):
        return _T975[df - 1]
    # Past the table: the Cornish-Fisher expansion around the normal quantile.
    z = _Z975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass(frozen=True)
class Estimate:
    """A mean and its 95% interval; ``n`` observations (prompts) behind it."""

    mean: float
    low: float
    high: float
    n: int

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high

    def show(self) -> str:
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}]"


def _t_interval(xs: Sequence[float]) -> tuple[float, float, float]:
    n = len(xs)
    mean = sum(xs) / n
    if n < 2:
        return mean, -math.inf, math.inf
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    half = t975(n - 1) * math.sqrt(var / n)
    return mean, mean - half, mean + half


def wilson(successes: float, n: int) -> tuple[float, float]:
    """The Wilson score 95% interval of a proportion ``successes / n``."""
    if n < 1:
        raise ValueError("a proportion needs at least one trial")
    p, z2 = successes / n, _Z975**2
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = _Z975 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_at_1(per_prompt: Sequence[Sequence[float]]) -> Estimate:
    """pass@1 of a round, ``per_prompt[i]`` the rewards (0..1) of prompt ``i``'s
    graded samples; prompts without a graded sample are left out."""
    means = [sum(rs) / len(rs) for rs in per_prompt if rs]
    if not means:
        raise ValueError("no prompt has a graded sample")
    mean, low, high = _t_interval(means)
    w_low, w_high = wilson(sum(means), len(means))
    return Estimate(mean, max(0.0, min(low, w_low)), min(1.0, max(high, w_high)), len(means))


def pass_at_k(per_prompt: Sequence[Sequence[float]], k: int) -> float:
    """pass@k of a round: the chance that at least one of ``k`` samples of a prompt is
    resolved (reward 1), by the unbiased estimator over each prompt's ``n >= k``
    graded samples (1 - C(n-c, k) / C(n, k), c of them resolved), averaged over the
    prompts with at least ``k`` graded samples."""
    if k < 1:
        raise ValueError("k must be at least 1")
    got = [
        1.0 - math.comb(len(rs) - c, k) / math.comb(len(rs), k)
        for rs in per_prompt
        if len(rs) >= k
        for c in [sum(1 for r in rs if r >= 1.0)]
    ]
    if not got:
        raise ValueError(f"no prompt has {k} graded samples")
    return sum(got) / len(got)


def paired_difference(a: Mapping[str, float], b: Mapping[str, float]) -> Estimate:
    """``a - b`` over the prompts both have (per-prompt means), with its t interval."""
    common = sorted(set(a) & set(b))
    if len(common) < 2:
        raise ValueError("a paired difference needs at least 2 prompts in common")
    mean, low, high = _t_interval([a[k] - b[k] for k in common])
    return Estimate(mean, low, high, len(common))
