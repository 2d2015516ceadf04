import pytest

from depgraph import CycleError, Graph, load_edges


def test_chain_order():
    g = Graph([("app", "lib"), ("lib", "core")])
    assert g.topological_order() == ["core", "lib", "app"]


def test_self_loop():
    assert Graph([("a", "a")]).has_cycle()


def test_two_cycle():
    g = Graph([("a", "b"), ("b", "a")])
    with pytest.raises(CycleError):
        g.topological_order()


def test_load_edges():
    text = "app -> lib_a, lib_b  # comment\n\nlib_a -> core\n"
    assert load_edges(text) == [("app", "lib_a"), ("app", "lib_b"), ("lib_a", "core")]
