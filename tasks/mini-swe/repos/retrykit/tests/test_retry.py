import pytest

from retrykit import RetryPolicy, retry


def test_success_first_time():
    assert retry(lambda: 42, sleep=lambda s: None) == 42


def test_eventual_success():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 2:
            raise OSError("temporary")
        return "ok"

    assert retry(flaky, RetryPolicy(max_attempts=5), sleep=lambda s: None) == "ok"
    assert len(calls) == 2


def test_non_retryable_raises_immediately():
    calls = []

    def bad():
        calls.append(1)
        raise KeyError("x")

    with pytest.raises(KeyError):
        retry(bad, RetryPolicy(retry_on=(OSError,)), sleep=lambda s: None)
    assert calls == [1]


def test_delays_grow():
    p = RetryPolicy(base_delay=0.1)
    assert [p.delay(n) for n in range(3)] == pytest.approx([0.1, 0.2, 0.4])
