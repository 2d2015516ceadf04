"""Generate the settings-kinds family: a wrong setting in a Python, JSON, TOML or INI file.

Every repository is a package whose settings live in one file of one kind
(``build/kinds.py``); an instance asks for one setting to change from its
current value to a new one, in one of six phrasings; its hidden test checks
the new value, as an ``int`` (FAIL_TO_PASS), and that the other settings
kept theirs (PASS_TO_PASS). The fix is one ``edit`` whose right form depends
on the file's kind, and the warm start's teacher gets each kind wrong in its
own way (``build/teacher.py``), so no single habit solves the family.

Packages (``ledger_hub``) and setting names (``IDLE_TIMEOUT``) are pairs of
words. The held-out split takes packages and names that occur nowhere else:
not in the train split, not in the demonstrations (each word of them does,
in other pairs). The demonstrations never repeat a train issue word for word.

* ``train.jsonl``: the RL prompts, 24 repositories (6 of each kind), 192 rows;
* ``heldout.jsonl``: evaluation only, 8 repositories (2 of each kind), 32 rows;
* ``demonstrations.jsonl``: the supervised warm start, no repository needed.

Everything follows from ``--seed`` (default 0). Patches come from ``git
diff``; FAIL_TO_PASS and PASS_TO_PASS are checked by running pytest on the
host unless ``--no-verify``.

Run: ``python tasks/settings-kinds/build/generate.py [--seed N] [--check]``.
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
from kinds import KINDS, edit_text, entry, key, reader, settings_file
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

PREFIXES = [
    "billing", "mail", "search", "upload", "auth", "report", "sync", "gate",
    "stock", "backup", "metric", "chat", "order", "media", "queue", "ledger",
]  # fmt: skip
SUFFIXES = ["api", "hub", "core", "desk", "kit", "box", "lab", "net", "ops", "pad", "run", "web"]
MODULES = ["settings", "config", "limits", "defaults", "options", "params"]
QUALIFIERS = [
    "MAX", "MIN", "DEFAULT", "IDLE", "READ", "WRITE",
    "CONN", "POOL", "LOCK", "SEND", "RECV", "BASE",
]  # fmt: skip
VALUES: dict[str, list[int]] = {
    "TIMEOUT": [10, 20, 30, 45, 60, 90, 120],
    "RETRIES": [1, 2, 3, 4, 5, 6, 8],
    "PORT": [8000, 8080, 8443, 9000, 9090],
    "WORKERS": [1, 2, 4, 8, 16],
    "SIZE": [16, 32, 64, 128, 256, 512],
    "TTL": [60, 300, 600, 900, 3600],
    "DEPTH": [2, 3, 4, 5, 8, 10],
    "LIMIT": [10, 50, 100, 500, 1000],
}
TEMPLATES = [
    "{name} in {path} is {old}, but it should be {new}.",
    "Please change {name} in {path} from {old} to {new}.",
    "The value {old} of {name} in {path} is wrong; use {new}.",
    "Set {name} in {path} to {new}; it is {old} now.",
    "{path}: {name} must be {new}, not {old}.",
    "We need {name} = {new} in {path} instead of {old}.",
]
DEMONSTRATIONS = 4000
SETTINGS_PER_REPO = 4
HELDOUT_PACKAGES = 8  # one repository each, one instance per setting
HELDOUT_QUALIFIERS = 2  # per value family: 16 held-out names
TRAIN_PACKAGES = 12  # two repositories each, two instances per setting


def values_of(name: str) -> list[int]:
    return VALUES[name.split("_", 1)[1]]


def issue(template: int, name: str, path: str, old: int, new: int) -> str:
    return TEMPLATES[template].format(name=name, path=path, old=old, new=new) + "\n"


@dataclass(frozen=True)
class Repo:
    package: str
    module: str
    kind: str
    variant: int
    values: dict[str, int]

    @property
    def name(self) -> str:
        return f"{self.package}-{self.variant}"

    @property
    def path(self) -> str:
        return f"{self.package}/{self.module}.{self.kind}"

    def files(self) -> dict[str, str]:
        checks = "".join(
            f'def test_{k.lower()}_is_positive():\n    assert S["{key(self.kind, k)}"] > 0\n\n\n'
            for k in self.values
        )
        return {
            ".gitignore": GITIGNORE,
            f"{self.package}/__init__.py": f'"""The {self.package} service."""\n',
            self.path: settings_file(self.kind, self.package, self.values),
            "tests/test_settings.py": reader(self.kind, self.package, self.path)
            + f"\n\n{checks.rstrip()}\n",
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
    def key(self) -> str:
        return key(self.repo.kind, self.name)

    @property
    def instance_id(self) -> str:
        return f"settings-kinds__{self.repo.name}-{self.repo.kind}-{self.index}"

    def issue(self) -> str:
        return issue(self.template, self.key, self.repo.path, self.old, self.new)

    def test_file(self) -> tuple[str, str]:
        r, k = self.repo, self.key
        body = reader(r.kind, r.package, r.path) + "\n\n"
        body += f"def test_{k.lower()}_value():\n"
        body += f'    assert S["{k}"] == {self.new} and type(S["{k}"]) is int\n'
        body += "\n\ndef test_other_settings_unchanged():\n"
        body += "".join(
            f'    assert S["{key(r.kind, n)}"] == {v}\n'
            for n, v in r.values.items()
            if n != self.name
        )
        return f"tests/test_{k.lower()}_value.py", body


def vocabulary(seed: int) -> dict[str, list[str]]:
    """Packages and names, split: held-out ones occur in no train repository and no
    demonstration; the demonstrations range over every other package."""
    rng = random.Random(f"{seed}:vocabulary")
    packages = [f"{p}_{s}" for p in PREFIXES for s in SUFFIXES]
    rng.shuffle(packages)
    held_names = [f"{q}_{v}" for v in VALUES for q in rng.sample(QUALIFIERS, HELDOUT_QUALIFIERS)]
    names = [f"{q}_{v}" for v in VALUES for q in QUALIFIERS if f"{q}_{v}" not in held_names]
    rest = packages[HELDOUT_PACKAGES:]
    return {
        "heldout_packages": sorted(packages[:HELDOUT_PACKAGES]),
        "heldout_names": held_names,
        "train_packages": sorted(rest[:TRAIN_PACKAGES]),
        "demo_packages": sorted(rest),
        "names": names,
    }


def _repo(rng: random.Random, pkg: str, kind: str, variant: int, names: list[str]) -> Repo:
    chosen = rng.sample(names, SETTINGS_PER_REPO)
    module = MODULES[sorted(PREFIXES).index(pkg.split("_")[0]) % len(MODULES)]
    return Repo(pkg, module, kind, variant, {n: rng.choice(values_of(n)) for n in chosen})


def splits(seed: int) -> dict[str, list[Change]]:
    """The train and held-out changes, each repository's kind dealt round robin."""
    rng = random.Random(seed)
    voc = vocabulary(seed)
    train: list[Change] = []
    for i, pkg in enumerate(voc["train_packages"]):
        for variant in (1, 2):
            repo = _repo(rng, pkg, KINDS[(i + variant) % len(KINDS)], variant, voc["names"])
            k = 0
            for name in repo.values:
                choices = [v for v in values_of(name) if v != repo.values[name]]
                for new in rng.sample(choices, 2):
                    k += 1
                    train.append(Change(repo, name, new, rng.randrange(len(TEMPLATES)), k))
    held: list[Change] = []
    for i, pkg in enumerate(voc["heldout_packages"]):
        repo = _repo(rng, pkg, KINDS[i % len(KINDS)], 3, voc["heldout_names"])
        for k, name in enumerate(repo.values, 1):
            new = rng.choice([v for v in values_of(name) if v != repo.values[name]])
            held.append(Change(repo, name, new, rng.randrange(len(TEMPLATES)), k))
    return {"train": train, "heldout": held}


