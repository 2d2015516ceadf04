from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    base_delay: float = 0.1
    max_delay: float = 10.0
    retry_on: tuple = (Exception,)

    def delay(self, retry_number):
        """Delay before retry number ``retry_number`` (0 for the first retry)."""
        return self.base_delay * 2**retry_number

    def should_retry(self, exc):
        return isinstance(exc, self.retry_on)
