import pytest

from ratelimit import FakeClock, KeyedLimiter, TokenBucket


def test_initial_burst_is_capacity():
    b = TokenBucket(rate=1, capacity=3, clock=FakeClock())
    assert [b.try_acquire() for _ in range(4)] == [True, True, True, False]


def test_refill_over_time():
    clock = FakeClock()
    b = TokenBucket(rate=2, capacity=2, clock=clock)
    b.try_acquire(2)
    assert not b.try_acquire()
    clock.advance(0.5)
    assert b.try_acquire()


def test_wait_time_when_empty():
    clock = FakeClock()
    b = TokenBucket(rate=4, capacity=1, clock=clock)
    b.try_acquire()
    assert b.wait_time() == pytest.approx(0.25)


def test_keys_are_independent():
    lim = KeyedLimiter(rate=1, capacity=1, clock=FakeClock())
    assert lim.allow("a") and lim.allow("b")
    assert not lim.allow("a")


def test_validation():
    with pytest.raises(ValueError):
        TokenBucket(0, 1)
