from mail_api import config


def test_stream_depth_is_positive():
    assert config.STREAM_DEPTH > 0


def test_default_rate_is_positive():
    assert config.DEFAULT_RATE > 0


def test_max_window_is_positive():
    assert config.MAX_WINDOW > 0


def test_max_rate_is_positive():
    assert config.MAX_RATE > 0
