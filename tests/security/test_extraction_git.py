"""Taking the patch runs nothing the agent's ``.git`` or work tree asks for.

The agent plants, in its repository's config and in ``.gitattributes``, a
clean filter, a textconv, an external diff driver, an fsmonitor hook, an
included config and a working-tree encoding; each writes a marker when git
runs it. Plain git in the agent's own sandbox runs them (the markers show
it); extraction runs none, and its patch is the work tree's bytes as they are.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from megaflow.datasets import environment_spec, extract_patch, load_instances, prepare_sandbox
from megaflow.environment.abstract import Sandbox
from megaflow.environment.local import LocalRuntime
from tests.datasets.conftest import make_calc_repo, write_jsonl
from tests.environment.conftest import leak_check, local

__all__ = ["leak_check", "local"]

pytestmark = pytest.mark.slow

MARK = "/tmp/ran"
CONFIG = """
[filter "evil"]
    clean = /workspace/.git/run clean
    smudge = cat
    required = true
[diff "evil"]
    textconv = /workspace/.git/run textconv
    command = /workspace/.git/run external
[core]
    fsmonitor = /workspace/.git/run fsmonitor
[include]
    path = /workspace/.git/extra
"""
# Each planted command notes its name; as a clean filter it hands git the fix.
RUN = f"""#!/bin/sh
echo "$1" >> {MARK}
if [ "$1" = clean ]; then printf 'def add(a, b):\\n    return a + b\\n'; fi
"""
EXTRA = "[core]\n    hooksPath = /workspace/.git/myhooks\n"
ATTRIBUTES = "calc.py filter=evil diff=evil\n*.txt working-tree-encoding=UTF-16\n"


async def plant(box: Sandbox) -> None:
    await box.exec(["sh", "-c", f"cat >> .git/config <<'EOF'\n{CONFIG}\nEOF"], cwd="/workspace")
    await box.write_file("/workspace/.git/extra", EXTRA.encode())
    await box.write_file("/workspace/.git/run", RUN.encode(), mode=0o755)
    await box.write_file("/workspace/.gitattributes", ATTRIBUTES.encode())
    await box.write_file("/workspace/notes.txt", b"plain ascii\n")
    # the work tree keeps the bug, with one line changed beside it
    await box.exec(["sh", "-c", "echo '# touched' >> calc.py"], cwd="/workspace")


async def markers(box: Sandbox) -> str:
    res = await box.exec(["sh", "-c", f"cat {MARK} 2>/dev/null; rm -f {MARK}"])
    return res.stdout


async def test_extraction_runs_nothing_the_repository_asks_for(
    tmp_path: Path, local: LocalRuntime
) -> None:
    _, inst = make_calc_repo(tmp_path)
    (loaded,) = load_instances(write_jsonl(tmp_path / "s.jsonl", [inst]))
    async with await local.create(environment_spec(loaded)) as box:
        await prepare_sandbox(box, loaded)
        await plant(box)
        # plain git in the agent's sandbox runs what was planted
        base = shlex.quote(loaded.base_commit)
        await box.exec(
            ["sh", "-c", f"git add -A && git diff --cached {base} >/dev/null"], cwd="/workspace"
        )
        await box.exec(
            ["sh", "-c", f"git diff --textconv {base} -- calc.py >/dev/null"], cwd="/workspace"
        )
        await box.exec(["sh", "-c", "git reset -q"], cwd="/workspace")
        planted = await markers(box)
        assert "clean" in planted
        assert "textconv" in planted or "external" in planted
        candidate = await extract_patch(box, loaded.base_commit)
        ran = await markers(box)
        calc = await box.read_file("/workspace/calc.py")
    assert ran == ""
    assert candidate.error is None
    assert b"+# touched" in candidate.patch
    assert b"return a + b" not in candidate.patch  # the clean filter's "fix" never ran
    assert b"+plain ascii" in candidate.patch  # no encoding conversion either
    assert b"return a - b" in calc
