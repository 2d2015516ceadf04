import pytest

from rle import Decoder, decode, encode


def test_encode():
    assert encode("aaabccdddd") == "3ab2c4d"


def test_decode_short_runs():
    assert decode("3ab2c4d") == "aaabccdddd"


def test_roundtrip_small():
    s = "xyyzzzz"
    assert decode(encode(s)) == s


def test_digits_rejected():
    with pytest.raises(ValueError):
        encode("a1")


def test_stream_simple():
    d = Decoder()
    d.feed("2a")
    d.feed("b")
    assert d.finish() == "aab"


def test_dangling():
    with pytest.raises(ValueError):
        decode("3")
