"""Generate the settings-fix task family: many tiny repositories, each with a setting to change.

Every repository is a package with one settings module of integer constants
(``order_sync/limits.py``: ``POOL_SIZE = 16`` ...) and a test of their types.
An instance asks for one constant to be set to a new value, in one of
several phrasings, and never says what the value is now: the fix is an
``edit`` of ``NAME = current`` into ``NAME = new``, and the current value is
only in the file, so the agent must read the file before it edits. The
hidden test (the test patch) checks the new value (FAIL_TO_PASS) and that
the other constants kept theirs (PASS_TO_PASS).

Names are built from parts: a package is ``<word>_<word>`` (``order_sync``),
a constant ``<PART>_<PART>`` (``POOL_SIZE``). The parts are shared, the
combinations are not: a pool of packages and a pool of constant names are
set aside for the held-out split, so

* ``train.jsonl``: the RL prompts, over packages and constants of the seen pools;
* ``heldout.jsonl``: evaluation only, over packages and constants that occur
  nowhere in the train split or the demonstrations (hence no (package,
  constant) pair and no (constant, current, new) triple of it either);
* ``demonstrations.jsonl``: the supervised warm start's conversations over
  the seen pools (``build/teacher.py``: a sloppy teacher who reads the file
  and, in most answers, copies the value of another line), none of whose
  issues is word for word a train prompt.

Everything follows from ``--seed`` (default 0). Patches come from ``git
diff``; FAIL_TO_PASS and PASS_TO_PASS are checked by running pytest on the
host (the base once per repository, then base + tests and base + tests +
fix), with the report parser grading uses, unless ``--no-verify``.

Run: ``python tasks/settings-fix/build/generate.py [--seed N] [--check]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from megaflow.datasets.prepare import GIT_ENV

sys.path.insert(0, str(Path(__file__).resolve().parent))
from teacher import demonstration

from megaflow.datasets.pytest_report import parse_pytest_report, passed

SET_DIR = Path(__file__).resolve().parent.parent
PYTEST = ["/usr/bin/python3", "-m", "pytest", "-rA", "-p", "no:cacheprovider", "-q"]
GITIGNORE = "__pycache__/\n*.pyc\n.pytest_cache/\n"

PACKAGE_HEADS = [
    "order", "user", "mail", "file", "auth", "report", "search", "cache",
    "event", "media", "price", "stock", "audit", "ticket", "photo", "route",
]  # fmt: skip
PACKAGE_TAILS = ["sync", "api", "store", "worker", "gate", "hub", "feed", "index"]
NAME_HEADS = [
    "MAX", "MIN", "DEFAULT", "POOL", "QUEUE", "CACHE",
    "RETRY", "BATCH", "PAGE", "BUFFER", "WORKER", "STREAM",
]  # fmt: skip
NAME_TAILS = [
    "SIZE", "TIMEOUT", "COUNT", "LIMIT", "DEPTH", "PORT", "DELAY", "TTL", "RATE", "WINDOW",
]  # fmt: skip
MODULES = ["settings", "config", "limits", "defaults", "options", "params", "tuning", "consts"]
VALUES = [
    1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 30, 32, 45, 50, 60, 64, 90, 100,
    120, 128, 200, 256, 300, 500, 512, 600, 900, 1000, 1024, 2048, 3600, 4096, 8080, 9000,
]  # fmt: skip
# Phrasings of the issue: the constant, the file and the new value, never the current one.
TEMPLATES = [
    "Set {name} in {path} to {new}.",
    "Please change {name} in {path} to {new}.",
    "{name} in {path} should be {new}.",
    "{path}: {name} must be {new}.",
    "We need {name} = {new} in {path}.",
    "Change the value of {name} in {path} to {new}.",
]
HELD_OUT_PACKAGES = 8  # packages set aside for the held-out split
HELD_OUT_NAMES = 24  # constant names set aside for the held-out split
DEMONSTRATIONS = 4000  # rows of demonstrations.jsonl
CONSTANTS_PER_REPO = 4
# Repositories (package, variant) of each split, and instances per repository.
REPOS = {"train": (12, 2), "heldout": (8, 2)}  # (packages, variants of each)
INSTANCES_PER_REPO = {"train": 8, "heldout": 2}


@dataclass(frozen=True)
class Repo:
    package: str
    module: str
    variant: int
    values: dict[str, int]

    @property
    def name(self) -> str:
        return f"{self.package}-{self.variant}"

    @property
    def path(self) -> str:
        return f"{self.package}/{self.module}.py"

    def settings(self) -> str:
        """The settings module's text: what ``read_file`` shows the agent."""
        consts = "".join(f"{k} = {v}\n" for k, v in self.values.items())
        return f'"""Settings of the {self.package} service."""\n\n{consts}'

    def files(self) -> dict[str, str]:
        checks = "".join(
            f"def test_{k.lower()}_is_positive():\n    assert {self.module}.{k} > 0\n\n\n"
            for k in self.values
        )
        return {
            ".gitignore": GITIGNORE,
            f"{self.package}/__init__.py": f'"""The {self.package} service."""\n',
            self.path: self.settings(),
            f"tests/test_{self.module}.py": (
                f"from {self.package} import {self.module}\n\n\n{checks.rstrip()}\n"
            ),
        }


