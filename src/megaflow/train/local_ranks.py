"""Run one function on N local processes joined in a gloo process group.

The distributed pieces of the trainer (1-bit Adam's compressed all-reduce,
the pipeline schedules, the planner's measured step) are tested and
benchmarked on real processes talking over gloo, as they would across
machines. :func:`run_ranks` starts ``world_size`` spawned processes, joins
them through a file store in a private temporary directory (no port to pick
or collide on), calls ``fn(rank, world_size, *args)`` on each with one
intra-op thread per rank, and returns the ranks' results (pickled by value) in rank order. A
rank that raises makes the call raise with that rank's traceback; a rank
that hangs is killed at ``timeout_s``.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import queue
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from megaflow.core.errors import MegaFlowTimeout


class RankFailed(RuntimeError):
    """A rank of :func:`run_ranks` raised; the message holds its traceback."""


def _main(
    fn: Callable[..., Any], rank: int, world: int, store: str, args: tuple[Any, ...], out: Any
) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
        try:
            # plain pickle: torch's queue pickler would share tensors through memory
            # that is gone once this process exits
            out.put((rank, True, pickle.dumps(fn(rank, world, *args))))
        finally:
            dist.destroy_process_group()
    except BaseException:
        out.put((rank, False, traceback.format_exc()))


def run_ranks(
    fn: Callable[..., Any], world_size: int, *args: Any, timeout_s: float = 120.0
) -> list[Any]:
    """``[fn(0, world_size, *args), ..., fn(world_size - 1, ...)]``, each on its own
    gloo rank. ``fn`` and ``args`` must be picklable (a module-level function)."""
    ctx = mp.get_context("spawn")
    results: dict[int, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mf-ranks-") as tmp:
        store = str(Path(tmp) / "store")
        out = ctx.Queue()
        procs = [
            ctx.Process(target=_main, args=(fn, r, world_size, store, args, out), daemon=True)
            for r in range(world_size)
        ]
        for p in procs:
            p.start()
        try:
            while len(results) < world_size:
                try:
                    rank, ok, value = out.get(timeout=timeout_s)
                except queue.Empty:
                    raise MegaFlowTimeout(
                        f"{world_size - len(results)} of {world_size} ranks gave no result "
                        f"within {timeout_s:.0f} s"
                    ) from None
                if not ok:
                    raise RankFailed(f"rank {rank} failed:\n{value}")
                results[rank] = pickle.loads(value)
        finally:
            for p in procs:
                p.join(timeout=10)
                if p.is_alive():
                    p.kill()
                    p.join()
    return [results[r] for r in range(world_size)]