def build_repo(
    repo: Repo, changes: list[Change], out_dir: Path, verify: bool
) -> list[dict[str, object]]:
    """Write one repository under ``out_dir/repos`` and return its instances."""
    write_files(out_dir / "repos" / repo.name, repo.files())
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix=f"settings-kinds-{repo.name}-") as tmp:
        work = Path(tmp)
        base = commit_base(work, repo.files(), verify, repo.name)
        for ch in changes:
            target, original = work / repo.path, repo.files()[repo.path]
            old_line = entry(repo.kind, ch.name, ch.old) + "\n"
            target.write_text(original.replace(old_line, entry(repo.kind, ch.name, ch.new) + "\n"))
            gold = git(work, "diff")
            target.write_text(original)
            test_path, test_body = ch.test_file()
            write_files(work, {test_path: test_body})
            git(work, "add", test_path)
            test_patch = git(work, "diff", "--cached")
            f2p = [f"{test_path}::test_{ch.key.lower()}_value"]
            p2p = [f"{test_path}::test_other_settings_unchanged"] + [
                f"tests/test_settings.py::test_{n.lower()}_is_positive" for n in repo.values
            ]
            if verify:
                restore = functools.partial(target.write_text, original)
                check_instance(work, gold, f2p, p2p, restore, ch.instance_id)
            git(work, "rm", "-q", "-f", test_path)
            rows.append(
                {
                    "instance_id": ch.instance_id,
                    "repo": f"settings-kinds/{repo.name}",
                    "base_commit": base,
                    "problem_statement": ch.issue(),
                    "patch": gold,
                    "test_patch": test_patch,
                    "FAIL_TO_PASS": f2p,
                    "PASS_TO_PASS": p2p,
                    "megaflow_source": {"type": "dir", "path": f"repos/{repo.name}"},
                    "megaflow_test_timeout_s": 60,
                    "settings_kinds": {
                        "kind": repo.kind,
                        "package": repo.package,
                        "path": repo.path,
                        "name": ch.name,
                        "old_str": edit_text(repo.kind, ch.name, ch.old),
                        "new_str": edit_text(repo.kind, ch.name, ch.new),
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
    planned = splits(seed)
    voc = vocabulary(seed)
    demos = demonstrations(
        seed, DEMONSTRATIONS, packages=voc["demo_packages"], modules=MODULES,
        names=voc["names"], values=values_of, issue=issue, templates=len(TEMPLATES),
        avoid={ch.issue() for ch in planned["train"]},
    )  # fmt: skip
    lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in demos)
    (out_dir / "demonstrations.jsonl").write_text(lines)
    sizes = {"demonstrations": len(demos)}
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