@dataclass(frozen=True)
class Change:
    repo: Repo
    name: str
    new: int
    template: int
    index: int

    @property
    def old(self) -> int:
        return self.repo.values[self.name]

    @property
    def instance_id(self) -> str:
        return f"settings-fix__{self.repo.name}-{self.index}"

    def issue(self) -> str:
        return TEMPLATES[self.template].format(name=self.name, path=self.repo.path, new=self.new)

    def test_file(self) -> tuple[str, str]:
        mod, others = self.repo.module, [k for k in self.repo.values if k != self.name]
        body = f"from {self.repo.package} import {mod}\n\n\n"
        body += f"def test_{self.name.lower()}_value():\n"
        body += f"    assert {mod}.{self.name} == {self.new}\n"
        body += "\n\ndef test_other_settings_unchanged():\n"
        body += "".join(f"    assert {mod}.{k} == {self.repo.values[k]}\n" for k in others)
        return f"tests/test_{self.name.lower()}_value.py", body


@dataclass(frozen=True)
class Pools:
    """Packages and constant names, each split into a seen pool and a held-out pool."""

    seen_packages: list[str]
    held_packages: list[str]
    seen_names: list[str]
    held_names: list[str]


def pools(rng: random.Random) -> Pools:
    """Every combination of parts, shuffled, the held-out ones set aside. Each part
    of a held-out combination also occurs in a seen one (only the whole is new)."""
    packages = [f"{h}_{t}" for h in PACKAGE_HEADS for t in PACKAGE_TAILS]
    names = [f"{h}_{t}" for h in NAME_HEADS for t in NAME_TAILS]
    rng.shuffle(packages)
    rng.shuffle(names)
    held_p, held_n = packages[:HELD_OUT_PACKAGES], names[:HELD_OUT_NAMES]
    seen_p, seen_n = packages[HELD_OUT_PACKAGES:], names[HELD_OUT_NAMES:]
    for held, seen in ((held_p, seen_p), (held_n, seen_n)):
        parts = {p for s in seen for p in s.split("_")}
        if not all(set(h.split("_")) <= parts for h in held):
            raise SystemExit("a held-out name has a part no seen name has; change --seed")
    return Pools(sorted(seen_p), sorted(held_p), sorted(seen_n), sorted(held_n))


