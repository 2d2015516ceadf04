"""`status` and `top` at 80 and 120 columns with run ids as long as a store of many
runs makes their unique prefixes (runs started in the same second share all but
the random tail): no id is cut or wrapped, no count column is squeezed to an
ellipsis or dropped, no line overflows, and a run whose driver died says so (in
its row or its line, and top counts its tasks as stalled, not queued or in flight)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.cli.run_lock import hold, lock_path
from megaflow.config import load_config
from megaflow.core.states import TaskState as S
from megaflow.core.tasks import ErrorKind, RunSpec, TaskResult, TaskSpec, TaskType
from megaflow.storage.abstract import Transition
from megaflow.storage.config import SqliteMetadataConfig
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.cli.test_config_paths import _write

runner = CliRunner()
STEM = "train-quickstart-kinds-20261205-083014-"
RUNS = [STEM + tail for tail in ("c1a7", "d2f0", "d2e9", "9b41")]
DEAD = RUNS[1]
"""Its driver died with tasks starting and grading."""
SHORT = {rid: STEM + tail for rid, tail in zip(RUNS, ("c", "d2f", "d2e", "9"), strict=True)}
"""Each run's shortest unique prefix, as `status` and `top` print it."""

_PATH = {
    "queued": [],
    "starting": [S.SCHEDULED, S.STARTING],
    "running": [S.SCHEDULED, S.STARTING, S.RUNNING],
    "grading": [S.SCHEDULED, S.STARTING, S.RUNNING, S.GRADING],
    "resolved": [S.SCHEDULED, S.STARTING, S.RUNNING, S.GRADING, S.SUCCEEDED],
    "unresolved": [S.SCHEDULED, S.STARTING, S.RUNNING, S.GRADING, S.SUCCEEDED],
    "agent error": [S.SCHEDULED, S.STARTING, S.RUNNING, S.GRADING, S.SUCCEEDED],
    "infra error": [S.SCHEDULED, S.FAILED],
}
_RESULT = {
    "resolved": {"success": True, "reward": 1.0},
    "unresolved": {"reward": 0.0},
    "agent error": {"error_kind": ErrorKind.AGENT, "error": "malformed answers"},
    "infra error": {"error_kind": ErrorKind.INFRA, "error": "sandbox did not start"},
}
EVAL = {"resolved": 3, "unresolved": 4, "agent error": 1, "infra error": 2}
TRAIN = {"queued": 2, "starting": 1, "running": 1, "grading": 3, "resolved": 5, "unresolved": 4}


async def _seed(db: Path, config: dict[str, object]) -> None:
    async with SqliteMetadataStore(db) as store:
        for rid in RUNS:
            await store.create_run(RunSpec(id=rid, name="train-quickstart-kinds", config=config))
            specs, moves, results = [], [], []
            for kind, counts in ((TaskType.EVAL, EVAL), (TaskType.TRAIN, TRAIN)):
                for label, n in counts.items():
                    for i in range(n):
                        tid = f"{rid}/{kind.value}-{label.replace(' ', '-')}-{i}/0"
                        specs.append(TaskSpec(id=tid, run_id=rid, type=kind))
                        moves += [Transition(tid, s) for s in _PATH[label]]
                        if label in _RESULT:
                            results.append(TaskResult(task_id=tid, **_RESULT[label]))
            await store.add_tasks(specs)
            await store.transition_many(moves)
            await store.put_results(results)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    tmp = tmp_path_factory.mktemp("narrow")
    cfg = load_config(_write(tmp, train__steps=8, train__prompts_per_step=8, samples=4))
    path = tmp / "m.db"
    asyncio.run(_seed(path, cfg.model_dump(mode="json")))
    with hold(lock_path(SqliteMetadataConfig(path=str(path)), DEAD)):
        pass  # the lock file stays behind, free: the run's process is gone
    return str(path)


def _tokens(line: str) -> list[str]:
    return re.split(r"[\s│┃]+", line)


def _check_fits(output: str, columns: int) -> list[str]:
    """Every line within ``columns``, nothing cut, each run's unique prefix whole."""
    lines = output.splitlines()
    assert all(len(line) <= columns for line in lines), output
    assert "…" not in output, output
    for short in SHORT.values():
        assert any(short in _tokens(line) for line in lines), (short, output)
    return lines


@pytest.mark.parametrize("columns", [80, 120])
def test_status_keeps_every_count_and_id_whole(db: str, columns: int) -> None:
    res = runner.invoke(app, ["status", "--db", db], env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    lines = _check_fits(res.output, columns)
    flat = " ".join(res.output.split())
    assert "16 of 256" in flat, res.output  # the train samples planned, on one line
    for label in (*EVAL, *TRAIN):  # every outcome is shown
        assert label in flat, (label, res.output)
    dead = [line for line in lines if SHORT[DEAD] in _tokens(line)]
    assert len(dead) == 1, res.output
    assert "gone" in dead[0], res.output


@pytest.mark.parametrize("columns", [80, 120])
def test_top_keeps_every_column_and_id_whole(db: str, columns: int) -> None:
    res = runner.invoke(app, ["top", "--once", "--db", db], env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    _check_fits(res.output, columns)
    assert res.output.count(" 9/256") == len(RUNS), res.output  # the done column, per run
    assert res.output.count(" 10/10 ") == len(RUNS), res.output  # eval: 10 of 10 done
    train_rows = [_tokens(line) for line in res.output.splitlines() if " 9/256" in line]
    assert all(t[t.index("9/256") + 1] == "-" for t in train_rows), res.output  # its rate
    flat = " ".join(res.output.split())
    assert f"driver gone: {SHORT[DEAD]} (7 tasks stalled until megaflow run --resume)" in flat
    # the dead run's tasks are neither queued nor in flight: the three live runs' only
    assert "queue 6 | in flight (sandboxes held) 15 |" in flat, res.output
    dead = [line for line in res.output.splitlines() if SHORT[DEAD] in _tokens(line)]
    assert all("gone" in line for line in dead[:1]), res.output  # its row, or its own line
