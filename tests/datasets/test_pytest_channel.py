"""The host's reading of the reporter's records: only a whole, signed,
self-consistent run counts. Records here are written by an independent
writer (the test's own HMAC), as the reporter in the sandbox writes them."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from megaflow.datasets.grading import judge
from megaflow.datasets.instance import SWEInstance, pytest_invocation
from megaflow.datasets.loader import load_instances
from megaflow.datasets.pytest_channel import BaseConfig, ChannelRun, check_records
from tests.datasets.conftest import make_calc_repo, write_jsonl

KEY = b"k" * 32
F2P, P2P = "test_new.py::test_add", "test_calc.py::test_zero"


def _instance(tmp_path: Path) -> SWEInstance:
    _, inst = make_calc_repo(tmp_path)
    (loaded,) = load_instances(write_jsonl(tmp_path / "s.jsonl", [inst]))
    return loaded


def signed(records: list[dict[str, Any]], key: bytes = KEY) -> bytes:
    out = b""
    for seq, r in enumerate(records):
        body = json.dumps({**r, "seq": seq}, sort_keys=True).encode()
        out += hmac.new(key, body, hashlib.sha256).hexdigest().encode() + b" " + body + b"\n"
    return out


def rec(
    nodeid: str, when: str = "call", outcome: str = "passed", xfail: bool = False
) -> dict[str, Any]:
    return {"kind": "test", "nodeid": nodeid, "when": when, "outcome": outcome, "xfail": xfail}


START = {"kind": "start", "pytest": "7.2.1"}


def end(status: int) -> dict[str, Any]:
    return {"kind": "end", "exitstatus": status, "session": status}


def passing() -> list[dict[str, Any]]:
    return [START, rec(F2P, "setup"), rec(F2P), rec(F2P, "teardown"), rec(P2P), end(0)]


def test_a_whole_passing_run_resolves(tmp_path: Path) -> None:
    inst = _instance(tmp_path)
    run = check_records(signed(passing()), KEY, inst, 0, False)
    assert run.problems == []
    assert run.tampers == []
    assert judge(inst, run, strict=True).resolved


def test_a_line_not_signed_with_the_runs_key_is_a_tamper(tmp_path: Path) -> None:
    inst = _instance(tmp_path)
    forged = signed(passing()[:2]) + signed([rec(F2P)], key=b"x" * 32).replace(
        b'"seq": 0', b'"seq": 2'
    )
    run = check_records(forged, KEY, inst, 0, False)
    assert run.tampers == ["the results channel holds a line the reporter did not write"]
    report = judge(inst, run, strict=False)
    assert report.tampered
    assert not report.resolved
    assert report.reward == 0.0


def test_lines_out_of_sequence_are_a_tamper(tmp_path: Path) -> None:
    inst = _instance(tmp_path)
    good = signed(passing()).splitlines(keepends=True)
    run = check_records(b"".join([good[0], good[2], good[1], *good[3:]]), KEY, inst, 0, False)
    assert run.tampers == ["the results channel is out of sequence"]


@pytest.mark.parametrize(
    ("records", "exit_code", "problem"),
    [
        (passing()[:-1], 0, "ended before the runner's last report"),
        (passing()[1:], 0, "did not start"),
        (passing(), 1, "exited with 1; the runner ended with 0"),
        ([*passing()[:-1], rec("test_x.py::t", outcome="failed"), end(0)], 0, "a test failed"),
        ([*passing()[:-1], end(2)], 2, "status 2 (not a completed run)"),
    ],
    ids=["no-end", "no-start", "exit-disagrees", "failure-under-0", "interrupted"],
)
def test_a_run_its_records_cannot_vouch_for_does_not_resolve(
    tmp_path: Path, records: list[dict[str, Any]], exit_code: int, problem: str
) -> None:
    inst = _instance(tmp_path)
    run = check_records(signed(records), KEY, inst, exit_code, False)
    assert any(problem in p for p in run.problems), run.problems
    report = judge(inst, run, strict=False)
    assert not report.resolved
    assert report.reward == 0.0
    assert not report.tampered


def test_statuses_are_pytests_summary_words(tmp_path: Path) -> None:
    inst = _instance(tmp_path)
    records = [
        START,
        rec(F2P, "setup", "skipped", xfail=True),  # pytest.xfail() in a fixture
        rec(P2P, outcome="passed"),
        rec(P2P, "teardown", "failed"),  # an error at teardown fails a passed test
        end(1),
    ]
    run = check_records(signed(records), KEY, inst, 1, False)
    assert run.statuses == {F2P: "XFAIL", P2P: "ERROR"}
    assert not judge(inst, run, strict=True).resolved
    assert not judge(inst, run, strict=False).resolved  # the teardown error


def test_findings_the_base_commit_has_too_are_not_the_patchs(tmp_path: Path) -> None:
    inst = _instance(tmp_path)
    run = check_records(signed(passing()), KEY, inst, 0, False)
    run.tampers = ["the tests called gc.get_objects"]
    assert judge(inst, run, strict=False).tampered
    allowed = judge(inst, run, strict=False, allowed=frozenset(run.tampers))
    assert allowed.resolved
    assert not allowed.tampered


def test_the_base_configuration_is_pinned_beside_itself() -> None:
    assert BaseConfig("pyproject.toml", b"").pinned_path() == ".megaflow-base-pyproject.toml"
    assert BaseConfig("sub/.pytest.ini", b"").pinned_path() == "sub/.megaflow-base-pytest.ini"
    assert BaseConfig("setup.cfg", b"").pinned_path().endswith(".cfg")


@pytest.mark.parametrize(
    ("cmd", "want"),
    [
        ("python3 -m pytest", ("python3", [], True)),
        (
            "/opt/env/bin/python -m pytest -x --tb=short",
            ("/opt/env/bin/python", ["-x", "--tb=short"], True),
        ),
        ("pytest -k 'not slow'", ("python3", ["-k", "not slow"], False)),
    ],
)
def test_runner_commands_the_reporter_can_start(
    cmd: str, want: tuple[str, list[str], bool]
) -> None:
    assert pytest_invocation(cmd) == want


@pytest.mark.parametrize(
    "cmd", ["cd sub && pytest", "sh run_tests.sh", "python3 -m pytest; true", ""]
)
def test_other_runner_commands_are_refused_with_the_way_out(cmd: str) -> None:
    with pytest.raises(ValueError, match="pytest_log"):
        pytest_invocation(cmd)


def test_an_empty_channel_run_is_not_resolved(tmp_path: Path) -> None:
    inst = _instance(tmp_path)
    run = check_records(b"", KEY, inst, 0, False)
    assert isinstance(run, ChannelRun)
    assert not run.started
    assert not judge(inst, run, strict=False).resolved


def test_a_phase_reported_twice_is_a_tamper(tmp_path: Path) -> None:
    """A forged PASSED beside the reporter's own FAILED for the same call."""
    inst = _instance(tmp_path)
    records = [*passing()[:2], rec(F2P), rec(F2P, outcome="failed"), rec(P2P), end(1)]
    run = check_records(signed(records), KEY, inst, 1, False)
    assert run.tampers == [f"{F2P} was reported twice at call"]
    assert judge(inst, run, strict=False).tampered


