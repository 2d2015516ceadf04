import time

from retrykit.policy import RetryPolicy


class RetryError(Exception):
    def __init__(self, attempts, last):
        super().__init__(f"gave up after {attempts} attempts: {last!r}")
        self.attempts = attempts
        self.last = last


def retry(fn, policy=None, sleep=time.sleep):
    policy = policy or RetryPolicy()
    attempt = 0
    while True:
        try:
            return fn()
        except Exception as exc:
            if not policy.should_retry(exc):
                raise
            if attempt >= policy.max_attempts:
                raise RetryError(attempt + 1, exc) from exc
            sleep(policy.delay(attempt))
            attempt += 1
