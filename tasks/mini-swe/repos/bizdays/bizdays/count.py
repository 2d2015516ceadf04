from datetime import timedelta

from bizdays.calendar import Calendar
from bizdays.daterange import days


def business_days_between(start, end, calendar=None):
    """Count business days from start to end, both inclusive."""
    cal = calendar or Calendar()
    if end < start:
        start, end = end, start
    return sum(1 for d in days(start, end) if cal.is_business_day(d))


def add_business_days(start, n, calendar=None):
    cal = calendar or Calendar()
    d = start
    while n > 0:
        d += timedelta(days=1)
        if cal.is_business_day(d):
            n -= 1
    return d
