"""The training runs of ``megaflow train``: their curves, from the files the loop writes.

The loop (``megaflow.app.training``, ``docs/train-loop.md``) keeps its curve
in two places: in every checkpoint (the ``extra`` of ``trainer.json`` under
``<checkpoint_prefix>/<run id>/``, reached through the ``latest`` pointer, in
the artifact store), and in ``<train dir>/<run id>/curve.json``, which it
rewrites after every step and held-out round. The dashboard reads both on
each call and shows the one with more points (a run whose files are on
another host shows its curve up to its last checkpoint).
The layout is the trainer's (:mod:`megaflow.train.checkpoint`), read here as
plain JSON so that no torch is imported. A curve is shown as stored: steps
(train reward, the trainer's figures, versions, staleness, timings) and
held-out rounds; a file that does not parse is reported, not skipped.
A run whose ``train.held_out`` names task sets records each set's figures in
every round (``EvalPoint.sets``); :func:`heldout_sets` gives each set's
latest round, which the training page shows as a table beside the per-set
series of its reward chart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from megaflow.core.errors import NotFound
from megaflow.storage.abstract import ArtifactStore

LATEST = "latest"
CURVE_FILE = "curve.json"


def _points(curve: dict[str, Any]) -> int:
    return len(curve.get("steps", [])) + len(curve.get("evals", []))


def _check(curve: Any, where: str) -> dict[str, Any]:
    if not isinstance(curve, dict) or not isinstance(curve.get("steps", []), list):
        raise ValueError(f"{where} holds no curve (steps and evals)")
    return curve


async def _from_checkpoint(store: ArtifactStore, prefix: str) -> dict[str, Any] | None:
    try:
        pointer = json.loads(await store.get(f"{prefix}/{LATEST}"))
        info = json.loads(await store.get(f"{prefix}/{pointer['dir']}/trainer.json"))
    except NotFound:
        return None
    curve = info.get("extra", {}).get("curve")
    if curve is None:
        return None
    return _check(curve, f"checkpoint {prefix}")


def _from_file(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    return _check(json.loads(path.read_text()), str(path))


class TrainingRuns:
    """Finds training runs under ``train_dir`` and the artifact store's ``checkpoint_prefix``."""

    def __init__(self, store: ArtifactStore, train_dir: Path, checkpoint_prefix: str) -> None:
        self.store = store
        self.train_dir = train_dir
        self.prefix = checkpoint_prefix.rstrip("/")

    async def run_ids(self) -> list[str]:
        ids = set()
        if self.train_dir.is_dir():
            ids |= {p.parent.name for p in self.train_dir.glob(f"*/{CURVE_FILE}")}
        for key in await self.store.list(f"{self.prefix}/"):
            rest = key[len(self.prefix) + 1 :].split("/")
            if len(rest) == 2 and rest[1] == LATEST:
                ids.add(rest[0])
        return sorted(ids)

    async def curve(self, run_id: str) -> dict[str, Any]:
        """The run's curve with more points (checkpoint or final file), and where it came from.
        Raises NotFound for a run with neither."""
        if "/" in run_id or run_id in ("", ".", ".."):
            raise NotFound(f"no training run {run_id!r}")
        found: list[tuple[str, dict[str, Any]]] = []
        problems: list[str] = []
        path = self.train_dir / run_id / CURVE_FILE
        try:
            ck = await _from_checkpoint(self.store, f"{self.prefix}/{run_id}")
            if ck is not None:
                found.append((f"checkpoint {self.prefix}/{run_id}", ck))
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"checkpoint {self.prefix}/{run_id}: {exc}")
        try:
            final = _from_file(path)
            if final is not None:
                found.append((str(path), final))
        except (ValueError, OSError) as exc:
            problems.append(f"{path}: {exc}")
        if not found and not problems:
            raise NotFound(f"no training run {run_id!r}")
        source, curve = max(found, key=lambda f: _points(f[1])) if found else ("", {})
        return {"run": run_id, "source": source or None, "curve": curve or None,
                "problems": problems, **summary(curve)}  # fmt: skip

    async def list(self) -> list[dict[str, Any]]:
        out = []
        for run_id in await self.run_ids():
            view = await self.curve(run_id)
            view.pop("curve")
            out.append(view)
        return out


def summary(curve: dict[str, Any]) -> dict[str, Any]:
    """The last step's figures, the last held-out reward, and whether the run is a control
    arm (``control``: its rewards shuffled; ``updates`` false: no optimizer step), so the
    page can offer a trained run's control to overlay."""
    steps, evals = curve.get("steps", []), curve.get("evals", [])
    last = steps[-1] if steps else {}
    return {
        "control": curve.get("control", "none"),
        "updates": curve.get("updates", True),
        "steps": len(steps),
        "weights_version": last.get("weights_version"),
        "loss": last.get("loss"),
        "kl": last.get("kl"),
        "staleness_max": max((s.get("staleness_max", 0) for s in steps), default=None),
        "heldout_reward": evals[-1]["reward_mean"] if evals else None,
        "heldout_sets": heldout_sets(evals),
    }


def heldout_sets(evals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each held-out set's figures in the latest round that evaluated it (its pass@1
    with ``ci_low`` and ``ci_high``, samples, greedy, malformed ...), with that round's
    ``step`` and ``weights_version``; in the order the sets first appear, none for a
    run whose held-out split is not sets."""
    latest: dict[str, dict[str, Any]] = {}
    for point in evals:
        sets = point.get("sets") if isinstance(point, dict) else None
        for name, figures in (sets if isinstance(sets, dict) else {}).items():
            if isinstance(figures, dict):
                at = {"step": point.get("step"), "weights_version": point.get("weights_version")}
                latest[name] = {"set": name, **at, **figures}
    return list(latest.values())
