import heapq


class Empty(Exception):
    pass


class PriorityQueue:
    def __init__(self):
        self._heap = []

    def push(self, item, priority=0):
        heapq.heappush(self._heap, (priority, item))

    def pop(self):
        if not self._heap:
            raise Empty("queue is empty")
        return heapq.heappop(self._heap)[-1]

    def peek(self):
        if not self._heap:
            raise Empty("queue is empty")
        return self._heap[0][-1]

    def __len__(self):
        return len(self._heap)
