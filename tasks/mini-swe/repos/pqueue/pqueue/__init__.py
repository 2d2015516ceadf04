from pqueue.queue import Empty, PriorityQueue
from pqueue.scheduler import Job, Scheduler

__all__ = ["Empty", "Job", "PriorityQueue", "Scheduler"]
