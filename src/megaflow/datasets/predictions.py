"""SWE-bench predictions files, and the reports SWE-bench's harness writes for them.

A predictions file is JSONL (one object per line) or JSON (a list of
objects, or an object keyed by instance id), each with ``instance_id``,
``model_name_or_path`` and ``model_patch``, as every SWE-bench submission
has. :func:`grade_predictions` grades each patch in a fresh sandbox of its
own; :func:`instance_report` and :func:`summary_report` lay the results out
as SWE-bench's ``report.json`` files do, so tools built for those read ours.
An empty or missing patch is not run, as in SWE-bench: it is unresolved and
counted under ``empty_patch_ids``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from megaflow.core.errors import InvalidInput, MegaFlowError
from megaflow.datasets.grading import GradeReport
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.loader import describe, read_records
from megaflow.datasets.validate import grade_patch
from megaflow.environment.abstract import EnvironmentSpec, Runtime

SCHEMA_VERSION = 2


class Prediction(BaseModel):
    model_config = ConfigDict(extra="allow")

    instance_id: str
    model_name_or_path: str
    model_patch: str | None = None


def _records(file: Path) -> list[tuple[str, Any]]:
    records = read_records(file)
    if len(records) == 1 and isinstance(records[0][1], dict) and "instance_id" not in records[0][1]:
        keyed = records[0][1]  # an object keyed by instance id, as SWE-bench also accepts
        return [
            (f"{file}[{k!r}]", {"instance_id": k, **v} if isinstance(v, dict) else v)
            for k, v in keyed.items()
        ]
    return records


def load_predictions(path: str | Path) -> list[Prediction]:
    """Every prediction of a file, checked; a repeated instance id is an error."""
    file = Path(path)
    if not file.is_file():
        raise InvalidInput(f"predictions file {file} does not exist")
    out: list[Prediction] = []
    seen: dict[str, str] = {}
    for where, record in _records(file):
        if not isinstance(record, dict):
            raise InvalidInput(f"{where}: a prediction must be a JSON object")
        try:
            pred = Prediction.model_validate(record)
        except ValidationError as e:
            raise InvalidInput(f"{where}: {describe(e)}") from None
        if pred.instance_id in seen:
            raise InvalidInput(
                f"{where}: instance {pred.instance_id!r} repeats {seen[pred.instance_id]}"
            )
        seen[pred.instance_id] = where
        out.append(pred)
    if not out:
        raise InvalidInput(f"{file}: no predictions in it")
    return out


@dataclass
class Graded:
    prediction: Prediction
    report: GradeReport | None  # None: empty patch, not run
    error: str | None = None  # grading itself failed (infrastructure)


async def grade_predictions(
    runtime: Runtime,
    instances: Sequence[SWEInstance],
    predictions: Sequence[Prediction],
    strict: bool = False,
    concurrency: int = 4,
    base_spec: EnvironmentSpec | None = None,
    on_graded: Callable[[Graded], None] | None = None,
) -> list[Graded]:
    """Grade every prediction in a fresh sandbox of its own, ``concurrency`` at a time."""
    by_id = {i.instance_id: i for i in instances}
    unknown = [p.instance_id for p in predictions if p.instance_id not in by_id]
    if unknown:
        raise InvalidInput(
            f"predictions for instances not in the task set: {', '.join(unknown[:10])}"
        )
    gate = asyncio.Semaphore(concurrency)

    async def one(pred: Prediction) -> Graded:
        if not (pred.model_patch or "").strip():
            graded = Graded(pred, None)
        else:
            async with gate:
                try:
                    report = await grade_patch(
                        runtime, by_id[pred.instance_id], pred.model_patch or "", base_spec, strict
                    )
                    graded = Graded(pred, report)
                except (MegaFlowError, OSError) as e:
                    graded = Graded(pred, None, f"{type(e).__name__}: {e}")
        if on_graded is not None:
            on_graded(graded)
        return graded

    return list(await asyncio.gather(*(one(p) for p in predictions)))


def instance_report(g: Graded) -> dict[str, Any]:
    """One instance's ``report.json``, in SWE-bench's layout."""
    r = g.report
    entry: dict[str, Any] = {
        "patch_is_None": g.prediction.model_patch is None,
        "patch_exists": bool((g.prediction.model_patch or "").strip()),
        "patch_successfully_applied": bool(r and r.patch_applied and r.test_patch_applied),
        "resolved": bool(r and r.resolved),
    }
    if r is not None:
        entry["tests_status"] = {
            "FAIL_TO_PASS": {"success": r.fail_to_pass.passed, "failure": r.fail_to_pass.failed},
            "PASS_TO_PASS": {"success": r.pass_to_pass.passed, "failure": r.pass_to_pass.failed},
        }
        entry["reward"] = r.reward
        entry["error"] = r.error
    elif g.error is not None:
        entry["error"] = g.error
    return {g.prediction.instance_id: entry}


def summary_report(total_instances: int, graded: Sequence[Graded]) -> dict[str, Any]:
    """The run's summary, in the layout of SWE-bench's ``<model>.<run_id>.json``."""
    ids = sorted(g.prediction.instance_id for g in graded)
    empty = sorted(g.prediction.instance_id for g in graded if g.report is None and not g.error)
    errors = sorted(g.prediction.instance_id for g in graded if g.error is not None)
    ran = [g for g in graded if g.report is not None]
    resolved = sorted(g.prediction.instance_id for g in ran if g.report and g.report.resolved)
    unresolved = sorted(g.prediction.instance_id for g in ran if g.report and not g.report.resolved)
    completed = sorted(g.prediction.instance_id for g in ran)
    return {
        "total_instances": total_instances,
        "submitted_instances": len(ids),
        "completed_instances": len(completed),
        "resolved_instances": len(resolved),
        "unresolved_instances": len(unresolved),
        "empty_patch_instances": len(empty),
        "error_instances": len(errors),
        "completed_ids": completed,
        "incomplete_ids": sorted(set(ids) - set(completed) - set(empty)),
        "empty_patch_ids": empty,
        "submitted_ids": ids,
        "resolved_ids": resolved,
        "unresolved_ids": unresolved,
        "error_ids": errors,
        "schema_version": SCHEMA_VERSION,
    }
