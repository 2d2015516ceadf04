class TrieNode:
    __slots__ = ("children", "terminal")

    def __init__(self):
        self.children = {}
        self.terminal = False
