import pytest

from csvlite import CsvError, format_line, parse_line, read_records


def test_plain_fields():
    assert parse_line("a,b,,c") == ["a", "b", "", "c"]


def test_quoted_simple():
    assert parse_line('"a",b') == ["a", "b"]


def test_semicolon_delimiter():
    assert parse_line("x;y", delimiter=";") == ["x", "y"]


def test_records():
    assert read_records("id,name\n1,ann\n2,bob\n") == [
        {"id": "1", "name": "ann"},
        {"id": "2", "name": "bob"},
    ]


def test_ragged_row():
    with pytest.raises(CsvError):
        read_records("a,b\n1\n")


def test_writer_quotes():
    assert format_line(["a,b", 'q"', 3]) == '"a,b","q""",3'
