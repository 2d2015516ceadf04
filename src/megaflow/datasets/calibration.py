"""Checking an instance's grading environment before trusting its grades.

A reward of 0 must mean the patch failed, never that grading could not work:
a runner missing from the image, a test patch that no longer applies to the
base, or tests that fail without any patch would give every sample 0 and
train the policy on noise. So before the first sample of an instance is
graded, :func:`calibrate` grades the base commit itself in a fresh sandbox
(no candidate patch) and checks that the test patch applies, the runner
starts and reports whole records, and every PASS_TO_PASS test passes within
the time limit. If not, grading that instance is an infrastructure failure
(:class:`~megaflow.core.errors.GradingEnvironmentError`: retried, then the
sample is masked), not the agent's.

Findings the base's own tests raise (a suite that walks the garbage
collector, doctests that set a trace function) are kept as ``allowed``:
they are the tests', so a patch is not called tampered for them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from megaflow.core.errors import GradingEnvironmentError
from megaflow.datasets.grading import apply_test_patch, run_tests, score
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.pytest_channel import find_base_config
from megaflow.environment.abstract import Sandbox


@dataclass(frozen=True)
class Calibration:
    """What grading the base commit showed about an instance's environment."""

    instance_id: str
    allowed: frozenset[str]
    duration_s: float


async def calibrate(sandbox: Sandbox, instance: SWEInstance) -> Calibration:
    """Grade the base commit in ``sandbox`` (freshly prepared, nothing else run in
    it); raise :class:`GradingEnvironmentError` saying what is broken."""
    t0 = time.monotonic()
    where = f"instance {instance.instance_id!r}: the grading environment is broken"
    config = await find_base_config(sandbox, instance)
    why = await apply_test_patch(sandbox, instance)
    if why is not None:
        raise GradingEnvironmentError(f"{where}: the test patch does not apply to the base: {why}")
    run = await run_tests(sandbox, instance, [], config)
    if not run.started or run.timed_out:
        detail = "; ".join(run.problems) or "no results"
        tail = run.output.strip()[-800:]
        raise GradingEnvironmentError(
            f"{where}: the test run at the base commit did not complete ({detail})\n{tail}"
        )
    kept = score(instance, run.statuses, strict=False).pass_to_pass
    if kept.failed:
        shown = ", ".join(f"{t} ({run.statuses.get(t) or 'MISSING'})" for t in kept.failed[:5])
        raise GradingEnvironmentError(
            f"{where}: {len(kept.failed)} PASS_TO_PASS test(s) do not pass without any "
            f"patch: {shown}. Every sample would be graded 0; none is"
        )
    return Calibration(instance.instance_id, frozenset(run.tampers), time.monotonic() - t0)
