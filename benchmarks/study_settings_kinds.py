"""STUDY, not the product: per-kind figures of the settings-kinds family without sandboxes.

Four uses:

    .venv/bin/python benchmarks/study_settings_kinds.py eval POLICY [--samples 8]
    .venv/bin/python benchmarks/study_settings_kinds.py copy POLICY [POLICY ...]
    .venv/bin/python benchmarks/study_settings_kinds.py kinds RUN.json [RUN.json ...]
    .venv/bin/python benchmarks/study_settings_kinds.py seeds DIR [DIR ...] [--out FILE]

``eval`` samples the policy on the held-out split (temperature 1 and greedy)
with batched generation, grades each answer with a Python re-implementation
of the family's hidden tests (apply the ``edit`` calls, parse the file as its
kind), and prints the pass rate per kind: how far the warm start left each
kind before RL. ``copy`` prints how much of the held-out issues each policy
copies (the build's own check, :mod:`megaflow.app.training.copy_check`):
tasks whose path, name and values it predicts whole, and copied tokens
right, with the words it gets wrong most often. ``kinds`` reads the curve
JSON of ``megaflow train`` runs and prints each held-out round's sampled
pass@1 per kind (from ``per_prompt``, the kind is in the instance id), so a
run's change can be seen kind by kind. ``seeds`` sets each seed's trained
arm against its shuffled control: DIR holds the two arms' curves
(``trained.json``, ``control.json``) and, if the runner wrote one,
``load.txt`` (the load average when each arm started and ended); it prints
one markdown row per DIR with the before / trained / control pass@1 and the
verdict of ``megaflow train compare`` (:mod:`megaflow.app.training.compare`),
and with ``--out`` writes the table there, dated and with the commit.
"""

from __future__ import annotations

import argparse
import ast
import configparser
import json
import posixpath
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

TASKS = ROOT / "tasks" / "settings-kinds"
KINDS = ("py", "json", "toml", "ini")
WORKDIR = "/workspace"


def kind_of(instance_id: str) -> str:
    """``settings-kinds__ledger_hub-3-toml-2`` -> ``toml``."""
    return instance_id.rsplit("-", 2)[-2]


def parse(kind: str, text: str, package: str) -> dict[str, Any] | None:
    """The settings as the hidden tests read them, or None where they cannot."""
    try:
        if kind == "py":
            out: dict[str, Any] = {}
            for node in ast.parse(text).body:
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                    out[node.targets[0].id] = ast.literal_eval(node.value)
            return out
        if kind == "json":
            return dict(json.loads(text))
        if kind == "toml":
            return dict(tomllib.loads(text)[package])
        cp = configparser.ConfigParser()
        cp.read_string(text)
        return {k: int(v) if v.isdigit() else v for k, v in cp[package].items()}
    except (SyntaxError, ValueError, KeyError, configparser.Error, tomllib.TOMLDecodeError):
        return None


def reward(inst: Any, text: str) -> tuple[float, bool]:
    """(1 if the edits leave the asked setting at its new int value and the others
    unchanged else 0, whether the answer had no edit call at all)."""
    from megaflow.model.transformers_lm import parse_tool_calls

    meta = (inst.model_extra or {})["settings_kinds"]
    src = TASKS / inst.megaflow_source.path
    base = (src / meta["path"]).read_text()
    files = {meta["path"]: base}
    _, calls = parse_tool_calls(text)
    edited = False
    for call in calls:
        fn = call["function"]
        if fn["name"] == "submit":
            break
        try:
            args = json.loads(fn["arguments"])
        except json.JSONDecodeError:
            continue
        if fn["name"] != "edit" or not isinstance(args, dict):
            continue
        edited = True
        path = posixpath.relpath(
            posixpath.normpath(posixpath.join(WORKDIR, str(args.get("path", "")))), WORKDIR
        )
        old, new = args.get("old_str"), args.get("new_str")
        fits = path in files and isinstance(old, str) and isinstance(new, str) and old
        if fits and files[path].count(old) == 1:
            files[path] = files[path].replace(old, new)
    got = parse(meta["kind"], files[meta["path"]], meta["package"])
    want = parse(meta["kind"], base, meta["package"]) or {}
    key = meta["new_str"].split()[0].strip('":')
    want[key] = meta["new"]
    ok = got is not None and all(
        got.get(k) == v and type(got.get(k)) is int for k, v in want.items() if k != "version"
    )
    return float(ok), not edited


