"""The words every view of a run uses for where its tasks stand, each with one meaning.

The command line (``status``, ``results``, ``top``, ``run``'s summary,
``export``), the dashboard and the training export all name outcomes with
these words and count them with these functions, so a figure read in one
place means the same in another. :data:`GLOSSARY` is the one definition of
each word; ``docs/cli.md`` prints it.

A task *state* (:class:`~megaflow.core.states.TaskState`) says where the
pipeline is; an *outcome* says what came of the task. ``succeeded`` is a
state (the pipeline ran to the end and stored a graded result) and is
never shown as an outcome: a succeeded task is *resolved*, *unresolved* or
an *agent error* (the agent's own failure, graded with reward 0).
"""

from __future__ import annotations

from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind, TaskResult

ERROR_LABELS = {
    ErrorKind.AGENT: "agent error",
    ErrorKind.INFRA: "infra error",
    ErrorKind.INFRA_LOST: "infra lost",
    ErrorKind.TIMEOUT: "timed out",
    ErrorKind.CANCELLED: "cancelled",
    ErrorKind.TAMPERED: "tampered",
}
"""The outcome of a task that errored, by its error kind."""

OUTCOMES = (
    *(s.value for s in TaskState if not s.terminal),
    "resolved", "unresolved", *ERROR_LABELS.values(),
)  # fmt: skip
"""Every :func:`outcome`, in the order tables show them."""

_UNFINISHED = tuple(s.value for s in TaskState if not s.terminal)

_ENDED_AS = {
    TaskState.FAILED: ErrorKind.INFRA,
    TaskState.TIMED_OUT: ErrorKind.TIMEOUT,
    TaskState.CANCELLED: ErrorKind.CANCELLED,
}

GLOSSARY: dict[str, str] = {
    "succeeded": "a task state, not an outcome: the pipeline ran to the end and stored a "
    "graded result. A succeeded task is resolved, unresolved or an agent error.",
    "resolved": "graded, and the grade says solved (reward from the grader, success true).",
    "unresolved": "graded, not solved, and the agent raised no error.",
    "errored": "any error outcome: agent error (the agent's own failure, graded with "
    "reward 0), infra error, infra lost, timed out, cancelled or tampered.",
    "agent error": "the agent failed on its own (malformed answers, step limit): the task "
    "succeeded as a task and its sample is graded with reward 0. It counts as errored "
    "and as graded.",
    "ungraded": "the task ended without a graded result (state failed, timed out or "
    "cancelled): it has no reward (null, never 0) and is left out of every reward figure.",
    "masked": "a sample left out of training: ungraded, or graded but without a "
    "token-exact episode to train on (export --training says why in token_error). "
    "Only training data has masked samples.",
    "cancelled": "ended by `megaflow cancel` (or the run's cancellation) before a result: "
    "ungraded, and not counted as done work in progress bars or throughput.",
    "done": "ended with an outcome other than cancelled (resolved, unresolved or an error "
    "it ran into); cancelled tasks are counted apart, never as done.",
    "resolved share": "resolved samples / all samples of the arm (an ungraded sample "
    "counts as not resolved); no share, a dash, while nothing is graded.",
    "driver gone": "the process that drove a run died (an embedded run's run lock is free, "
    "or its driver lease ended; a submitted run's scheduler service stopped or was killed) "
    "while tasks were unfinished: they will not move until `megaflow run --resume` (or the "
    "scheduler service is started again).",
    "retried": "the dashboard's word for an earlier attempt of a task that was tried again "
    "(its trajectory page shows that attempt's own error, no reward); the task's outcome is "
    "its last attempt's. Not the state *retrying*, which a task is in while it waits for its "
    "next attempt.",
}
"""The one meaning of each word the command line, dashboard and exports use."""


def outcome(state: TaskState, result: TaskResult | None) -> str:
    """Where a task stands: its state while unfinished; ``resolved`` or ``unresolved``
    once it ran and was graded; its error kind (:data:`ERROR_LABELS`) when it errored,
    an agent's own failure included (graded with reward 0)."""
    if not state.terminal:
        return state.value
    kind = result.error_kind if result else None
    if state is TaskState.SUCCEEDED:
        if kind is not None and not (result and result.success):
            return ERROR_LABELS[kind]
        return "resolved" if result and result.success else "unresolved"
    return ERROR_LABELS[kind or _ENDED_AS[state]]


def ungraded(state: TaskState) -> bool:
    """Whether a task ended without a graded result (:data:`GLOSSARY` ``ungraded``)."""
    return state.terminal and state is not TaskState.SUCCEEDED


def is_error(label: str) -> bool:
    """Whether an :func:`outcome` is an error (:data:`GLOSSARY` ``errored``)."""
    return label in ERROR_LABELS.values()


def is_done(label: str) -> bool:
    """Whether an :func:`outcome` counts as done (:data:`GLOSSARY` ``done``)."""
    return label != "cancelled" and label in OUTCOMES[len(_UNFINISHED) :]


def outcome_order(label: str) -> int:
    """Sort key for outcomes: :data:`OUTCOMES` order, unknown labels last."""
    return OUTCOMES.index(label) if label in OUTCOMES else len(OUTCOMES)
