"""Generate the settings-fix task family: many tiny repositories, each with a wrong setting.

Every repository is a package with one settings module of integer constants
and a test of their types. An instance asks for one constant to be changed
from its current value to a new one, in one of several phrasings; its hidden
test (the test patch) checks the new value (FAIL_TO_PASS) and that the other
constants kept theirs (PASS_TO_PASS). The fix is one line: an ``edit`` of
``NAME = old`` into ``NAME = new``.

Each package keeps its settings in one module (``billing/limits.py``);
its repositories are variants with different constants and values. The
two splits take disjoint repositories, every package in each of them:

* ``train.jsonl``: the RL prompts, every phrasing;
* ``heldout.jsonl``: evaluation only, every phrasing; no held-out change
  (package, constant, current value, new value) occurs in the train split
  or the demonstrations, so each is a new combination of known words.

Beside them, ``demonstrations.jsonl`` holds the supervised warm start's
conversations: a sloppy teacher's answers to random issues
(``build/teacher.py``), no repository needed.

Everything follows from ``--seed`` (default 0). Patches come from ``git
diff``; FAIL_TO_PASS and PASS_TO_PASS are checked by running pytest on the
host (the base once per repository, then base + tests and base + tests + fix), with
the report parser grading uses, unless ``--no-verify``.

Run: ``python tasks/settings-fix/build/generate.py [--seed N] [--check]``.
"""

from __future__ import annotations

import functools
import json
import random
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from teacher import demonstrations

from megaflow.datasets.family_build import (
    GITIGNORE,
    check_instance,
    commit_base,
    git,
    main,
    write_files,
)

SET_DIR = Path(__file__).resolve().parent.parent

