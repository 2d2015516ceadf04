from bizdays.calendar import Calendar
from bizdays.count import add_business_days, business_days_between

__all__ = ["Calendar", "add_business_days", "business_days_between"]
