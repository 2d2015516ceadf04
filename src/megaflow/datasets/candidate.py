"""The candidate patch: what the agent changed, taken from its sandbox once it stops.

Nothing the agent did reaches grading except this patch. It is extracted
after every process the agent left behind is killed, as ``git diff
--binary`` of the work tree against the base commit *by sha*, by a git that
uses nothing of the agent's ``.git`` but its objects: a fresh repository in a
new temporary directory borrows them (``objects/info/alternates``), so the
agent's config (filters, textconv, fsmonitor, includes, ``core.worktree``),
hooks, refs, replace objects, index and ``info/attributes`` are never read,
and an ``info/attributes`` of ours unsets every attribute that would run or
convert anything (``filter``, ``text``, ``eol``, ``ident``,
``working-tree-encoding``, ``diff``) over whatever ``.gitattributes`` the work
tree holds. Whatever the agent did to its objects can only change which
patch comes out, and the reward is a function of that patch alone, graded in
a fresh sandbox (:mod:`megaflow.datasets.grading`).

Who failed decides the reward: a patch that cannot be taken (no base commit,
a broken repository, a full disk, a patch over the size limit) is the
agent's failure, recorded with its cause, and graded 0; only a sandbox that
is gone raises (``SandboxError``, an infrastructure failure, retried).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from megaflow.core.errors import NotFound, SandboxFileError
from megaflow.datasets.prepare import GIT_ENV, WORKDIR
from megaflow.environment.abstract import Sandbox

# Environment for every git call over the agent's work tree: nothing from
# outside the fresh repository is read (no system or global config either).
_SAFE_GIT_ENV = {
    **GIT_ENV,
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_EXTERNAL_DIFF": "",
    "GIT_WORK_TREE": WORKDIR,
    "HOME": "/nonexistent",
    "XDG_CONFIG_HOME": "/nonexistent",
}
_GIT = (
    "git -c core.fsmonitor=false -c core.hooksPath=/dev/null -c core.untrackedCache=false "
    "-c diff.external= -c core.pager=cat -c core.attributesFile=/dev/null -c core.autocrlf=false "
    "-c core.safecrlf=false -c core.symlinks=true -c core.fileMode=true"
)
# Over every .gitattributes of the work tree: nothing runs, nothing is converted.
_NEUTRAL_ATTRIBUTES = "* !filter !text !eol !ident !working-tree-encoding !diff !crlf\n"


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
    attrs = shlex.quote(_NEUTRAL_ATTRIBUTES)
    return f"""set -e
t=$(mktemp -d /tmp/.megaflow-extract.XXXXXX)
export GIT_DIR="$t/git" GIT_INDEX_FILE="$t/index"
env -u GIT_WORK_TREE git init -q --bare "$GIT_DIR"
printf '%s\\n' {WORKDIR}/.git/objects > "$GIT_DIR/objects/info/alternates"
printf %s {attrs} > "$GIT_DIR/info/attributes"
{_GIT} cat-file -e {base}^{{commit}}
{_GIT} read-tree {base}
{_GIT} add -A -- . ':(exclude).git' ':(exclude)*.pyc' ':(exclude)**/__pycache__' >/dev/null
{_GIT} diff --cached --binary --full-index --no-ext-diff --no-textconv --no-color \\
  --no-renames --no-relative -U3 --src-prefix=a/ --dst-prefix=b/ {base} -- > "$t/patch"
size=$(wc -c < "$t/patch")
if [ "$size" -gt {max_bytes} ]; then echo "too-large $size"; else echo "ok $size $t/patch"; fi
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
    path = status.split(" ", 2)[2]
    try:
        return Candidate(await sandbox.read_file(path))
    except (NotFound, SandboxFileError) as exc:  # the file's doing; a lost sandbox raises
        return Candidate(b"", f"cannot take the agent's patch: {exc}")