def test_a_failure_no_record_shows_does_not_resolve(tmp_path: Path) -> None:
    """Exit status 1 (pytest counted a failure) while every record passed: a
    record of the failure was kept from the channel."""
    inst = _instance(tmp_path)
    run = check_records(signed([*passing()[:-1], end(1)]), KEY, inst, 1, False)
    assert "the runner reported a failure that no report shows" in run.problems
    assert not judge(inst, run, strict=False).resolved


def test_the_channel_stops_when_its_file_is_swapped_under_it(tmp_path: Path) -> None:
    """Code in the test process puts another file (a filtering pipe, here
    /dev/null) at the records' fd number, leaving every attribute as it was:
    the next record is not written there, and the process ends without an
    end record (exit 97), so the run cannot count."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "key").write_bytes(KEY)
    script = (
        "import os, sys\n"
        f"sys.path.insert(0, {str(Path(reporter_file()).parent)!r})\n"
        "import sandbox_reporter as r\n"
        f"c = r._Channel({str(out)!r})\n"
        "c.write('start', pytest='x')\n"
        "os.dup2(os.open('/dev/null', os.O_WRONLY), c._fd)\n"
        "c.write('end', exitstatus=0, session=0)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, check=False)
    assert done.returncode == 97, done.stderr
    lines = (out / "records").read_bytes().splitlines()
    assert len(lines) == 1
    assert b'"kind": "start"' in lines[0]


def reporter_file() -> str:
    import megaflow.datasets.sandbox_reporter as reporter

    return str(reporter.__file__)
