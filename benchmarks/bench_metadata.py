"""Metadata backends side by side: PostgreSQL and MongoDB against embedded SQLite.

Starts a throw-away PostgreSQL cluster (``initdb``/``pg_ctl``) and nx-27017 on
loopback, as the tests do, and measures through the ``MetadataStore`` API:
- submit: ``add_tasks`` in batches (tasks/s);
- batched: every task walks SCHEDULED -> ... -> SUCCEEDED with
  ``transition_many`` over a batch of tasks per call (transitions/s);
- unbatched: one ``transition`` per call, its P50 latency in ms;
- contended: two stores claim the same tasks concurrently, one call per
  claim (claims/s; each task must be claimed exactly once).
The peer is the embedded SQLite store, measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))

from tests.fixtures.sql_servers import (
    find_nx27017,
    find_postgres_bindir,
    running_nx27017,
    running_postgres,
)

from ab import ratios, spread
from megaflow.core.errors import InvalidTransition
from megaflow.core.states import TaskState as S
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.storage.abstract import MetadataStore, Transition
from megaflow.storage.mongo import MongoMetadataStore
from megaflow.storage.postgres import PostgresMetadataStore
from megaflow.storage.sqlite import SqliteMetadataStore
from report import LOAD_AT_START, report

CHAIN = [S.SCHEDULED, S.STARTING, S.RUNNING, S.GRADING, S.SUCCEEDED]
Factory = Callable[[str], MetadataStore]


async def measure(make: Factory, n: int, batch: int, singles: int) -> dict[str, float]:
    out: dict[str, float] = {}
    async with make("a") as store:
        await store.create_run(RunSpec(id="b"))
        specs = [TaskSpec(id=f"b/t{i}", run_id="b") for i in range(n)]
        t0 = time.perf_counter()
        for i in range(0, n, batch):
            await store.add_tasks(specs[i : i + batch])
        out["submit"] = n / (time.perf_counter() - t0)
        ids = [s.id for s in specs]
        t0 = time.perf_counter()
        for i in range(0, n, batch):
            chunk = ids[i : i + batch]
            await store.transition_many([Transition(t, d) for d in CHAIN for t in chunk])
        out["batched"] = n * len(CHAIN) / (time.perf_counter() - t0)
        assert await store.count_by_state("b") == {S.SUCCEEDED: n}

        await store.create_run(RunSpec(id="u"))
        await store.add_tasks([TaskSpec(id=f"u/t{i}", run_id="u") for i in range(singles)])
        lat = []
        for i in range(singles):
            t0 = time.perf_counter()
            await store.transition(f"u/t{i}", S.SCHEDULED, expect=S.QUEUED)
            lat.append(time.perf_counter() - t0)
        out["single_p50_ms"] = statistics.median(lat) * 1000

        await store.create_run(RunSpec(id="c"))
        contended = [f"c/t{i}" for i in range(singles)]
        await store.add_tasks([TaskSpec(id=i, run_id="c") for i in contended])
        async with make("b") as other:

            async def claim(s: MetadataStore, task_id: str) -> int:
                try:
                    await s.transition(task_id, S.SCHEDULED, expect=S.QUEUED)
                except InvalidTransition:
                    return 0
                return 1

            async def worker(s: MetadataStore, order: list[str]) -> int:
                return sum([await claim(s, t) for t in order])

            t0 = time.perf_counter()
            wins = await asyncio.gather(worker(store, contended), worker(other, contended[::-1]))
            out["contended"] = singles / (time.perf_counter() - t0)
        assert sum(wins) == singles, f"{sum(wins)} claims for {singles} tasks"
        recs = await store.list_tasks("c")
        assert all(r.attempts == 1 for r in recs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tasks", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--singles", type=int, default=1000, help="calls of one transition each")
    ap.add_argument("--quick", action="store_true", help="a short run (2,000 tasks, 200 calls)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions (>= 3)")
    args = ap.parse_args()
    n, singles = (2000, 200) if args.quick else (args.tasks, args.singles)
    bindir, nx = find_postgres_bindir(), find_nx27017()
    if bindir is None or nx is None:
        sys.exit("needs PostgreSQL's initdb/pg_ctl and nx-27017: run `make sysdeps setup`")
    reps = max(3, args.reps)
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        d = Path(tmp)
        pg = stack.enter_context(running_postgres(bindir))
        mongo = stack.enter_context(running_nx27017(nx, d))

        def factories(rep: int) -> dict[str, Factory]:  # fresh storage per repetition
            return {
                "sqlite (peer, embedded)": lambda _: SqliteMetadataStore(d / f"m{rep}.db"),
                "postgres": lambda _: PostgresMetadataStore(pg.dsn, schema=f"bench{rep}"),
                "mongo on nx-27017": lambda _: MongoMetadataStore(
                    mongo.uri, database=f"bench{rep}"
                ),
            }

        for rep in range(reps):  # interleaved: sqlite, postgres, mongo, sqlite, ...
            for name, make in factories(rep).items():
                results.setdefault(name, []).append(
                    asyncio.run(measure(make, n, args.batch, singles))
                )
    peer = [r["batched"] for r in results["sqlite (peer, embedded)"]]

    X = "{:.2f}x".format

    def med(runs: list[dict[str, float]], key: str, fmt: str = "{:,.0f}") -> str:
        return fmt.format(statistics.median(r[key] for r in runs))

    rows = [
        [
            name,
            med(runs, "submit"),
            f"{med(runs, 'batched')} ({spread(ratios([r['batched'] for r in runs], peer), X)})",
            med(runs, "single_p50_ms", "{:.2f}"),
            med(runs, "contended"),
        ]
        for name, runs in results.items()
    ]
    report(
        "metadata",
        f"Metadata stores: {n:,} tasks in batches of {args.batch}, {singles} single calls",
        [
            "backend",
            "submit tasks/s",
            "batched transitions/s (vs sqlite)",
            "single transition P50 ms",
            "contended claims/s (2 stores)",
        ],
        rows,
        notes="Loopback servers started by the benchmark; the PostgreSQL cluster runs with "
        "fsync=off and synchronous_commit=off (as in the tests), SQLite in WAL with "
        "synchronous=NORMAL. nx-27017 stores in memory. Every task is claimed exactly once. "
        f"Medians of {reps} repetitions interleaved sqlite, postgres, mongo, sqlite, ..., "
        "each on fresh storage, servers started once before any timing; the ratio to sqlite "
        "is taken within each repetition, median (min-max).",
        load_before=LOAD_AT_START,
    )


if __name__ == "__main__":
    main()
