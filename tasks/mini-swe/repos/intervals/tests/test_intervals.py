import pytest

from intervals import Interval, IntervalSet


def test_overlapping_merge():
    s = IntervalSet([(5, 8), (1, 4), (3, 6)])
    assert s.merged() == [Interval(1, 8)]


def test_disjoint_gaps():
    s = IntervalSet([(1, 2), (4, 5)])
    assert s.gaps() == [(2, 4)]
    assert s.total_length() == 2


def test_contained():
    s = IntervalSet([(0, 10), (2, 3)])
    assert s.merged() == [Interval(0, 10)]
    assert s.covers(1, 9)


def test_invalid():
    with pytest.raises(ValueError):
        Interval(3, 1)
