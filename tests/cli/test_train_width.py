"""`megaflow train`'s lines on a terminal of 80 and 120 columns: each printed line fits,
and every label stays beside its value (rich wrapped a step line at 80 columns between
``clip`` and ``0.021``); to a pipe or a file each line stays whole."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from megaflow.app.training.curve import EvalPoint, StepPoint
from megaflow.app.training.heldout import eval_line
from megaflow.app.training.step_line import fit, step_line
from megaflow.cli.train_cmd import printer
from megaflow.train.loop_config import TrainingConfig
from tests.train_loop.test_step_line import BASE

TC = TrainingConfig.model_validate({"held_out": {"path": "h.jsonl"}, "steps": 10})
STEP = step_line(
    StepPoint(step=3, prompts=["p"], reward_mean=0.375, loss=0.0028, weights_version=3,
              seconds=12.3, dropped=1),
    TC, lost=2, stats=BASE,
) + "  sets swe 0.000 pass 0.00 n 2  qa 0.250 pass 0.50 n 4"  # fmt: skip
HELD_OUT = eval_line(
    EvalPoint(step=0, weights_version=0, reward_mean=0.336, ci_low=0.198, ci_high=0.509,
              samples=128, malformed=0.008, greedy=0.0, greedy_samples=32)
)  # fmt: skip
# every "label value" pair the two lines hold: a label never ends a line without its value
PAIRS = re.compile(r"[a-z@0-9-]+ (?:v?-?[0-9][0-9./e+-]*|\[)")


def _printed(line: str, columns: int, terminal: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    out = io.StringIO()
    printer(Console(file=out, force_terminal=terminal, color_system=None))(line)
    return out.getvalue()


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("line", [STEP, HELD_OUT], ids=["step", "held-out"])
def test_each_line_fits_with_every_label_beside_its_value(
    line: str, columns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(line) > columns  # it must be laid out at all
    shown = _printed(line, columns, True, monkeypatch).splitlines()
    assert len(shown) > 1
    assert all(len(s) <= columns for s in shown), shown
    pairs = PAIRS.findall(line)
    assert len(pairs) >= 6
    for pair in pairs:  # each label printed on the line that holds its value
        assert any(pair in s for s in shown), (pair, shown)
    assert all(s.startswith("  ") for s in shown[1:])  # the later lines indented
    assert not shown[0].startswith(" ")
    assert " ".join(" ".join(shown).split()) == " ".join(line.split())  # nothing lost


def test_a_pipe_or_a_log_keeps_each_line_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _printed(STEP, 80, False, monkeypatch) == STEP + "\n"
    assert _printed(HELD_OUT, 80, False, monkeypatch) == HELD_OUT + "\n"


def test_an_interval_is_never_cut_and_a_short_line_is_left_alone() -> None:
    assert fit("step 1/8  reward 0.250", 80) == ["step 1/8  reward 0.250"]
    cut = fit(HELD_OUT, 60)
    assert all("[0.198, 0.509]" in s or "0.509" not in s for s in cut)
    assert all(len(s) <= 60 for s in cut)
