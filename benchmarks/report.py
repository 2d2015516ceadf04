"""Shared by the benchmarks: the rules a table follows, then the table itself.

Each benchmark writes ``<name>.md`` into the results folder: the one
``megaflow bench`` gives it (``MEGAFLOW_BENCH_RESULTS``, a fresh folder per
run), else ``benchmarks/results``. The rules (``benchmarks/README.md``):

- **Other work over the whole run.** Importing this module starts a thread
  that, every second until the table is written, reads ``/proc/loadavg`` and
  the CPU every process outside the benchmark used (:mod:`other_work`); the
  table gives both, and is quotable only if other work stayed within
  ``OTHERS_MEAN`` cores on average and ``OTHERS_PEAK`` at every sample (the
  start and end alone hide a busy middle; the load counts the benchmark's own
  work, so on two cores it cannot tell the two apart).
- **A clean tree.** The table names its commit; a tree with changed tracked
  files is refused (exit 2) unless ``--allow-dirty`` (or
  ``MEGAFLOW_BENCH_ALLOW_DIRTY=1``, which ``megaflow bench --allow-dirty``
  sets), and then the table is marked dirty and carries ``git diff --stat``.
- **Every flag, seed and repetition.** The parsed flags (defaults included) go
  into the table, with the seeds and the number of repetitions.
- **One run.** Under ``megaflow bench`` each table carries the run's id
  (``MEGAFLOW_BENCH_RUN``), so ``RESULTS.md`` is gathered from that run alone.

Sides alternate and get the same warm-up through :func:`ab.interleave`.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))  # also when imported as a package's
from other_work import OtherWork

RESULTS = Path(__file__).resolve().parent / "results"
# one-off studies, which `megaflow bench` does not run: results/ is rewritten whole by it
STUDIES = Path(__file__).resolve().parent / "studies"
REPO = Path(__file__).resolve().parent.parent
RESULTS_ENV = "MEGAFLOW_BENCH_RESULTS"
ALLOW_DIRTY_ENV = "MEGAFLOW_BENCH_ALLOW_DIRTY"
RUN_ENV = "MEGAFLOW_BENCH_RUN"
OTHERS_MEAN = 0.05
"""Most cores other work may take on average over a quotable run (2.5% of 2 cores)."""
OTHERS_PEAK = 0.5
"""Most cores other work may take over any ``OTHERS_WINDOW`` samples of a quotable run
(a one-second sample alone catches the last breath of a process the benchmark
orphaned before it was ever seen, such as a killed Ray node's sandbox)."""
OTHERS_WINDOW = 5
RUN_MARK = "<!-- megaflow bench run: {} -->"
"""The first line of a table written under ``megaflow bench``; it gathers only its own."""


def read_loadavg() -> float:
    """The 1-minute load average, from ``/proc/loadavg`` (``os.getloadavg`` elsewhere)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return os.getloadavg()[0]


@dataclass(frozen=True)
class LoadSummary:
    """What the sampler saw from the benchmark's start to its table."""

    first: float
    last: float
    low: float
    median: float
    high: float
    count: int
    seconds: float
    others_mean: float | None = None
    """Cores the processes outside the benchmark used, on average (:mod:`other_work`)."""
    others_max: float | None = None
    others_top: str = ""
    """The other processes that took the most CPU, by name."""
    own: str = ""
    """What of its own raised the load from a point on (:meth:`LoadSampler.own_load`)."""
    judged_high: float | None = None
    """The highest sample before that point, which alone decides."""

    def quotable(self, cores: int) -> bool:
        """Other work within its limits where it was measured; else the load's rule."""
        if self.others_mean is not None and self.others_max is not None:
            return self.others_mean <= OTHERS_MEAN and self.others_max <= OTHERS_PEAK
        return (self.high if self.judged_high is None else self.judged_high) <= cores


class LoadSampler:
    """Reads the load every ``period_s`` in a daemon thread, from :meth:`start` on."""

    def __init__(
        self,
        period_s: float = 1.0,
        read: Callable[[], float] = read_loadavg,
        others: Callable[[], float] | None = None,
    ) -> None:
        self.period_s = period_s
        self.read = read
        self.others = others
        self.others_top: Callable[[], str] | None = None
        self.samples: list[float] = []
        self.other_samples: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()
        self._own: tuple[int, str] | None = None

    def own_load(self, what: str) -> None:
        """From now on the benchmark's own ``what`` raises the load (a thousand live
        sandboxes, after every latency row): the samples from here on are shown but
        do not decide whether the table is quotable."""
        with self._lock:
            self._own = (len(self.samples), what)

    def start(self) -> LoadSampler:
        self._t0 = time.monotonic()
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="load-sampler", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.sample()

    def sample(self) -> float:
        value = self.read()
        other = self.others() if self.others is not None else None
        with self._lock:
            self.samples.append(value)
            if other is not None:
                self.other_samples.append(other)
        return value

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def summary(self) -> LoadSummary:
        """The samples so far, with one taken now (the table's own moment)."""
        self.sample()
        with self._lock:
            got, own, others = list(self.samples), self._own, list(self.other_samples)
        judged = None if own is None else max(got[: max(own[0], 1)])
        return LoadSummary(
            got[0], got[-1], min(got), statistics.median(got), max(got), len(got),
            time.monotonic() - self._t0, statistics.fmean(others) if others else None,
            _peak(others) if others else None, self.others_top() if self.others_top else "",
            own[1] if own else "", judged,
        )  # fmt: skip


def _peak(values: list[float], window: int = OTHERS_WINDOW) -> float:
    """The highest mean over ``window`` consecutive samples (all, if fewer)."""
    n = min(window, len(values))
    return max(statistics.fmean(values[i : i + n]) for i in range(len(values) - n + 1))


_OTHER_WORK = OtherWork()
SAMPLER = LoadSampler(others=_OTHER_WORK.sample)
SAMPLER.others_top = _OTHER_WORK.top
SAMPLER.start()
"""Started when a benchmark imports this module, i.e. as its run starts."""
LOAD_AT_START = SAMPLER.samples[0]
"""The load when the benchmark imported this module (kept for older call sites)."""


def claim(path: str) -> None:
    """Processes naming ``path`` on their command line are this benchmark's own
    (:meth:`OtherWork.claim`): podman's conmons, for a podman storage folder."""
    _OTHER_WORK.claim(path)


@dataclass(frozen=True)
class Tree:
    commit: str
    dirty: bool
    diff_stat: str


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    return done.stdout.rstrip() if done.returncode == 0 else ""


def tree_state(repo: Path | None = None) -> Tree:
    """The checkout's commit, whether tracked files changed, and ``git diff --stat``."""
    where = repo or REPO
    head = _git(where, "rev-parse", "HEAD").strip()
    if not head:
        return Tree("unknown (not a git checkout)", False, "")
    dirty = bool(_git(where, "status", "--porcelain", "--untracked-files=no"))
    return Tree(head, dirty, _git(where, "diff", "HEAD", "--stat") if dirty else "")


def commit() -> str:
    """``git rev-parse HEAD`` of the checkout, with ``+dirty`` when tracked files changed."""
    tree = tree_state()
    return tree.commit + ("+dirty" if tree.dirty else "")


def allow_dirty_env() -> bool:
    return os.environ.get(ALLOW_DIRTY_ENV, "") not in ("", "0")


def check_tree(allow_dirty: bool = False, repo: Path | None = None) -> Tree:
    """The tree, or exit 2 when it is dirty and neither the flag nor the env allows it."""
    tree = tree_state(repo)
    if tree.dirty and not (allow_dirty or allow_dirty_env()):
        print(
            f"error: the checkout at {repo or REPO} has uncommitted changes to tracked files, "
            f"so its figures would name no commit; commit them, or pass --allow-dirty "
            f"(or set {ALLOW_DIRTY_ENV}=1) to mark the table dirty with its diff",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return tree


def add_rule_args(ap: argparse.ArgumentParser) -> None:
    """The flags every benchmark takes for the rules (``--allow-dirty``)."""
    ap.add_argument(
        "--allow-dirty", action="store_true",
        help="Measure a tree with uncommitted changes; the table is marked dirty.",
    )  # fmt: skip


def begin(args: argparse.Namespace) -> Tree:
    """Check the tree before the run (so a refusal costs no run)."""
    return check_tree(bool(getattr(args, "allow_dirty", False)))


def flags_of(args: argparse.Namespace | None) -> str:
    """Every parsed flag with its value (defaults too), or the command line as given."""
    if args is None:
        return " ".join(sys.argv[1:]) or "(none)"
    parts = []
    for key, value in sorted(vars(args).items()):
        flag = "--" + key.replace("_", "-")
        parts.append(flag if value is True else f"{flag}={value}")
    return " ".join(parts) or "(none)"


def _seeds_reps(
    args: argparse.Namespace | None, seeds: Sequence[int] | None, reps: int | None
) -> tuple[str, str]:
    if seeds is None and args is not None:
        got = getattr(args, "seeds", None)
        got = getattr(args, "seed", None) if got is None else got
        if got is not None:
            seeds = [int(s) for s in str(got).replace(",", " ").split()]
    if reps is None and args is not None:
        for name in ("reps", "repeats", "rounds"):
            if isinstance(getattr(args, name, None), int):
                reps = int(getattr(args, name))
                break
    return (", ".join(map(str, seeds)) if seeds else "none"), (str(reps) if reps else "1")


def machine() -> str:
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    py = platform.python_version()
    return f"{platform.machine()}, {os.cpu_count()} cores, {mem_gib:.0f} GiB, Python {py}"


def quotable(before: float, after: float) -> bool:
    return max(before, after) <= (os.cpu_count() or 1)


def provenance(
    load_before: float | None = None,
    self_loading: str = "",
    *,
    args: argparse.Namespace | None = None,
    seeds: Sequence[int] | None = None,
    reps: int | None = None,
    tree: Tree | None = None,
    load: LoadSummary | None = None,
) -> tuple[str, bool]:
    """(the "Measured ..." text, whether the figures are quotable). ``self_loading``
    names what the benchmark itself runs that raises the load (a thousand
    concurrent sandboxes); then the load at the start alone decides, and the
    text says so."""
    tree = tree or tree_state()
    load = load or SAMPLER.summary()
    before = load.first if load_before is None else load_before
    cores = os.cpu_count() or 1
    measured = load.others_mean is not None and load.others_max is not None
    if measured:  # other work measured: it alone decides (the load shows the benchmark's own)
        ok = load.quotable(cores)
    else:
        ok = before <= cores if self_loading else load.quotable(cores) and before <= cores
    seed_text, rep_text = _seeds_reps(args, seeds, reps)
    line = (
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine()}, "
        f"commit {tree.commit}{' (dirty tree)' if tree.dirty else ''}. Load average (1 min) "
        f"over the run ({load.count} samples in {load.seconds:.0f} s): min {load.low:.2f}, "
        f"median {load.median:.2f}, max {load.high:.2f}; {before:.2f} at the start, "
        f"{load.last:.2f} at the end, on {cores} cores. Flags: `{flags_of(args)}`. "
        f"Seeds: {seed_text}. Repetitions: {rep_text}."
    )
    if measured:
        line += (
            f" Other work (every process outside the benchmark's, sampled each second): "
            f"{load.others_mean:.3f} cores on average, at most {load.others_max:.2f} over "
            f"{OTHERS_WINDOW} s (most: "
            f"{load.others_top or 'not named'}); a table is "
            f"quotable when that stays within {OTHERS_MEAN:g} on average and {OTHERS_PEAK:g} "
            f"over any {OTHERS_WINDOW} s (the load counts the benchmark's own work too)."
        )
        if self_loading or load.own:
            line += f" The load includes the benchmark's own {self_loading or load.own}."
    elif self_loading:
        line += (
            f" The load during the run includes the benchmark's own {self_loading}, so the "
            "load at the start decides whether the table is quotable."
        )
    elif load.own:
        line += (
            f" From its {load.own} on, the load is the benchmark's own; the samples before "
            f"them decide whether the table is quotable (max {load.judged_high:.2f})."
        )
    if not ok and measured:
        line += (
            " **Not quotable**: other work on the machine took more than that during the run, "
            "so it shaped these figures."
        )
    elif not ok:
        line += (
            f" **Not quotable**: the load exceeded the {cores} cores during the run, so other "
            "work on the machine shaped these figures."
        )
    if tree.dirty:
        line += "\n\n**Dirty tree** (`--allow-dirty`); `git diff --stat`:\n\n```\n"
        line += tree.diff_stat + "\n```"
    return line, ok


def report(
    name: str,
    title: str,
    columns: list[str],
    rows: list[list[str]],
    notes: str = "",
    *,
    load_before: float | None = None,
    extra_md: str = "",
    self_loading: str = "",
    args: argparse.Namespace | None = None,
    seeds: Sequence[int] | None = None,
    reps: int | None = None,
    folder: Path | None = None,
) -> None:
    """Print the table and write ``<name>.md`` (into ``folder``, else the run's
    results folder); ``extra_md`` goes to the file only.
    A dirty tree not allowed: the table is printed, not written, and the exit is 2."""
    tree = tree_state()
    line, ok = provenance(load_before, self_loading, args=args, seeds=seeds, reps=reps, tree=tree)
    shown = title if ok else f"{title} (not quotable)"
    if tree.dirty:
        shown += " (dirty)"
    table = Table(title=shown)
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    console = Console()
    console.print(table)
    if notes:
        console.print(notes)
    console.print(f"[dim]{line}[/]")
    check_tree(bool(getattr(args, "allow_dirty", False)))
    run = os.environ.get(RUN_ENV, "")
    lines = [RUN_MARK.format(run)] if run else []
    lines += [
        f"## {shown}",
        "",
        line,
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
    ]
    if notes:
        lines += [notes, ""]
    if extra_md:
        lines += [extra_md, ""]
    out = folder or results_dir()
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text("\n".join(lines))


def results_dir() -> Path:
    return Path(os.environ.get(RESULTS_ENV) or RESULTS)
