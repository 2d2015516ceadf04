from datetime import timedelta, timezone

UTC = timezone.utc


def fixed_zone(hours, minutes=0, name=None):
    """A timezone with a fixed offset from UTC, e.g. fixed_zone(5, 30)."""
    sign = -1 if hours < 0 else 1
    delta = timedelta(hours=hours, minutes=sign * minutes)
    return timezone(delta) if name is None else timezone(delta, name)
