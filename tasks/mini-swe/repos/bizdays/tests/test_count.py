from datetime import date

from bizdays import Calendar, add_business_days, business_days_between


def test_weekend_end_date():
    assert business_days_between(date(2024, 1, 1), date(2024, 1, 7)) == 5


def test_reversed_weekend_range():
    assert business_days_between(date(2024, 1, 14), date(2024, 1, 6)) == 5


def test_add_over_weekend():
    assert add_business_days(date(2024, 1, 5), 1) == date(2024, 1, 8)


def test_add_skips_holiday():
    cal = Calendar([date(2024, 1, 8)])
    assert add_business_days(date(2024, 1, 5), 1, cal) == date(2024, 1, 9)
