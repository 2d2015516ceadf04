"""Running an instance's tests through MegaFlow's reporter, and checking what it signed.

The host side of :mod:`megaflow.datasets.sandbox_reporter`. For each grading
run it writes a fresh key, the reporter and the list of files the candidate
changed into a directory of the grading sandbox, starts the runner from
there with an isolated interpreter, the runner's configuration taken from
the base commit (:func:`find_base_config`, passed with ``-c``), then kills
every process the run left and reads the records.

What the tests printed is kept for people to read and never parsed. The run
counts only when its records are whole and agree with each other and with
the sandbox: every line signed and in sequence, a start and an end, the end's
exit status the one the process exited with, no failure under exit status 0,
not timed out. Anything else is a *problem* (the run cannot resolve), and a
line nobody signed or a tamper record is a *tamper* (the patch reached into
the runner: reward 0, marked ``tampered``).
"""

from __future__ import annotations

import configparser
import hmac
import json
import posixpath
import secrets
import shlex
import tomllib
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path

from megaflow.datasets.instance import SWEInstance, pytest_invocation
from megaflow.datasets.prepare import GIT_ENV, WORKDIR
from megaflow.datasets.pytest_report import TestStatus, statuses_for
from megaflow.environment.abstract import Sandbox

RUNNER_NAME = "megaflow_pytest.py"
CONFIG_NAMES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
BASE_CONFIG_PREFIX = ".megaflow-base-"
RECORDS_CAP = 32 << 20
OUTPUT_CAP = 1 << 20  # what the tests print is kept for people, never read for results
# No PYTHON* or PYTEST_* from anywhere but here; the interpreter ignores them anyway (-I).
RUN_ENV = {**GIT_ENV, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONNOUSERSITE": "1"}


@dataclass(frozen=True)
class BaseConfig:
    """The file pytest reads its settings from at the base commit (relative to the workspace)."""

    path: str
    content: bytes

    def pinned_path(self) -> str:
        """Where its copy goes: beside it (relative paths in it keep their meaning),
        under a name no discovery finds, with the suffix that says how to parse it."""
        head, name = posixpath.split(self.path)
        return posixpath.join(head, BASE_CONFIG_PREFIX + name.lstrip("."))


@dataclass
class ChannelRun:
    """What one run of the tests established."""

    statuses: dict[str, TestStatus | None]
    problems: list[str] = field(default_factory=list)
    tampers: list[str] = field(default_factory=list)
    exit_code: int | None = None
    timed_out: bool = False
    output: str = ""
    started: bool = False
    log: str = ""
    """A log-read format's whole output (stdout, then stderr), for the harness's parsers."""


def _holds_settings(name: str, content: bytes) -> bool:
    """Whether pytest takes ``name`` as its configuration file (pytest's own rule)."""
    if name in ("pytest.ini", ".pytest.ini"):
        return True
    text = content.decode(errors="replace")
    if name == "pyproject.toml":
        try:
            return "ini_options" in tomllib.loads(text).get("tool", {}).get("pytest", {})
        except tomllib.TOMLDecodeError:
            return False
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return False
    wanted = ("pytest",) if name == "tox.ini" else ("tool:pytest", "pytest")
    return any(parser.has_section(s) for s in wanted)


def _search_dirs(instance: SWEInstance) -> list[str]:
    """The directories pytest searches for its configuration, nearest first:
    the test files' common directory up to the workspace."""
    dirs = [posixpath.dirname(f) for f in instance.test_files()]
    common = posixpath.commonpath(dirs) if dirs and all(dirs) else ""
    out = []
    while True:
        out.append(common)
        if not common:
            return out
        common = posixpath.dirname(common)


async def find_base_config(sandbox: Sandbox, instance: SWEInstance) -> BaseConfig | None:
    """The configuration pytest would read at the base commit; call before any patch."""
    candidates = [posixpath.join(d, n) for d in _search_dirs(instance) for n in CONFIG_NAMES]
    listing = " ".join(shlex.quote(c) for c in candidates)
    script = f'for f in {listing}; do [ -f "$f" ] && [ ! -L "$f" ] && echo "$f"; done; true'
    res = await sandbox.exec(["sh", "-c", script], timeout=60, env=GIT_ENV, cwd=WORKDIR)
    for path in res.stdout.splitlines():
        content = await sandbox.read_file(path)
        if _holds_settings(posixpath.basename(path), content):
            return BaseConfig(path, content)
    return None


def untrusted_files(candidate_files: list[str], test_patch_files: list[str]) -> list[str]:
    """Files the candidate changed that grading did not put back (test files are)."""
    restored = set(test_patch_files)
    return [f for f in candidate_files if f not in restored]


def reporter_source() -> bytes:
    return (Path(__file__).parent / "sandbox_reporter.py").read_bytes()


def _command(instance: SWEInstance, directory: str, config: BaseConfig | None) -> list[str]:
    python, extra, as_module = pytest_invocation(instance.megaflow_test_cmd)
    pinned = config.pinned_path() if config else BASE_CONFIG_PREFIX + "pytest.ini"
    return [
        python, "-I", "-S", "-B", f"{directory}/{RUNNER_NAME}", f"{directory}/out", WORKDIR,
        f"{directory}/untrusted", "-m" if as_module else "--", *extra, "-rA",
        "-p", "no:cacheprovider", "-c", pinned, *instance.test_files(),
    ]  # fmt: skip


async def run_reported(
    sandbox: Sandbox, instance: SWEInstance, untrusted: list[str], config: BaseConfig | None
) -> ChannelRun:
    """Run the tests with the reporter; every process of the run is dead on return."""
    key = secrets.token_bytes(32)
    directory = f"/tmp/.megaflow-grade-{secrets.token_hex(8)}"
    pinned = config.pinned_path() if config else BASE_CONFIG_PREFIX + "pytest.ini"
    await sandbox.exec(
        ["rm", "-rf", "--", pinned], timeout=30, cwd=WORKDIR
    )  # whatever the patch put there
    await sandbox.write_file(pinned, config.content if config else b"[pytest]\n")
    await sandbox.write_file(f"{directory}/{RUNNER_NAME}", reporter_source())
    listing = "".join(f + "\n" for f in untrusted).encode()
    await sandbox.write_file(f"{directory}/untrusted", listing)
    await sandbox.write_file(f"{directory}/out/key", key, mode=0o600)
    res = await sandbox.exec(
        _command(instance, directory, config), timeout=instance.megaflow_test_timeout_s,
        env=RUN_ENV, cwd=WORKDIR, output_cap=OUTPUT_CAP,
    )  # fmt: skip
    await sandbox.kill_processes()  # nothing the run left can still write its records
    # Read with a time limit and a cap: the tests may have left a FIFO or a link there.
    out = await sandbox.exec(
        ["head", "-c", str(RECORDS_CAP), f"{directory}/out/records"], timeout=60,
        output_cap=RECORDS_CAP,
    )  # fmt: skip
    run = check_records(out.stdout.encode(), key, instance, res.exit_code, res.timed_out)
    if not out.ok:
        run.problems.insert(0, "the runner's records could not be read")
    run.output = (res.stdout + res.stderr)[-20_000:]
    if res.timed_out:
        limit = instance.megaflow_test_timeout_s
        run.problems.append(f"the tests ran past {limit:g} s and were killed")
    return run


def _lines(data: bytes, key: bytes) -> tuple[list[dict[str, object]], list[str]]:
    """The records whose signature and sequence hold, and the tampers found."""
    records: list[dict[str, object]] = []
    for raw in data.split(b"\n"):
        if not raw:
            continue
        mac, _, body = raw.partition(b" ")
        want = hmac.new(key, body, sha256).hexdigest().encode()
        if not hmac.compare_digest(mac, want):
            return records, ["the results channel holds a line the reporter did not write"]
        record = json.loads(body)
        if record.get("seq") != len(records):
            return records, ["the results channel is out of sequence"]
        records.append(record)
    return records, []


_STATUS = {  # (phase, outcome, was an expected failure) -> pytest -rA's word
    ("setup", "failed", False): "ERROR", ("setup", "failed", True): "ERROR",
    ("setup", "skipped", False): "SKIPPED", ("setup", "skipped", True): "XFAIL",
    ("call", "passed", False): "PASSED", ("call", "passed", True): "XPASS",
    ("call", "failed", False): "FAILED", ("call", "failed", True): "FAILED",
    ("call", "skipped", False): "SKIPPED", ("call", "skipped", True): "XFAIL",
    ("teardown", "failed", False): "ERROR", ("teardown", "failed", True): "ERROR",
}  # fmt: skip


def check_records(
    data: bytes, key: bytes, instance: SWEInstance, exit_code: int | None, timed_out: bool
) -> ChannelRun:
    """Statuses of the expected tests from the signed records, with every
    reason the run cannot count (problems) or was tampered with (tampers)."""
    records, tampers = _lines(data, key)
    lines: list[str] = []
    problems: list[str] = []
    phases: set[tuple[str, str]] = set()
    failed = False
    start = end = None
    for r in records:
        kind = r.get("kind")
        if kind == "start":
            start = r
        elif kind == "end":
            end = r
        elif kind == "tamper":
            tampers.append(str(r.get("reason")))
        elif kind == "collect":
            failed = True
        elif kind == "test":
            phase = (str(r["nodeid"]), str(r["when"]))
            if phase in phases:  # pytest reports each phase of a test once
                tampers.append(f"{phase[0]} was reported twice at {phase[1]}")
            phases.add(phase)
            word = _STATUS.get((str(r["when"]), str(r["outcome"]), bool(r["xfail"])))
            if word is not None:
                lines.append(f"{word} {r['nodeid']}")
                failed = failed or word in ("FAILED", "ERROR")
    ids = [*instance.FAIL_TO_PASS, *instance.PASS_TO_PASS]
    run = ChannelRun(statuses_for("\n".join(lines), ids), problems, tampers, exit_code, timed_out)
    run.started = start is not None
    if start is None:
        problems.append("the test runner did not start")
    elif end is None:
        problems.append("the test run ended before the runner's last report")
    else:
        status = int(str(end["exitstatus"]))
        if exit_code != status:
            problems.append(
                f"the test process exited with {exit_code}; the runner ended with {status}"
            )
        if status not in (0, 1):
            problems.append(f"the runner ended with status {status} (not a completed run)")
        if status == 0 and failed:
            problems.append("the runner reported success, but a test failed")
        if status == 1 and not failed:
            problems.append("the runner reported a failure that no report shows")
    return run
