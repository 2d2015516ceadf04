"""STUDY, not the product: can the quickstart's tiny policy learn settings-fix by RL?

This simulates the train quickstart's loop in one process, without
sandboxes, gateway or scheduler, to choose its settings before the real loop
runs them: the same tokenizer and model builder
(:mod:`megaflow.train.quickstart_model`), the same warm start on the demo
split (:mod:`megaflow.train.warm_start`), the same prompts the builtin agent
sends, the same tool-call parser as the ``transformers`` backend, and the
real GRPO trainer (:class:`megaflow.train.worker.RankWorker`). What differs:
generation is batched here (the backend generates one at a time), and the
reward comes from a Python re-implementation of the verifier (apply the
``edit`` calls to the file text, read the constants with ``ast``) instead of
pytest in a fresh sandbox. The loop with ``--no-update`` is the control.

    .venv/bin/python benchmarks/study_train_quickstart.py --steps 20

It prints the held-out reward (greedy and sampled) before RL, every
``--eval-every`` steps and at the end, the train reward of each step, and
the wall time of each part.
"""

from __future__ import annotations

import argparse
import ast
import json
import posixpath
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.loader import load_instances
from megaflow.model.transformers_lm import parse_tool_calls, sampled_logprobs
from megaflow.train.config import TrainerConfig
from megaflow.train.quickstart_model import PolicyConfig, build_policy, render
from megaflow.train.samples import TrainingSample
from megaflow.train.warm_start import WarmStartConfig, load_conversations, warm_start
from megaflow.train.worker import RankWorker

TASKS = ROOT / "tasks" / "settings-fix"
SYSTEM = "Fix the setting with one edit call, then call submit."
WORKDIR = "/workspace"
OLD_FIRST = 3  # the phrasings that name the current value first (tasks/settings-fix/build)


def study_reward(inst: SWEInstance, text: str) -> float:
    """The verifier, re-implemented: 1 if the edits leave the asked constant at its
    new value and the others unchanged, else 0 (the study's stand-in for pytest)."""
    meta = inst.model_extra["settings_fix"] if inst.model_extra else {}
    src = Path(inst.megaflow_source.path)
    files = {meta["path"]: (src / meta["path"]).read_text()}
    _, calls = parse_tool_calls(text)
    for call in calls:
        fn = call["function"]
        if fn["name"] == "submit":
            break
        args = json.loads(fn["arguments"])
        if fn["name"] != "edit" or not isinstance(args, dict):
            continue
        path = posixpath.relpath(
            posixpath.normpath(posixpath.join(WORKDIR, args.get("path", ""))), WORKDIR
        )
        old, new = args.get("old_str"), args.get("new_str")
        if path not in files or not isinstance(old, str) or not isinstance(new, str) or not old:
            continue
        if files[path].count(old) == 1:
            files[path] = files[path].replace(old, new)
    try:
        tree = ast.parse(files[meta["path"]])
    except SyntaxError:
        return 0.0
    values: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                values[node.targets[0].id] = None
    base = ast.parse((src / meta["path"]).read_text())
    for node in base.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            want = meta["new"] if name == meta["name"] else ast.literal_eval(node.value)
            if values.get(name) != want or type(values.get(name)) is not int:
                return 0.0
    return 1.0


class Sampler:
    """Batched generation from the trainer's own model, with exact prompt ids."""

    def __init__(self, model: Any, tok: Any, max_new: int) -> None:
        self.model, self.tok, self.max_new = model, tok, max_new

    def prompt_ids(self, inst: SWEInstance) -> list[int]:
        msgs = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": inst.problem_statement},
        ]
        text = self.tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        return [int(t) for t in self.tok(text, add_special_tokens=False)["input_ids"]]

    @torch.no_grad()
    def generate(self, prompts: list[list[int]], temperature: float) -> list[list[int]]:
        return [ids for ids, _ in self.generate_scored(prompts, temperature)]

    @torch.no_grad()
    def generate_scored(
        self, prompts: list[list[int]], temperature: float
    ) -> list[tuple[list[int], list[float]]]:
        """Each completion with the logprob of each of its tokens under the
        distribution it was drawn from (``generate``'s own logits, as MegaFlow's
        transformers backend records them: no second forward)."""
        width = max(len(p) for p in prompts)
        pad = int(self.tok.pad_token_id)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
        attn = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        kw: dict[str, Any] = {"do_sample": False}
        if temperature > 0:
            kw = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        out = self.model.generate(
            input_ids=ids,
            attention_mask=attn,
            max_new_tokens=self.max_new,
            pad_token_id=pad,
            eos_token_id=int(self.tok.eos_token_id),
            return_dict_in_generate=True,
            output_logits=True,
            **kw,
        )
        seqs = []
        eos = int(self.tok.eos_token_id)
        for r, row in enumerate(out.sequences[:, width:].tolist()):
            cut = row.index(eos) + 1 if eos in row else len(row)
            ids = row[:cut]
            seqs.append((ids, sampled_logprobs(out.logits, ids, temperature or 1.0, row=r)))
        return seqs

    @torch.no_grad()
    def logprobs(self, prompt: list[int], completion: list[int]) -> list[float]:
        ids = torch.tensor([prompt + completion])
        logits = self.model(input_ids=ids).logits[0, :-1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:].unsqueeze(-1)).squeeze(-1)
        return lp[len(prompt) - 1 :].tolist()

    def text(self, completion: list[int]) -> str:
        return str(self.tok.decode(completion, skip_special_tokens=True))


