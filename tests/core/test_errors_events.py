import inspect

import pytest
from pydantic import ValidationError

from megaflow.core import errors
from megaflow.core.events import (
    InstanceJoined,
    TaskFailed,
    TaskFinished,
    TaskSubmitted,
    parse_event,
)
from megaflow.core.plugins import load_class, load_object
from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind, TaskSpec


def test_every_error_derives_from_root_and_a_builtin() -> None:
    classes = [
        c for _, c in inspect.getmembers(errors, inspect.isclass)
        if issubclass(c, Exception) and c.__module__ == errors.__name__
    ]  # fmt: skip
    assert len(classes) >= 15
    for cls in classes:
        assert issubclass(cls, errors.MegaFlowError), cls
        if cls is not errors.MegaFlowError:
            builtin = [b for b in cls.__mro__ if b.__module__ == "builtins" and b is not object]
            assert any(b not in (Exception, BaseException) for b in builtin), cls


def test_builtin_catch_works() -> None:
    with pytest.raises(TimeoutError):
        raise errors.SandboxTimeout("x")
    with pytest.raises(ConnectionError):
        raise errors.TransportError("x")
    assert str(errors.NotFound("task 'a' not found")) == "task 'a' not found"


@pytest.mark.parametrize(
    "event",
    [
        TaskSubmitted(run_id="r", task_ids=["a", "b"]),
        TaskFinished(run_id="r", task_id="a", state=TaskState.SUCCEEDED, success=True, reward=1),
        TaskFailed(run_id="r", task_id="a", error_kind=ErrorKind.INFRA, will_retry=True),
        InstanceJoined(instance="i-1", capacity={"cpu": 8}),
    ],
)
def test_events_round_trip_through_json(event: object) -> None:
    assert hasattr(event, "model_dump_json")
    text = event.model_dump_json()  # type: ignore[attr-defined]
    assert parse_event(text) == event
    assert parse_event(event.model_dump()) == event  # type: ignore[attr-defined]


def test_unknown_event_kind_is_rejected() -> None:
    with pytest.raises(ValidationError):
        parse_event({"kind": "nope"})


def test_task_spec_rejects_bad_ids_and_unknown_fields() -> None:
    TaskSpec(id="run-1/django-1234/0", run_id="run-1")
    for bad in ["", "../etc", "a" * 201, " x", "a\x00b"]:
        with pytest.raises(ValidationError):
            TaskSpec(id=bad, run_id="r")
    with pytest.raises(ValidationError):
        TaskSpec(id="a", run_id="r", colour="red")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        TaskSpec.model_validate({"id": "a", "run_id": "r", "resources": {"cpu": -1}})


def test_plugin_loader() -> None:
    assert load_object("megaflow.core.states.TaskState") is TaskState
    assert load_class("megaflow.core.errors.NotFound", KeyError) is errors.NotFound
    with pytest.raises(errors.PluginError, match="cannot import"):
        load_object("no_such_pkg.mod.Thing")
    with pytest.raises(errors.PluginError, match="no attribute"):
        load_object("megaflow.core.states.Nope")
    with pytest.raises(errors.PluginError, match="not a subclass"):
        load_class("megaflow.core.states.TaskState", KeyError)
    with pytest.raises(errors.PluginError, match="must look like"):
        load_object("justaname")
