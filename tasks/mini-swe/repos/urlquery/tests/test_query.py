from urlquery import build_query, parse_query, with_params


def test_parse_simple():
    assert parse_query("a=1&b=2&a=3") == {"a": ["1", "3"], "b": ["2"]}


def test_parse_percent_and_plus():
    assert parse_query("?q=hello+world%21") == {"q": ["hello world!"]}


def test_flag_without_value():
    assert parse_query("debug&x=1") == {"debug": [""], "x": ["1"]}


def test_build_lists():
    assert build_query({"a": [1, 2], "b": "x"}) == "a=1&a=2&b=x"


def test_with_params():
    assert with_params("/s?x=1", {"y": 2}) == "/s?x=1&y=2"
    assert with_params("/s", {}) == "/s"
