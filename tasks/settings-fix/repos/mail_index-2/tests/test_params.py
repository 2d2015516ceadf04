from mail_index import params


def test_buffer_delay_is_positive():
    assert params.BUFFER_DELAY > 0


def test_max_timeout_is_positive():
    assert params.MAX_TIMEOUT > 0


def test_page_depth_is_positive():
    assert params.PAGE_DEPTH > 0


def test_stream_rate_is_positive():
    assert params.STREAM_RATE > 0
