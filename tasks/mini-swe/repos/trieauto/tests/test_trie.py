from trieauto import Trie, complete
from trieauto.complete import count_prefix


def test_insert_contains():
    t = Trie(["a", "ab"])
    assert "ab" in t and "a" in t and "abc" not in t
    assert t.size == 2


def test_complete_longer_words():
    t = Trie(["card", "care", "carbon", "dog"])
    assert complete(t, "car") == ["carbon", "card", "care"]


def test_limit():
    t = Trie(["aa", "ab", "ac"])
    assert complete(t, "a", limit=2) == ["aa", "ab"]


def test_missing_prefix():
    assert complete(Trie(["x"]), "y") == []
    assert count_prefix(Trie(["x"]), "y") == 0
