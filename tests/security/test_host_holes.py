"""What a sandbox must not reach on the host, attacked through ``megaflow run``.

The scripted attacker looks for the exec server's channel to forge replies
(and a frame header claiming 1 GiB, which once made the host hold 1 GiB),
for root-only host files, and for another checkout on the machine with its
task set's gold patches. Nothing it finds may reach its patch, its
trajectory or its reward, and the host process's memory stays bounded.
"""

from __future__ import annotations

import resource
import secrets
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.attack import FAILING_TEST, calc_task_set, run_attack

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]

# Python run by the attacker: open every fd of every process it does not own and
# write a forged reply frame whose header claims a 1 GiB body.
FORGE = r"""
import os, struct, marshal
head = marshal.dumps({"id": 1, "exit_code": 0, "stdout_len": 0, "truncated": False,
                      "timed_out": False, "duration_s": 0.0}, 4)
frame = struct.pack(">II", len(head), 1 << 30) + head
foreign = opened = 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if os.stat(f"/proc/{pid}").st_uid == os.getuid():
            continue
        foreign += 1
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with open(f"/proc/{pid}/fd/{fd}", "wb", buffering=0) as f:
                f.write(frame)
                opened += 1
    except OSError:
        pass
print(f"foreign={foreign} opened={opened}")
"""


def test_forged_and_oversized_frames_cannot_reach_the_host(tmp_path: Path) -> None:
    tasks, _ = calc_task_set(tmp_path / "set")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    stored = run_attack(tmp_path, tasks, [
        f"printf %s {shlex.quote(FAILING_TEST)} > test_new.py",
        f"python3 -c {shlex.quote(FORGE)}",
        "cat /proc/1/fd/1 </dev/null >/dev/null 2>&1; echo rc=$?; kill -STOP 1; echo kill=$?",
    ])  # fmt: skip
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    (t,) = stored
    obs = t.observations()
    assert "opened=0" in obs, obs
    assert "foreign=0 " not in obs  # it did see the server and init, and could not write
    assert "kill=1" in obs
    assert not t.success
    assert t.reward == 0.0
    assert grown_mib < 256, f"the host process grew by {grown_mib:.0f} MiB"


@pytest.fixture
def host_secrets() -> Iterator[tuple[str, list[Path]]]:
    """A root-only file under /srv and /var, and a world-readable file in another
    checkout beside this one (a task set's gold patches), all holding one token."""
    token = "megaflow-secret-" + secrets.token_hex(8)
    other = REPO.parent / f".megaflow-security-other-checkout-{secrets.token_hex(4)}"
    made = [Path("/srv/megaflow-security-test"), Path("/var/lib/megaflow-security-test"), other]
    files = [made[0] / "secret", made[1] / "secret", other / "tasks" / "gold.patch"]
    for f, mode in zip(files, (0o600, 0o600, 0o644), strict=True):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(token + "\n")
        f.chmod(mode)
    (other / ".git").mkdir()
    try:
        yield token, files
    finally:
        for d in made:
            shutil.rmtree(d, ignore_errors=True)


def test_host_files_and_other_checkouts_are_not_readable(
    tmp_path: Path, host_secrets: tuple[str, list[Path]]
) -> None:
    token, files = host_secrets
    tasks, _ = calc_task_set(tmp_path / "set")
    reads = [f"cat {f} >> leak.txt 2>&1; echo read=$?" for f in files]
    stored = run_attack(tmp_path, tasks, [
        *reads,
        "cat /etc/shadow >> leak.txt 2>&1; echo shadow=$?",
        f"ls {files[2].parents[1].parent} >> leak.txt 2>&1; echo ls=$?",
        "grep -rs megaflow-secret- /srv /var /work /opt /mnt /home /root /etc >> leak.txt; true",
        "cat leak.txt",
    ])  # fmt: skip
    (t,) = stored
    obs = t.observations()
    assert token not in obs
    assert token.encode() not in t.patch
    assert obs.count("read=1") == len(files), obs
    assert "shadow=1" in obs