def random_repo(rng: random.Random, package: str, names: list[str], variant: int) -> Repo:
    """A repository of ``package`` with constants drawn from ``names``, all values distinct."""
    picked = rng.sample(names, CONSTANTS_PER_REPO)
    values = rng.sample(VALUES, CONSTANTS_PER_REPO)
    module = MODULES[rng.randrange(len(MODULES))]
    return Repo(package, module, variant, dict(zip(picked, values, strict=True)))


def random_change(rng: random.Random, repo: Repo, index: int, name: str | None = None) -> Change:
    name = name or rng.choice(sorted(repo.values))
    new = rng.choice([v for v in VALUES if v != repo.values[name]])
    return Change(repo, name, new, rng.randrange(len(TEMPLATES)), index)


def splits(seed: int) -> tuple[Pools, dict[str, list[Change]]]:
    """The pools and the two splits' changes (disjoint repositories, packages and names)."""
    rng = random.Random(seed)
    pool = pools(rng)
    out: dict[str, list[Change]] = {}
    for split, (n_packages, variants) in REPOS.items():
        packages = pool.held_packages if split == "heldout" else pool.seen_packages
        names = pool.held_names if split == "heldout" else pool.seen_names
        changes: list[Change] = []
        for pkg in rng.sample(packages, n_packages):
            for variant in range(1, variants + 1):
                repo = random_repo(rng, pkg, names, variant)
                order = list(repo.values)  # the constants in turn, each as often
                seen: set[tuple[str, int]] = set()
                while len(seen) < INSTANCES_PER_REPO[split]:
                    ch = random_change(rng, repo, len(seen) + 1, order[len(seen) % len(order)])
                    if (ch.name, ch.new) not in seen:
                        seen.add((ch.name, ch.new))
                        changes.append(ch)
        out[split] = changes
    return pool, out


def demonstrations(seed: int, pool: Pools, train: list[Change]) -> list[dict[str, object]]:
    """The warm start's rows: random repositories and changes over the seen pools,
    none of whose issues is word for word a train prompt."""
    rng = random.Random(seed + 1)
    taken = {ch.issue() for ch in train}
    rows: list[dict[str, object]] = []
    while len(rows) < DEMONSTRATIONS:
        repo = random_repo(rng, rng.choice(pool.seen_packages), pool.seen_names, 0)
        ch = random_change(rng, repo, 0)
        if ch.issue() in taken:
            continue
        rows.append(
            demonstration(rng, ch.issue(), repo.path, repo.settings(), repo.values, ch.name, ch.new)
        )
    return rows


