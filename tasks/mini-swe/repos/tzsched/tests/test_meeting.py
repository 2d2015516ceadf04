import pytest

from tzsched import UTC, Meeting, fixed_zone
from tzsched.convert import parse_iso


def test_utc_meeting_local_time():
    m = Meeting.at("2024-03-10T09:00:00+00:00", 30)
    assert m.local_time(UTC) == "09:00"


def test_end():
    m = Meeting.at("2024-03-10T23:45:00+00:00", 30)
    assert m.end.day == 11


def test_naive_rejected():
    with pytest.raises(ValueError):
        parse_iso("2024-03-10T09:00:00")


def test_fixed_zone_offset():
    z = fixed_zone(-3, 30)
    assert z.utcoffset(None).total_seconds() == -(3 * 3600 + 1800)


def test_same_zone_overlap():
    a = Meeting.at("2024-03-10T09:00:00+00:00", 60)
    b = Meeting.at("2024-03-10T09:30:00+00:00", 60)
    assert a.overlaps(b)
