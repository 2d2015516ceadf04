"""The SWE-bench instance, plus the MegaFlow fields that make it runnable.

An instance is one repository at one commit, an issue about it, the gold
patch that fixes the issue, a test patch that adds tests for it, and two lists
of pytest node ids: FAIL_TO_PASS (fail before the fix, pass after) and
PASS_TO_PASS (pass before and after). SWE-bench's own fields keep their names.

MegaFlow adds:

* ``megaflow_source``: where the repository comes from: a local directory
  (``dir``), a tarball (``tarball``) or a git bundle (``git_bundle``); relative
  paths are resolved against the file the instance was loaded from, and the
  path (symlinks resolved) must lie inside the task set's folder or a source
  root the run config names. Or a container image per instance (``image``)
  that holds the repository at ``path``; it runs in the ``container`` runtime
  with that image, and nothing is read on the host.
* ``megaflow_reward``: ``binary`` (1 if resolved, else 0; the default) or
  ``fraction`` (the share of FAIL_TO_PASS and PASS_TO_PASS tests that pass).
* ``megaflow_test_format``: how results are taken: ``pytest`` (the default;
  the tests run under MegaFlow's own reporter, which signs each result, and
  nothing they print is believed; :mod:`megaflow.datasets.pytest_channel`),
  ``pytest_log`` (``pytest -rA`` summary lines read from the output, as the
  SWE-bench harness reads them: for a runner MegaFlow cannot start itself,
  such as a script in an image without Python; the code under test can print
  such lines) or ``django`` (Django's runner at ``--verbosity 2``, or ``python
  -m unittest -v``, read from the output: the command runs as given, so it
  names its own test labels, and must be set).
* ``megaflow_test_cmd``: the test runner command; ``python3 -m pytest`` unless
  set. Under ``pytest`` it is ``<python> -m pytest [options]`` or ``pytest
  [options]`` (:func:`pytest_invocation`).
* ``megaflow_test_timeout_s``: how long the test run may take.

Other fields found in SWE-bench exports (``version``, ``hints_text``...) are
kept as they are and ignored.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from megaflow.core.tasks import check_id

_SHELL = set("|&;<>()$`\n")


def pytest_invocation(cmd: str) -> tuple[str, list[str], bool]:
    """``(python, options, as_module)`` of a ``megaflow_test_cmd`` under the
    ``pytest`` format: ``<python> -m pytest [options]`` or ``pytest [options]``
    (run by ``python3``). Grading starts that interpreter itself, isolated, so
    a shell line (``cd x && pytest``) cannot be honoured: such a runner is a
    ``pytest_log`` instance."""
    plain = not any(ch in _SHELL for ch in cmd)
    try:
        words = shlex.split(cmd) if plain else []
    except ValueError:
        words, plain = [], False
    if plain and len(words) >= 3 and words[1:3] == ["-m", "pytest"]:
        return words[0], words[3:], True
    if plain and words and PurePosixPath(words[0]).name in ("pytest", "py.test"):
        return "python3", words[1:], False
    raise ValueError(
        f"megaflow_test_cmd {cmd!r} is not '<python> -m pytest [options]' or 'pytest "
        "[options]', which the pytest format needs; set megaflow_test_format to "
        "'pytest_log' to read a pytest -rA log printed by another command"
    )


class _Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(
        min_length=1, description="Host path; relative paths are relative to the instance file."
    )

    @field_validator("path")
    @classmethod
    def _no_nul(cls, v: str) -> str:
        if "\x00" in v:
            raise ValueError("a path cannot contain a NUL character")
        return v

    def resolved(self, base: Path, roots: Sequence[Path] = ()) -> Self:
        """This source with an absolute path, symlinks resolved (relative paths
        against ``base``). Raise ``ValueError`` unless the result lies inside
        ``base`` or one of ``roots``."""
        try:
            p = Path(self.path).expanduser()
            full = (p if p.is_absolute() else base / p).resolve()
            allowed = [base.resolve(), *(Path(r).expanduser().resolve() for r in roots)]
        except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop
            raise ValueError(f"{self.path!r} cannot be resolved: {e}") from None
        if not any(full.is_relative_to(r) for r in allowed):
            where = " or ".join(str(r) for r in allowed)
            raise ValueError(
                f"{self.path!r} resolves to {full}, outside the task set's folder and "
                f"every source root ({where}); add a source root to use it"
            )
        return self.model_copy(update={"path": str(full)})


class DirSource(_Source):
    """A directory on the host. If it is a git work tree, ``base_commit`` is checked
    out; otherwise its files are committed as the base."""

    type: Literal["dir"] = "dir"


class TarballSource(_Source):
    """A ``.tar``, ``.tar.gz``, ``.tgz``, ``.tar.bz2`` or ``.tar.xz`` archive. A
    single top-level directory (as in source releases) is stripped."""

    type: Literal["tarball"] = "tarball"


class GitBundleSource(_Source):
    """A file made by ``git bundle create``; it must contain ``base_commit``."""

    type: Literal["git_bundle"] = "git_bundle"


class ImageSource(BaseModel):
    """A container image per instance with the repository already inside it
    (SWE-bench's instance images keep it at ``/testbed``). Preparation checks out
    ``base_commit`` there, inside the sandbox; the image needs ``git``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["image"] = "image"
    image: str = Field(min_length=1, description="The image, e.g. 'registry/name:tag'.")
    path: str = Field("/testbed", description="The repository's directory inside the image.")

    @field_validator("image")
    @classmethod
    def _image_name(cls, v: str) -> str:
        if any(c.isspace() or c == "\x00" for c in v):
            raise ValueError(f"{v!r} is not an image name (it holds a space or control character)")
        return v

    @field_validator("path")
    @classmethod
    def _absolute(cls, v: str) -> str:
        p = PurePosixPath(v)
        if "\x00" in v or not p.is_absolute() or ".." in p.parts or p == PurePosixPath("/"):
            raise ValueError(
                f"{v!r} must be the absolute path of a directory in the image, not '/'"
            )
        return str(p)

    def resolved(self, base: Path, roots: Sequence[Path] = ()) -> Self:
        """Itself: an image names nothing on the host."""
        return self


RepoSource = Annotated[
    DirSource | TarballSource | GitBundleSource | ImageSource, Field(discriminator="type")
]


def _json_list(value: Any) -> Any:
    # SWE-bench exports on the Hugging Face hub store these lists as JSON text.
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError(f"not a JSON list of test ids: {e}") from None
    return value


class SWEInstance(BaseModel):
    """One task of a SWE-bench-style task set."""

    model_config = ConfigDict(extra="allow")

    instance_id: str
    repo: str = Field(description="Repository name, e.g. 'owner/name'.")
    base_commit: str = Field(description="Commit the task starts from.")
    problem_statement: str
    patch: str = Field(description="The gold patch (unified diff).")
    test_patch: str = Field(description="Adds the tests that check the fix (unified diff).")
    FAIL_TO_PASS: list[str] = Field(min_length=1)
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    megaflow_source: RepoSource
    megaflow_reward: Literal["binary", "fraction"] = "binary"
    megaflow_test_format: Literal["pytest", "pytest_log", "django"] = "pytest"
    megaflow_test_cmd: str = "python3 -m pytest"
    megaflow_test_timeout_s: float = Field(600.0, gt=0)

    @field_validator("instance_id")
    @classmethod
    def _valid_id(cls, v: str) -> str:
        return check_id(v, "instance_id")

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> Any:
        return _json_list(v)

    @field_validator("test_patch")
    @classmethod
    def _test_patch_not_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("the test patch is empty")
        return v

    @model_validator(mode="after")
    def _django_names_its_command(self) -> Self:
        if (
            self.megaflow_test_format == "django"
            and "megaflow_test_cmd" not in self.model_fields_set
        ):
            raise ValueError(
                "megaflow_test_format 'django' needs megaflow_test_cmd, the runner with its "
                "test labels, e.g. './tests/runtests.py --verbosity 2 --parallel 1 app'"
            )
        if self.megaflow_test_format == "pytest":
            pytest_invocation(self.megaflow_test_cmd)  # ValueError names the field
        return self

    def test_files(self) -> list[str]:
        """Files named by FAIL_TO_PASS and PASS_TO_PASS, in first-seen order."""
        seen: dict[str, None] = {}
        for node in [*self.FAIL_TO_PASS, *self.PASS_TO_PASS]:
            seen.setdefault(node.split("::", 1)[0], None)
        return list(seen)

    def to_payload(self) -> dict[str, Any]:
        """The instance as a task payload: plain JSON, every SWE-bench key at the top."""
        return self.model_dump(mode="json")

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> SWEInstance:
        return cls.model_validate(payload)
