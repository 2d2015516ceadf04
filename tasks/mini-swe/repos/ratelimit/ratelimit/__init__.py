from ratelimit.bucket import TokenBucket
from ratelimit.clock import FakeClock, MonotonicClock
from ratelimit.limiter import KeyedLimiter

__all__ = ["FakeClock", "KeyedLimiter", "MonotonicClock", "TokenBucket"]
