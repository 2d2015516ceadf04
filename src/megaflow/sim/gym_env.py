"""A Gymnasium-style step/reset interface over the simulator's scheduling decisions.

:class:`SchedulingEnv` runs one episode (a trace on a fleet) per ``reset``;
each ``step`` is one decision of the ``learned`` policy's decision loop
(:class:`~megaflow.scheduler.learned.LearnedPolicy`): the observation is the
candidate rows (one per queued class head and placement, columns
:data:`~megaflow.scheduler.learned_net.FEATURES`) and the critic's state
vector, the action is a row index. The same :class:`Simulator` and
:class:`~megaflow.scheduler.dispatch.DispatchCore` as run-to-end mode make
everything else happen, so stepping with a fixed policy's choices gives
exactly that policy's run-to-end result.

The simulator runs in a worker thread that hands each decision over and
waits for the action; only one of the two threads runs at any time, so an
episode is deterministic. The reward of a step is minus the task-seconds
spent in the system (arrived, not finished) until the next decision, over
the trace's task count: an episode's rewards add up to minus its average
job completion time (:class:`InSystem`). Spaces are not declared: the number
of candidates changes from one decision to the next, which Gymnasium's fixed
``Box`` spaces do not express; ``gymnasium`` is not a dependency.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from megaflow.core.tasks import Outcome
from megaflow.scheduler.abstract import InstanceSpec, TaskFeedback
from megaflow.scheduler.config import SchedulerConfig
from megaflow.scheduler.learned import Chooser, LearnedPolicy
from megaflow.sim.engine import SimOptions, Simulator
from megaflow.sim.report import SimReport
from megaflow.sim.trace import TraceTask

if TYPE_CHECKING:
    from megaflow.scheduler.learned_net import Array, Checkpoint


@dataclass
class Episode:
    """What one episode simulates."""

    config: SchedulerConfig
    instances: list[InstanceSpec]
    trace: list[TraceTask]
    options: SimOptions | None = None


class InSystem:
    """Task-seconds spent in the system so far: the integral of (arrived - finished);
    and the integral of the ages of the tasks in the system (:meth:`age_area`)."""

    def __init__(self, trace: list[TraceTask]) -> None:
        self._arrivals = [t.arrival_s for t in trace]
        self._prefix = [0.0, *itertools.accumulate(self._arrivals)]
        self._prefix2 = [0.0, *itertools.accumulate(a * a for a in self._arrivals)]
        self._finished = 0
        self._finished_sum = 0.0
        self._finished_arrival = 0.0
        self._finished_arrival2 = 0.0
        self._finished_age2 = 0.0

    def finished(self, fb: TaskFeedback) -> None:
        if fb.outcome is Outcome.OK:
            self._finished += 1
            self._finished_sum += fb.ended_at
            a = fb.task.enqueued_at  # the simulator queues a task as it arrives
            self._finished_arrival += a
            self._finished_arrival2 += a * a
            self._finished_age2 += (fb.ended_at - a) ** 2

    def area(self, now: float) -> float:
        n = bisect.bisect_right(self._arrivals, now)
        return (n * now - self._prefix[n]) - (self._finished * now - self._finished_sum)

    def age_area(self, now: float) -> float:
        """Sum over arrived tasks of half their squared time in the system up to ``now``:
        its growth rate is the summed age of the tasks in the system, so a reward on it
        weighs a task's delay by how long it has been in the system (a convex cost of
        completion time, which holds back the tail that minus ``area`` alone lets grow)."""
        n = bisect.bisect_right(self._arrivals, now)
        k = self._finished
        open_sq = (n - k) * now * now - 2 * now * (self._prefix[n] - self._finished_arrival)
        open_sq += self._prefix2[n] - self._finished_arrival2
        return (open_sq + self._finished_age2) / 2


def simulator(
    episode: Episode, chooser: Chooser | None = None, net: Checkpoint | None = None
) -> Simulator:
    """A simulator whose queues are :class:`LearnedPolicy` choosing through ``chooser``
    (or, without one, by ``net``)."""
    return Simulator(
        episode.config, episode.instances, episode.trace, options=episode.options,
        policy=lambda: LearnedPolicy(net, chooser=chooser),
    )  # fmt: skip


class _Closed(Exception):
    """The environment was reset or closed while its episode waited for an action."""


_STOP = object()


class SchedulingEnv:
    """``reset() -> (obs, info)``; ``step(a) -> (obs, reward, terminated, truncated, info)``."""

    def __init__(self, episodes: Callable[[int], Episode]) -> None:
        """``episodes(seed)`` builds the episode a ``reset(seed=...)`` starts."""
        self.episodes = episodes
        self._to_env: queue.Queue[tuple[Any, ...]] = queue.Queue(maxsize=1)
        self._to_sim: queue.Queue[object] = queue.Queue(maxsize=1)
        self._thread: threading.Thread | None = None
        self._waiting = False
        self._n_actions = 0
        self._area = 0.0
        self._tasks = 1
        self._sim: Simulator | None = None
        self._tracker: InSystem | None = None
        self.report: SimReport | None = None
        """The finished episode's report, once ``terminated``."""

    # -- the simulator's side (worker thread) --------------------------------------------
    def _choose(self, rows: Array, state: Array) -> int:
        sim, tracker = self._sim, self._tracker
        assert sim is not None
        assert tracker is not None
        self._to_env.put(("decide", rows, state, sim.now, tracker.area(sim.now)))
        action = self._to_sim.get()
        if action is _STOP:
            raise _Closed
        assert isinstance(action, int)
        return action

    def _run(self, sim: Simulator, tracker: InSystem) -> None:
        try:
            report = asyncio.run(sim.run())
        except _Closed:
            return
        except BaseException as exc:  # handed to the caller of step/reset
            self._to_env.put(("error", exc))
            return
        self._to_env.put(("done", report, tracker.area(sim.now)))

    # -- the agent's side ----------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Array], dict[str, Any]]:
        self.close()
        episode = self.episodes(0 if seed is None else seed)
        tracker = self._tracker = InSystem(episode.trace)
        sim = self._sim = simulator(episode, self._choose)
        sim.core.listeners.append(tracker.finished)
        self._tasks = max(1, len(episode.trace))
        self._area = 0.0
        self.report = None
        self._thread = threading.Thread(target=self._run, args=(sim, tracker), daemon=True)
        self._thread.start()
        obs, _, done, info = self._next()
        if done:
            raise ValueError("the episode has no decision to make (an empty trace?)")
        return obs, info

    def step(self, action: int) -> tuple[dict[str, Array], float, bool, bool, dict[str, Any]]:
        if not self._waiting:
            raise RuntimeError("call reset() first; the episode is over or was never started")
        if not 0 <= int(action) < self._n_actions:
            raise ValueError(f"action {action} is not one of the {self._n_actions} candidates")
        self._waiting = False
        self._to_sim.put(int(action))
        obs, reward, done, info = self._next()
        return obs, reward, done, False, info

    def _next(self) -> tuple[dict[str, Array], float, bool, dict[str, Any]]:
        msg = self._to_env.get()
        if msg[0] == "error":
            raise msg[1]
        area = msg[-1]
        reward = -(area - self._area) / self._tasks
        self._area = area
        if msg[0] == "done":
            self.report = msg[1]
            return {}, reward, True, {"report": msg[1]}
        _, rows, state, now, _ = msg
        self._waiting = True
        self._n_actions = len(rows)
        return {"candidates": rows, "state": state}, reward, False, {"time": now}

    def close(self) -> None:
        """Stop the episode in progress, if any."""
        if self._thread is None:
            return
        if self._waiting:
            self._waiting = False
            self._to_sim.put(_STOP)
        self._thread.join()
        self._thread = None
        while not self._to_env.empty():
            self._to_env.get_nowait()
