from lrukit.cache import LRUCache
from lrukit.linked import DoublyLinkedList, Node

__all__ = ["DoublyLinkedList", "LRUCache", "Node"]
