"""The 'host' image shows only its allow list (and the config's host_paths)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from megaflow.environment.abstract import EnvironmentSpec
from megaflow.environment.local import LocalRuntime
from tests.environment.conftest import leak_check, local, local_runtime

__all__ = ["leak_check", "local"]

SECRET = Path("/srv/megaflow-test-secret")
OPEN = Path("/opt/megaflow-test-open")
CHECKOUT = Path("/work/other-checkout-test")
NEVER = ("/work", "/srv", "/opt", "/var/lib", "/mnt", "/home", "/media", "/boot")


@pytest.fixture
def planted() -> Iterator[None]:
    """A root-only file, a world-readable one and a fake checkout on the host."""
    made = []
    for d in (SECRET, OPEN, CHECKOUT):
        if not d.exists():
            d.mkdir(parents=True)
            made.append(d)
    (SECRET / "key").write_text("TOPSECRET")
    (SECRET / "key").chmod(0o600)
    OPEN.chmod(0o755)
    (OPEN / "readme").write_text("OPENDATA")
    (OPEN / "readme").chmod(0o644)
    CHECKOUT.chmod(0o755)
    (CHECKOUT / ".git").mkdir(exist_ok=True)
    (CHECKOUT / "pyproject.toml").write_text("CHECKOUTDATA")
    try:
        yield
    finally:
        for d in made:
            shutil.rmtree(d, ignore_errors=True)


async def test_only_the_allow_list_is_visible(local: LocalRuntime, planted: None) -> None:
    async with await local.create(EnvironmentSpec()) as sb:
        result = await sb.exec(
            f"cat {SECRET}/key {OPEN}/readme {CHECKOUT}/pyproject.toml; ls -A / ;"
            f'for d in {" ".join(NEVER)} /root /var; do echo "$d: $(ls -A $d 2>&1)"; done;'
            "cat /etc/shadow /etc/gshadow; ls -A /etc/ssh /etc/sudoers.d"
        )
        for data in ("TOPSECRET", "OPENDATA", "CHECKOUTDATA"):
            assert data not in result.stdout, data
        listing = (await sb.exec("ls -A /")).stdout.split()
        assert set(listing) <= {
            "bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc",
            "dev", "proc", "run", "tmp", "root", "var", "workspace",
        }, listing  # fmt: skip
        for d in NEVER:
            assert f"{d}: ls: cannot access" in result.stdout, d
        assert "/root: \n" in result.stdout  # the sandbox's own, empty home
        assert "/var: tmp\n" in result.stdout
        assert (await sb.exec("ls -A /etc/ssh; cat /etc/shadow")).stdout == ""


async def test_host_paths_are_bound_read_only_when_named(tmp_path: Path, planted: None) -> None:
    rt = local_runtime(tmp_path, host_paths=[str(OPEN), str(SECRET)])
    async with rt, await rt.create(EnvironmentSpec()) as sb:
        result = await sb.exec(f"cat {OPEN}/readme; cat {SECRET}/key; touch {OPEN}/x")
        assert result.stdout == "OPENDATA"
        assert "Permission denied" in result.stderr  # named, but root-only still
        assert "Read-only file system" in result.stderr
        assert (await sb.exec(f"ls {CHECKOUT}")).exit_code != 0


async def test_hide_works_inside_host_paths(tmp_path: Path, planted: None) -> None:
    rt = local_runtime(tmp_path, host_paths=[str(OPEN)], hide=[f"{OPEN}/readme"])
    async with rt, await rt.create(EnvironmentSpec()) as sb:
        assert (await sb.exec(f"cat {OPEN}/readme")).stdout == ""


async def test_grading_tools_work_in_a_host_sandbox(local: LocalRuntime) -> None:
    spec = EnvironmentSpec(files={"test_a.py": "def test_a():\n    assert True\n"})
    async with await local.create(spec) as sb:
        result = await sb.exec(
            "git --version && python3 -m pytest -q -p no:cacheprovider test_a.py", timeout=120
        )
        assert result.exit_code == 0, result
        assert "1 passed" in result.stdout
