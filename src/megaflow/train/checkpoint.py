"""Trainer checkpoints in the artifact store, visible only once complete.

A checkpoint is written by rank 0 from the full (gathered) state: the model
and AdamW state as a ``torch.distributed.checkpoint`` (DCP) directory, every
rank's random generator states (``rng.pt``) and ``trainer.json`` (step,
weights version, world size and the caller's ``extra``). It is first written
to a local staging directory, then each file is put under
``PREFIX/step-NNNNNNNN/``, and only then is ``PREFIX/latest`` written: a small
JSON naming that directory and its files. A reader goes through ``latest``
alone, so a checkpoint whose writer died before the pointer (a SIGKILL in the
middle of the uploads) is never read; the next save deletes its leftovers.
Each artifact put is atomic (temp file and rename, or one object), so the
pointer is either the old one or the new one.

``latest`` also lists the checkpoints kept (``keep_checkpoints``); a save
deletes every other key under the prefix.

An asynchronous save (``async_checkpoint``) gathers the state as usual, then
takes copies of its tensors (:func:`owned`) so the steps that follow cannot
change what is being written, and writes and uploads in the background in
the same order, pointer last: a process that dies meanwhile leaves the
previous checkpoint as ``latest``.
"""

from __future__ import annotations

import asyncio
import json
import random
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

from megaflow.core.errors import InvalidInput, NotFound, StorageError
from megaflow.storage.abstract import ArtifactStore

LATEST = "latest"


@dataclass(frozen=True, slots=True)
class FullState:
    """Unsharded CPU state of the trainer, held by rank 0 (empty dicts elsewhere)."""

    model: dict[str, Any]
    optim: dict[str, Any] | None  # None before the first step: no optimizer state yet
    rng: list[dict[str, Any]]  # one entry per rank
    step: int
    version: int


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """What ``trainer.json`` of a checkpoint says."""

    step: int
    version: int
    world_size: int
    has_optim: bool
    extra: dict[str, Any]


@contextmanager
def _single_process() -> Iterator[None]:
    """DCP warns that it runs in one process even when asked to (``no_dist``)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
        yield


def owned(state: FullState) -> FullState:
    """``state`` with every tensor copied: nothing in it aliases live training state."""

    def copy(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return x.detach().clone()
        if isinstance(x, dict):
            return {k: copy(v) for k, v in x.items()}
        if isinstance(x, list):
            return [copy(v) for v in x]
        if isinstance(x, tuple):
            return tuple(copy(v) for v in x)
        return x

    return FullState(
        copy(state.model), copy(state.optim), copy(state.rng), state.step, state.version
    )


def rng_state() -> dict[str, Any]:
    """This process's random generator states (torch, Python, CUDA), as ``rng.pt`` keeps them."""
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def check_extra(extra: dict[str, Any]) -> str:
    """``extra`` as JSON; raises InvalidInput when it cannot be stored as such."""
    try:
        return json.dumps(extra, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"checkpoint extra is not plain JSON data: {exc}") from exc


def write_local(state: FullState, extra: dict[str, Any], world_size: int, out: Path) -> None:
    """Write ``state`` as a checkpoint directory ``out`` (rank 0 only)."""
    tensors: dict[str, Any] = {"model": state.model}
    if state.optim is not None:
        tensors["optim"] = state.optim
    with _single_process():
        dcp_save(tensors, checkpoint_id=out / "dcp", no_dist=True)
    torch.save(state.rng, out / "rng.pt")
    info = {
        "step": state.step,
        "version": state.version,
        "world_size": world_size,
        "has_optim": state.optim is not None,
        "extra": json.loads(check_extra(extra)),
    }
    (out / "trainer.json").write_text(json.dumps(info, sort_keys=True))


def read_info(local: Path) -> CheckpointInfo:
    raw = json.loads((local / "trainer.json").read_text())
    return CheckpointInfo(
        step=int(raw["step"]),
        version=int(raw["version"]),
        world_size=int(raw["world_size"]),
        has_optim=bool(raw["has_optim"]),
        extra=dict(raw["extra"]),
    )


def read_rng(local: Path) -> list[dict[str, Any]]:
    rng: list[dict[str, Any]] = torch.load(local / "rng.pt", weights_only=True)
    return rng


def read_tensors(local: Path, model: dict[str, Any], optim: dict[str, Any] | None) -> None:
    """Load the checkpoint's tensors into the full state dicts given (in place)."""
    tensors: dict[str, Any] = {"model": model}
    if optim is not None:
        tensors["optim"] = optim
    with _single_process():
        dcp_load(tensors, checkpoint_id=local / "dcp", no_dist=True)


def _files(local: Path) -> list[str]:
    return sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())


def _dir_name(step: int) -> str:
    return f"step-{step:08d}"


def checkpoint_key(prefix: str, step: int) -> str:
    """The key prefix the checkpoint of ``step`` is published under."""
    return f"{prefix}/{_dir_name(step)}"


async def _pointer(store: ArtifactStore, prefix: str) -> dict[str, Any] | None:
    key = f"{prefix}/{LATEST}"
    try:
        raw = await store.get(key)
    except NotFound:
        return None
    try:
        pointer = json.loads(raw)
        if not isinstance(pointer["dir"], str) or not isinstance(pointer["files"], list):
            raise TypeError("dir or files has the wrong type")
    except (ValueError, KeyError, TypeError) as exc:
        raise StorageError(f"checkpoint pointer {key!r} is unreadable: {exc}") from exc
    return dict(pointer)


async def publish(store: ArtifactStore, prefix: str, local: Path, step: int, keep: int) -> str:
    """Put the checkpoint directory ``local`` under ``prefix``, then the pointer;
    returns the checkpoint's key prefix."""
    name = _dir_name(step)
    files = await asyncio.to_thread(_files, local)
    for rel in files:
        data = await asyncio.to_thread((local / rel).read_bytes)
        await store.put(f"{prefix}/{name}/{rel}", data)
    old = await _pointer(store, prefix)
    kept = [name, *[k for k in (old or {}).get("kept", []) if k != name]][:keep]
    pointer = {"dir": name, "step": step, "files": files, "kept": kept}
    await store.put(f"{prefix}/{LATEST}", json.dumps(pointer, sort_keys=True).encode())
    keep_dirs = {f"{prefix}/{k}/" for k in kept}
    for key in await store.list(f"{prefix}/"):
        if key != f"{prefix}/{LATEST}" and not any(key.startswith(d) for d in keep_dirs):
            await store.delete(key)
    return f"{prefix}/{name}"


async def fetch_latest(store: ArtifactStore, prefix: str, local: Path) -> str | None:
    """Download the checkpoint ``latest`` names into ``local``; its key, or None
    when the prefix holds no complete checkpoint."""
    pointer = await _pointer(store, prefix)
    if pointer is None:
        return None
    base = f"{prefix}/{pointer['dir']}"
    for rel in pointer["files"]:
        try:
            data = await store.get(f"{base}/{rel}")
        except NotFound as exc:
            raise StorageError(
                f"checkpoint {base!r} lacks {rel!r}, which its pointer lists; "
                "the store lost part of it"
            ) from exc
        path = local / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return base
