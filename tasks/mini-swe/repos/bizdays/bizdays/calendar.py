class Calendar:
    """Working days are Monday to Friday, minus the listed holidays."""

    def __init__(self, holidays=()):
        self.holidays = set(holidays)

    def is_business_day(self, day):
        return day.weekday() < 5 and day not in self.holidays
