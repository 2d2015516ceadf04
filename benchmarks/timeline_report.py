"""Reads the timelines :mod:`loop_timeline` recorded: the phases of each step, and a chart.

For one run (a JSON file that ``bench_remote_loop.py --timeline DIR`` wrote):

- **phases**: per step, the seconds the loop waited for the step's rollouts
  (``collect``), the trainer's step (``train``) and the weight push (``push``:
  the state dict, the checkpoint written, every engine loaded), and, during
  train + push, how many tasks and model calls were in flight (0 in sync
  mode by construction; above 0 means the async loop kept sampling);
- **engines**: each engine's busy share of the timed window (some call of
  the loop's in flight to it: generation, queueing and HTTP included);
- **tasks**: where a rollout's time goes (sandbox start, repository placed,
  agent, grading), median seconds;
- **cpu**: the cores used on average by each group of processes
  (:class:`loop_timeline.CpuSampler`) and by the whole machine;
- **bound**: what overlap could save at most. With the step's phases fully
  overlapped the loop takes ``max(rollouts, train + push)`` a step instead of
  their sum; no schedule does the run's CPU work in less than its CPU seconds
  over the machine's cores; and ``thin`` is the share of a run with fewer
  tasks in flight than cores, or the trainer or a push running, the time a
  deeper pipeline could fill on a machine of its own.

::

    .venv/bin/python benchmarks/timeline_report.py DIR     # every run in DIR
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Run = dict[str, Any]
PHASES = ("sandbox_start_s", "prepare_s", "agent_s", "grade_s")


def load(path: Path) -> Run:
    run: Run = json.loads(path.read_text())
    run["name"] = path.stem
    return run


def _spans(run: Run, kind: str) -> list[dict[str, Any]]:
    return sorted((s for s in run["spans"] if s["kind"] == kind), key=lambda s: s["start"])


def _union(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Seconds of [lo, hi] covered by at least one interval."""
    total, end = 0.0, lo
    for a, b in sorted(intervals):
        a, b = max(a, end), min(b, hi)
        if b > a:
            total += b - a
            end = b
    return total


def _in_flight(spans: list[dict[str, Any]], lo: float, hi: float) -> int:
    """How many of ``spans`` overlap [lo, hi]."""
    return sum(1 for s in spans if s["start"] < hi and s["end"] > lo)


@dataclass
class Step:
    step: int
    rollout_s: float  # the loop waiting for this step's groups
    train_s: float
    push_s: float  # state dict, checkpoint, every engine loaded
    tasks_during_update: int  # tasks in flight during train + push
    calls_during_update: int  # model calls in flight during train + push
    read_s: float  # from the step's last task ending (or the wait's start) to its groups read


def steps(run: Run) -> list[Step]:
    tasks, calls = _spans(run, "task"), _spans(run, "call")
    collects = [s for s in _spans(run, "collect") if ".s" in s["label"]]
    trains = _spans(run, "train")
    out = []
    for n, (c, t) in enumerate(zip(collects, trains, strict=False), start=1):
        mine = [s for s in tasks if f".s{n:05d}." in s["label"]]
        last = max((s["end"] for s in mine), default=c["end"])
        until = trains[n]["start"] if n < len(trains) else float("inf")
        pushed = [
            s for k in ("export", "write", "load") for s in _spans(run, k)
            if t["end"] - 1e-3 <= s["start"] and s["end"] <= until
        ]  # fmt: skip
        end = max((s["end"] for s in pushed), default=t["end"])
        out.append(
            Step(
                n, c["end"] - c["start"], t["end"] - t["start"], end - t["end"],
                _in_flight(tasks, t["start"], end), _in_flight(calls, t["start"], end),
                c["end"] - max(last, c["start"]),
            )
        )  # fmt: skip
    return out


def cores(run: Run) -> dict[str, float]:
    """Average cores each group used over the timed window, and its CPU seconds."""
    lo, hi = run["window"]
    inside = [c for c in run["cpu"] if lo <= c[0] <= hi]
    if len(inside) < 2:
        return {}
    (t0, a), (t1, b) = inside[0], inside[-1]
    out = {k: (b[k] - a.get(k, 0.0)) / (t1 - t0) for k in b}
    out["ours_cpu_s"] = b["ours"] - a["ours"]
    out["seconds"] = t1 - t0
    return out


def engines_busy(run: Run) -> dict[str, float]:
    lo, hi = run["window"]
    by: dict[str, list[tuple[float, float]]] = {}
    for s in _spans(run, "call"):
        by.setdefault(s["label"], []).append((s["start"], s["end"]))
    return {url: _union(iv, lo, hi) / (hi - lo) for url, iv in sorted(by.items())}


def task_phases(run: Run) -> dict[str, float]:
    tasks = [s for s in _spans(run, "task") if ".s" in s["label"]]
    return {k: statistics.median(s["extra"].get(k, 0.0) for s in tasks) for k in PHASES}


