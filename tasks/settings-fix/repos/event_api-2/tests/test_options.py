from event_api import options


def test_queue_port_is_positive():
    assert options.QUEUE_PORT > 0


def test_retry_depth_is_positive():
    assert options.RETRY_DEPTH > 0


def test_worker_port_is_positive():
    assert options.WORKER_PORT > 0


def test_page_port_is_positive():
    assert options.PAGE_PORT > 0
