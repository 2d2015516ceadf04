from cronexpr.field import CronField
from cronexpr.schedule import Schedule

__all__ = ["CronField", "Schedule"]
