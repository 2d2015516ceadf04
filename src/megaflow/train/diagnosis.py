"""Where the trainer's step time goes, per rank, from its metrics log.

Reads the JSON lines :mod:`megaflow.train.metrics_log` wrote (one per step,
each with its ranks' ``compute_s``, ``comm_s`` and ``idle_s``; see
:class:`megaflow.train.stats.RankTiming`) and sums them per rank. The rank
that idles least is the one the others wait for. ``megaflow train diagnose``
prints the result.

This module imports neither torch nor transformers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megaflow.core.errors import InvalidInput


@dataclass(frozen=True, slots=True)
class RankShare:
    rank: int
    steps: int
    compute_s: float  # totals over the steps read
    comm_s: float
    idle_s: float

    @property
    def total_s(self) -> float:
        return self.compute_s + self.comm_s + self.idle_s

    def share(self, part: float) -> float:
        return part / self.total_s if self.total_s else 0.0


@dataclass(frozen=True, slots=True)
class Diagnosis:
    steps: list[dict[str, Any]]  # the records read, in file order
    ranks: list[RankShare]
    strategy: str

    @property
    def straggler(self) -> int | None:
        """The rank the others wait for (the least idle), with several ranks."""
        if len(self.ranks) < 2:
            return None
        return min(self.ranks, key=lambda r: r.idle_s).rank

    def verdict(self) -> str:
        if not self.ranks:
            return "no step trained anything: there is no time to attribute"
        tot = sum(r.total_s for r in self.ranks) or 1.0
        comm = sum(r.comm_s for r in self.ranks) / tot
        idle = sum(r.idle_s for r in self.ranks) / tot
        if idle >= 0.2:
            return (
                f"ranks idle {idle:.0%} of their time waiting for rank {self.straggler}: "
                "its micro-batches hold more tokens (or its device is slower)"
            )
        if comm >= 0.2:
            return f"communication after backward takes {comm:.0%}: consider 1-bit Adam or hsdp"
        return f"compute-bound: communication {comm:.0%}, idle {idle:.0%}"


def read_log(path: Path) -> list[dict[str, Any]]:
    """The step records of a metrics log; InvalidInput naming the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"cannot read metrics log {path}: {exc.strerror}") from None
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict) or not isinstance(rec.get("ranks", []), list):
                raise ValueError("not a step record")
            for r in rec.get("ranks", []):
                float(r["compute_s"]), float(r["comm_s"]), float(r["idle_s"])
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidInput(f"{path}:{n}: not a trainer step record ({exc})") from None
        records.append(rec)
    return records


def diagnose(records: list[dict[str, Any]]) -> Diagnosis:
    sums: dict[int, list[float]] = {}
    for rec in records:
        for rank, t in enumerate(rec.get("ranks", [])):
            acc = sums.setdefault(rank, [0.0, 0.0, 0.0, 0.0])
            acc[0] += 1
            acc[1] += float(t["compute_s"])
            acc[2] += float(t["comm_s"])
            acc[3] += float(t["idle_s"])
    ranks = [RankShare(r, int(a[0]), a[1], a[2], a[3]) for r, a in sorted(sums.items())]
    strategy = str(records[-1].get("strategy", "?")) if records else "?"
    return Diagnosis(records, ranks, strategy)
