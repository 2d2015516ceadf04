"""Grading with SWE-bench semantics: the rule itself, and runs in real sandboxes."""

from __future__ import annotations

from pathlib import Path

import pytest

from megaflow.datasets import (
    SWEInstance,
    environment_spec,
    extract_patch,
    grade_patch,
    prepare_sandbox,
)
from megaflow.datasets.grading import patch_files, score
from megaflow.datasets.loader import load_instances
from megaflow.datasets.pytest_report import TestStatus, parse_pytest_report, statuses_for
from megaflow.environment.abstract import Runtime
from tests.datasets.conftest import make_calc_repo, write_jsonl

REPORT = """\
=========================== short test summary info ============================
PASSED tests/test_a.py::test_ok
PASSED tests/test_a.py::test_param[a b]
FAILED tests/test_a.py::test_bad - assert 1 == 2
ERROR tests/test_a.py::test_fixture - RuntimeError: boom
XFAIL tests/test_a.py::test_known - reason
SKIPPED [1] tests/test_a.py:40: no network
"""


def _instance(tmp_path: Path, **extra: object) -> SWEInstance:
    _, inst = make_calc_repo(tmp_path)
    (loaded,) = load_instances(write_jsonl(tmp_path / "s.jsonl", [{**inst, **extra}]))
    return loaded


def test_statuses_keep_ids_with_spaces() -> None:
    ids = [
        "tests/test_a.py::test_ok",
        "tests/test_a.py::test_param[a b]",
        "tests/test_a.py::test_bad",
        "tests/test_a.py::test_fixture",
        "tests/test_a.py::test_known",
        "tests/test_a.py::test_absent",
    ]
    got = statuses_for(REPORT, ids)
    assert got == {
        ids[0]: TestStatus.PASSED,
        ids[1]: TestStatus.PASSED,
        ids[2]: TestStatus.FAILED,
        ids[3]: TestStatus.ERROR,
        ids[4]: TestStatus.XFAIL,
        ids[5]: None,
    }
    assert parse_pytest_report(REPORT)["tests/test_a.py::test_bad"] is TestStatus.FAILED


def test_failed_then_error_keeps_failure() -> None:
    out = "FAILED t.py::x - a\nPASSED t.py::x\n"
    assert statuses_for(out, ["t.py::x"]) == {"t.py::x": TestStatus.FAILED}


def test_score_rule(tmp_path: Path) -> None:
    inst = _instance(tmp_path)
    f2p, p2p = inst.FAIL_TO_PASS[0], inst.PASS_TO_PASS[0]
    both = score(inst, {f2p: TestStatus.PASSED, p2p: TestStatus.PASSED})
    assert both.resolved
    assert both.reward == 1.0
    broke = score(inst, {f2p: TestStatus.PASSED, p2p: TestStatus.FAILED})
    assert not broke.resolved
    assert broke.reward == 0.0
    assert broke.pass_to_pass.failed == [p2p]
    missing = score(inst, {f2p: None, p2p: TestStatus.PASSED})
    assert not missing.resolved
    assert missing.statuses[f2p] == "MISSING"


def test_skipped_pass_to_pass_is_kept_unless_strict(tmp_path: Path) -> None:
    """As in SWE-bench, a skipped PASS_TO_PASS test is no regression; a skipped
    FAIL_TO_PASS test is no fix; strict grading counts only PASSED."""
    inst = _instance(tmp_path)
    f2p, p2p = inst.FAIL_TO_PASS[0], inst.PASS_TO_PASS[0]
    assert score(inst, {f2p: TestStatus.PASSED, p2p: TestStatus.SKIPPED}).resolved
    assert not score(inst, {f2p: TestStatus.SKIPPED, p2p: TestStatus.PASSED}).resolved
    strict = score(inst, {f2p: TestStatus.PASSED, p2p: TestStatus.SKIPPED}, strict=True)
    assert not strict.resolved


def test_published_ids_cut_at_a_space_are_found() -> None:
    out = "PASSED t.py::test_p[a b]\nFAILED t.py::test_q[x - y] - assert 0\n"
    got = statuses_for(out, ["t.py::test_p[a", "t.py::test_q[x - y]"])
    assert got == {"t.py::test_p[a": TestStatus.PASSED, "t.py::test_q[x - y]": TestStatus.FAILED}


def test_fraction_reward(tmp_path: Path) -> None:
    inst = _instance(tmp_path, megaflow_reward="fraction")
    f2p, p2p = inst.FAIL_TO_PASS[0], inst.PASS_TO_PASS[0]
    half = score(inst, {f2p: TestStatus.FAILED, p2p: TestStatus.PASSED})
    assert not half.resolved
    assert half.reward == 0.5


def test_patch_files(tmp_path: Path) -> None:
    inst = _instance(tmp_path)
    assert patch_files(inst.test_patch) == ["test_new.py"]
    assert patch_files(inst.patch) == ["calc.py"]


@pytest.mark.slow
async def test_gold_empty_and_broken_patches(tmp_path: Path, runtime: Runtime) -> None:
    inst = _instance(tmp_path)
    gold = await grade_patch(runtime, inst, inst.patch)
    assert gold.resolved
    assert gold.reward == 1.0
    assert gold.error is None
    assert gold.fail_to_pass.passed == inst.FAIL_TO_PASS
    assert gold.pass_to_pass.passed == inst.PASS_TO_PASS
    assert "PASSED test_new.py::test_add" in gold.test_output

    empty = await grade_patch(runtime, inst, "")
    assert not empty.resolved
    assert empty.reward == 0.0
    assert empty.fail_to_pass.failed == inst.FAIL_TO_PASS
    assert empty.pass_to_pass.passed == inst.PASS_TO_PASS

    bad = await grade_patch(runtime, inst, inst.patch.replace("a - b", "a * b"))
    assert not bad.patch_applied
    assert not bad.resolved
    assert bad.error is not None
    assert "did not apply" in bad.error


@pytest.mark.slow
async def test_agent_cannot_pass_by_writing_the_tests(tmp_path: Path, runtime: Runtime) -> None:
    """Files the test patch touches are reset before it is applied."""
    inst = _instance(tmp_path)
    async with await runtime.create(environment_spec(inst)) as box:
        await prepare_sandbox(box, inst)
        cheat = "def test_add():\n    pass\n"
        await box.exec(["sh", "-c", f"printf '{cheat}' > test_new.py"], cwd="/workspace")
        await box.exec("mkdir __pycache__ && echo x > __pycache__/calc.pyc", cwd="/workspace")
        candidate = await extract_patch(box, inst.base_commit)
    report = await grade_patch(runtime, inst, candidate.patch)
    assert not report.resolved
    assert "test_new.py" in report.model_patch
    assert "__pycache__" not in report.model_patch
    assert report.statuses[inst.FAIL_TO_PASS[0]] == "FAILED"


@pytest.mark.slow
async def test_test_run_timeout_is_reported(tmp_path: Path, runtime: Runtime) -> None:
    inst = _instance(
        tmp_path,
        megaflow_test_format="pytest_log",
        megaflow_test_cmd="sleep 30; python3 -m pytest",
        megaflow_test_timeout_s=0.5,
    )
    report = await grade_patch(runtime, inst, inst.patch)
    assert not report.resolved
    assert report.error is not None
    assert "ran past 0.5 s" in report.error