PACKAGES = [
    "billing", "mailer", "search", "upload", "auth", "reports",
    "sync", "gateway", "inventory", "backup", "metrics", "chat",
]  # fmt: skip
MODULES = ["settings", "config", "limits", "defaults", "options", "params", "tuning", "consts"]
CONSTANTS: dict[str, list[int]] = {
    "TIMEOUT": [10, 20, 30, 45, 60, 90, 120],
    "RETRIES": [1, 2, 3, 4, 5, 6, 8],
    "PORT": [8000, 8080, 8443, 9000, 9090],
    "WORKERS": [1, 2, 4, 8, 16],
    "PAGE_SIZE": [10, 20, 25, 50, 100],
    "BATCH_SIZE": [16, 32, 64, 128, 256],
    "MAX_USERS": [10, 50, 100, 500, 1000],
    "CACHE_TTL": [60, 300, 600, 900, 3600],
    "MAX_DEPTH": [2, 3, 4, 5, 8, 10],
    "BUFFER_SIZE": [512, 1024, 2048, 4096, 8192],
}
# Phrasings of the issue. The first three name the current value first, the
# last three the new one.
TEMPLATES = [
    "{name} in {path} is {old}, but it should be {new}.",
    "Please change {name} in {path} from {old} to {new}.",
    "The value {old} of {name} in {path} is wrong; use {new}.",
    "Set {name} in {path} to {new}; it is {old} now.",
    "{path}: {name} must be {new}, not {old}.",
    "We need {name} = {new} in {path} instead of {old}.",
]
OLD_FIRST = 3
DEMONSTRATIONS = 4000  # rows of demonstrations.jsonl
CONSTANTS_PER_REPO = 4
# Instances per constant of a repository, by split (None: every other value).
INSTANCES_PER_CONSTANT = {"train": 2, "heldout": 1}
# Repositories of each package, by split (variants of the package's settings).
VARIANTS = {"train": 2, "heldout": 1}


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

    def files(self) -> dict[str, str]:
        consts = "".join(f"{k} = {v}\n" for k, v in self.values.items())
        checks = "".join(
            f"def test_{k.lower()}_is_positive():\n    assert {self.module}.{k} > 0\n\n\n"
            for k in self.values
        )
        return {
            ".gitignore": GITIGNORE,
            f"{self.package}/__init__.py": f'"""The {self.package} service."""\n',
            self.path: f'"""Settings of the {self.package} service."""\n\n{consts}',
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
        text = TEMPLATES[self.template].format(
            name=self.name, path=self.repo.path, old=self.old, new=self.new
        )
        return text + "\n"

    def test_file(self) -> tuple[str, str]:
        mod, others = self.repo.module, [k for k in self.repo.values if k != self.name]
        body = f"from {self.repo.package} import {mod}\n\n\n"
        body += f"def test_{self.name.lower()}_value():\n"
        body += f"    assert {mod}.{self.name} == {self.new}\n"
        body += "\n\ndef test_other_settings_unchanged():\n"
        body += "".join(f"    assert {mod}.{k} == {self.repo.values[k]}\n" for k in others)
        return f"tests/test_{self.name.lower()}_value.py", body


def splits(seed: int) -> dict[str, list[Change]]:
    """The two splits: disjoint repositories; every package in each split, each time
    with other settings; no held-out change (package, constant, old, new) elsewhere."""
    rng = random.Random(seed)
    modules = {pkg: MODULES[i % len(MODULES)] for i, pkg in enumerate(PACKAGES)}
    seen: set[tuple[str, str, int, int]] = set()
    out: dict[str, list[Change]] = {}
    variant = 0
    for split, n in VARIANTS.items():  # held-out last, so it can avoid what the others use
        changes: list[Change] = []
        for _ in range(n):
            variant += 1
            for pkg in PACKAGES:
                names = rng.sample(sorted(CONSTANTS), CONSTANTS_PER_REPO)
                values = {c: rng.choice(CONSTANTS[c]) for c in names}
                repo = Repo(pkg, modules[pkg], variant, values)
                k = 0
                for name in names:
                    choices = [
                        v
                        for v in CONSTANTS[name]
                        if v != values[name] and (pkg, name, values[name], v) not in seen
                    ]
                    for new in rng.sample(
                        choices, min(len(choices), INSTANCES_PER_CONSTANT[split])
                    ):
                        k += 1
                        seen.add((pkg, name, values[name], new))
                        template = rng.randrange(len(TEMPLATES))
                        changes.append(Change(repo, name, new, template, k))
        out[split] = changes
    return out


def build_repo(
    repo: Repo, changes: list[Change], out_dir: Path, verify: bool
) -> list[dict[str, object]]:
    """Write one repository under ``out_dir/repos`` and return its instances."""
    write_files(out_dir / "repos" / repo.name, repo.files())
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix=f"settings-fix-{repo.name}-") as tmp:
        work = Path(tmp)
        base = commit_base(work, repo.files(), verify, repo.name)
        for ch in changes:
            target, original = work / repo.path, repo.files()[repo.path]
            line = f"{ch.name} = {ch.old}\n"
            target.write_text(original.replace(line, f"{ch.name} = {ch.new}\n"))
            gold = git(work, "diff")
            target.write_text(original)
            test_path, test_body = ch.test_file()
            write_files(work, {test_path: test_body})
            git(work, "add", test_path)
            test_patch = git(work, "diff", "--cached")
            f2p = [f"{test_path}::test_{ch.name.lower()}_value"]
            p2p = [f"{test_path}::test_other_settings_unchanged"] + [
                f"tests/test_{repo.module}.py::test_{k.lower()}_is_positive" for k in repo.values
            ]
            if verify:
                restore = functools.partial(target.write_text, original)
                check_instance(work, gold, f2p, p2p, restore, ch.instance_id)
            git(work, "rm", "-q", "-f", test_path)
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
    planned = splits(seed)
    held = {(ch.repo.package, ch.name, ch.old, ch.new) for ch in planned["heldout"]}
    demos = demonstrations(
        seed, DEMONSTRATIONS, constants=CONSTANTS, templates=TEMPLATES, avoid=held,
        packages={pkg: MODULES[i % len(MODULES)] for i, pkg in enumerate(PACKAGES)},
    )  # fmt: skip
    lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in demos)
    (out_dir / "demonstrations.jsonl").write_text(lines)
    sizes["demonstrations"] = len(demos)
    for split, changes in planned.items():
        by_repo: dict[str, list[Change]] = {}
        for ch in changes:
            by_repo.setdefault(ch.repo.name, []).append(ch)
        jobs = [(chs[0].repo, chs) for chs in by_repo.values()]
        with ThreadPoolExecutor(max_workers=2) as pool:
            built = pool.map(lambda job: build_repo(job[0], job[1], out_dir, verify), jobs)
            rows = [row for rs in built for row in rs]
        lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
        (out_dir / f"{split}.jsonl").write_text(lines)
        sizes[split] = len(rows)
    return sizes


if __name__ == "__main__":
    sys.exit(main(__doc__ or "", SET_DIR, generate))
