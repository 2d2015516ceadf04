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
torch and transformers are imported when a checkpoint is written.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from megaflow.core.errors import MegaFlowTimeout, ModelError
from megaflow.train.weight_sync.abstract import (
    Engines,
    EngineStatus,
    SyncResult,
    WeightSync,
    check_served,
)

_VERSION_DIR = re.compile(r"^v(\d+)$")


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
    ) -> None:
        self.engines = engines
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
        names = list(self.engines)
        answers = await asyncio.gather(
            *(self._update(n, str(path), version) for n in names), return_exceptions=True
        )
        served: dict[str, int] = {}
        problems = []
        for name, answer in zip(names, answers, strict=True):
            if isinstance(answer, BaseException):
                if not isinstance(answer, Exception):
                    raise answer  # a cancellation, not a refusal
                problems.append(f"{name}: {answer}")
            else:
                problem = check_served(name, answer, version, served)
                if problem:
                    problems.append(problem)
        if problems:
            raise ModelError(
                f"weights v{version} ({path}) did not reach {len(problems)} of "
                f"{len(names)} engines: {'; '.join(problems)}. An engine that refused "
                f"keeps serving its previous weights; versions reported: {served or 'none'}"
            )
        await asyncio.to_thread(self._prune, version)
        return SyncResult(
            version=version, seconds=time.perf_counter() - t0, served=served, path=str(path)
        )

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
