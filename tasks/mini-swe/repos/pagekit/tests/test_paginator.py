import pytest

from pagekit import PageOutOfRange, paginate


def test_partial_last_page():
    p = paginate(range(11), page_size=5)
    assert p.num_pages == 3
    assert p.page(3).items == [10]
    assert not p.page(3).has_next


def test_empty_list_has_one_page():
    p = paginate([], page_size=5)
    assert p.num_pages == 1
    assert p.page(1).items == []


def test_page_zero_is_out_of_range():
    with pytest.raises(PageOutOfRange):
        paginate(range(3)).page(0)


def test_bad_page_size():
    with pytest.raises(ValueError):
        paginate([1], page_size=0)
