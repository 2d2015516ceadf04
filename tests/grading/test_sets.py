"""The ``sets`` grader: each task to its set's grader, every other to the default."""

from __future__ import annotations

from megaflow.environment.abstract import EnvironmentSpec
from megaflow.grading.config import SetsGraderConfig
from megaflow.grading.judge import JudgeGrader
from megaflow.grading.python_fn import PythonGrader
from megaflow.grading.sets import SET_KEY, SetsGrader
from megaflow.grading.swebench import SwebenchGrader
from tests.grading.conftest import task_of

FN = "tests.grading.rewards_for_tests.exact_match"


def test_each_task_goes_to_its_sets_grader() -> None:
    cfg = SetsGraderConfig.model_validate(
        {
            "sets": {
                "qa": {"type": "python", "function": FN},
                "essay": {"type": "judge", "rubric": "1 if it rhymes"},
            }
        }
    )
    grader = cfg.build()
    assert isinstance(grader, SetsGrader)
    qa = task_of({SET_KEY: "qa", "answer": 1})
    essay = task_of({SET_KEY: "essay"})
    other = task_of({SET_KEY: "unknown"})
    held_out = task_of({"problem_statement": "no set"})
    assert isinstance(grader.of(qa), PythonGrader)
    assert isinstance(grader.of(essay), JudgeGrader)
    assert isinstance(grader.of(other), SwebenchGrader)  # the default: swebench
    assert isinstance(grader.of(held_out), SwebenchGrader)
    assert grader.grades(qa)  # the python grader grades any task
    assert not grader.grades(held_out)  # swebench: no instance, nothing to grade
    base = EnvironmentSpec(image="img")
    assert grader.sandbox_spec(qa, base) == base
