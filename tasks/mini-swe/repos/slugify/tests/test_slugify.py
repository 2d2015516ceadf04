from slugify import slugify, unique_slug


def test_simple():
    assert slugify("Hello World") == "hello-world"


def test_numbers():
    assert slugify("Top 10 tips") == "top-10-tips"


def test_max_length():
    assert slugify("abcdef", max_length=3) == "abc"


def test_unique():
    assert unique_slug("Hello", {"hello"}) == "hello-2"
    assert unique_slug("Hello", {"hello", "hello-2"}) == "hello-3"
    assert unique_slug("!!!", set()) == "item"
