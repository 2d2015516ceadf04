"""The held-out figures' 95% intervals and the verdict of a run against its control.

The numbers are computed by hand (or with scipy's t quantiles, quoted) in the comments.
"""

from __future__ import annotations

import math

import pytest

from megaflow.app.training.compare import compare, table
from megaflow.app.training.curve import Curve, EvalPoint
from megaflow.app.training.heldout import malformed
from megaflow.app.training.intervals import (
    Estimate,
    paired_difference,
    pass_at_1,
    pass_at_k,
    t975,
    wilson,
)
from megaflow.core.errors import InvalidInput


def test_t_quantiles_match_the_table_and_approach_the_normal() -> None:
    assert t975(1) == 12.706
    assert t975(31) == pytest.approx(2.0395, abs=2e-3)  # scipy.stats.t.ppf(.975, 31)
    assert t975(100) == pytest.approx(1.9840, abs=1e-3)
    assert t975(10**6) == pytest.approx(1.95996, abs=1e-4)
    with pytest.raises(ValueError):
        t975(0)


def test_wilson_interval_by_hand() -> None:
    # p = 0.5, n = 10: centre 0.5, half = 1.96 * sqrt(0.025 + 3.8415/400) / 1.38415
    low, high = wilson(5, 10)
    half = 1.959964 * math.sqrt(0.025 + 1.959964**2 / 400) / (1 + 1.959964**2 / 10)
    assert (low, high) == pytest.approx((0.5 - half, 0.5 + half))
    assert (low, high) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(0, 32)[0] == 0.0
    assert wilson(0, 32)[1] == pytest.approx(0.1072, abs=1e-4)


def test_pass_at_1_is_the_mean_of_prompt_means_with_a_t_interval_over_prompts() -> None:
    # Prompt means 1.0, 0.5, 0.25, 0.25 -> mean 0.5; sample sd = sqrt(0.375/3) = 0.35355;
    # half = t(3) * sd / 2 = 3.182 * 0.176777 = 0.56250.
    est = pass_at_1([[1, 1, 1, 1], [1, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0]])
    assert est.mean == 0.5
    assert est.n == 4
    assert est.low == pytest.approx(0.0)  # 0.5 - 0.5625 clipped at 0
    assert est.high == pytest.approx(1.0)  # 0.5 + 0.5625 clipped at 1
    # 8 prompts: four at 0.75, four at 0.25 -> mean 0.5, sd = sqrt(8 * 0.0625 / 7) = 0.26726,
    # half = 2.365 * 0.26726 / sqrt(8) = 0.22347 (the Wilson interval, 0.215-0.785, is narrower
    # on neither side... it is wider: the interval is never narrower than Wilson's).
    xs = [[1, 1, 1, 0]] * 4 + [[1, 0, 0, 0]] * 4
    est = pass_at_1(xs)
    w_low, w_high = wilson(4, 8)
    assert est.mean == 0.5
    assert (est.low, est.high) == pytest.approx((min(0.5 - 0.22347, w_low), max(0.77653, w_high)))
    assert est.low == pytest.approx(w_low)  # here Wilson is the wider one


def test_pass_at_1_of_a_round_without_spread_is_not_a_point() -> None:
    zero = pass_at_1([[0, 0, 0, 0]] * 32)
    assert (zero.mean, zero.low) == (0.0, 0.0)
    assert zero.high == pytest.approx(0.1072, abs=1e-4)  # Wilson for 0 of 32
    full = pass_at_1([[1, 1]] * 32)
    assert full.high == 1.0
    assert full.low == pytest.approx(1 - 0.1072, abs=1e-4)


def test_the_sample_count_per_prompt_does_not_narrow_the_interval() -> None:
    """Correlated samples of one prompt are one observation: 100 copies of each
    prompt's samples give the interval of the prompts, not of 100x the samples."""
    few = pass_at_1([[1, 0], [0, 0], [1, 1], [0, 0], [1, 0], [1, 1]])
    many = pass_at_1([[1, 0] * 50, [0, 0] * 50, [1, 1] * 50, [0, 0] * 50, [1, 0] * 50, [1, 1] * 50])
    assert (few.low, few.high) == pytest.approx((many.low, many.high))


def test_prompts_without_a_graded_sample_are_left_out() -> None:
    assert pass_at_1([[1.0], [], [0.0]]).n == 2
    with pytest.raises(ValueError):
        pass_at_1([[], []])


def test_pass_at_k_by_hand() -> None:
    # 4 samples each: none, one and all four resolved; a prompt with 2 samples is left out
    rounds = [[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1], [1, 0]]
    assert pass_at_k(rounds, 4) == pytest.approx((0 + 1 + 1) / 3)
    # k=2: 1 - C(n-c, 2)/C(n, 2) per prompt: 0; 1 - 3/6 = 0.5; 1; the 2-sample prompt 1
    assert pass_at_k(rounds, 2) == pytest.approx((0 + 0.5 + 1 + 1) / 4)
    assert pass_at_k(rounds, 1) == pytest.approx((0 + 0.25 + 1 + 0.5) / 4)  # pass@1
    assert pass_at_k([[0.5, 0.5]], 2) == 0.0  # a partial reward is not resolved
    with pytest.raises(ValueError, match="no prompt has 5"):
        pass_at_k(rounds, 5)


