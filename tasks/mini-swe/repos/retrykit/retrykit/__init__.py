from retrykit.policy import RetryPolicy
from retrykit.retry import RetryError, retry

__all__ = ["RetryError", "RetryPolicy", "retry"]
