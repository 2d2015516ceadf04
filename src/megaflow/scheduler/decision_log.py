"""The learned policy's decisions and their outcomes, recorded for fine-tuning.

A live scheduler under ``policy: {type: learned}`` (with ``record: true``, the
default) writes, per run, what each placement decision saw and chose and how
the placement ended, as gzip-compressed JSON Lines chunks in the artifact
store::

    runs/<run>/decisions/<session>-<chunk>.jsonl.gz

``<session>`` names one scheduler process (UTC start time and a random tag),
so a resumed run adds chunks instead of overwriting. Each chunk starts with a
header line (``"k": "h"``: format, feature names, checkpoint), then decision
lines (``"k": "d"``: task, time, candidate rows, critic state, the row chosen
and its probability under the policy) and outcome lines (``"k": "o"``: task,
outcome, placed, ended, arrival, instance, preemptions). Outcomes are written
when they happen, not joined to their decision: a line is final once written.
A chunk is written every ``record_every`` lines and at stop; a crash loses at
most the lines not yet written. After ``record_max`` decisions the scheduler
records no more (and says so once). :func:`read_decisions` reads it back
(``megaflow sim train --from-run``).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from megaflow.core.errors import InvalidInput
from megaflow.scheduler.abstract import PendingTask, SchedulingPolicy, TaskFeedback
from megaflow.scheduler.config import LearnedPolicyConfig, SchedulerConfig
from megaflow.scheduler.learned_net import FEATURES
from megaflow.storage.abstract import ArtifactStore

if TYPE_CHECKING:
    from megaflow.scheduler.learned import LearnedPolicy
    from megaflow.scheduler.learned_net import Array

log = logging.getLogger(__name__)

FORMAT = "megaflow-decisions/1"
_DIGITS = 4


def decisions_prefix(run_id: str) -> str:
    return f"runs/{run_id}/decisions/"


class DecisionLog:
    """Buffers the lines of each run and writes them as chunks to ``artifacts``."""

    def __init__(self, cfg: LearnedPolicyConfig, artifacts: ArtifactStore) -> None:
        from megaflow.scheduler.learned import learned_factory

        self.cfg = cfg
        self.artifacts = artifacts
        self._make = learned_factory(cfg)
        self.session = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)
        self._lines: dict[str, list[str]] = {}
        self._chunks: dict[str, int] = {}
        self._open: dict[str, str] = {}
        """Task id -> run id of recorded decisions whose outcome is still to come."""
        self._writes: set[asyncio.Task[None]] = set()
        self.decisions = 0
        self.dropped = 0
        self.write_errors = 0

    @classmethod
    def build(cls, cfg: SchedulerConfig, artifacts: ArtifactStore) -> DecisionLog | None:
        """A log when the policy is ``learned`` with ``record`` on; else None."""
        policy = cfg.policy
        if not isinstance(policy, LearnedPolicyConfig) or not policy.record:
            return None
        return cls(policy, artifacts)

    def make_queue(self) -> SchedulingPolicy:
        """A region's learned policy, reporting its decisions here."""
        policy: LearnedPolicy = self._make()  # type: ignore[assignment]
        policy.record = self.decision
        return policy

    # -- recording (synchronous: called inside the dispatcher's planning round) --------
    def decision(
        self, task: PendingTask, rows: Array, state: Array, chosen: int, prob: float, now: float
    ) -> None:
        if self.decisions >= self.cfg.record_max:
            if not self.dropped:
                log.warning(
                    "learned policy: %d decisions recorded (scheduler.policy.record_max); "
                    "recording no more in this scheduler",
                    self.decisions,
                )
            self.dropped += 1
            return
        self.decisions += 1
        run = task.spec.run_id
        self._open[task.id] = run
        line = {"k": "d", "task": task.id, "t": now, "a": chosen, "p": round(prob, _DIGITS),
                "rows": rows.astype(float).round(_DIGITS).tolist(),
                "state": state.astype(float).round(_DIGITS).tolist()}  # fmt: skip
        self._add(run, line)

    def observe(self, fb: TaskFeedback) -> None:
        """The core's listener: the outcome of a placement whose decision was recorded."""
        run = self._open.pop(fb.task.id, None)
        if run is None:
            return
        line = {"k": "o", "task": fb.task.id, "outcome": fb.outcome.value, "placed": fb.placed_at,
                "ended": fb.ended_at, "enq": fb.task.enqueued_at, "instance": fb.instance,
                "preemptions": fb.task.preemptions}  # fmt: skip
        self._add(run, line)

    def _add(self, run: str, line: dict[str, Any]) -> None:
        lines = self._lines.setdefault(run, [])
        lines.append(json.dumps(line, separators=(",", ":")))
        if len(lines) >= self.cfg.record_every:
            self._flush(run)

    def _flush(self, run: str) -> None:
        lines = self._lines.pop(run, [])
        if not lines:
            return
        n = self._chunks[run] = self._chunks.get(run, 0) + 1
        header = {"k": "h", "format": FORMAT, "features": list(FEATURES),
                  "checkpoint": self.cfg.checkpoint, "greedy": self.cfg.greedy,
                  "session": self.session}  # fmt: skip
        raw = "\n".join([json.dumps(header, separators=(",", ":")), *lines, ""]).encode()
        key = f"{decisions_prefix(run)}{self.session}-{n:06d}.jsonl.gz"
        task = asyncio.get_running_loop().create_task(self._write(key, raw))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, key: str, raw: bytes) -> None:
        try:
            data = await asyncio.to_thread(gzip.compress, raw, 6)
            await self.artifacts.put(key, data)
        except Exception as exc:  # recording must never stop the scheduling
            self.write_errors += 1
            log.warning("learned policy: cannot write decisions to %s: %s", key, exc)

    async def close(self) -> None:
        """Write what is buffered and wait for every chunk to be stored."""
        for run in list(self._lines):
            self._flush(run)
        while self._writes:
            await asyncio.gather(*list(self._writes))


