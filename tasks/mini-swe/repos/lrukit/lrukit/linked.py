class Node:
    __slots__ = ("key", "value", "prev", "next")

    def __init__(self, key, value):
        self.key = key
        self.value = value
        self.prev = None
        self.next = None


class DoublyLinkedList:
    """Most recently used at the head, least recently used at the tail."""

    def __init__(self):
        self.head = None
        self.tail = None
        self.size = 0

    def push_front(self, node):
        node.prev = None
        node.next = self.head
        if self.head is not None:
            self.head.prev = node
        self.head = node
        if self.tail is None:
            self.tail = node
        self.size += 1

    def unlink(self, node):
        if node.prev is not None:
            node.prev.next = node.next
        else:
            self.head = node.next
        if node.next is not None:
            node.next.prev = node.prev
        else:
            self.tail = node.prev
        node.prev = node.next = None
        self.size -= 1

    def pop_back(self):
        node = self.tail
        if node is not None:
            self.unlink(node)
        return node

    def keys(self):
        out, node = [], self.head
        while node is not None:
            out.append(node.key)
            node = node.next
        return out
