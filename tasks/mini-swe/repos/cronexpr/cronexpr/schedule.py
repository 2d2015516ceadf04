from cronexpr.field import CronField

LIMITS = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 6)]


class Schedule:
    """A five-field cron schedule: minute hour day-of-month month day-of-week.

    Day of week: 0 = Monday ... 6 = Sunday (Python's weekday()).
    """

    def __init__(self, expr):
        parts = expr.split()
        if len(parts) != 5:
            raise ValueError("expected 5 fields")
        self.fields = [CronField.parse(p, lo, hi) for p, (lo, hi) in zip(parts, LIMITS)]

    def matches(self, dt):
        values = [dt.minute, dt.hour, dt.day, dt.month, dt.weekday()]
        return all(v in f for v, f in zip(values, self.fields))
