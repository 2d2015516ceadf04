import pytest

from unitconv import convert, units_of


def test_length():
    assert convert(1, "km", "m") == 1000
    assert convert(10, "ft", "m") == pytest.approx(3.048)


def test_mass():
    assert convert(1, "lb", "kg") == pytest.approx(0.45359237)


def test_kelvin_celsius():
    assert convert(0, "C", "K") == pytest.approx(273.15)
    assert convert(300, "K", "C") == pytest.approx(26.85)


def test_dimension_mismatch():
    with pytest.raises(ValueError):
        convert(1, "m", "kg")


def test_units_of():
    assert units_of("mass") == ["g", "kg", "lb"]