def thin_share(run: Run, step_s: float = 0.1) -> float:
    """Share of the window with fewer tasks in flight than the machine has cores, or the
    trainer or a push running: time an unshared machine's cores could not all be busy
    with this run's rollouts (a rough proxy: a task's agent waits on an engine)."""
    lo, hi = run["window"]
    tasks = _spans(run, "task")
    update = [(s["start"], s["end"]) for k in ("train", "load") for s in _spans(run, k)]
    ncpu, thin, n = os.cpu_count() or 1, 0, max(1, int((hi - lo) / step_s))
    for i in range(n):
        t = lo + (i + 0.5) * step_s
        busy = sum(1 for s in tasks if s["start"] <= t < s["end"])
        thin += busy < ncpu or any(a <= t < b for a, b in update)
    return thin / n


def summary(run: Run) -> dict[str, float]:
    """The run's figures: phases summed over its steps, the overlap bound and the CPU."""
    st = steps(run)
    rollout = sum(s.rollout_s for s in st)
    update = sum(s.train_s + s.push_s for s in st)
    cpu = cores(run)
    lo, hi = run["window"]
    out = {
        "wall_s": hi - lo,
        "rollout_s": rollout,
        "train_s": sum(s.train_s for s in st),
        "push_s": sum(s.push_s for s in st),
        "overlap_bound": (rollout + update) / max(rollout, update) if st else 1.0,
        "tasks_during_update": sum(s.tasks_during_update for s in st) / max(1, len(st)),
        "calls_during_update": sum(s.calls_during_update for s in st) / max(1, len(st)),
        "engine_busy": statistics.mean(engines_busy(run).values() or [0.0]),
        "thin_share": thin_share(run),
        **{f"task_{k}": v for k, v in task_phases(run).items()},
    }
    if cpu:
        out.update(
            ours_cores=cpu["ours"], machine_cores=cpu["machine"], loop_cores=cpu["loop"],
            sandbox_cores=cpu["sandbox"],
            engine_cores=sum(v for k, v in cpu.items() if k.startswith("engine")),
            ours_cpu_s=cpu["ours_cpu_s"], cpu_floor_s=cpu["ours_cpu_s"] / (os.cpu_count() or 1),
        )  # fmt: skip
    return out


def chart(run: Run, width: int = 96) -> str:
    """One character per time bin: tasks in flight (0-9, then a=10 to z=35), each engine busy
    (#), train (T), push (P), and the cores our processes and the machine used
    (0-8: eighths of the machine's cores)."""
    lo, hi = run["window"]
    dt = (hi - lo) / width
    bins = [(lo + i * dt, lo + (i + 1) * dt) for i in range(width)]
    tasks = _spans(run, "task")
    rows = [("tasks", "".join(_digit(_in_flight(tasks, a, b)) for a, b in bins))]
    for i, url in enumerate(engines_busy(run)):
        calls = [s for s in _spans(run, "call") if s["label"] == url]
        rows.append(
            (f"engine{i}", "".join("#" if _in_flight(calls, a, b) else "." for a, b in bins))
        )
    for kind, mark in (("train", "T"), ("load", "P")):
        sp = _spans(run, kind)
        rows.append((kind if kind == "train" else "push", "".join(
            mark if _in_flight(sp, a, b) else " " for a, b in bins)))  # fmt: skip
    ncpu = os.cpu_count() or 1
    for key, name in (("ours", "cpu run"), ("machine", "cpu all")):
        rows.append((name, "".join(_cpu_level(run, key, a, b, ncpu) for a, b in bins)))
    head = f"0 s{' ' * (width - 8)}{hi - lo:5.0f} s"
    return "\n".join([f"{'':10}{head}", *(f"{name:10}{line}" for name, line in rows)])


_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _digit(n: int) -> str:
    return _DIGITS[n] if n < len(_DIGITS) else "+"


def _cpu_level(run: Run, key: str, a: float, b: float, ncpu: int) -> str:
    """Eighths of the machine's cores ``key`` used in [a, b] (the samples around it)."""
    before = [c for c in run["cpu"] if c[0] <= a]
    after = [c for c in run["cpu"] if c[0] >= b]
    if not before or not after:
        return " "
    (t0, x), (t1, y) = before[-1], after[0]
    used = (y.get(key, 0.0) - x.get(key, 0.0)) / (t1 - t0) / ncpu
    return str(max(0, min(8, round(used * 8))))


def describe(run: Run) -> str:
    s = summary(run)
    lines = [f"{run['name']} ({run['mode']}): {s['wall_s']:.1f} s"]
    for st in steps(run):
        lines.append(
            f"  step {st.step}: rollouts {st.rollout_s:6.2f} s  train {st.train_s:5.2f} s  "
            f"push {st.push_s:5.2f} s  in flight during train+push: "
            f"{st.tasks_during_update} tasks, {st.calls_during_update} calls; groups read "
            f"{st.read_s:.2f} s after the last task"
        )
    lines.append("  " + "  ".join(f"{k} {v:.2f}" for k, v in s.items()))
    lines.append(chart(run))
    return "\n".join(lines)


