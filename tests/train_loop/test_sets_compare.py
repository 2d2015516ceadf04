"""``megaflow train compare`` on runs that held out task sets: each set both last rounds
evaluated gets both arms' pass@1 with its interval and the paired difference over
the set's own prompts; the verdict (and exit code) stays the one over every prompt."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from megaflow.app.training.compare import compare, table
from megaflow.app.training.curve import Curve, EvalPoint
from megaflow.app.training.intervals import paired_difference, pass_at_1
from megaflow.cli.main import app


def _round(step: int, sets: dict[str, dict[str, list[float]]]) -> EvalPoint:
    """A held-out round of ``sets``: by set, each prompt's sampled rewards."""
    per_prompt = {f"{s}.{k}": sum(r) / len(r) for s, ps in sets.items() for k, r in ps.items()}
    overall = pass_at_1([r for ps in sets.values() for r in ps.values()])
    figures = {}
    for name, ps in sets.items():
        est = pass_at_1(list(ps.values()))
        figures[name] = {"samples": sum(len(r) for r in ps.values()), "masked": 0,
                         "reward_mean": est.mean, "ci_low": est.low, "ci_high": est.high,
                         "pass_at_k": None, "malformed": 0.0}  # fmt: skip
    return EvalPoint(
        step=step, weights_version=step, reward_mean=overall.mean, ci_low=overall.low,
        ci_high=overall.high, samples=sum(f["samples"] for f in figures.values()),
        per_prompt=per_prompt, sets=figures,
    )  # fmt: skip


def _hits(*hits: int) -> dict[str, list[float]]:
    """Prompt ``q<i>`` with ``hits[i]`` of its 4 samples resolved."""
    return {f"q{i}": [1.0] * h + [0.0] * (4 - h) for i, h in enumerate(hits)}


BEFORE = {"qa": _hits(1, 0, 1, 0, 1, 0), "swe": _hits(0, 1, 0, 1)}
TRAINED = {"qa": _hits(4, 3, 4, 3, 4, 3), "swe": _hits(1, 1, 0, 1), "extra": _hits(2, 2)}
CONTROL = {"qa": _hits(1, 0, 1, 1, 0, 0), "swe": _hits(1, 1, 1, 0), "gone": _hits(0, 0)}


def _curves() -> tuple[Curve, Curve]:
    t = Curve(run_id="t", evals=[_round(0, BEFORE), _round(4, TRAINED)])
    c = Curve(run_id="c", control="shuffled", evals=[_round(4, CONTROL)])
    return t, c


def _by_hand(name: str) -> tuple[str, str, str]:
    def means(sets: dict[str, dict[str, list[float]]]) -> dict[str, float]:
        return {k: sum(r) / len(r) for k, r in sets[name].items()}

    t, c = pass_at_1(list(TRAINED[name].values())), pass_at_1(list(CONTROL[name].values()))
    return t.show(), c.show(), paired_difference(means(TRAINED), means(CONTROL)).show()


def test_each_shared_held_out_set_gets_its_own_difference() -> None:
    v = compare(*_curves())
    assert [s.name for s in v.sets] == ["qa", "swe"]
    assert v.only_one == ("extra", "gone")
    qa, swe = v.sets
    assert qa.difference is not None
    assert swe.difference is not None
    assert (qa.difference.n, swe.difference.n) == (6, 4)
    assert qa.difference.mean == pytest.approx((3.5 - 0.5) / 4)  # 21/24 - 3/24
    assert qa.difference.low > 0  # qa alone: the run beats its control
    assert swe.difference.mean == pytest.approx(0.0)
    assert swe.difference.low < 0 < swe.difference.high  # swe alone: no difference
    assert v.ok  # over every prompt: the verdict as before
    assert v.difference.n == 10  # qa and swe prompts; extra and gone are in one run only


def test_compare_prints_each_sets_figures_and_keeps_the_verdicts_exit(tmp_path: Path) -> None:
    t, c = _curves()
    t_path, c_path = t.write_json(tmp_path / "t.json"), c.write_json(tmp_path / "c.json")
    res = CliRunner().invoke(app, ["train", "compare", str(t_path), str(c_path)],
                             env={"COLUMNS": "200"})  # fmt: skip
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines == table(compare(t, c))
    head = lines.index(next(x for x in lines if x.startswith("held-out set")))
    for row, name in zip(lines[head + 1 : head + 3], ("qa", "swe"), strict=True):
        trained, control, diff = _by_hand(name)
        assert row.split() == [name, *trained.split(), *control.split(), *diff.split(),
                               "over", str(len(TRAINED[name])), "prompts"]  # fmt: skip
    assert lines[head + 3].split()[0] == "extra"
    assert "in one run's last round only" in lines[head + 3]
    assert lines[head + 4].split()[0] == "gone"
    assert lines[-1].endswith("trained beats control: yes")


def test_a_set_with_one_shared_prompt_has_no_interval() -> None:
    t, c = _curves()
    last = t.evals[-1]
    one = {k: v for k, v in last.per_prompt.items() if not k.startswith("swe.") or k == "swe.q0"}
    t.evals[-1] = last.model_copy(update={"per_prompt": one})
    (swe,) = [s for s in compare(t, c).sets if s.name == "swe"]
    assert swe.difference is None
    assert swe.trained is not None  # its pass@1 is still shown
    row = next(x for x in table(compare(t, c)) if x.startswith("swe "))
    assert row.endswith("- (fewer than 2 prompts in common)")


def test_runs_without_held_out_sets_print_as_before() -> None:
    t, c = _curves()
    for curve in (t, c):
        curve.evals = [e.model_copy(update={"sets": None}) for e in curve.evals]
    v = compare(t, c)
    assert (v.sets, v.only_one) == ((), ())
    assert not any(x.startswith("held-out set") for x in table(v))
