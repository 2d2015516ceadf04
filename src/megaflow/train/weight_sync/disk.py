"""``disk``: a versioned safetensors checkpoint every engine loads by path.

The trainer writes ``<root>/<run id>/v<version>/`` in Hugging Face layout
(``config.json`` and ``model.safetensors``, or shards and their index) with
``save_pretrained``, into a temporary directory renamed into place, so an
engine never sees half a checkpoint. Then every engine is told, at once, to
load that path as ``version`` (MegaFlow's ``ModelControl.update_weights``; the
vLLM and SGLang backends of the model service take the same path). An engine
checks the whole checkpoint before it copies anything, so one that refuses
(a missing file, a corrupt or partial checkpoint, a stale version) keeps
serving its old weights; the push then fails naming every engine that did
not take the new version, and the versions each serves. Once all took it,
checkpoints older than the last ``keep`` are deleted.

The path must be readable by the engines under the same name: a local
directory for engines on this machine, a shared filesystem across machines.

With ``store: artifacts`` the checkpoint goes to the run's artifact store
instead, under ``weights/<run id>/v<version>/`` (written under ``root`` first,
uploaded file by file, then removed there), and each engine is given what it
can read: the directory of a local store, or an ``s3://bucket/prefix/...``
URI for an S3 store, which the engine downloads (checking each object's
stored SHA-256) before it swaps. Old versions are pruned from the store the
same way. torch and transformers are imported when a checkpoint is written.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megaflow.core.errors import ConfigError, MegaFlowTimeout, ModelError
from megaflow.train.weight_sync.abstract import (
    Engines,
    EngineStatus,
    SyncResult,
    WeightSync,
    read_answers,
)

if TYPE_CHECKING:
    from megaflow.storage.abstract import ArtifactStore

_VERSION_DIR = re.compile(r"^v(\d+)$")


def store_uri(store: ArtifactStore, key: str) -> str:
    """Where an engine reads the artifacts under ``key``: a directory or an S3 URI."""
    where = store.location(key)
    if where is not None:
        return where
    raise ConfigError(
        f"train.weight_sync.store artifacts: engines cannot read a {type(store).__name__}",
        [("train.weight_sync.store", "needs a local or S3 artifact store")],
    )


class DiskWeightSync(WeightSync):
    def __init__(
        self,
        engines: Engines,
        *,
        base_model: Path,
        root: Path,
        keep: int = 2,
        timeout_s: float = 600.0,
        max_shard_mb: int = 2048,
        store: ArtifactStore | None = None,
        run_id: str = "",
    ) -> None:
        self.engines = engines
        self.store = store
        """The artifact store the checkpoints go to; None keeps them under ``root``."""
        self.prefix = f"weights/{run_id or root.name}"
        self.base_model = base_model
        self.root = root.absolute()
        self.keep = keep
        self.timeout_s = timeout_s
        self.max_shard_mb = max_shard_mb
        self._shell: Any = None  # the model's architecture on the meta device

    def checkpoint_dir(self, version: int) -> Path:
        return self.root / f"v{version}"

    def write(self, weights: Mapping[str, Any], version: int) -> Path:
        """Write ``weights`` as ``version``'s checkpoint; its directory."""
        if self._shell is None:
            import torch
            from transformers import AutoConfig, AutoModelForCausalLM

            config = AutoConfig.from_pretrained(self.base_model, local_files_only=True)
            with torch.device("meta"):  # only its config and tied names are used
                self._shell = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
        target = self.checkpoint_dir(version)
        tmp = self.root / f".v{version}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        self._shell.save_pretrained(
            tmp,
            state_dict=dict(weights),
            safe_serialization=True,
            max_shard_size=f"{self.max_shard_mb}MB",
        )
        if target.exists():  # a resumed run writes its restored version again
            shutil.rmtree(target)
        os.replace(tmp, target)
        return target

    async def push(self, weights: Mapping[str, Any], version: int) -> SyncResult:
        t0 = time.perf_counter()
        path = await asyncio.to_thread(self.write, weights, version)
        where = str(path)
        if self.store is not None:
            where = await self._upload(path, version)
        names = list(self.engines)
        answers = await asyncio.gather(
            *(self._update(n, where, version) for n in names), return_exceptions=True
        )
        served, problems = read_answers(names, answers, version)
        if problems:
            raise ModelError(
                f"weights v{version} ({where}) did not reach {len(problems)} of "
                f"{len(names)} engines: {'; '.join(problems)}. An engine that refused "
                f"keeps serving its previous weights; versions reported: {served or 'none'}"
            )
        await asyncio.to_thread(self._prune, version)
        if self.store is not None:
            await self._prune_store(version)
        return SyncResult(
            version=version, seconds=time.perf_counter() - t0, served=served, path=where
        )

    async def _upload(self, path: Path, version: int) -> str:
        """Put the checkpoint at ``path`` into the store (then drop it locally); its URI."""
        assert self.store is not None
        key = f"{self.prefix}/v{version}"
        for old in await self.store.list(key + "/"):  # a resumed run writes a version again
            await self.store.delete(old)
        for f in await asyncio.to_thread(lambda: sorted(path.iterdir())):
            await self.store.put(f"{key}/{f.name}", await asyncio.to_thread(f.read_bytes))
        await asyncio.to_thread(shutil.rmtree, path, True)
        return store_uri(self.store, key)

    async def _prune_store(self, version: int) -> None:
        assert self.store is not None
        for key in await self.store.list(self.prefix + "/"):
            m = _VERSION_DIR.match(key[len(self.prefix) + 1 :].split("/")[0])
            if m and int(m.group(1)) <= version - self.keep:
                await self.store.delete(key)

    async def _update(self, name: str, path: str, version: int) -> Sequence[EngineStatus]:
        try:
            return await asyncio.wait_for(
                self.engines[name].update_weights(path, version), self.timeout_s
            )
        except TimeoutError as exc:
            if isinstance(exc, MegaFlowTimeout):
                raise
            raise MegaFlowTimeout(
                f"engine {name} did not load weights v{version} within {self.timeout_s:g}s"
            ) from None

    def _prune(self, version: int) -> None:
        for entry in self.root.iterdir():
            m = _VERSION_DIR.match(entry.name)
            if m and int(m.group(1)) <= version - self.keep:
                shutil.rmtree(entry, ignore_errors=True)
