"""A calibration whose every caller stopped waiting (a job stopped mid-grading) and
that then failed is forgotten without an unretrieved error on the loop."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import pytest

from megaflow.app import calibrations
from megaflow.app.calibrations import Calibrations
from megaflow.datasets.calibration import Calibration
from megaflow.storage.local_artifacts import LocalArtifactStore


async def test_a_failed_calibration_nobody_waits_for_leaves_no_unretrieved_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(calibrations, "calibration_key", lambda instance, spec: "calibrations/k")
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    store = LocalArtifactStore(tmp_path)
    await store.start()
    cache = Calibrations(store)
    release = asyncio.Event()

    async def make() -> Calibration:
        await release.wait()
        raise RuntimeError("the base's tests could not run")

    none: Any = None
    waiter = asyncio.ensure_future(cache.get(none, none, make))
    await asyncio.sleep(0.05)
    waiter.cancel()  # the job stops: its attempt no longer waits for the calibration
    with pytest.raises(asyncio.CancelledError):
        await waiter
    release.set()
    for _ in range(5):
        await asyncio.sleep(0.01)
    assert cache._jobs == {}  # forgotten: the next caller grades the base again
    del waiter
    gc.collect()
    await asyncio.sleep(0)
    assert not [c for c in reported if "never retrieved" in str(c.get("message"))]
