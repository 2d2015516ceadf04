from ratelimit.bucket import TokenBucket


class KeyedLimiter:
    """One token bucket per key (user, API key, IP...)."""

    def __init__(self, rate, capacity, clock=None):
        self.rate, self.capacity, self.clock = rate, capacity, clock
        self.buckets = {}

    def allow(self, key, n=1):
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = TokenBucket(self.rate, self.capacity, self.clock)
        return bucket.try_acquire(n)
