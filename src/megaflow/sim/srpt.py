"""A reference no scheduler can reach: preemptive shortest remaining work on a pooled fleet.

It knows every task's exact run time, stops and resumes tasks at no cost, and
treats the fleet as one machine with the fleet's total CPU, memory and slots
(no task is ever kept out by how the others are packed). At every arrival and
every end it runs the tasks with the least remaining work (CPU x remaining
time) that fit the pool, in that order. On one machine and one resource,
shortest remaining processing time minimises the average completion time; on
a fleet of tasks of several sizes it is not proven optimal, so it is reported
as a reference, not as a bound. It is what the policies' order of
non-preemptive, restart-from-zero placements on real instances gives up.
"""

from __future__ import annotations

import math

from megaflow.scheduler.abstract import InstanceSpec
from megaflow.sim.report import SimReport, summarize
from megaflow.sim.trace import TraceTask


def srpt_pooled(
    instances: list[InstanceSpec], trace: list[TraceTask], sandbox_start_s: float = 5.0
) -> SimReport:
    """Simulate ``trace`` under preemptive SRPT on the pooled ``instances``; each task
    needs ``sandbox_start_s`` plus its duration of running time, as in the simulator."""
    cpu_cap = sum(i.cpu for i in instances)
    mem_cap = sum(i.memory_mb for i in instances)
    gpu_cap = sum(i.gpu for i in instances)
    slot_cap = sum(i.slots for i in instances)
    order = sorted(range(len(trace)), key=lambda i: trace[i].arrival_s)
    left = [sandbox_start_s + t.duration_s for t in trace]
    start = [math.nan] * len(trace)
    end = [math.nan] * len(trace)
    system: list[int] = []
    running: list[int] = []
    now = 0.0
    nxt = 0
    preemptions = rounds = 0
    smallest = min((t.cpu for t in trace), default=0.0)
    while nxt < len(order) or system:
        arrive = trace[order[nxt]].arrival_s if nxt < len(order) else math.inf
        finish = min((left[i] for i in running), default=math.inf)
        step = min(arrive - now, finish)
        for i in running:
            left[i] -= step
        now += step
        for i in [i for i in running if left[i] <= 1e-9]:
            end[i] = now
            system.remove(i)
        while nxt < len(order) and trace[order[nxt]].arrival_s <= now:
            system.append(order[nxt])
            nxt += 1
        system.sort(key=lambda i: (trace[i].cpu * left[i], i))
        was = set(running)
        running = []
        cpu = mem = 0.0
        gpu = 0
        for i in system:
            t = trace[i]
            if (
                cpu + t.cpu <= cpu_cap + 1e-9
                and mem + t.memory_mb <= mem_cap
                and (gpu + t.gpu <= gpu_cap)
            ):
                running.append(i)
                cpu, mem, gpu = cpu + t.cpu, mem + t.memory_mb, gpu + t.gpu
                if math.isnan(start[i]):
                    start[i] = now
            if len(running) == slot_cap or cpu_cap - cpu < smallest:
                break
        preemptions += len(was - set(running) - {i for i in was if not math.isnan(end[i])})
        rounds += 1
    busy = sum(t.cpu * (sandbox_start_s + t.duration_s) for t in trace)
    makespan = max((e for e in end if not math.isnan(e)), default=0.0)
    return summarize(trace, start, end, busy, cpu_cap * makespan, [], preemptions,
                     len(instances), rounds)  # fmt: skip
