"""Unified git diffs: the files they touch, and applying one in a sandbox."""

from __future__ import annotations

import re

from megaflow.datasets.prepare import GIT_ENV, WORKDIR
from megaflow.datasets.sources import one_file_tar
from megaflow.environment.abstract import Sandbox

PATCH_FILE = ".megaflow-eval.patch"
_DIFF_HEAD = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)


def patch_files(patch: str) -> list[str]:
    """Every path a unified git diff touches (old and new names)."""
    files: dict[str, None] = {}
    for a, b in _DIFF_HEAD.findall(patch):
        files.setdefault(a, None)
        files.setdefault(b, None)
    return list(files)


async def put_file(sandbox: Sandbox, name: str, data: bytes) -> None:
    await sandbox.upload(one_file_tar(name, data), WORKDIR)


async def apply_patch(sandbox: Sandbox, patch: bytes) -> str | None:
    """Apply a patch in the workspace; return None, or why it did not apply."""
    await put_file(sandbox, PATCH_FILE, patch)
    script = (
        f"git apply --whitespace=nowarn {PATCH_FILE} || "
        f"git apply --whitespace=nowarn --3way {PATCH_FILE}; rc=$?; rm -f {PATCH_FILE}; exit $rc"
    )
    res = await sandbox.exec(["sh", "-c", script], timeout=120, env=GIT_ENV, cwd=WORKDIR)
    return None if res.ok else (res.stderr or res.stdout).strip()[-2000:] or "git apply failed"
