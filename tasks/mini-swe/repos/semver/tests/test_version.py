import pytest

from semver import Version, latest


def test_parse_roundtrip():
    assert str(Version.parse("1.2.3-rc.1+build.5")) == "1.2.3-rc.1+build.5"


def test_numeric_ordering():
    assert Version.parse("1.10.0") > Version.parse("1.9.9")


def test_build_ignored_in_equality():
    assert Version.parse("1.0.0+a") == Version.parse("1.0.0+b")


def test_invalid():
    with pytest.raises(ValueError):
        Version.parse("1.0")


def test_latest_without_pre():
    assert latest(["1.0.0", "2.0.0-rc.1", "1.5.0"], allow_pre=False) == "1.5.0"


def test_bump():
    assert str(Version.parse("1.2.3").bump("minor")) == "1.3.0"
