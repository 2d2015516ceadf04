from trieauto.node import TrieNode


class Trie:
    def __init__(self, words=()):
        self.root = TrieNode()
        self.size = 0
        for w in words:
            self.insert(w)

    def insert(self, word):
        node = self.root
        for ch in word:
            node = node.children.setdefault(ch, TrieNode())
        if not node.terminal:
            node.terminal = True
            self.size += 1

    def find(self, prefix):
        node = self.root
        for ch in prefix:
            node = node.children.get(ch)
            if node is None:
                return None
        return node

    def __contains__(self, word):
        node = self.find(word)
        return node is not None and node.terminal

    def words_below(self, node, prefix):
        """Yield every word strictly below ``node`` (prefix + suffix)."""
        for ch, child in sorted(node.children.items()):
            word = prefix + ch
            if child.terminal:
                yield word
            yield from self.words_below(child, word)
