from lrukit.linked import DoublyLinkedList, Node


class LRUCache:
    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self.index = {}
        self.order = DoublyLinkedList()
        self.evictions = 0

    def get(self, key, default=None):
        node = self.index.get(key)
        if node is None:
            return default
        return node.value

    def put(self, key, value):
        node = self.index.get(key)
        if node is not None:
            node.value = value
            self._touch(node)
            return
        node = Node(key, value)
        self.index[key] = node
        self.order.push_front(node)
        if self.order.size > self.capacity:
            old = self.order.pop_back()
            del self.index[old.key]
            self.evictions += 1

    def _touch(self, node):
        self.order.unlink(node)
        self.order.push_front(node)

    def __len__(self):
        return len(self.index)

    def __contains__(self, key):
        return key in self.index

    def keys_mru_first(self):
        return self.order.keys()
