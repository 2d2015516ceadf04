"""Getting a sandbox ready for an instance: the repository at its base commit.

After :func:`prepare_sandbox` the workspace is a git work tree on branch
``main`` at the base commit, and its ``.git`` holds the base commit's history
and nothing else: no other branches, tags, remotes or reflog, and no objects
of later commits, so ``git log --all`` cannot reach a later fix. The
source's own history (a bundle, or the ``.git`` of a directory or tarball) is
fetched from in a scratch directory outside the workspace that is removed
before the agent starts.

An ``image`` source already holds the repository in the sandbox's image, at
its ``path``: everything happens inside the sandbox, never on the host. The
directory is moved aside once (to :data:`IMAGE_REPO_KEEP`), copied into the
workspace, and its old path becomes a link to the workspace, so what the
image installed from it (an editable install, a path in a config) sees the
agent's work tree. Files the repository ignores (an in-place build) are
kept; untracked ones are removed, as for every source.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from megaflow.core.errors import InvalidInput, SandboxError
from megaflow.datasets.instance import ImageSource, SWEInstance
from megaflow.datasets.sources import BUNDLE_NAME, source_archive
from megaflow.environment.abstract import EnvironmentSpec, Sandbox

WORKDIR = "/workspace"
BRANCH = "main"
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
_NO_HISTORY = "no-history"  # what the script prints when the source has no base commit
IMAGE_REPO_KEEP = "/.megaflow-image-repo"
"""Where an image's repository directory is kept after its first preparation."""


@dataclass(frozen=True)
class PreparedRepo:
    """What preparation produced: the HEAD commit (always ``base_commit``)."""

    head: str
    matches_base: bool = True


def environment_spec(instance: SWEInstance, base: EnvironmentSpec | None = None) -> EnvironmentSpec:
    """The sandbox an instance needs: ``base`` (image, resources, network) with
    the workspace and git settings tasks rely on. The repository itself is
    placed by :func:`prepare_sandbox`, which works on every runtime."""
    spec = base or EnvironmentSpec()
    update: dict[str, object] = {"workdir": WORKDIR, "env": {**spec.env, **GIT_ENV}}
    if isinstance(instance.megaflow_source, ImageSource):
        update["image"] = instance.megaflow_source.image
    return spec.model_copy(update=update)


def _from_image(source: ImageSource) -> str:
    """Shell lines putting the image's repository into the workspace (the cwd)."""
    if source.path == WORKDIR:
        return ""
    path, keep = shlex.quote(source.path), shlex.quote(IMAGE_REPO_KEEP)
    return f"""if [ ! -L {path} ]; then
  [ -d {path} ] || {{ echo "the image has no directory {path}" >&2; exit 3; }}
  rm -rf {keep}; mv {path} {keep}; ln -s "$PWD" {path}
fi
cp -a {keep}/. .
"""


def clean_command(instance: SWEInstance) -> str:
    """What removes files git does not track: an image's ignored files are its
    in-place build and stay; a host source never ships any."""
    image = isinstance(instance.megaflow_source, ImageSource)
    return "git clean -ffdq" if image else "git clean -ffdqx"


def _script(instance: SWEInstance) -> str:
    base = shlex.quote(instance.base_commit)
    source = instance.megaflow_source
    clean = clean_command(instance)
    return f"""set -e
{_from_image(source) if isinstance(source, ImageSource) else ""}
src=$(mktemp -d /tmp/.megaflow-src.XXXXXX)
trap 'rm -rf "$src"' EXIT
if [ -f {BUNDLE_NAME} ]; then
  git init -q --bare "$src/git"
  git -C "$src/git" fetch -q "$PWD/{BUNDLE_NAME}" '+refs/*:refs/*'
  rm -f {BUNDLE_NAME}
elif [ -e .git ]; then
  mv .git "$src/git"
fi
if [ -d "$src/git" ]; then
  if ! git --git-dir="$src/git" cat-file -e {base}^{{commit}} 2>/dev/null; then
    echo {_NO_HISTORY}; exit 0
  fi
  git --git-dir="$src/git" update-ref refs/megaflow/base {base}
  git init -q -b {BRANCH} .
  git fetch -q --no-tags "$src/git" refs/megaflow/base
  git checkout -q -f -B {BRANCH} FETCH_HEAD
  {clean}
  rm -f .git/FETCH_HEAD .git/ORIG_HEAD
else
  git init -q -b {BRANCH} .
  git add -A
  git commit -q --allow-empty -m base
fi
rm -rf .git/logs
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
    """Place the repository in the workspace at the base commit, with no later history.

    Raises ``InvalidInput`` when the source does not hold ``base_commit`` (a
    git source without it, or a plain directory whose snapshot commit differs).
    """
    if not isinstance(instance.megaflow_source, ImageSource):
        await sandbox.upload(source_archive(instance.megaflow_source), WORKDIR)
    out = await run_checked(
        sandbox, _script(instance), f"preparing the repository of {instance.instance_id}"
    )
    head = out.strip().splitlines()[-1] if out.strip() else ""
    src = instance.megaflow_source
    shown = f"{src.image}:{src.path}" if isinstance(src, ImageSource) else src.path
    where = f"instance {instance.instance_id!r}: megaflow_source {shown}"
    if head == _NO_HISTORY:
        raise InvalidInput(f"{where}: its history has no commit {instance.base_commit}")
    if head != instance.base_commit:
        raise InvalidInput(
            f"{where}: the directory's snapshot commit is {head}, but base_commit is "
            f"{instance.base_commit}; set base_commit to {head}, or give a git work tree"
        )
    return PreparedRepo(head=head)
