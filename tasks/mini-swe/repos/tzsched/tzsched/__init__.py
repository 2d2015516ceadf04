from tzsched.meeting import Meeting
from tzsched.zones import UTC, fixed_zone

__all__ = ["UTC", "Meeting", "fixed_zone"]
