"""The line `megaflow train` prints after each step.

::

    step 3/10  reward 0.375  loss 0.0028  weights v3  staleness 0/1  signal 3/4  clip 0.021
      ratio 1.000  mismatch 2.1e-05  grad 0.512  entropy 1.84  len 41.0  trunc 0.00  12.3 s

(one line). After the reward, loss (and ``kl``, only when a reference model
measures it: ``kl_coef > 0``), version and staleness come the trainer's
figures: groups with signal out of those given, the share of trained tokens
whose clip was taken, the mean ratio trainer / sampler and the mismatch
(k3 KL of sampler to trainer), the gradient norm, the policy's entropy, the
mean response length and the truncation rate. A step in which no group had
signal says ``no signal: weights kept`` instead of the figures only an update
measures; the loop's own drops and losses follow.

:func:`fit` lays such a line (or a held-out round's) out for a terminal
narrower than it: cut only between figures, never between a label and its
value, the later lines indented.
"""

from __future__ import annotations

import re

from megaflow.app.training.curve import StepPoint
from megaflow.train.loop_config import TrainingConfig
from megaflow.train.stats import StepStats


def _trainer(s: StepStats) -> str:
    signal = f"signal {s.groups_with_signal}/{s.groups - s.warmup_skipped_groups}"
    shape = f"len {s.response_length:.1f}  trunc {s.truncation_rate:.2f}"
    if not s.updated:
        why = "no signal: weights kept" if s.skipped_without_signal else "nothing trained"
        return f"  {signal}  {why}  {shape}"
    figures = (
        f"clip {s.clip_fraction:.3f}  ratio {s.mean_ratio:.3f}  mismatch {s.mismatch:.1e}  "
        f"grad {s.grad_norm:.3f}  entropy {s.entropy:.2f}"
    )
    if s.corrected_fraction:
        figures += f"  corrected {s.corrected_fraction:.3f}"
    filtered = f"  filtered {s.filtered_groups}" if s.filtered_groups else ""
    filtered += f"  overlong {s.overlong_filtered}" if s.overlong_filtered else ""
    return f"  {signal}  {figures}  {shape}{filtered}"


def step_line(p: StepPoint, tc: TrainingConfig, lost: int, stats: StepStats | None = None) -> str:
    """The step's line; ``stats`` is None when the loop took no step (``updates: false``)."""
    loss = "-" if p.loss is None else f"{p.loss:.4f}"
    kl = "" if p.kl is None else f"kl {p.kl:.4f}  "  # only when measured (kl_coef > 0)
    extra = f"  dropped {p.dropped}" if p.dropped else ""  # each figure apart, as the others
    extra += f"  reweighted {p.reweighted}" if p.reweighted else ""
    extra += f"  lost {lost}" if lost else ""
    return (
        f"step {p.step}/{tc.steps}  reward {p.reward_mean:.3f}  loss {loss}  {kl}"
        f"weights v{p.weights_version}  staleness {p.staleness_max}/{tc.max_staleness}"
        f"{_trainer(stats) if stats is not None else ''}{extra}  {p.seconds:.1f} s"
    )


# a cut between figures: two spaces, or a space after ',' or ';' (not inside brackets,
# which hold an interval "[0.198, 0.509]")
_CUT = re.compile(r"  +|(?<=[,;]) ")
_OPEN, _CLOSE = "([", ")]"


def _figures(line: str) -> list[str]:
    """``line`` cut where a figure ends: each piece a label with its value(s), and the
    spaces that followed it."""
    pieces: list[str] = []
    depth, start, at = 0, 0, 0
    while at < len(line):
        depth += (line[at] in _OPEN) - (line[at] in _CLOSE)
        cut = _CUT.match(line, at) if depth == 0 and line[at] == " " else None
        if cut is None:
            at += 1
            continue
        pieces.append(line[start : cut.end()])
        start = at = cut.end()
    return [*pieces, line[start:]] if start < len(line) else pieces


def fit(line: str, width: int, indent: int = 2) -> list[str]:
    """``line`` as lines of at most ``width`` characters, cut only between figures and
    packed greedily, every line after the first indented by ``indent`` spaces: a label
    (``clip``) is never left at the end of one line with its value on the next. A
    figure wider than a line by itself is cut between its words."""
    if len(line) <= width:
        return [line]
    room = max(width - indent, 8)
    pieces = [
        w
        for f in _figures(line)
        for w in (re.findall(r"\S+\s*", f) if len(f.rstrip()) > room else [f])
    ]
    lines: list[str] = []
    current = ""
    for piece in pieces:
        limit = width if not lines else room
        if current and len(current) + len(piece.rstrip()) > limit:
            lines.append(current.rstrip())
            current = piece
        else:
            current += piece
    lines.append(current.rstrip())
    return [lines[0], *(" " * indent + rest for rest in lines[1:])]
