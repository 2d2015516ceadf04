"""A timeline of one training loop run: what ran when, and what the CPU did meanwhile.

:class:`Recorder` wraps, for the length of a ``with`` block, the points of the
loop that take time (class attributes, put back when the block ends):

- ``task``: an attempt of a task (``AgentExecutor.run``: sandbox, agent, grading),
  labelled with its sample id, so each is attributed to its step's round;
- ``agent``: the agent's episode inside it (``AgentExecutor._run_agent``);
- ``call``: one model call to one engine (``OpenAIBackend.complete``), labelled
  with the engine's address and the weights version that answered;
- ``collect``: the loop waiting for a round's groups (``Rollouts.collect``);
- ``train``: the trainer's optimizer step (``Trainer.step``);
- ``export`` / ``write`` / ``load``: a weight push's parts: the trainer's state
  dict for inference, the checkpoint written to disk, and each engine loading it
  (``OpenAIBackend.update_weights``, labelled with the engine).

:class:`CpuSampler` reads ``/proc`` every ``period_s`` in a thread: the CPU
seconds of this process (the loop, scheduler, agents and trainer), of the
local sandboxes' processes (through the cgroups the runtime makes for them)
and any other child of this process, of each engine process, and the whole
machine's busy time, so a phase can be told apart as waiting or computing, and
the run's own share of the 2 cores from the other work on the machine.
:mod:`timeline_report` reads both.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Span:
    kind: str
    label: str
    start: float
    end: float
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Recorder:
    spans: list[Span] = field(default_factory=list)
    _undo: list[tuple[Any, str, Any]] = field(default_factory=list)

    def add(self, kind: str, label: str, start: float, **extra: Any) -> None:
        self.spans.append(Span(kind, label, start, time.time(), extra))

    def _patch(self, owner: Any, name: str, kind: str, label: Callable[..., str]) -> None:
        """Time every call of ``owner.name`` (a coroutine function or a plain one)."""
        orig = owner.__dict__[name]
        rec = self

        if _is_async(orig):

            @functools.wraps(orig)
            async def timed_async(*a: Any, **kw: Any) -> Any:
                t0 = time.time()
                out = await orig(*a, **kw)
                rec.add(kind, label(*a, **kw), t0, **_figures(out))
                return out

            setattr(owner, name, timed_async)
        else:

            @functools.wraps(orig)
            def timed(*a: Any, **kw: Any) -> Any:
                t0 = time.time()
                out = orig(*a, **kw)
                rec.add(kind, label(*a, **kw), t0)
                return out

            setattr(owner, name, timed)
        self._undo.append((owner, name, orig))

    @contextlib.contextmanager
    def recording(self) -> Iterator[Recorder]:
        from megaflow.app.attempt import AgentExecutor
        from megaflow.app.training.rollouts import Rollouts
        from megaflow.model.openai_compat import OpenAIBackend
        from megaflow.train.trainer import Trainer
        from megaflow.train.weight_sync.disk import DiskWeightSync

        def nothing(*_: Any, **__: Any) -> str:
            return ""

        self._patch(AgentExecutor, "run", "task", lambda _s, ctx: ctx.spec.id)
        self._patch(AgentExecutor, "_run_agent", "agent", lambda _s, ctx, *_: ctx.spec.id)
        self._patch(OpenAIBackend, "complete", "call", lambda s, *_: s.base_url)
        self._patch(Rollouts, "collect", "collect", lambda _s, name: name)
        self._patch(Trainer, "step", "train", nothing)
        self._patch(Trainer, "state_dict_for_inference", "export", nothing)
        self._patch(DiskWeightSync, "write", "write", lambda _s, _w, v: f"v{v}")
        self._patch(OpenAIBackend, "update_weights", "load", lambda s, *_: s.base_url)
        try:
            yield self
        finally:
            for owner, name, orig in reversed(self._undo):
                setattr(owner, name, orig)
            self._undo.clear()


def _figures(out: Any) -> dict[str, Any]:
    """What a span keeps of a call's answer: the weights version of a completion, the
    phase times of a task's result (sandbox start, prepare, agent, grading)."""
    if (version := getattr(out, "weights_version", None)) is not None:
        return {"version": version}
    metrics = getattr(out, "metrics", None)
    if isinstance(metrics, dict):
        return {k: v for k, v in metrics.items() if k.endswith("_s")}
    return {}


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn)


def _stat(pid: int | str) -> tuple[int, list[str]] | None:
    """(ppid, the fields after the command) of ``/proc/<pid>/stat``; None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = raw[raw.rfind(")") + 2 :].split()
    return int(rest[1]), rest


def _cpu(fields: list[str], children: bool) -> float:
    """CPU seconds of a stat line's fields: utime + stime (+ cutime + cstime)."""
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / TICK


def _sandbox_cgroups(pid: int) -> float:
    """CPU seconds of every local sandbox process ``pid`` started: the cgroup (v1 cpuacct
    or v2 cpu) it made for its sandboxes, which keeps counting sandboxes already gone."""
    total = 0.0
    for base, name, scale in (
        (Path("/sys/fs/cgroup/cpuacct/megaflow"), "cpuacct.usage", 1e-9),
        (Path("/sys/fs/cgroup/megaflow"), "cpu.stat", 1e-6),
    ):
        for owner in base.glob(f"{pid}.*"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                text = (owner / name).read_text()
                total += scale * int(text.split()[1] if name == "cpu.stat" else text)
    return total


def _machine_busy() -> float:
    """Busy CPU seconds of the whole machine since boot (every core)."""
    cpu = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(x) for x in cpu]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks[:8]) - idle) / TICK


@dataclass
class CpuSampler:
    """Cumulative CPU seconds by group, sampled every ``period_s``: ``loop`` (this
    process), ``sandbox`` (its other children, live or reaped, and the sandboxes' cgroups),
    each engine by pid
    (read from ``engines_json`` once it exists), ``machine`` (all work on the host)."""

    engines_json: Path
    period_s: float = 0.25
    samples: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    engines: list[int] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True, name="cpu-sampler")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), self.read()))
            self._stop.wait(self.period_s)

    def read(self) -> dict[str, float]:
        me = os.getpid()
        if not self.engines and self.engines_json.exists():
            with contextlib.suppress(ValueError, OSError, KeyError):
                self.engines = list(json.loads(self.engines_json.read_text())["pids"])
        parents: dict[int, int] = {}
        stats: dict[int, list[str]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (got := _stat(entry)) is not None:
                parents[int(entry)], stats[int(entry)] = got
        out: dict[str, float] = {"machine": _machine_busy()}
        mine = stats.get(me)
        out["loop"] = _cpu(mine, children=False) if mine else 0.0
        reaped = (int(mine[13]) + int(mine[14])) / TICK if mine else 0.0
        out["sandbox"] = reaped
        for i, pid in enumerate(self.engines):
            out[f"engine{i}"] = _cpu(stats[pid], children=True) if pid in stats else 0.0
        kids: dict[int, list[int]] = {}
        for pid, ppid in parents.items():
            kids.setdefault(ppid, []).append(pid)
        todo = [p for p in kids.get(me, []) if p not in self.engines]
        while todo:  # live descendants that are not engines, with their reaped children
            pid = todo.pop()
            out["sandbox"] += _cpu(stats[pid], children=True)
            todo += kids.get(pid, [])
        out["sandbox"] += _sandbox_cgroups(me)
        out["ours"] = (
            out["loop"] + out["sandbox"] + sum(out[f"engine{i}"] for i in range(len(self.engines)))
        )
        return out