def test_paired_difference_over_common_prompts() -> None:
    # differences 0.5, 0.25, 0.75, 0.5: mean 0.5, sd = sqrt(0.125/3) = 0.20412,
    # half = 3.182 * 0.20412 / 2 = 0.32476
    a = {"p1": 0.75, "p2": 0.5, "p3": 1.0, "p4": 0.5, "only-a": 1.0}
    b = {"p1": 0.25, "p2": 0.25, "p3": 0.25, "p4": 0.0}
    d = paired_difference(a, b)
    assert d.n == 4
    assert d.mean == pytest.approx(0.5)
    assert (d.low, d.high) == pytest.approx((0.5 - 0.32476, 0.5 + 0.32476), abs=1e-4)
    with pytest.raises(ValueError):
        paired_difference({"p": 1.0}, {"p": 0.0})


def _point(step: int, per_prompt: dict[str, list[float]], greedy: float = 0.0) -> EvalPoint:
    est: Estimate = pass_at_1(list(per_prompt.values()))
    return EvalPoint(
        step=step, weights_version=step, reward_mean=est.mean, ci_low=est.low,
        ci_high=est.high, samples=sum(len(v) for v in per_prompt.values()), malformed=0.0,
        per_prompt={k: sum(v) / len(v) for k, v in per_prompt.items()}, greedy=greedy,
    )  # fmt: skip


def _round(hits: list[int]) -> dict[str, list[float]]:
    """Prompt ``i`` with ``hits[i]`` of its 4 samples resolved."""
    return {f"p{i:02d}": [1.0] * h + [0.0] * (4 - h) for i, h in enumerate(hits)}


BEFORE = [1, 0, 2, 1, 0, 1, 1, 0, 2, 1, 0, 1, 1, 0, 1, 0]  # 12 of 64: 0.1875


def _curves(trained: list[int], control: list[int]) -> tuple[Curve, Curve]:
    t = Curve(run_id="t", evals=[_point(0, _round(BEFORE)), _point(8, _round(trained), 0.5)])
    c = Curve(run_id="c", control="shuffled", evals=[_point(8, _round(control))])
    return t, c


def test_a_run_beats_a_control_that_stayed_put() -> None:
    trained = [3, 2, 4, 3, 2, 3, 2, 1, 4, 3, 2, 3, 3, 2, 3, 2]
    t, c = _curves(trained, control=[0, 1, 2, 1, 1, 0, 1, 0, 2, 0, 0, 1, 2, 0, 1, 1])
    v = compare(t, c)
    assert v.control_held
    assert v.beats_control
    assert v.ok
    assert v.before.step == 0  # the control did not evaluate step 0: the run's round serves
    text = "\n".join(table(v))
    assert "trained beats control: yes" in text
    assert "control within its interval" in text
    assert "0.656" in text


def test_no_win_when_the_run_does_not_beat_the_control() -> None:
    # two prompts better by 2 samples, one worse by 2: the mean difference is 1/32 and
    # its interval straddles 0
    t, c = _curves(trained=[3, 2, 0, *BEFORE[3:]], control=[1, 0, *BEFORE[2:]])
    v = compare(t, c)
    assert v.difference.mean == pytest.approx(1 / 32)
    assert v.difference.low < 0
    assert v.control_held
    assert not v.beats_control
    assert not v.ok
    assert "trained beats control: NO" in "\n".join(table(v))


def test_no_win_when_the_control_rose_above_its_interval() -> None:
    t, c = _curves(trained=[4] * 16, control=[3] * 16)
    v = compare(t, c)
    assert v.beats_control
    assert v.control_gained
    assert not v.ok
    assert "control ABOVE its interval" in "\n".join(table(v))


def test_a_control_that_fell_below_its_interval_is_still_a_control() -> None:
    # updates without signal can harm the policy; the trained arm still has to beat it
    t, c = _curves(trained=[4] * 16, control=[0] * 16)
    v = compare(t, c)
    assert not v.control_held
    assert not v.control_gained
    assert v.beats_control
    assert v.ok
    assert "control below its interval" in "\n".join(table(v))


def test_compare_refuses_curves_that_are_not_a_run_and_its_control() -> None:
    t, c = _curves([4] * 16, BEFORE)
    with pytest.raises(InvalidInput, match="shuffled control"):
        compare(c, t)
    with pytest.raises(InvalidInput, match="no held-out round after training"):
        compare(t.model_copy(update={"evals": t.evals[:1]}), c)


def _traj(*steps: dict[str, object]) -> dict[str, object]:
    return {"steps": list(steps)}


def _call(tool_calls: list[object] | None) -> dict[str, object]:
    message: dict[str, object] = {"role": "assistant", "content": ""}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {"kind": "model_call", "response": {"message": message}}


READ = [{"function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}]


@pytest.mark.parametrize(
    ("steps", "bad"),
    [
        ((_call(READ), {"kind": "observation", "content": "X = 1\n"}), False),
        ((_call(None),), True),  # a turn without a tool call
        ((_call([]),), True),
        (
            (_call(READ), {"kind": "observation", "content": "error: unknown tool 'grep'; use"}),
            True,
        ),
        (
            (
                _call(READ),
                {"kind": "observation", "content": "error: arguments are not valid JSON"},
            ),
            True,
        ),
        (
            (
                _call(READ),
                {"kind": "observation", "content": "error: arguments must be a JSON object"},
            ),
            True,
        ),
        # a tool used wrongly is not a malformed answer: the edit found nothing to replace
        (
            (_call(READ), {"kind": "observation", "content": "error: old_str not found in a.py"}),
            False,
        ),
        # the model service failing is not the policy's answer
        (({"kind": "model_call", "response": {"error": "boom"}},), False),
    ],
)
def test_malformed_answers_are_those_the_agent_cannot_act_on(
    steps: tuple[dict[str, object], ...], bad: bool
) -> None:
    assert malformed(_traj(*steps)) is bad
