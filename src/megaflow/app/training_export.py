"""The training export: one row per sample of a run, token-level, for a trainer.

``megaflow export RUN --training [--format parquet|jsonl]`` writes, for
every task of the run in submission order, the sample's prompt token ids,
completion token ids, logprobs and loss mask (from
:func:`megaflow.train.samples.sample_from_trajectory`, through
:mod:`megaflow.app.training_data`), its reward, group id, task type, weights
version and whether it is masked. In Parquet the token columns are Arrow
lists (``list<int64>``, ``list<double>``, ``list<int8>``), so pyarrow,
pandas and Hugging Face ``datasets`` read them as lists.

A masked row is left out of training and of its group's statistics: its
task has no graded result (``reward`` null, never 0), or its trajectory gives
no token-exact episode (token columns null; ``token_error`` says why, and
the command prints it). No sample is dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from megaflow.app.training_data import StoredSample

if TYPE_CHECKING:
    import pyarrow as pa

Format = Literal["jsonl", "parquet"]
COLUMNS = (
    "sample_id", "group_id", "run_id", "task_type", "state", "masked", "reward",
    "prompt_ids", "completion_ids", "logprobs", "loss_mask", "weights_version",
    "error_kind", "token_error",
)  # fmt: skip


def training_row(s: StoredSample) -> dict[str, Any]:
    t = s.training
    return {
        "sample_id": s.sample_id,
        "group_id": s.group_id,
        "run_id": s.run_id,
        "task_type": s.task_type,
        "state": s.state.value,
        "masked": s.as_training_sample().masked,
        "reward": s.reward,
        "prompt_ids": t.prompt_ids if t else None,
        "completion_ids": t.completion_ids if t else None,
        "logprobs": t.logprobs if t else None,
        "loss_mask": t.loss_mask if t else None,
        "weights_version": t.weights_version if t else None,
        "error_kind": s.error_kind,
        "token_error": s.problem,
    }


def schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("sample_id", pa.string()),
            ("group_id", pa.string()),
            ("run_id", pa.string()),
            ("task_type", pa.string()),
            ("state", pa.string()),
            ("masked", pa.bool_()),
            ("reward", pa.float64()),
            ("prompt_ids", pa.list_(pa.int64())),
            ("completion_ids", pa.list_(pa.int64())),
            ("logprobs", pa.list_(pa.float64())),
            ("loss_mask", pa.list_(pa.int8())),
            ("weights_version", pa.int64()),
            ("error_kind", pa.string()),
            ("token_error", pa.string()),
        ]
    )


def write_training(samples: list[StoredSample], target: Path, fmt: Format) -> int:
    """Write one row per sample to ``target``; returns the number of rows."""
    rows = [training_row(s) for s in samples]
    if fmt == "jsonl":
        with target.open("w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows, schema=schema()), target)
    return len(rows)
