from histobin import Histogram, linear_edges, render_bars


def test_edges():
    assert linear_edges(0, 10, 5) == [0, 2, 4, 6, 8, 10]


def test_inner_values_half_open():
    h = Histogram([0, 1, 2])
    assert h.bin_of(0) == 0
    assert h.bin_of(1) == 1
    assert h.bin_of(-1) is None


def test_counts_below_max():
    h = Histogram([0, 5, 10])
    for x in [0, 1, 5, 6, 9.9]:
        h.add(x)
    assert h.counts == [2, 3]


def test_render():
    h = Histogram([0, 1, 2])
    h.add(0.5)
    assert render_bars(h, width=4).splitlines()[0] == "0-1 | #### 1"
