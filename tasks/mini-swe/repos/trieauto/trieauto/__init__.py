from trieauto.complete import complete
from trieauto.trie import Trie

__all__ = ["Trie", "complete"]
