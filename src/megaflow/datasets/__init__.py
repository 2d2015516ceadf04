"""Task sets: SWE-bench-style instances, their repositories, and grading.

Load a task set with :func:`load_instances`, give each task a sandbox from
:func:`environment_spec` prepared by :func:`prepare_sandbox`, and after the
agent stops, take its patch with :func:`extract_patch` and grade it in a fresh
sandbox with :func:`grade_prepared` (or :func:`grade_patch`).
:func:`validate_instances` checks a whole set (gold resolves, empty does not).
The format is described in
``docs/tasks-format.md``.
"""

from megaflow.datasets.candidate import Candidate, extract_patch
from megaflow.datasets.config import GradingConfig
from megaflow.datasets.grading import GradeReport, TestOutcome, grade_prepared, score
from megaflow.datasets.instance import (
    DirSource,
    GitBundleSource,
    ImageSource,
    RepoSource,
    SWEInstance,
    TarballSource,
)
from megaflow.datasets.loader import load_instances
from megaflow.datasets.prepare import PreparedRepo, environment_spec, prepare_sandbox
from megaflow.datasets.task_specs import instance_of, to_task_specs
from megaflow.datasets.validate import (
    CheckResult,
    ValidationReport,
    grade_patch,
    grade_patches,
    validate_instances,
)

__all__ = [
    "Candidate",
    "CheckResult",
    "DirSource",
    "GitBundleSource",
    "GradeReport",
    "GradingConfig",
    "ImageSource",
    "PreparedRepo",
    "RepoSource",
    "SWEInstance",
    "TarballSource",
    "TestOutcome",
    "ValidationReport",
    "environment_spec",
    "extract_patch",
    "grade_patch",
    "grade_patches",
    "grade_prepared",
    "instance_of",
    "load_instances",
    "prepare_sandbox",
    "score",
    "to_task_specs",
    "validate_instances",
]
