from ratelimit.clock import MonotonicClock


class TokenBucket:
    def __init__(self, rate, capacity, clock=None):
        if rate <= 0 or capacity <= 0:
            raise ValueError("rate and capacity must be positive")
        self.rate = rate
        self.capacity = capacity
        self.clock = clock or MonotonicClock()
        self.tokens = float(capacity)
        self.last = self.clock.now()

    def _refill(self):
        now = self.clock.now()
        self.tokens = self.tokens + (now - self.last) * self.rate
        self.last = now

    def try_acquire(self, n=1):
        self._refill()
        if self.tokens >= n:
            self.tokens -= n
            return True
        return False

    def wait_time(self, n=1):
        self._refill()
        missing = n - self.tokens
        return max(0.0, missing / self.rate)
