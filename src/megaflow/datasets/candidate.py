"""The candidate patch: what the agent changed, taken from its sandbox once it stops.

Nothing the agent did reaches grading except this patch. It is extracted
after every process the agent left behind is killed, as ``git diff
--binary`` of the work tree against the base commit *by sha* (moving a tag or
branch changes nothing), through a fresh index (index flags such as
``assume-unchanged`` are ignored) and with replace objects, external diff
drivers, textconv, hooks and fsmonitor disabled. The agent's ``.git`` is
still its own: whatever it did there can only change which patch comes out,
and the reward is a function of that patch alone, graded in a fresh sandbox
(:mod:`megaflow.datasets.grading`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from megaflow.datasets.prepare import GIT_ENV, WORKDIR
from megaflow.environment.abstract import Sandbox

PATCH_PATH = "/tmp/.megaflow-candidate.patch"
# Environment for every git call over the agent's repository.
_SAFE_GIT_ENV = {
    **GIT_ENV,
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_EXTERNAL_DIFF": "",
    "GIT_DIR": f"{WORKDIR}/.git",  # never a repository found above the workspace
    "GIT_WORK_TREE": WORKDIR,
}
_GIT = (
    "git -c core.fsmonitor=false -c core.hooksPath=/dev/null -c core.untrackedCache=false "
    "-c diff.external= -c core.pager=cat"
)


@dataclass(frozen=True)
class Candidate:
    """The agent's patch (exact bytes), or why none could be taken."""

    patch: bytes
    error: str | None = None

    @property
    def text(self) -> str:
        return self.patch.decode(errors="replace")


def _script(base_commit: str, max_bytes: int) -> str:
    base = shlex.quote(base_commit)
    out = shlex.quote(PATCH_PATH)
    return f"""set -e
export GIT_INDEX_FILE=$(mktemp /tmp/.megaflow-index.XXXXXX)
trap 'rm -f "$GIT_INDEX_FILE"' EXIT
{_GIT} cat-file -e {base}^{{commit}}
{_GIT} read-tree {base}
{_GIT} add -A -- . ':(exclude)*.pyc' ':(exclude)**/__pycache__' >/dev/null
rm -f {out}
{_GIT} diff --cached --binary --full-index --no-ext-diff --no-textconv --no-color \\
  --no-renames --no-relative -U3 --src-prefix=a/ --dst-prefix=b/ {base} -- > {out}
size=$(wc -c < {out})
if [ "$size" -gt {max_bytes} ]; then echo "too-large $size"; else echo "ok $size"; fi
"""


async def extract_patch(
    sandbox: Sandbox, base_commit: str, max_bytes: int = 4 << 20, timeout: float = 120.0
) -> Candidate:
    """Kill what the agent left running, then take its patch against ``base_commit``.

    A repository the agent broke (no base commit, no ``.git``) gives an empty
    candidate with the reason; a sandbox that is gone raises ``SandboxError``
    (an infrastructure failure, retried like any other)."""
    await sandbox.kill_processes()
    res = await sandbox.exec(
        ["sh", "-c", _script(base_commit, max_bytes)], timeout=timeout, env=_SAFE_GIT_ENV,
        cwd=WORKDIR,
    )  # fmt: skip
    status = (res.stdout.strip().splitlines() or [""])[-1]
    if not res.ok or not status.startswith(("ok ", "too-large ")):
        why = "timed out" if res.timed_out else (res.stderr or res.stdout).strip()[-500:]
        return Candidate(b"", f"cannot take the agent's patch: {why or 'git failed'}")
    if status.startswith("too-large"):
        size = status.split()[1]
        return Candidate(b"", f"the agent's patch is {size} bytes; the limit is {max_bytes}")
    return Candidate(await sandbox.read_file(PATCH_PATH))