COLUMNS = (
    ("wall_s", "wall s", "{:.1f}"), ("rollout_s", "rollouts s", "{:.1f}"),
    ("train_s", "train s", "{:.2f}"), ("push_s", "push s", "{:.2f}"),
    ("overlap_bound", "overlap bound", "{:.3f}x"),
    ("tasks_during_update", "tasks during train+push", "{:.1f}"),
    ("calls_during_update", "calls during train+push", "{:.1f}"),
    ("engine_busy", "engine busy", "{:.0%}"), ("thin_share", "thin", "{:.1%}"),
    ("ours_cpu_s", "run CPU s", "{:.1f}"),
    ("cpu_floor_s", "CPU floor s", "{:.1f}"), ("ours_cores", "run cores", "{:.2f}"),
    ("machine_cores", "machine cores", "{:.2f}"),
)  # fmt: skip


def markdown(runs: list[Run]) -> str:
    """The phases of every mode (medians over its runs), the tasks' own phases, and the
    chart of each mode's last run, for a results file."""
    by: dict[str, list[dict[str, float]]] = {}
    for run in runs:
        by.setdefault(run["mode"], []).append(summary(run))
    head = ["mode", *(c[1] for c in COLUMNS)]
    lines = ["### Where the time goes", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]  # fmt: skip
    for mode, sums in by.items():
        cells = [
            fmt.format(statistics.median(s.get(k, 0.0) for s in sums)) for k, _, fmt in COLUMNS
        ]
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    every = [s for ss in by.values() for s in ss]
    task = " ".join(
        f"{k[:-2].replace('_', ' ')} {statistics.median(s[f'task_{k}'] for s in every):.2f} s,"
        for k in PHASES
    )
    lines += [
        "",
        f"A rollout's own phases, median over every train task of every run: {task[:-1]}.",
    ]
    lines += reading(by)
    for mode in by:
        last = [r for r in runs if r["mode"] == mode][-1]
        lines += ["", f"{mode}, run {last['name']}:", "", "```", chart(last), "```"]
    return "\n".join(lines)


def reading(by: dict[str, list[dict[str, float]]]) -> list[str]:
    """What the phases allow, in sentences computed from the medians of both modes."""
    if "sync" not in by or "async" not in by:
        return []

    def med(mode: str, key: str) -> float:
        return statistics.median(s.get(key, 0.0) for s in by[mode])

    ncpu, thin = os.cpu_count() or 1, med("sync", "thin_share")
    cores_s, cores_a = med("sync", "ours_cores"), med("async", "ours_cores")
    cpu_s, cpu_a = med("sync", "ours_cpu_s"), med("async", "ours_cpu_s")
    share = cores_a / cores_s if cores_s else 0.0
    work = cpu_s / cpu_a if cpu_a else 0.0
    return [
        "",
        "What these phases allow (medians of the timed runs):",
        "",
        f"- **Overlap.** Fully overlapped, a step would take max(rollouts, train + push) "
        f"instead of their sum: at most {med('sync', 'overlap_bound'):.3f}x of sync (rollouts "
        f"{med('sync', 'rollout_s'):.1f} s, train {med('sync', 'train_s'):.2f} s, push "
        f"{med('sync', 'push_s'):.2f} s).",
        f"- **Tails.** {thin:.1%} of sync's time had fewer tasks in flight than cores, or the "
        f"trainer or a push running: a deeper pipeline fills at most that, "
        f"{1 / (1 - thin):.2f}x, on a machine of its own.",
        f"- **CPU.** Both modes did the same work ({cpu_s:.1f} and {cpu_a:.1f} CPU s for the "
        f"loop's process, its sandboxes and the engines); on {ncpu} cores no schedule takes "
        f"less than {cpu_s / ncpu:.1f} s.",
        f"- **Share.** The machine's cores were busy {med('sync', 'machine_cores'):.2f} and "
        f"{med('async', 'machine_cores'):.2f} of {ncpu}; the run got {cores_s:.2f} of them in "
        f"sync and {cores_a:.2f} in async. Wall time is CPU work over cores: the cores' ratio "
        f"{share:.2f} times the work's {work:.2f} is {share * work:.2f}x, against the measured "
        f"{med('sync', 'wall_s') / med('async', 'wall_s'):.2f}x over the same windows.",
        f"- **Engines.** A call was in flight to an engine {med('sync', 'engine_busy'):.0%} "
        f"(sync) and {med('async', 'engine_busy'):.0%} (async) of the time; during train + "
        f"push the async loop had {med('async', 'tasks_during_update'):.1f} tasks in flight "
        f"a step.",
    ]


def main() -> None:
    for path in sorted(Path(sys.argv[1]).glob("*.json")):
        print(describe(load(path)), end="\n\n")


if __name__ == "__main__":
    main()
