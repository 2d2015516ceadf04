"""Two MegaFlow processes reaping the same dead owner at once.

On a fleet several processes of one host start a local runtime together (Ray
workers, each with its own), and each runtime's start reaps what dead makers
left. One reaper listed a dead owner's staging directory, another removed it,
and the first's listing of what was inside raised ``FileNotFoundError`` out of
``LocalRuntime.start`` (seen in the fleet benchmark: the worker failed and the
run with it). Here the other reaper acts exactly in that window: the liveness
check of the dead owner removes its directory before answering.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from megaflow.environment.local import cgroups, reaper, userns
from megaflow.environment.local.records import process_key

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
# a maker that cannot be alive: no pid is this large, in this pid namespace
DEAD = "4000000001.1." + process_key().rsplit(".", 1)[-1]


def test_a_staging_directory_removed_by_another_reaper_is_skipped() -> None:
    owner = userns.STAGE_ROOT / DEAD
    (owner / "view").mkdir(parents=True)

    def alive(key: str) -> bool:
        if key != DEAD:
            return True  # every other owner is left alone
        shutil.rmtree(owner)  # the other reaper, between the listing and the look inside
        return False

    userns.reap_stages(alive)  # raised FileNotFoundError before
    assert not owner.exists()


def test_a_cgroup_owner_removed_by_another_reaper_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = cgroups.detect("auto")
    if layout is None:
        pytest.skip("no cgroups")
    layout.prepare()
    owners = [base / DEAD for base in layout.bases()]
    for owner in owners:
        (owner / "sandbox").mkdir(parents=True)

    def key_alive(key: str) -> bool:
        if key != DEAD:
            return True
        for owner in owners:  # the other reaper removes them all
            if owner.exists():
                cgroups.remove_groups([owner / "sandbox", owner])
        return False

    monkeypatch.setattr(reaper, "key_alive", key_alive)
    reaper.Reaper(tmp_path, layout, process_key())._reap_cgroups()  # raised before
    assert not any(owner.exists() for owner in owners)
