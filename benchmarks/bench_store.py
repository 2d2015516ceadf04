"""Task state transitions per second in the SQLite metadata store.

Every task walks the full happy path (SCHEDULED -> STARTING -> RUNNING ->
GRADING -> SUCCEEDED), with the state machine checked on every step:
- batched: ``transition_many`` with many transitions per transaction;
- unbatched: one transaction per transition;
- peer: the same UPDATE statements through bare ``sqlite3`` in batches,
  with no state check, as the floor of what SQLite itself costs here.
Target: at least 20,000 batched transitions/s.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab import ratios, spread
from megaflow.core.states import TaskState as S
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.storage.abstract import Transition
from megaflow.storage.sqlite import SqliteMetadataStore
from report import LOAD_AT_START, report

CHAIN = [S.SCHEDULED, S.STARTING, S.RUNNING, S.GRADING, S.SUCCEEDED]


async def seeded(path: Path, n: int) -> tuple[SqliteMetadataStore, list[str]]:
    store = SqliteMetadataStore(path)
    await store.start()
    await store.create_run(RunSpec(id="bench"))
    ids = [f"bench/t{i}" for i in range(n)]
    await store.add_tasks([TaskSpec(id=i, run_id="bench") for i in ids])
    return store, ids


async def batched(path: Path, n: int, batch: int) -> float:
    store, ids = await seeded(path, n)
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        chunk = ids[i : i + batch]
        for dst in CHAIN:
            await store.transition_many([Transition(t, dst) for t in chunk])
    dt = time.perf_counter() - t0
    assert await store.count_by_state("bench") == {S.SUCCEEDED: n}
    await store.stop()
    return n * len(CHAIN) / dt


async def unbatched(path: Path, n: int) -> float:
    store, ids = await seeded(path, n)
    t0 = time.perf_counter()
    for t in ids:
        for dst in CHAIN:
            await store.transition_many([Transition(t, dst)])
    dt = time.perf_counter() - t0
    assert await store.count_by_state("bench") == {S.SUCCEEDED: n}
    await store.stop()
    return n * len(CHAIN) / dt


async def raw_sqlite(path: Path, n: int, batch: int) -> float:
    store, ids = await seeded(path, n)
    await store.stop()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous=NORMAL")
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        chunk = ids[i : i + batch]
        for dst in CHAIN:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "UPDATE tasks SET state = ?, updated_at = ? WHERE id = ?",
                [(dst.value, time.time(), t) for t in chunk],
            )
            conn.execute("COMMIT")
    dt = time.perf_counter() - t0
    conn.close()
    return n * len(CHAIN) / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tasks", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="a short run (2,000 tasks)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions (>= 3)")
    args = ap.parse_args()
    n = 2000 if args.quick else args.tasks
    reps = max(3, args.reps)
    b: list[float] = []
    u: list[float] = []
    r: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for k in range(reps):  # interleaved: batched, unbatched, bare sqlite3, batched, ...
            b.append(asyncio.run(batched(d / f"b{k}.db", n, args.batch)))
            u.append(asyncio.run(unbatched(d / f"u{k}.db", max(n // 10, 200))))
            r.append(asyncio.run(raw_sqlite(d / f"r{k}.db", n, args.batch)))
    big, x = "{:,.0f}".format, "{:.2f}x".format
    rows = [
        ["batched (transition_many)", f"{args.batch}", spread(b, big), spread(ratios(b, r), x),
         ">= 20,000"],
        ["unbatched (one per commit)", "1", spread(u, big), spread(ratios(u, r), x), ""],
        ["peer: bare sqlite3 UPDATE", f"{args.batch}", spread(r, big), "1.00x", ""],
    ]  # fmt: skip
    report(
        "store",
        f"SQLite metadata store: task state transitions/s ({n:,} tasks x {len(CHAIN)} steps)",
        ["mode", "per transaction", "transitions/s", "vs bare sqlite3", "target"],
        rows,
        notes=f"batched/unbatched speed-up: {spread(ratios(b, u), '{:.1f}x'.format)}; "
        "WAL, synchronous=NORMAL, state machine checked on every step. Median (min-max) of "
        f"{reps} repetitions interleaved batched, unbatched, bare sqlite3, batched, ..., each "
        "on a fresh database; ratios are taken within each repetition.",
        load_before=LOAD_AT_START,
    )


if __name__ == "__main__":
    main()
