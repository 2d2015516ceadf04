import asyncio
from pathlib import Path

import pytest
from rich.table import Table
from typer.testing import CliRunner

from megaflow.cli.main import app
from megaflow.cli.top_cmd import TopView
from megaflow.core.states import TaskState as S
from megaflow.core.tasks import ErrorKind, RunSpec, TaskResult, TaskSpec
from megaflow.storage.abstract import Transition
from megaflow.storage.sqlite import SqliteMetadataStore


async def test_frames_show_counts_and_rates(tmp_path: Path) -> None:
    async with SqliteMetadataStore(tmp_path / "m.db") as store:
        await store.create_run(RunSpec(id="r"))
        await store.add_tasks([TaskSpec(id=f"r/{i}", run_id="r") for i in range(6)])
        view = TopView(store, runs=5, width=120)
        await view.frame()
        chain = [S.SCHEDULED, S.STARTING, S.RUNNING, S.GRADING, S.SUCCEEDED]
        await store.transition_many([Transition(f"r/{i}", s) for i in range(3) for s in chain])
        await store.transition_many(
            [Transition("r/3", S.SCHEDULED), Transition("r/4", S.CANCELLED)]
        )
        await store.put_results([
            TaskResult(task_id="r/0", success=True, reward=1.0),
            TaskResult(task_id="r/1"),
            TaskResult(task_id="r/2", error_kind=ErrorKind.AGENT, error="model error"),
            TaskResult(task_id="r/4", error_kind=ErrorKind.CANCELLED),
        ])  # fmt: skip
        await asyncio.sleep(0.05)
        frame = await view.frame()
    table = frame.renderables[0]
    assert isinstance(table, Table)
    cells = {c.header: c._cells[0] for c in table.columns}
    shown = ("queued", "running", "resolved", "unresolved", "errors")
    assert tuple(cells[c] for c in shown) == ("1", "1", "1", "1", "2")
    assert cells["done"] == "3/6"  # the cancelled task is not done
    assert float(str(cells["/s"])) > 0
    footer = "queue 1 | in flight (sandboxes held) 1 | errors 2 (agent error 1, cancelled 1)"
    assert str(frame.renderables[1]).startswith(footer)


def test_top_once_and_missing_db(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["top", "--once", "--db", str(tmp_path / "none.db")])
    assert res.exit_code == 2
    asyncio.run(_seed(tmp_path / "m.db"))
    res = runner.invoke(app, ["top", "--once", "--db", str(tmp_path / "m.db")])
    assert res.exit_code == 0, res.output
    assert "queue 2" in res.output


async def _seed(path: Path) -> None:
    async with SqliteMetadataStore(path) as store:
        await store.create_run(RunSpec(id="r"))
        await store.add_tasks([TaskSpec(id=f"r/{i}", run_id="r") for i in range(2)])


def test_top_prints_a_plain_snapshot_into_a_pipe(tmp_path: Path) -> None:
    """Without a terminal (CliRunner's stdout is not one) and without --once, one frame, exit 0."""
    asyncio.run(_seed(tmp_path / "m.db"))
    res = CliRunner().invoke(app, ["top", "--db", str(tmp_path / "m.db"), "--interval", "0.1"])
    assert res.exit_code == 0, res.output
    assert "megaflow top" in res.output
    assert res.output.count("megaflow top") == 1
    assert "\x1b[" not in res.output  # plain text, no cursor movement


@pytest.mark.parametrize("columns", [80, 120])
def test_top_fits_the_terminal_and_keeps_run_ids_whole(tmp_path: Path, columns: int) -> None:
    ids = ["quickstart-20261201-071930-08c4", "quickstart-20261201-071931-77ab"]

    async def seed() -> None:
        async with SqliteMetadataStore(tmp_path / "m.db") as store:
            for rid in ids:
                await store.create_run(RunSpec(id=rid))
                await store.add_tasks([TaskSpec(id=f"{rid}/t{i}/0", run_id=rid) for i in range(3)])

    asyncio.run(seed())
    res = CliRunner().invoke(
        app, ["top", "--once", "--db", str(tmp_path / "m.db")], env={"COLUMNS": str(columns)}
    )
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert all(len(line) <= columns for line in lines), res.output
    for short in ("quickstart-20261201-071930 ", "quickstart-20261201-071931 "):
        assert sum(short in line for line in lines) == 1, res.output
    assert "…" not in res.output


def test_a_train_run_keeps_its_types_apart_with_a_total_that_does_not_grow(
    tmp_path: Path,
) -> None:
    from megaflow.config import load_config
    from megaflow.core.tasks import TaskType
    from tests.cli.test_config_paths import _write

    cfg = load_config(_write(tmp_path, train__steps=2, train__prompts_per_step=2, samples=2))
    rid = "train-quickstart-20261201-071930-08c4"

    def step(n: int) -> list[TaskSpec]:
        return [
            TaskSpec(id=f"{rid}/s{n}-p{p}/{i}", run_id=rid, type=TaskType.TRAIN)
            for p in range(2)
            for i in range(2)
        ]

    async def go() -> list[str]:
        async with SqliteMetadataStore(tmp_path / "m.db") as store:
            await store.create_run(RunSpec(id=rid, config=cfg.model_dump(mode="json")))
            held_out = [
                TaskSpec(id=f"{rid}/e{i}/0", run_id=rid, type=TaskType.EVAL) for i in (0, 1)
            ]
            await store.add_tasks([*held_out, *step(0)])
            view = TopView(store, runs=5, width=120)
            frames = [await view.frame()]
            await store.add_tasks(step(1))
            frames.append(await view.frame())
        out = []
        for frame in frames:
            table = frame.renderables[0]
            assert isinstance(table, Table)
            cells = {c.header: [str(x) for x in c._cells] for c in table.columns}
            out.append(
                " ".join(f"{t}={d}" for t, d in zip(cells["type"], cells["done"], strict=True))
            )
        return out

    first, second = asyncio.run(go())
    assert first == "eval=0/2 train=0/8"  # 4 of the 8 planned train samples submitted
    assert second == "eval=0/2 train=0/8"  # the second step's: the total stays


def test_status_says_how_many_train_samples_a_train_run_plans(tmp_path: Path) -> None:
    from megaflow.config import load_config
    from megaflow.core.tasks import TaskType
    from tests.cli.test_config_paths import _write

    cfg = load_config(_write(tmp_path, train__steps=2, train__prompts_per_step=2, samples=2))
    rid = "train-quickstart-20261201-071930-08c4"

    async def seed() -> None:
        async with SqliteMetadataStore(tmp_path / "m.db") as store:
            await store.create_run(RunSpec(id=rid, config=cfg.model_dump(mode="json")))
            specs = [
                TaskSpec(id=f"{rid}/p{p}/0", run_id=rid, type=TaskType.TRAIN) for p in range(4)
            ]
            await store.add_tasks(specs)

    asyncio.run(seed())
    res = CliRunner().invoke(
        app, ["status", "--db", str(tmp_path / "m.db")], env={"COLUMNS": "120"}
    )
    assert res.exit_code == 0, res.output
    row = next(line for line in res.output.splitlines() if " train " in line)
    assert "4 of 8" in row