# -- reading back ----------------------------------------------------------------------
@dataclass
class Decision:
    """One recorded decision and, once known, how its placement ended."""

    task: str
    t: float
    rows: list[list[float]]
    state: list[float]
    chosen: int
    prob: float
    outcome: str | None = None
    enqueued_at: float | None = None
    ended_at: float | None = None


@dataclass
class Session:
    """The decisions one scheduler process recorded for a run, in time order."""

    name: str
    checkpoint: str
    greedy: bool
    decisions: list[Decision] = field(default_factory=list)


def parse_chunks(chunks: list[tuple[str, bytes]]) -> list[Session]:
    """Join the decision and outcome lines of ``(key, gzip data)`` chunks, by session.

    An outcome belongs to the latest earlier decision of its task (a retried task
    is decided again). A damaged chunk is an ``InvalidInput`` naming its key."""
    sessions: dict[str, Session] = {}
    for key, data in sorted(chunks):
        try:
            lines = [json.loads(s) for s in gzip.decompress(data).decode().splitlines() if s]
            head = lines[0]
            if head.get("k") != "h" or head.get("format") != FORMAT:
                raise ValueError(f"no {FORMAT} header")
            if tuple(head.get("features", ())) != FEATURES:
                raise ValueError("recorded with other features than this version computes")
            sess = sessions.setdefault(
                head["session"], Session(head["session"], head["checkpoint"], head["greedy"])
            )
            for line in lines[1:]:
                _apply(sess, line)
        except (OSError, EOFError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise InvalidInput(f"recorded decisions {key} are not readable: {exc}") from None
    return [sessions[name] for name in sorted(sessions)]


def _apply(sess: Session, line: dict[str, Any]) -> None:
    if line["k"] == "d":
        sess.decisions.append(
            Decision(line["task"], float(line["t"]), line["rows"], line["state"],
                     int(line["a"]), float(line["p"]))
        )  # fmt: skip
        return
    if line["k"] != "o":
        raise ValueError(f"unknown line kind {line['k']!r}")
    for d in reversed(sess.decisions):
        if d.task == line["task"]:
            if d.outcome is None:
                d.outcome, d.enqueued_at = line["outcome"], float(line["enq"])
                d.ended_at = float(line["ended"])
            return


async def read_decisions(artifacts: ArtifactStore, run_id: str) -> list[Session]:
    """Every session of recorded decisions of ``run_id`` (an empty list if none)."""
    keys = [k for k in await artifacts.list(decisions_prefix(run_id)) if k.endswith(".jsonl.gz")]
    chunks = [(k, await artifacts.get(k)) for k in keys]
    return parse_chunks(chunks)
