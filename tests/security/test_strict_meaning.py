"""Runner settings in the patch reach no grading, by meaning rather than by words.

The agent plants a plugin module and enables it through a settings file in
ways the old word list missed: a TOML key written with an escape, and a
settings file turned binary (its diff has no hunk lines). Its own pytest run
loads the plugin and reports the failing test PASSED. Strict grading refuses
the settings file, read from the sandbox before and after the patch; under
either rule the run uses the base commit's configuration, so the plugin is
never loaded.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.security.attack import EVIL_PLUGIN, FAILING_TEST, calc_task_set, run_attack, write

pytestmark = pytest.mark.slow


PYTEST = "python3 -m pytest -rA -p no:cacheprovider test_new.py"
ESCAPED = '[project]\nname = "calc"\n\n[tool.pytest.ini_options]\n"add\\u006fpts" = "-p evilplug"\n'
CFG = "[metadata]\nname = calc\n\n[tool:pytest]\naddopts = -p evilplug\n"
# A NUL byte (in a comment pytest's ini parser skips) makes git write the
# file's diff as a binary patch: no hunk lines to read words from.
PLANTS = {
    "escaped-key": ("pyproject.toml", [write("pyproject.toml", ESCAPED)]),
    "binary": ("setup.cfg", [write("setup.cfg", CFG), "printf '# \\000\\n' >> setup.cfg"]),
}


@pytest.mark.parametrize("plant", list(PLANTS))
@pytest.mark.parametrize("strict", [True, False], ids=["strict", "lenient"])
def test_settings_that_enable_a_plugin_do_not_resolve(
    tmp_path: Path, plant: str, strict: bool
) -> None:
    tasks, _ = calc_task_set(tmp_path / "set")
    settings, plant_it = PLANTS[plant]
    commands = [write("evilplug.py", EVIL_PLUGIN), *plant_it, write("test_new.py", FAILING_TEST)]
    commands += [PYTEST, "git checkout -q -- . && rm -f test_new.py"]  # only the plant stays
    (t,) = run_attack(tmp_path, tasks, commands, grading={"strict": strict})
    assert "PASSED test_new.py::test_add" in t.observations()  # the plugin works here
    assert t.reward == 0.0
    assert not t.grade["resolved"]
    if strict:
        assert t.grade["test_infra_changes"] == [settings], t.grade
    else:  # the base's configuration ran: the plugin was never even loaded
        assert t.grade["statuses"]["test_new.py::test_add"] == "FAILED"
        assert not t.grade["tampered"], t.grade["tamper_reasons"]
    if plant == "binary":
        assert b"GIT binary patch" in t.patch
