"""`megaflow export --training`: one token-level row per sample, read back by
pyarrow and Hugging Face datasets with the same values."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import datasets
from megaflow.cli.main import app
from megaflow.core.states import TaskState as S
from megaflow.core.tasks import ErrorKind, RunSpec, TaskResult, TaskSpec, TaskType, sample_id
from megaflow.core.trajectory import ModelCall, Observation, Trajectory
from megaflow.storage.abstract import Transition
from megaflow.storage.local_artifacts import LocalArtifactStore
from megaflow.storage.sqlite import SqliteMetadataStore

runner = CliRunner()
RUN = "tr-1"
DONE = [S.SCHEDULED, S.STARTING, S.RUNNING, S.GRADING, S.SUCCEEDED]


def _call(prompt: list[int], out: list[int], version: int) -> ModelCall:
    return ModelCall(
        prompt_token_ids=prompt, token_ids=out, logprobs=[-0.5 - i for i in range(len(out))],
        prompt_tokens=len(prompt), completion_tokens=len(out), weights_version=version,
    )  # fmt: skip


def _traj(tid: str, calls: list[ModelCall]) -> Trajectory:
    t = Trajectory(id=f"{tid}/a1", task_id=tid, run_id=RUN, meta={"task_type": "train"})
    for c in calls:
        t.add(c)
        t.add(Observation(content="ok"))
    return t


@pytest.fixture
def stores(tmp_path: Path) -> tuple[str, str]:
    db, art = str(tmp_path / "m.db"), str(tmp_path / "art")
    ids = [sample_id(RUN, "q", n) for n in range(4)]
    exact = _traj(ids[0], [_call([1, 2], [3, 4], 2), _call([1, 2, 3, 4, 9], [5], 3)])
    agent_failed = _traj(ids[1], [_call([1, 2], [7], 2)])
    drift = _traj(ids[2], [_call([1, 2], [3], 2), _call([8, 8, 8], [5], 2)])

    async def seed() -> None:
        async with SqliteMetadataStore(db) as md, LocalArtifactStore(art) as arts:
            await md.create_run(RunSpec(id=RUN))
            await md.add_tasks(
                [
                    TaskSpec(id=i, run_id=RUN, type=TaskType.TRAIN, sample=n)
                    for n, i in enumerate(ids)
                ]
            )
            outcomes = [
                (exact, 1.0, None),
                (agent_failed, 0.0, ErrorKind.AGENT),
                (drift, 0.5, None),
            ]
            for traj, reward, kind in outcomes:
                key = f"runs/{RUN}/{traj.task_id}/trajectory.json"
                await arts.put(key, traj.model_dump_json().encode())
                await md.transition_many([Transition(traj.task_id, s) for s in DONE])
                await md.put_result(
                    TaskResult(task_id=traj.task_id, reward=reward, success=reward == 1.0,
                               error_kind=kind, artifacts={"trajectory": key})
                )  # fmt: skip
            lost = [S.SCHEDULED, S.STARTING, S.FAILED]  # infra failure past its retries
            await md.transition_many([Transition(ids[3], s) for s in lost])
            await md.put_result(
                TaskResult(task_id=ids[3], error_kind=ErrorKind.INFRA, error="gone")
            )

    asyncio.run(seed())
    return db, art


def _export(stores: tuple[str, str], out: Path, fmt: str) -> str:
    db, art = stores
    args = ["export", RUN, "--training", "--format", fmt, "--db", db, "--artifacts", art]
    res = runner.invoke(app, [*args, "-o", str(out)])
    assert res.exit_code == 0, res.output
    return res.output


def _check(rows: list[dict[str, object]]) -> None:
    assert [r["sample_id"] for r in rows] == [f"{RUN}/q/{n}" for n in range(4)]
    assert {r["group_id"] for r in rows} == {f"{RUN}/q"}
    assert {r["task_type"] for r in rows} == {"train"}
    exact, failed, drift, lost = rows
    # one sequence: first prompt, then completion and fed-back tokens, masked apart
    assert exact["prompt_ids"] == [1, 2]
    assert exact["completion_ids"] == [3, 4, 9, 5]
    assert exact["loss_mask"] == [1, 1, 0, 1]
    assert exact["logprobs"] == [-0.5, -1.5, 0.0, -0.5]
    assert (exact["reward"], exact["weights_version"], exact["masked"]) == (1.0, 2, False)
    assert (failed["reward"], failed["error_kind"], failed["masked"]) == (0.0, "agent", False)
    assert failed["completion_ids"] == [7]
    assert (drift["masked"], drift["prompt_ids"], drift["reward"]) == (True, None, 0.5)
    assert "re-tokenized" in str(drift["token_error"])
    assert (lost["masked"], lost["reward"], lost["state"]) == (True, None, "failed")


def test_parquet_reads_back_in_pyarrow_and_datasets(
    stores: tuple[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "train.parquet"
    output = _export(stores, out, "parquet")
    assert "wrote 4 training rows (2 masked: left out of training)" in output
    assert f"no token data: {RUN}/q/2" in output  # the drift is reported, not dropped
    table = pq.read_table(out)
    assert table.schema.field("prompt_ids").type == pa.list_(pa.int64())
    assert table.schema.field("logprobs").type == pa.list_(pa.float64())
    assert table.schema.field("loss_mask").type == pa.list_(pa.int8())
    _check(table.to_pylist())
    ds = datasets.Dataset.from_parquet(str(out))
    assert isinstance(ds, datasets.Dataset)
    _check([ds[i] for i in range(len(ds))])
    assert ds.features["completion_ids"].feature.dtype == "int64"


def test_jsonl_has_the_same_rows(stores: tuple[str, str], tmp_path: Path) -> None:
    out = tmp_path / "train.jsonl"
    _export(stores, out, "jsonl")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    _check(rows)
    assert not any(isinstance(r["reward"], float) and math.isnan(r["reward"]) for r in rows)


def test_missing_artifact_store_is_a_clear_error(stores: tuple[str, str], tmp_path: Path) -> None:
    db, _ = stores
    res = runner.invoke(
        app, ["export", RUN, "--training", "--db", db, "--artifacts", str(tmp_path / "none")]
    )
    assert res.exit_code == 2
    assert "no artifact store" in res.output
