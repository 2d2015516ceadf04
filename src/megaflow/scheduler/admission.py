"""Admission control: token buckets and concurrency caps.

Buckets read time from the ``now`` they are given, never from the wall
clock, so the same code runs in the scheduler (monotonic time) and in the
simulator (virtual time), and tests measure rates on a virtual clock. When a
bucket refuses, :attr:`Admission.next_refill` says when it will have a token
again, so the dispatcher can arm one timer instead of polling.
"""

from __future__ import annotations

from megaflow.scheduler.abstract import PendingTask
from megaflow.scheduler.config import AdmissionConfig
from megaflow.scheduler.fleet import Instance

_EPS = 1e-9
"""Tolerance for the rounding of refills (0.1 * 10 tokens is 0.9999999999999998)."""


class TokenBucket:
    """``rate`` tokens per second, holding at most ``burst``."""

    __slots__ = ("burst", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: float, now: float = 0.0) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"token bucket needs rate > 0 and burst >= 1, got {rate}, {burst}")
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.stamp = now

    def _refill(self, now: float) -> None:
        if now > self.stamp:
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now

    def has(self, now: float, n: float = 1.0) -> bool:
        self._refill(now)
        return self.tokens >= n - _EPS

    def try_take(self, now: float, n: float = 1.0) -> bool:
        if self.has(now, n):
            self.tokens = max(0.0, self.tokens - n)
            return True
        return False

    def ready_at(self, now: float, n: float = 1.0) -> float:
        """When ``n`` tokens will be there (``now`` if they already are)."""
        if self.has(now, n):
            return now
        return now + max((n - self.tokens) / self.rate, _EPS)


class Admission:
    """Checks caps (global, per run, per region) and rate limits for one start."""

    def __init__(self, cfg: AdmissionConfig, max_concurrency: int) -> None:
        self.cfg = cfg
        self.max_concurrency = max_concurrency
        self.running = 0
        self.per_run: dict[str, int] = {}
        self._sandbox: dict[str, TokenBucket] = {}
        self._run: dict[str, TokenBucket] = {}
        self.next_refill: float | None = None
        """Earliest time a refused rate limit has a token again (None: none refused)."""

    def reset_round(self) -> None:
        self.next_refill = None

    def _bucket(
        self, table: dict[str, TokenBucket], key: str, rate: float, burst: float, now: float
    ) -> TokenBucket:
        b = table.get(key)
        if b is None:
            b = table[key] = TokenBucket(rate, burst, now)
        return b

    def _refused(self, bucket: TokenBucket, now: float) -> bool:
        at = bucket.ready_at(now)
        if self.next_refill is None or at < self.next_refill:
            self.next_refill = at
        return False

    def admit(self, task: PendingTask, inst: Instance, now: float) -> bool:
        """True, and the start counted, if every cap and bucket lets the task start."""
        if self.running >= self.max_concurrency:
            return False
        spec = task.spec
        cfg = self.cfg
        if cfg.max_per_run is not None and self.per_run.get(spec.run_id, 0) >= cfg.max_per_run:
            return False
        # Check both buckets before taking from either, so a refusal costs nothing.
        sb = rb = None
        if cfg.sandbox_rate is not None:
            sb = self._bucket(
                self._sandbox, spec.environment, cfg.sandbox_rate, cfg.sandbox_burst, now
            )
            if not sb.has(now):
                return self._refused(sb, now)
        if cfg.run_start_rate is not None:
            rb = self._bucket(self._run, spec.run_id, cfg.run_start_rate, cfg.run_start_burst, now)
            if not rb.has(now):
                return self._refused(rb, now)
        if sb is not None:
            sb.try_take(now)
        if rb is not None:
            rb.try_take(now)
        self.running += 1
        self.per_run[spec.run_id] = self.per_run.get(spec.run_id, 0) + 1
        return True

    def done(self, spec_run_id: str) -> None:
        """A started task stopped holding its slot."""
        self.running -= 1
        left = self.per_run.get(spec_run_id, 0) - 1
        if left > 0:
            self.per_run[spec_run_id] = left
        else:
            self.per_run.pop(spec_run_id, None)

    def forget_run(self, run_id: str) -> None:
        self._run.pop(run_id, None)
