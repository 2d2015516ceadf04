"""Task sets: SWE-bench-style instances, their repositories, and grading.

Load a task set with :func:`load_instances`, give each task a sandbox from
:func:`environment_spec` prepared by :func:`prepare_sandbox`, and after the
agent stops, :func:`grade` it. :func:`validate_instances` checks a whole set
(gold resolves, empty does not). The format is described in
``docs/tasks-format.md``.
"""

from megaflow.datasets.grading import GradeReport, TestOutcome, grade, score
from megaflow.datasets.instance import (
    DirSource,
    GitBundleSource,
    RepoSource,
    SWEInstance,
    TarballSource,
)
from megaflow.datasets.loader import load_instances
from megaflow.datasets.prepare import PreparedRepo, environment_spec, prepare_sandbox
from megaflow.datasets.tasks import instance_of, to_task_specs
from megaflow.datasets.validate import (
    CheckResult,
    ValidationReport,
    grade_patch,
    grade_patches,
    validate_instances,
)

__all__ = [
    "CheckResult",
    "DirSource",
    "GitBundleSource",
    "GradeReport",
    "PreparedRepo",
    "RepoSource",
    "SWEInstance",
    "TarballSource",
    "TestOutcome",
    "ValidationReport",
    "environment_spec",
    "grade",
    "grade_patch",
    "grade_patches",
    "instance_of",
    "load_instances",
    "prepare_sandbox",
    "score",
    "to_task_specs",
    "validate_instances",
]