def evaluate(policy: Path, samples: int) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from megaflow.datasets.loader import load_instances
    from study_train_quickstart import Sampler

    torch.set_num_threads(1)
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(policy)
    model = AutoModelForCausalLM.from_pretrained(policy).eval()
    sampler = Sampler(model, tok, 96)
    insts = load_instances(TASKS / "heldout.jsonl")
    for label, temp, n in (("sampled", 1.0, samples), ("greedy", 0.0, 1)):
        prompts = [sampler.prompt_ids(i) for i in insts for _ in range(n)]
        outs: list[list[int]] = []
        for k in range(0, len(prompts), 32):
            outs += sampler.generate(prompts[k : k + 32], temp)
        by: dict[str, list[float]] = {k: [] for k in KINDS}
        bad = 0
        for j, out in enumerate(outs):
            inst = insts[j // n]
            r, malformed = reward(inst, sampler.text(out))
            by[kind_of(inst.instance_id)].append(r)
            bad += malformed
        allr = [r for v in by.values() for r in v]
        per = "  ".join(f"{k} {sum(v) / len(v):.2f}" for k, v in by.items())
        print(f"{label}: {sum(allr) / len(allr):.3f} ({per}), no edit {bad}/{len(outs)}")


def copies(policies: list[Path]) -> None:
    from collections import Counter

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from megaflow.app.training.copy_check import _copy_positions, copy_score, gold_conversation
    from megaflow.datasets.loader import load_instances
    from megaflow.train.warm_start import encode_turns, load_conversations

    torch.set_num_threads(1)
    system = str(load_conversations(TASKS / "demonstrations.jsonl")[0][0]["content"])
    convs = [gold_conversation(system, i) for i in load_instances(TASKS / "heldout.jsonl")]
    for policy in policies:
        tok = AutoTokenizer.from_pretrained(policy)
        model = AutoModelForCausalLM.from_pretrained(policy).eval()
        score = copy_score(model, tok, convs)
        missed: Counter[str] = Counter()
        for conv in convs:
            ids, spans = encode_turns(tok, conv)
            where = _copy_positions(tok, ids, spans[-1][0], str(conv[1]["content"]))
            with torch.no_grad():
                guess = model(input_ids=torch.tensor([ids])).logits[0].argmax(-1).tolist()
            missed.update(
                f"{tok.decode([ids[p]]).strip()}->{tok.decode([guess[p - 1]]).strip()}"
                for p in where
                if guess[p - 1] != ids[p]
            )
        print(
            f"{policy}: copied {score.copied}/{score.tasks} ({score.share:.3f}), tokens "
            f"{score.right}/{score.tokens} ({score.token_share:.3f}); most missed: "
            + (", ".join(f"{k} x{n}" for k, n in missed.most_common(6)) or "none")
        )


def kinds(paths: list[Path]) -> None:
    for p in paths:
        run = json.loads(p.read_text())
        for ev in run["evals"]:
            by: dict[str, list[float]] = {k: [] for k in KINDS}
            for iid, r in ev.get("per_prompt", {}).items():
                by[kind_of(iid)].append(r)
            per = "  ".join(f"{k} {sum(v) / len(v):.2f}" for k, v in by.items() if v)
            print(
                f"{p.name} step {ev['step']}: {ev['reward_mean']:.3f} "
                f"[{ev['ci_low']:.3f}, {ev['ci_high']:.3f}] greedy {ev.get('greedy')} "
                f"malformed {ev.get('malformed')}  {per}"
            )


def _held_out(p: Any) -> str:
    """A held-out round as the table shows it: pass@1 [interval], samples lost."""
    if p.reward_mean is None:
        return f"no sample graded ({p.masked} lost)"
    lost = f", {p.masked} lost" if p.masked else ""
    return f"{p.reward_mean:.3f} [{p.ci_low:.3f}, {p.ci_high:.3f}]{lost}"


def seeds(dirs: list[Path], out: Path | None) -> None:
    import datetime
    import subprocess

    from megaflow.app.training.compare import compare, load_curve

    head = (
        "| run | before (v0) | trained | greedy b/t | control | greedy c "
        "| trained - control | compare | load (start/end of each arm) |"
    )
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for d in dirs:
        v = compare(load_curve(d / "trained.json"), load_curve(d / "control.json"))
        where = "within" if v.control_held else ("ABOVE" if v.control_gained else "below")
        verdict = f"control {where}, beats: {'yes' if v.beats_control else 'NO'} "
        verdict += f"(exit {0 if v.ok else 1})"
        log = d / "load.txt"
        load = log.read_text().strip().replace("\n", "; ") if log.is_file() else "-"
        g = [f"{x:.3f}" if x is not None else "-" for x in (v.before.greedy, v.trained.greedy)]
        gc = f"{v.control.greedy:.3f}" if v.control.greedy is not None else "-"
        rows.append(
            f"| {d.name} | {_held_out(v.before)} | @{v.trained.step} {_held_out(v.trained)} "
            f"| {g[0]} / {g[1]} | @{v.control.step} {_held_out(v.control)} | {gc} "
            f"| {v.difference.show()} over {v.difference.n} | {verdict} | {load} |"
        )
    print("\n".join(rows))
    if out is not None:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        out.write_text(
            "## settings-kinds: trained arm against its shuffled control, per seed (study)\n\n"
            f"Written {now} by `benchmarks/study_settings_kinds.py seeds` at commit {commit}, "
            "from each seed's `megaflow train` curves; pass@1 sampled at temperature 1 over "
            "4 samples of each of the 32 held-out tasks, with its 95% interval; greedy one "
            "sample each. Each row is one directory of a seed's two arms; load: the 1, 5 and "
            "15-minute load averages when each arm started and ended.\n\n" + "\n".join(rows) + "\n"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("eval")
    e.add_argument("policy", type=Path)
    e.add_argument("--samples", type=int, default=8)
    c = sub.add_parser("copy")
    c.add_argument("policies", type=Path, nargs="+")
    k = sub.add_parser("kinds")
    k.add_argument("runs", type=Path, nargs="+")
    r = sub.add_parser("seeds")
    r.add_argument("dirs", type=Path, nargs="+")
    r.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.cmd == "eval":
        evaluate(args.policy, args.samples)
    elif args.cmd == "copy":
        copies(args.policies)
    elif args.cmd == "seeds":
        seeds(args.dirs, args.out)
    else:
        kinds(args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
