"""What the two SQL metadata stores (SQLite, PostgreSQL) share: a task row.

Both keep a task as one row of the same columns, the spec as JSON text;
:data:`TASK_COLS` is the column list their queries select and
:func:`task_record` turns such a row back into a :class:`TaskRecord`.
"""

from __future__ import annotations

from megaflow.core.states import TaskState
from megaflow.core.tasks import TaskRecord, TaskSpec

TASK_COLS = "id, run_id, seq, state, attempts, preemptions, updated_at, error, spec"


def task_record(row: tuple[object, ...]) -> TaskRecord:
    """A row of :data:`TASK_COLS` as a record."""
    _id, _run, seq, state, attempts, preemptions, updated_at, error, spec = row
    return TaskRecord(
        spec=TaskSpec.model_validate_json(str(spec)),
        state=TaskState(str(state)),
        attempts=int(attempts),  # type: ignore[call-overload]
        preemptions=int(preemptions),  # type: ignore[call-overload]
        seq=int(seq),  # type: ignore[call-overload]
        updated_at=float(updated_at),  # type: ignore[arg-type]
        error=None if error is None else str(error),
    )
