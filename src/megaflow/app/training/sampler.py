"""Which tasks a step of a mixed train run draws: by set weight, and by curriculum.

Each of a step's ``per_step`` prompts is drawn in two stages. First a set,
by smooth weighted round robin: every step each set that has a task to give
earns ``per_step * weight / (sum of those sets' weights)`` credit, and each
slot goes to the set with the most credit (which pays 1 for it); so a set's
share of the prompts is its weight's share, exactly over the run and within
one prompt in every step, with no luck involved (two sets of equal weight
and two prompts a step give one prompt each, every step). Then a task of
that set that the step has not drawn yet. Without a
curriculum the task is the next of the set's own order (a shuffle per pass
over the set, seeded by the seed, the set and the pass), so every task of a
set comes up once before any comes up again. With a curriculum
(:class:`~megaflow.train.task_sets.CurriculumConfig`) a task is drawn with
weight ``max(p (1 - p), floor)``, ``p = (passes + 1) / (graded + 2)`` its
smoothed running pass rate, so tasks the policy solves about half the time
come up most and unseen ones are tried; a task graded ``min_attempts`` times
or more that passed every time, or never, is skipped. When every task of
every set is skipped the step draws from all of them again as without the
skip (``lifted`` says so): a run of nothing but solved and unsolvable tasks
then stops the way any run without signal does
(``train.max_steps_without_signal``). A set with every task skipped gives
its share to the others.

Draws change the sampler's state (the sets' orders and, through
:meth:`SetSampler.observe`, the pass rates), so steps are drawn once each,
in order. :meth:`SetSampler.state` is all of it, as JSON, for a checkpoint;
:meth:`SetSampler.load` puts it back on resume, so a curriculum run goes on
with the pass rates it had, not from zero.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from megaflow.train.task_sets import CurriculumConfig


@dataclass
class TaskRecord:
    """A task's graded samples so far and how many passed (reward 1)."""

    graded: int = 0
    passed: int = 0

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.graded if self.graded else None


class SetSampler:
    def __init__(
        self,
        sets: Mapping[str, Sequence[str]],
        weights: Mapping[str, float],
        per_step: int,
        seed: int = 0,
        curriculum: CurriculumConfig | None = None,
    ) -> None:
        """``sets``: each set's task keys (unique across sets); ``weights`` by set."""
        if not any(sets.values()):
            raise ValueError("the task sets hold no task")
        self.sets = {name: list(keys) for name, keys in sets.items()}
        self.weights = dict(weights)
        self.per_step = per_step
        self.seed = seed
        self.curriculum = curriculum
        self.records: dict[str, TaskRecord] = {k: TaskRecord() for ks in sets.values() for k in ks}
        self._order: dict[str, list[str]] = {name: [] for name in sets}
        self._passes: dict[str, int] = dict.fromkeys(sets, 0)
        self.credit: dict[str, float] = dict.fromkeys(sets, 0.0)
        self.lifted: list[int] = []
        """The steps drawn with the curriculum's skip lifted (every task was skipped)."""

    def observe(self, key: str, rewards: Iterable[float]) -> None:
        """Count a task's graded rewards (NaN, a masked sample, is not counted)."""
        rec = self.records[key]
        for r in rewards:
            if not math.isnan(r):
                rec.graded += 1
                rec.passed += r >= 1.0

    def state(self) -> dict[str, Any]:
        """Everything a draw depends on besides the settings, as JSON."""
        return {
            "records": {k: [r.graded, r.passed] for k, r in self.records.items() if r.graded},
            "order": self._order, "passes": self._passes, "credit": self.credit,
            "lifted": self.lifted,
        }  # fmt: skip

    def load(self, state: dict[str, Any]) -> None:
        """Take back :meth:`state` of a sampler with the same sets."""
        records = state["records"]
        if set(records) - set(self.records) or set(state["order"]) != set(self.sets):
            raise ValueError("the saved sampler state names other tasks or sets")
        for key, (graded, passed) in records.items():
            self.records[key] = TaskRecord(int(graded), int(passed))
        self._order = {n: list(ks) for n, ks in state["order"].items()}
        self._passes = {n: int(v) for n, v in state["passes"].items()}
        self.credit = {n: float(v) for n, v in state["credit"].items()}
        self.lifted = [int(s) for s in state["lifted"]]

    def skipped(self, key: str) -> bool:
        """A task the curriculum skips: graded often enough, and always or never passed."""
        c, rec = self.curriculum, self.records[key]
        if c is None or rec.graded < c.min_attempts:
            return False
        return rec.passed in (0, rec.graded)

    def task_weight(self, key: str) -> float:
        assert self.curriculum is not None
        rec = self.records[key]
        p = (rec.passed + 1) / (rec.graded + 2)
        return max(p * (1 - p), self.curriculum.floor)

    def draw(self, step: int) -> list[str]:
        """The task keys of ``step``: at most ``per_step``, none twice."""
        rng = random.Random(f"{self.seed}:mix:{step}")
        open_ = {s: [k for k in ks if not self.skipped(k)] for s, ks in self.sets.items()}
        if not any(open_.values()):
            open_ = {s: list(ks) for s, ks in self.sets.items()}
            self.lifted.append(step)
        live = [n for n, ks in open_.items() if ks]
        total = sum(self.weights[n] for n in live)
        for n in live:
            self.credit[n] += self.per_step * self.weights[n] / total
        chosen: list[str] = []
        taken: set[str] = set()
        per_set = dict.fromkeys(live, 0)
        for _ in range(self.per_step):
            names = [n for n in live if len(open_[n]) > per_set[n]]
            if not names:
                break
            name = max(names, key=lambda n: (self.credit[n], -live.index(n)))
            self.credit[name] -= 1.0
            if self.curriculum is not None:
                cands = [k for k in open_[name] if k not in taken]
                key = rng.choices(cands, weights=[self.task_weight(k) for k in cands])[0]
            else:
                key = self._next(name, taken)
            chosen.append(key)
            taken.add(key)
            per_set[name] += 1
        for n in live:  # a set short of tasks does not hoard credit
            self.credit[n] = max(-self.per_step, min(self.per_step, self.credit[n]))
        return chosen

    def _next(self, name: str, taken: set[str]) -> str:
        """The next task of the set's own order that the step has not taken."""
        while True:
            order = self._order[name]
            for i, key in enumerate(order):
                if key not in taken:
                    del order[i]
                    return key
            # this pass is used up (or holds only tasks the step has): start the next
            fresh = list(self.sets[name])
            random.Random(f"{self.seed}:{name}:{self._passes[name]}").shuffle(fresh)
            self._passes[name] += 1
            self._order[name] = order + fresh
