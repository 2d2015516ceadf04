from dataclasses import dataclass

from pqueue.queue import Empty, PriorityQueue


@dataclass
class Job:
    name: str
    priority: int = 0


class Scheduler:
    def __init__(self):
        self.queue = PriorityQueue()
        self.done = []

    def submit(self, job):
        self.queue.push(job, job.priority)

    def run_all(self):
        while True:
            try:
                job = self.queue.pop()
            except Empty:
                return self.done
            self.done.append(job.name)
