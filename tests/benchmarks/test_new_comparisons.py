"""The instruments behind issue 33's new comparisons: bench_cores pins its side
with a real ``taskset`` (the child sees 1 core, then 2); grade_throughput says
why the swebench harness cannot grade the bundled set, and its stage timers
time ``grade_patch``'s stages on a real local sandbox and put the functions back."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

import pytest

from benchmarks import bench_cores, grade_throughput
from megaflow.datasets import grading as grading_mod
from megaflow.datasets import validate as validate_mod

PROBE = "import os; print('ab cpus', len(os.sched_getaffinity(0))); print('ab wall-s 0.01')"


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) is missing")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores")
def test_each_side_runs_on_the_cores_it_names() -> None:
    one = bench_cores.figures([sys.executable, "-c", PROBE], "0")
    two = bench_cores.figures([sys.executable, "-c", PROBE], "0,1")
    assert one == {"cpus": 1.0, "wall-s": 0.01}
    assert two["cpus"] == 2.0
    with pytest.raises(SystemExit, match="no 'ab wall-s VALUE' line"):
        bench_cores.figures([sys.executable, "-c", "print('ab cpus 1')"], "0")


def test_the_harness_peer_is_blocked_by_what_the_instances_lack() -> None:
    why = grade_throughput.peer_blockers()
    lacking = next(w for w in why if "lack" in w)
    assert "image" in lacking.split("lack", 1)[1]
    assert "eval_script" in lacking.split("lack", 1)[1]


@pytest.mark.slow
def test_stage_timers_time_a_real_grading_and_put_the_functions_back(tmp_path: Path) -> None:
    original = (grading_mod.run_tests, vars(validate_mod)["prepare_sandbox"])
    per = asyncio.run(grade_throughput.breakdown(tmp_path / "sb", 1))
    assert (grading_mod.run_tests, vars(validate_mod)["prepare_sandbox"]) == original
    assert len(per) == 1
    stages = per[0]
    for name in ("sandbox start", *grade_throughput.STAGES.values()):
        assert stages[name] > 0, name
    assert stages["total"] >= stages["run the tests"] + stages["sandbox start"]
    rows = grade_throughput.stage_rows(per)
    assert rows[-1][0] == "per instance: total"
    assert rows[-1][3] == "100%"