def evaluate(
    sampler: Sampler, insts: list[SWEInstance], temperature: float
) -> tuple[float, float, float]:
    """Mean held-out reward: overall, phrased old value first, phrased new value first."""
    prompts = [sampler.prompt_ids(i) for i in insts]
    outs: list[list[int]] = []
    for k in range(0, len(prompts), 32):
        outs += sampler.generate(prompts[k : k + 32], temperature)
    seen: list[float] = []
    unseen: list[float] = []
    for inst, out in zip(insts, outs, strict=True):
        meta = inst.model_extra["settings_fix"] if inst.model_extra else {}
        r = study_reward(inst, sampler.text(out))
        (seen if meta["template"] < OLD_FIRST else unseen).append(r)
    mean = (sum(seen) + sum(unseen)) / len(insts)
    return mean, sum(seen) / max(len(seen), 1), sum(unseen) / max(len(unseen), 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--sft-steps", type=int, default=1200)
    ap.add_argument("--sft-lr", type=float, default=3e-3)
    ap.add_argument("--sft-batch", type=int, default=16)
    ap.add_argument("--prompts", type=int, default=8, help="Prompts (groups) per RL step.")
    ap.add_argument("--group", type=int, default=4, help="Samples per prompt.")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--max-new", type=int, default=96)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-update", action="store_true", help="The control: never step.")
    ap.add_argument("--policy", type=Path, help="Start from this built policy (no warm start).")
    ap.add_argument("--json", type=Path, help="Also write the curve here.")
    args = ap.parse_args()
    torch.set_num_threads(1)  # two threads on a loaded 2-core machine run 6x slower
    train = load_instances(TASKS / "train.jsonl")
    heldout = load_instances(TASKS / "heldout.jsonl")
    convs = load_conversations(TASKS / "demonstrations.jsonl")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="study-quickstart-") as tmp:
        if args.policy:
            model_dir = Path(shutil.copytree(args.policy, Path(tmp) / "policy"))
            losses: list[float] = []
        else:
            texts = [render(c) for c in convs] + [i.problem_statement for i in train]
            model_dir = build_policy(
                tmp, texts, PolicyConfig(hidden=args.hidden, layers=args.layers, seed=args.seed)
            )
            losses = warm_start(
                model_dir,
                convs,
                WarmStartConfig(
                    steps=args.sft_steps, lr=args.sft_lr, batch_size=args.sft_batch, seed=args.seed
                ),
            )
        t_sft = time.perf_counter() - t0
        worker = RankWorker(
            model_dir, TrainerConfig(lr=args.lr, temperature=1.0, seed=args.seed, micro_batch=32)
        )
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(model_dir)
        sampler = Sampler(worker.model, tok, args.max_new)
        curve: list[dict[str, Any]] = []
        rng = random.Random(args.seed)
        t_gen = t_train = t_eval = 0.0

        def record(step: int, train_reward: float | None) -> None:
            nonlocal t_eval
            t = time.perf_counter()
            g, s = evaluate(sampler, heldout, 0.0), evaluate(sampler, heldout, args.temperature)
            t_eval += time.perf_counter() - t
            curve.append(
                {"step": step, "heldout_greedy": g, "heldout_sampled": s, "train": train_reward}
            )
            print(
                f"step {step:3d}  held-out greedy {g[0]:.3f} (old first {g[1]:.2f}, "
                f"new first {g[2]:.2f})  sampled {s[0]:.3f} ({s[1]:.2f}, {s[2]:.2f})",
                flush=True,
            )

        print(
            f"warm start: {args.sft_steps} steps in {t_sft:.1f}s, "
            f"loss {losses[0]:.2f} -> {losses[-1]:.3f}"
            if losses
            else "no warm start"
        )
        record(0, None)
        episodes = 0
        for step in range(1, args.steps + 1):
            t = time.perf_counter()
            insts = rng.sample(train, args.prompts)
            prompts = [sampler.prompt_ids(i) for i in insts for _ in range(args.group)]
            outs = sampler.generate(prompts, args.temperature)
            groups: list[list[TrainingSample]] = []
            rewards = []
            for k, inst in enumerate(insts):
                group = []
                for j in range(args.group):
                    p, c = prompts[k * args.group + j], outs[k * args.group + j]
                    r = study_reward(inst, sampler.text(c))
                    rewards.append(r)
                    group.append(
                        TrainingSample(
                            sample_id=f"{inst.instance_id}/{j}",
                            group_id=inst.instance_id,
                            run_id="study",
                            prompt_ids=p,
                            completion_ids=c,
                            logprobs=sampler.logprobs(p, c),
                            loss_mask=[1] * len(c),
                            reward=r,
                        )
                    )
                groups.append(group)
            episodes += len(prompts)
            t_gen += time.perf_counter() - t
            t = time.perf_counter()
            stats = None if args.no_update else worker.step(groups)
            t_train += time.perf_counter() - t
            mean = sum(rewards) / len(rewards)
            extra = (
                f" loss {stats.loss:+.4f} zero-adv groups {stats.zero_advantage_groups}"
                if stats
                else ""
            )
            print(f"  step {step:3d} train reward {mean:.3f}{extra}", flush=True)
            if step % args.eval_every == 0 or step == args.steps:
                record(step, mean)
        total = time.perf_counter() - t0
        print(
            f"episodes {episodes}; seconds: warm start {t_sft:.1f}, rollouts {t_gen:.1f}, "
            f"updates {t_train:.1f}, evaluation {t_eval:.1f}, total {total:.1f}"
        )
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "args": {k: str(v) for k, v in vars(args).items()},
                        "curve": curve,
                        "seconds": {
                            "sft": t_sft,
                            "rollouts": t_gen,
                            "updates": t_train,
                            "eval": t_eval,
                            "total": total,
                        },
                    },
                    indent=1,
                )
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
