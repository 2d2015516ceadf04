"""The rank protocol: rank 0 drives, the other ranks follow.

Rank 0 is the only rank the caller talks to. Every call on the
:class:`~megaflow.train.trainer.Trainer` that needs all ranks is an *op*:
rank 0 broadcasts ``[name, args]`` from rank 0 with
``torch.distributed.broadcast_object_list`` and then runs
``RankWorker.<name>(*local_args)`` itself; each other rank sits in
:func:`serve`, receives the op, and runs ``RankWorker.<name>(*args)``. So all
ranks enter the same collectives in the same order. The ops are the names in
:data:`OPS`; ``stop`` ends :func:`serve`. A worker rank's ``args`` may differ
from rank 0's own (a restore passes the checkpoint directory to rank 0 only).

An op that raises on a worker rank is not reported back; rank 0 then waits
in the op's collectives until the process group's timeout (``timeout_s``)
and fails there. Each rank logs its error to stderr first.
"""

from __future__ import annotations

import sys
import traceback
from typing import Any

import torch.distributed as dist

from megaflow.train.worker import RankWorker

#: The worker methods rank 0 may ask every rank to run.
OPS = frozenset({"step", "inference_state", "full_state", "restore"})
STOP = "stop"


def send(name: str, args: tuple[Any, ...]) -> None:
    """Rank 0: tell every other rank to run op ``name`` with ``args``."""
    if name != STOP and name not in OPS:
        raise ValueError(f"unknown trainer op {name!r}")
    dist.broadcast_object_list([name, args], src=0)


def serve(worker: RankWorker) -> None:
    """Ranks > 0: run the ops rank 0 sends until it sends ``stop``."""
    while True:
        msg: list[Any] = [None, None]
        dist.broadcast_object_list(msg, src=0)
        name, args = msg
        if name == STOP:
            return
        if name not in OPS:
            raise RuntimeError(f"rank {worker.rank} received unknown trainer op {name!r}")
        try:
            getattr(worker, name)(*args)
        except Exception:
            print(f"trainer rank {worker.rank}: op {name} failed", file=sys.stderr)
            traceback.print_exc()
            raise
