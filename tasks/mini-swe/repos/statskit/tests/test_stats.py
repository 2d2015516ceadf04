import pytest

from statskit import mean, median, mode, stdev, summary, variance


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5


def test_median_odd():
    assert median([5, 1, 3]) == 3


def test_mode_smallest_on_tie():
    assert mode([1, 2, 2, 3, 3]) == 2


def test_variance():
    assert variance([2, 4, 4, 4, 5, 5, 7, 9], sample=False) == 4
    assert stdev([2, 4, 4, 4, 5, 5, 7, 9], sample=False) == 2


def test_empty():
    with pytest.raises(ValueError):
        median([])


def test_summary_odd():
    s = summary([3, 1, 2])
    assert s["median"] == 2 and s["min"] == 1 and s["n"] == 3
