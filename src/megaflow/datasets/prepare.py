"""Getting a sandbox ready for an instance: the repository at its base commit.

After :func:`prepare_sandbox` the workspace is a git work tree whose HEAD is
the base commit, tagged ``megaflow-base``, so an agent (or the grader) can use
``git diff``, ``git apply`` and ``git stash`` as in any checkout.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from megaflow.core.errors import SandboxError
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.sources import BUNDLE_NAME, source_archive
from megaflow.environment.abstract import EnvironmentSpec, Sandbox

WORKDIR = "/workspace"
BASE_TAG = "megaflow-base"
# A fixed identity and date make the snapshot commit of a plain directory
# reproducible: the same files give the same base commit everywhere.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "mini-swe",
    "GIT_AUTHOR_EMAIL": "mini-swe@megaflow.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "mini-swe",
    "GIT_COMMITTER_EMAIL": "mini-swe@megaflow.invalid",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+00:00",
    "GIT_CONFIG_COUNT": "2",
    "GIT_CONFIG_KEY_0": "safe.directory",
    "GIT_CONFIG_VALUE_0": "*",
    "GIT_CONFIG_KEY_1": "advice.detachedHead",
    "GIT_CONFIG_VALUE_1": "false",
    "PYTHONDONTWRITEBYTECODE": "1",
}


@dataclass(frozen=True)
class PreparedRepo:
    """What preparation produced: the HEAD commit and whether it is ``base_commit``."""

    head: str
    matches_base: bool


def environment_spec(instance: SWEInstance, base: EnvironmentSpec | None = None) -> EnvironmentSpec:
    """The sandbox an instance needs: ``base`` (image, resources, network) with
    the workspace and git settings tasks rely on. The repository itself is
    placed by :func:`prepare_sandbox`, which works on every runtime."""
    spec = base or EnvironmentSpec()
    return spec.model_copy(update={"workdir": WORKDIR, "env": {**spec.env, **GIT_ENV}})


def _script(instance: SWEInstance) -> str:
    base = shlex.quote(instance.base_commit)
    return f"""set -e
if [ -f {BUNDLE_NAME} ]; then
  git init -q .
  git fetch -q {BUNDLE_NAME} '+refs/*:refs/megaflow/*'
  rm -f {BUNDLE_NAME}
  git checkout -q -f --detach {base}
elif [ -d .git ]; then
  git checkout -q -f --detach {base}
else
  git init -q -b main .
  git add -A
  git commit -q --allow-empty -m base
fi
git tag -f {BASE_TAG} >/dev/null
git rev-parse HEAD
"""


async def run_checked(sandbox: Sandbox, script: str, what: str, timeout: float = 120.0) -> str:
    """Run a shell script in the workspace; raise ``SandboxError`` saying ``what`` failed."""
    res = await sandbox.exec(["sh", "-c", script], timeout=timeout, env=GIT_ENV, cwd=WORKDIR)
    if not res.ok:
        detail = (res.stderr or res.stdout).strip()[-2000:]
        why = "timed out" if res.timed_out else f"exit {res.exit_code}"
        raise SandboxError(f"{what} failed in sandbox {sandbox.id} ({why}): {detail}")
    return res.stdout


async def prepare_sandbox(sandbox: Sandbox, instance: SWEInstance) -> PreparedRepo:
    """Place the repository in the workspace and check out the base commit."""
    await sandbox.upload(source_archive(instance.megaflow_source), WORKDIR)
    out = await run_checked(
        sandbox, _script(instance), f"preparing the repository of {instance.instance_id}"
    )
    head = out.strip().splitlines()[-1] if out.strip() else ""
    return PreparedRepo(head=head, matches_base=head == instance.base_commit)
