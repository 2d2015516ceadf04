"""trusted() builds the same model as pydantic's model_construct, only faster."""

from typing import Any

import pytest
from pydantic import BaseModel

from megaflow.core.events import TaskFinished
from megaflow.core.states import TaskState
from megaflow.core.tasks import Attempt, ErrorKind, TaskResult
from megaflow.scheduler.records import trusted

CASES: list[tuple[type[BaseModel], dict[str, Any]]] = [
    (TaskResult, {"task_id": "t1", "success": True, "reward": 1.0, "finished_at": 5.0}),
    (TaskResult, {"task_id": "t1", "error_kind": ErrorKind.INFRA, "error": "x", "finished_at": 1}),
    (Attempt, {"task_id": "t1", "number": 2, "instance": "i", "started_at": 1.0, "ended_at": 2.0}),
    (
        TaskFinished,
        {"ts": 3.0, "run_id": "r", "task_id": "t1", "state": TaskState.SUCCEEDED, "reward": 0.5},
    ),
]


@pytest.mark.parametrize(("cls", "values"), CASES)
def test_same_as_model_construct(cls: type[BaseModel], values: dict[str, Any]) -> None:
    fast, ref = trusted(cls, **values), cls.model_construct(**values)
    assert type(fast) is cls
    assert fast.model_dump() == ref.model_dump()
    assert list(fast.__dict__) == list(ref.__dict__)  # declaration order, as dumps keep it
    assert fast.model_fields_set == ref.model_fields_set == set(values)
    assert fast.model_dump_json() == ref.model_dump_json()


def test_factories_run_per_call() -> None:
    a = trusted(TaskResult, task_id="a")
    b = trusted(TaskResult, task_id="b")
    a.metrics["x"] = 1.0
    assert b.metrics == {}
    assert a.finished_at > 0


def test_missing_required_and_unknown_names_behave_as_model_construct() -> None:
    fast, ref = trusted(Attempt, number=1), Attempt.model_construct(number=1)
    assert fast.__dict__.keys() == ref.__dict__.keys()
    assert "task_id" not in fast.__dict__
    odd = trusted(TaskResult, task_id="a", nonsense=1)
    assert "nonsense" not in odd.__dict__
