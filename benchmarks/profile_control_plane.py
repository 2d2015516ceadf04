"""The control plane's CPU per episode, alone: the rollout's MegaFlow side on the dummy runtime.

``bench_rollout.py`` measures this side among four others (its row "control
plane: MegaFlow on the dummy runtime"); this script runs only that side, so
a change to the scheduler, pool, agent, model client or stores can be
measured in seconds and profiled without a thousand sandboxes around it.
Each repetition is :func:`bench_rollout.megaflow` with ``dummy=True``: the
same stores (a SQLite file and a local artifact folder), scheduler, pool,
builtin agent and scripted model client, the same five-step episodes, the
same untimed warm-up episode, in a fresh event loop under ``tuned_gc()``.
The figure is the CPU time of this process (``getrusage``, its threads
included: the artifact writes run on worker threads) per episode.

::

    python benchmarks/profile_control_plane.py --episodes 1024 --reps 5
    python benchmarks/ab.py --before REV -- python benchmarks/profile_control_plane.py
    py-spy record -o cp.speedscope --format speedscope -- \
        python benchmarks/profile_control_plane.py --reps 3

It prints one line per repetition and ``ab cp-cpu-ms/episode MEDIAN`` (with
``cp-wall-s``) for ``ab.py``; it writes no table. ``--root DIR`` keeps the
stores under ``DIR`` (left in place, for the caller to remove), so a
profiler attached to the whole process does not also see a temporary
folder's removal at exit. ``--discard-artifacts`` measures what the artifact
writes cost: the local artifact store's ``put`` checks the key and hashes the
bytes but writes nothing (a measuring device, not a mode of MegaFlow).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report
from bench_rollout import megaflow, tuned
from megaflow.storage.abstract import ArtifactRef
from megaflow.storage.local_artifacts import LocalArtifactStore


async def _discard(self: LocalArtifactStore, key: str, data: bytes) -> ArtifactRef:
    self._where(key)
    return ArtifactRef(key=key, size=len(data), sha256=hashlib.sha256(data).hexdigest())


def main() -> None:
    # No table is written, so the load sampler that importing report starts would
    # only add its once-a-second scan of every process to this process's CPU.
    report.SAMPLER.stop()
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--episodes", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--root", type=Path, help="keep the stores here (default: a temporary folder)")
    ap.add_argument("--discard-artifacts", action="store_true", help="write no artifact files")
    args = ap.parse_args()
    if args.discard_artifacts:
        LocalArtifactStore.put = _discard  # type: ignore[method-assign]
    n = args.episodes
    cpu_ms: list[float] = []
    walls: list[float] = []
    with contextlib.ExitStack() as stack:
        root = args.root or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for rep in range(args.reps):
            wall, cpu = tuned(megaflow(root / f"cp{rep}", n, dummy=True))
            cpu_ms.append(cpu / n * 1000)
            walls.append(wall)
            print(f"rep {rep}: {n} episodes, {wall:.2f} s wall, {cpu_ms[-1]:.3f} ms CPU/episode")
    print(f"ab cp-cpu-ms/episode {statistics.median(cpu_ms):.3f}")
    print(f"ab cp-wall-s {statistics.median(walls):.3f}")


if __name__ == "__main__":
    main()
