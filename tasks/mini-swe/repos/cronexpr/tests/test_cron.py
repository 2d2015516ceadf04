from datetime import datetime

import pytest

from cronexpr import CronField, Schedule


def test_star():
    field = CronField.parse("*", 0, 59)
    assert 0 in field and 30 in field and 60 not in field


def test_list():
    assert CronField.parse("1,15,30", 0, 59).values == {1, 15, 30}


def test_star_step():
    assert CronField.parse("*/15", 0, 59).values == {0, 15, 30, 45}


def test_out_of_range():
    with pytest.raises(ValueError):
        CronField.parse("61", 0, 59)


def test_schedule_matches_single_values():
    s = Schedule("30 9 * * 0")
    assert s.matches(datetime(2024, 1, 1, 9, 30))  # a Monday
    assert not s.matches(datetime(2024, 1, 2, 9, 30))
