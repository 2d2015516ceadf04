"""A training run set against its control: did the signal, and not the updates, help?

Both curves start from the same weights and are evaluated on the same
held-out tasks. The verdict holds two checks:

* **the control stays put**: the control's last sampled pass@1 lies inside
  the 95% interval of pass@1 before training (the control's own first round,
  else the trained run's, which evaluated the same weights);
* **the run beats the control**: the paired difference of the last rounds'
  per-prompt means (trained minus control) has a 95% interval above 0.

``megaflow train compare TRAINED CONTROL`` prints :func:`table` and exits
non-zero unless both hold. When the runs held out task sets
(``EvalPoint.sets``), the table also gives, for each set both last rounds
evaluated, each arm's pass@1 with its interval and the paired difference
over the set's own prompts (their per-prompt keys are ``<set>.<task id>``);
these inform, the verdict stays the one over every held-out prompt.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from megaflow.app.training.curve import Curve, EvalPoint
from megaflow.app.training.intervals import Estimate, paired_difference
from megaflow.core.errors import InvalidInput


def load_curve(path: Path) -> Curve:
    """A ``curve.json`` (or the PNG beside it), or InvalidInput naming the file."""
    js = path.with_suffix(".json")
    try:
        return Curve.model_validate_json(js.read_text())
    except OSError as exc:
        raise InvalidInput(f"{js}: cannot read the curve: {exc.strerror}") from exc
    except ValueError as exc:
        raise InvalidInput(f"{js}: not a curve of megaflow train: {exc}") from exc


def _estimate(p: EvalPoint, where: str) -> Estimate:
    if p.reward_mean is None or p.ci_low is None or p.ci_high is None:
        raise InvalidInput(f"{where}: its held-out round at step {p.step} graded no sample")
    return Estimate(p.reward_mean, p.ci_low, p.ci_high, len(p.per_prompt))


@dataclass(frozen=True)
class SetDifference:
    """One held-out set in both arms' last rounds: each arm's pass@1 with its interval
    (None: nothing graded) and trained minus control over the set's prompts both
    graded (None with fewer than 2 of them)."""

    name: str
    trained: Estimate | None
    control: Estimate | None
    difference: Estimate | None


@dataclass(frozen=True)
class Verdict:
    before: EvalPoint
    trained: EvalPoint
    control: EvalPoint
    difference: Estimate
    sets: tuple[SetDifference, ...] = ()
    only_one: tuple[str, ...] = ()
    """Held-out sets of one arm's last round only: no difference to give."""

    @property
    def control_held(self) -> bool:
        ctl = self.control.reward_mean
        return ctl is not None and _estimate(self.before, "before").contains(ctl)

    @property
    def control_gained(self) -> bool:
        """The control ended above the interval it started in: updates without the
        signal improved the policy, so the trained arm's gain is not the signal's."""
        ctl = self.control.reward_mean
        return ctl is not None and ctl > _estimate(self.before, "before").high

    @property
    def beats_control(self) -> bool:
        return self.difference.low > 0

    @property
    def ok(self) -> bool:
        """The trained arm beat the control, and the control gained nothing; a control
        that fell (updates without signal can only harm) still counts as a control."""
        return not self.control_gained and self.beats_control


def compare(trained: Curve, control: Curve) -> Verdict:
    """The verdict of ``trained`` against ``control`` (InvalidInput if either lacks
    the held-out rounds it needs)."""
    if control.control != "shuffled" or trained.control != "none":
        raise InvalidInput(
            f"compare a run (control none, here {trained.control!r}) with its shuffled "
            f"control (here {control.control!r})"
        )
    for c in (trained, control):
        if not c.evals or c.evals[-1].step == 0:
            raise InvalidInput(f"run {c.run_id} has no held-out round after training")
    first = control.evals[0] if control.evals[0].step == 0 else trained.evals[0]
    if first.step != 0:
        raise InvalidInput(f"neither {trained.run_id} nor {control.run_id} evaluated step 0")
    t_last, c_last = trained.evals[-1], control.evals[-1]
    _estimate(t_last, trained.run_id), _estimate(c_last, control.run_id)
    diff = paired_difference(t_last.per_prompt, c_last.per_prompt)
    t_sets, c_sets = t_last.sets or {}, c_last.sets or {}
    both = tuple(_set_difference(n, t_last, c_last) for n in t_sets if n in c_sets)
    only = tuple(n for n in [*t_sets, *c_sets] if (n in t_sets) != (n in c_sets))
    return Verdict(first, t_last, c_last, diff, both, only)


def _of_set(p: EvalPoint, name: str) -> tuple[Estimate | None, dict[str, float]]:
    """Set ``name``'s pass@1 in round ``p``, and its prompts' means (keys ``<set>.<id>``)."""
    prompts = {k: v for k, v in p.per_prompt.items() if k.split(".", 1)[0] == name}
    f = (p.sets or {}).get(name, {})
    mean, low, high = f.get("reward_mean"), f.get("ci_low"), f.get("ci_high")
    if mean is None or low is None or high is None:
        return None, prompts
    return Estimate(float(mean), float(low), float(high), len(prompts)), prompts


def _set_difference(name: str, trained: EvalPoint, control: EvalPoint) -> SetDifference:
    t, t_prompts = _of_set(trained, name)
    c, c_prompts = _of_set(control, name)
    try:
        diff: Estimate | None = paired_difference(t_prompts, c_prompts)
    except ValueError:  # fewer than 2 prompts in common: no interval to give
        diff = None
    return SetDifference(name, t, c, diff)


def _fig(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def table(v: Verdict) -> list[str]:
    """The held-out figures of both arms, the difference, and the two checks."""
    rows = [("before (v0)", v.before), ("trained", v.trained), ("control: shuffled", v.control)]
    out = [f"{'held-out':<22}{'pass@1 [95% interval]':<26}{'greedy':>8}{'malformed':>11}"]
    for name, p in rows:
        est = _estimate(p, name).show()
        label = f"{name} @{p.step}" if p.step else name
        out.append(f"{label:<22}{est:<26}{_fig(p.greedy):>8}{_fig(p.malformed):>11}")
    d = v.difference
    out.append(f"trained - control over {d.n} prompts: {d.show()}")
    out += _set_rows(v)
    where = "within" if v.control_held else ("ABOVE" if v.control_gained else "below")
    out.append(
        f"control {where} its interval before training; "
        f"trained beats control: {'yes' if v.beats_control else 'NO'}"
    )
    return out


def _set_rows(v: Verdict) -> list[str]:
    """Each held-out set's row: both arms' pass@1 and their difference over its prompts."""
    if not v.sets and not v.only_one:
        return []
    out = [f"{'held-out set':<22}{'trained':<26}{'control':<26}trained - control"]
    for s in v.sets:
        t = s.trained.show() if s.trained else "-"
        c = s.control.show() if s.control else "-"
        d = s.difference
        diff = f"{d.show()} over {d.n} prompts" if d else "- (fewer than 2 prompts in common)"
        out.append(f"{s.name:<22}{t:<26}{c:<26}{diff}")
    for name in v.only_one:
        out.append(f"{name:<22}in one run's last round only: no difference")
    return out
