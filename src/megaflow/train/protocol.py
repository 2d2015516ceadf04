"""The rank protocol: rank 0 drives, the other ranks follow.

Rank 0 is the only rank the caller talks to. Every call on the
:class:`~megaflow.train.trainer.Trainer` that needs all ranks is an *op*:
rank 0 broadcasts ``[name, args]`` (pickled, the way
``torch.distributed.broadcast_object_list`` does) and then runs
``RankWorker.<name>(*local_args)`` itself; each other rank sits in
:func:`serve`, receives the op, and runs ``RankWorker.<name>(*args)``. So all
ranks enter the same collectives in the same order. The ops are the names in
:data:`OPS`; ``stop`` ends :func:`serve`. A worker rank's ``args`` may differ
from rank 0's own (a restore passes the checkpoint directory to rank 0 only).

An op that raises on a worker rank is not reported back; rank 0 then waits
in the op's collectives until the process group's timeout (``timeout_s``)
and fails there. Each rank logs its error to stderr first.

The message's own broadcasts keep their work handles until the next message
(:data:`_LAST`). gloo's worker thread otherwise drops the last reference to a
finished broadcast, and with it the tensors Python made; when that happens
after the interpreter began to exit (``stop`` is the last message, and under
load the thread runs late) it needs the GIL, cannot have it, and the process
aborts with "terminate called without an active exception". Held here, the
work is freed by the main thread. :func:`leave` also waits at a barrier, so
no rank leaves the group while another still reads from it.
"""

from __future__ import annotations

import pickle
import sys
import traceback
from typing import Any

import torch
import torch.distributed as dist

from megaflow.train.worker import RankWorker

#: The worker methods rank 0 may ask every rank to run.
OPS = frozenset({"step", "inference_state", "full_state", "restore"})
STOP = "stop"

#: The work handles of the last message's broadcasts (see the module's doc).
_LAST: list[Any] = []


def _broadcast(payload: bytes | None) -> bytes:
    """Rank 0 passes ``payload``; every rank gets it back."""
    size = torch.tensor([0 if payload is None else len(payload)], dtype=torch.long)
    sent = dist.broadcast(size, src=0, async_op=True)
    sent.wait()
    if payload is None:
        data = torch.empty(int(size.item()), dtype=torch.uint8)
    else:
        data = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    body = dist.broadcast(data, src=0, async_op=True)
    body.wait()
    _LAST[:] = [sent, body]
    return data.numpy().tobytes()


def send(name: str, args: tuple[Any, ...]) -> None:
    """Rank 0: tell every other rank to run op ``name`` with ``args``."""
    if name != STOP and name not in OPS:
        raise ValueError(f"unknown trainer op {name!r}")
    _broadcast(pickle.dumps((name, args)))


def serve(worker: RankWorker) -> None:
    """Ranks > 0: run the ops rank 0 sends until it sends ``stop``."""
    while True:
        name, args = pickle.loads(_broadcast(None))  # rank 0 of this job sent it
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


def leave() -> None:
    """Every rank, last: wait for the others, then destroy the process group."""
    dist.barrier()
    dist.destroy_process_group()
