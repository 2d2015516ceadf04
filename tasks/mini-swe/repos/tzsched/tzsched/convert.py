from datetime import datetime


def parse_iso(text):
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no UTC offset")
    return dt


def to_zone(dt, zone):
    """Express an aware datetime in another timezone (same instant)."""
    if dt.tzinfo is None:
        raise ValueError("naive datetime")
    return dt.replace(tzinfo=zone)
