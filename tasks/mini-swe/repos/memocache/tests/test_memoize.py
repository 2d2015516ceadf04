from memocache import memoize


def test_positional_hits():
    calls = []

    @memoize()
    def square(x):
        calls.append(x)
        return x * x

    assert square(3) == 9
    assert square(3) == 9
    assert calls == [3]
    assert square.cache_info().hits == 1


def test_eviction():
    @memoize(maxsize=2)
    def ident(x):
        return x

    for i in range(5):
        ident(i)
    assert ident.cache_info().size == 2


def test_clear():
    @memoize()
    def f(x):
        return x

    f(1)
    f.cache_clear()
    assert f.cache_info().hits == 0 and f.cache_info().size == 0