def _git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    env = {**os.environ, **GIT_ENV}
    res = subprocess.run(
        ["git", *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True
    )
    if res.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed in {cwd}: {res.stderr}")
    return res.stdout


def _pytest(cwd: Path) -> dict[str, bool]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "HOME": str(cwd)}
    res = subprocess.run(PYTEST, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    return {node: passed(s) for node, s in parse_pytest_report(res.stdout).items()}


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def build_repo(
    repo: Repo, changes: list[Change], out_dir: Path, verify: bool
) -> list[dict[str, object]]:
    """Write one repository under ``out_dir/repos`` and return its instances."""
    _write(out_dir / "repos" / repo.name, repo.files())
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix=f"settings-fix-{repo.name}-") as tmp:
        work = Path(tmp)
        _write(work, repo.files())
        _git(work, "init", "-q", "-b", "main")
        _git(work, "add", "-A")
        _git(work, "commit", "-q", "--allow-empty", "-m", "base")
        base = _git(work, "rev-parse", "HEAD").strip()
        if verify and not all(_pytest(work).values()):
            raise SystemExit(f"{repo.name}: the base tests must all pass")
        for ch in changes:
            target, original = work / repo.path, repo.files()[repo.path]
            line = f"{ch.name} = {ch.old}\n"
            target.write_text(original.replace(line, f"{ch.name} = {ch.new}\n"))
            gold = _git(work, "diff")
            target.write_text(original)
            test_path, test_body = ch.test_file()
            _write(work, {test_path: test_body})
            _git(work, "add", test_path)
            test_patch = _git(work, "diff", "--cached")
            f2p = [f"{test_path}::test_{ch.name.lower()}_value"]
            p2p = [f"{test_path}::test_other_settings_unchanged"] + [
                f"tests/test_{repo.module}.py::test_{k.lower()}_is_positive" for k in repo.values
            ]
            if verify:
                unfixed = _pytest(work)
                _git(work, "apply", stdin=gold)
                fixed = _pytest(work)
                target.write_text(original)
                if [n for n in f2p + p2p if not fixed.get(n)] or any(unfixed.get(n) for n in f2p):
                    raise SystemExit(f"{ch.instance_id}: FAIL_TO_PASS/PASS_TO_PASS do not hold")
                if not all(unfixed.get(n) for n in p2p):
                    raise SystemExit(f"{ch.instance_id}: PASS_TO_PASS fails before the fix")
            _git(work, "rm", "-q", "-f", test_path)
            rows.append(
                {
                    "instance_id": ch.instance_id,
                    "repo": f"settings-fix/{repo.name}",
                    "base_commit": base,
                    "problem_statement": ch.issue(),
                    "patch": gold,
                    "test_patch": test_patch,
                    "FAIL_TO_PASS": f2p,
                    "PASS_TO_PASS": p2p,
                    "megaflow_source": {"type": "dir", "path": f"repos/{repo.name}"},
                    "megaflow_test_timeout_s": 60,
                    "settings_fix": {
                        "package": repo.package,
                        "path": repo.path,
                        "name": ch.name,
                        "old": ch.old,
                        "new": ch.new,
                        "template": ch.template,
                    },
                }
            )
    return rows


def generate(out_dir: Path, seed: int, verify: bool) -> dict[str, int]:
    """Write repos/, the split files and the demonstrations under ``out_dir``;
    return their sizes."""
    shutil.rmtree(out_dir / "repos", ignore_errors=True)
    sizes: dict[str, int] = {}
    pool, planned = splits(seed)
    demos = demonstrations(seed, pool, planned["train"])
    lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in demos)
    (out_dir / "demonstrations.jsonl").write_text(lines)
    sizes["demonstrations"] = len(demos)
    for split, changes in planned.items():
        by_repo: dict[str, list[Change]] = {}
        for ch in changes:
            by_repo.setdefault(ch.repo.name, []).append(ch)
        jobs = [(chs[0].repo, chs) for chs in by_repo.values()]
        with ThreadPoolExecutor(max_workers=2) as pool_:
            built = pool_.map(lambda job: build_repo(job[0], job[1], out_dir, verify), jobs)
            rows = [row for rs in built for row in rs]
        lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
        (out_dir / f"{split}.jsonl").write_text(lines)
        sizes[split] = len(rows)
    return sizes


def _tree(root: Path) -> dict[str, bytes]:
    names = ["demonstrations.jsonl", "train.jsonl", "heldout.jsonl"]
    files = {n: (root / n).read_bytes() for n in names if (root / n).exists()}
    for p in sorted((root / "repos").rglob("*")):
        if p.is_file():
            files[str(p.relative_to(root))] = p.read_bytes()
    return files


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seed", type=int, default=0, help="Seed of the whole family.")
    ap.add_argument("--check", action="store_true", help="Fail if the committed set is stale.")
    ap.add_argument("--no-verify", action="store_true", help="Skip the pytest runs.")
    args = ap.parse_args()
    if args.check:
        with tempfile.TemporaryDirectory(prefix="settings-fix-check-") as tmp:
            generate(Path(tmp), args.seed, verify=False)
            if _tree(Path(tmp)) != _tree(SET_DIR):
                print("tasks/settings-fix is stale; run generate.py", file=sys.stderr)
                return 1
        return 0
    sizes = generate(SET_DIR, args.seed, verify=not args.no_verify)
    print(", ".join(f"{k}: {v} rows" for k, v in sizes.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
