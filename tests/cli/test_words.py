"""One meaning per word: what `run`, `results` and the docs call resolved, errored,
ungraded, masked and cancelled, and figures that are not shown when nothing backs them."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from typer.testing import CliRunner

from megaflow.app.job import Job
from megaflow.app.summary import ArmSummary, JobSummary, summarize_arm
from megaflow.cli import run_cmd
from megaflow.cli.common import console
from megaflow.cli.main import app
from megaflow.config import load_config
from megaflow.core.outcomes import GLOSSARY
from megaflow.core.states import TaskState as S
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.storage.abstract import Transition
from megaflow.storage.sqlite import SqliteMetadataStore
from tests.cli.test_run_accounting import _config, _run_id

runner = CliRunner()
RUN = "ctl-20261201-071930"
DOC = Path(__file__).parents[2] / "docs" / "cli.md"


def test_every_word_is_defined_once_in_the_cli_docs() -> None:
    text = DOC.read_text()
    glossary = text.split("## Glossary", 1)[1].split("\n## ", 1)[0]
    for word, meaning in GLOSSARY.items():
        terms = re.findall(rf"^\| \*\*{re.escape(word)}\*\* \|", glossary, re.M)
        assert len(terms) == 1, f"{word!r} is in the glossary {len(terms)} times"
        # the docs say what the module says, word for word
        assert meaning.split(":")[0] in glossary


async def _cancelled_arm(path: str) -> None:
    async with SqliteMetadataStore(path) as s:
        await s.create_run(RunSpec(id=RUN, name="ctl"))
        await s.add_tasks([TaskSpec(id=f"{RUN}/t{i}/0", run_id=RUN) for i in range(4)])
        await s.transition_many([Transition(f"{RUN}/t{i}/0", S.CANCELLED) for i in range(4)])


def test_an_arm_with_nothing_graded_shows_dashes_and_no_throughput(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    asyncio.run(_cancelled_arm(db))

    async def arm() -> ArmSummary:
        async with SqliteMetadataStore(db) as s:
            return await summarize_arm(s, RUN, "control", 1)

    a = asyncio.run(arm())
    assert a.resolved_share is None
    assert a.task_p50_s is None
    assert a.start_p50_s is None
    assert (a.graded, a.ungraded, a.cancelled) == (0, 4, 4)
    summary = JobSummary(arms=[a], wall_s=2.0)
    assert (summary.ran, summary.throughput) == (0, 0.0)  # cancelled tasks are no work done
    job = Job(load_config(_config(tmp_path)), run_id=RUN)
    with console.capture() as cap:
        run_cmd._print(job, summary)
    out = re.sub("[│┃]", " ", cap.get())
    assert "0.0%" not in out
    assert "0.00 / 0.00 s" not in out
    assert re.search(r"resolved share\s+-", out)
    assert re.search(r"graded\s+0/4", out)
    assert re.search(r"cancelled\s+4", out)
    assert "no throughput" in out
    assert "4 cancelled, not counted" in out


def test_results_say_ungraded_and_masked_is_left_for_training(tmp_path: Path) -> None:
    res = runner.invoke(app, ["run", str(_config(tmp_path))], env={"COLUMNS": "200"})
    run_id = _run_id(res.output)
    out = runner.invoke(app, ["results", run_id, "--db", str(tmp_path / "m.db"), "--json"])
    rows = json.loads(out.output)
    assert rows
    assert all("ungraded" in r and "masked" not in r for r in rows)
    table = runner.invoke(app, ["results", run_id, "--db", str(tmp_path / "m.db")])
    assert "ungraded" in table.output
    assert "masked" not in table.output


def test_the_bar_counts_no_cancelled_task_as_done() -> None:
    from types import SimpleNamespace
    from typing import Any

    from rich.progress import Progress

    counts = {S.CANCELLED: 5, S.SUCCEEDED: 1}
    job: Any = SimpleNamespace(run_ids=["r"], sched=SimpleNamespace(counts=lambda rid: counts))
    progress = Progress()
    bar = progress.add_task("tasks", total=None, running=0, queued=0, rate=0.0, cancelled="")
    run_cmd._refresh(job, progress, bar, t0=0.0)
    task = progress.tasks[0]
    assert (task.completed, task.total) == (1, 6)  # not a full bar
    assert task.fields["cancelled"] == ", 5 cancelled"
    counts.pop(S.SUCCEEDED)
    run_cmd._refresh(job, progress, bar, t0=0.0)
    assert progress.tasks[0].completed == 0
    assert progress.tasks[0].fields["rate"] == 0.0  # a fully cancelled run has no rate
