import itertools

import pytest

from megaflow.core.errors import InvalidTransition, MegaFlowError
from megaflow.core.states import TERMINAL_STATES, TRANSITIONS, TaskState, check_transition

S = TaskState
LEGAL = {
    (S.QUEUED, S.SCHEDULED), (S.QUEUED, S.CANCELLED), (S.QUEUED, S.TIMED_OUT),
    (S.QUEUED, S.FAILED),
    *((src, dst) for src in (S.SCHEDULED, S.STARTING, S.RUNNING, S.GRADING)
      for dst in (S.PREEMPTED, S.RETRYING, S.CANCELLED, S.TIMED_OUT, S.FAILED)),
    (S.SCHEDULED, S.STARTING), (S.STARTING, S.RUNNING), (S.RUNNING, S.GRADING),
    (S.GRADING, S.SUCCEEDED),
    (S.PREEMPTED, S.QUEUED), (S.PREEMPTED, S.CANCELLED),
    (S.RETRYING, S.QUEUED), (S.RETRYING, S.CANCELLED), (S.RETRYING, S.FAILED),
}  # fmt: skip
ALL_PAIRS = list(itertools.product(TaskState, TaskState))


@pytest.mark.parametrize(("src", "dst"), sorted(LEGAL))
def test_legal_transition_passes(src: TaskState, dst: TaskState) -> None:
    check_transition(src, dst)


@pytest.mark.parametrize(("src", "dst"), [p for p in ALL_PAIRS if p not in LEGAL])
def test_illegal_transition_raises(src: TaskState, dst: TaskState) -> None:
    with pytest.raises(InvalidTransition) as info:
        check_transition(src, dst, "t-1")
    assert isinstance(info.value, MegaFlowError)
    assert isinstance(info.value, ValueError)
    assert f"{src.value} -> {dst.value}" in str(info.value)
    assert "t-1" in str(info.value)


def test_table_matches_spec_exactly() -> None:
    table = {(src, dst) for src, dsts in TRANSITIONS.items() for dst in dsts}
    assert table == LEGAL


def test_terminal_states_have_no_exit() -> None:
    assert {S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.CANCELLED} == TERMINAL_STATES
    for state in TERMINAL_STATES:
        assert state.terminal
        assert not TRANSITIONS[state]


def test_preempted_and_retrying_lead_back_to_queue() -> None:
    for state in (S.PREEMPTED, S.RETRYING):
        assert S.QUEUED in TRANSITIONS[state]
        assert not state.terminal
