import pytest

from pqueue import Empty, Job, PriorityQueue, Scheduler


def test_lower_priority_first():
    q = PriorityQueue()
    q.push("b", 2)
    q.push("a", 1)
    assert q.pop() == "a" and q.pop() == "b"


def test_empty():
    with pytest.raises(Empty):
        PriorityQueue().pop()


def test_peek():
    q = PriorityQueue()
    q.push("x", 5)
    assert q.peek() == "x" and len(q) == 1


def test_scheduler_distinct_priorities():
    s = Scheduler()
    s.submit(Job("late", 9))
    s.submit(Job("early", 1))
    assert s.run_all() == ["early", "late"]
