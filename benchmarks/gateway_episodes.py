"""``bench_gateway.py --mode episodes``: what real inference costs per episode.

Agent episodes of ``EPISODE_TURNS`` model calls each (the same requests on
both sides, the conversation growing one step per turn) through a gateway
process serving the ``transformers`` backend with a real small model, and
through one serving the scripted backend. The servers are started by
``bench_gateway.start`` (passed in), once, before any timing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from ab import interleave, order_text, ratios, spread
from megaflow.model.client import HttpModelClient
from report import report

Start = Callable[[str, str], tuple[subprocess.Popen[bytes], str]]

EPISODE_TURNS, EPISODE_TOKENS = 3, 32
TASK = [
    {"role": "system", "content": "You fix settings files. Answer with one shell command."},
    {"role": "user", "content": "settings.json sets workers to 2; it must be 4."},
]
STEP = [
    {"role": "assistant", "content": "cat settings.json"},
    {"role": "user", "content": '{"name": "megaflow", "workers": 2, "debug": false}'},
]


async def episodes(url: str, n: int, conc: int) -> dict[str, float]:
    """``n`` episodes, ``conc`` at a time: each ``EPISODE_TURNS`` calls whose
    conversation grows by one step per turn (the same requests on every side)."""
    gate, tokens, lat = asyncio.Semaphore(conc), [0], []
    async with HttpModelClient(url, timeout_s=600) as h:

        async def one(i: int) -> None:
            async with gate:
                t0 = time.perf_counter()
                for turn in range(EPISODE_TURNS):
                    c = await h.chat(TASK + STEP * turn, trajectory_id=f"e{i}")
                    tokens[0] += c.completion_tokens
                lat.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        wall = time.perf_counter() - t0
    return {"rate": n / wall, "tokens": tokens[0] / n, "p50": statistics.median(lat)}


def episodes_mode(args: argparse.Namespace, start: Start) -> None:
    model = Path(args.model)
    if not (model / "config.json").is_file():
        raise SystemExit(f"--model: {model} holds no model (config.json); run `make run` first")
    n = args.episodes or (4 if args.quick else 16)
    procs: list[subprocess.Popen[bytes]] = []
    urls: dict[str, str] = {}
    try:  # both servers started once, before any timing
        for kind, up in (("transformers", str(model.resolve())), ("gateway", "")):
            proc, urls[kind] = start(kind, up)
            procs.append(proc)
        sides = [lambda: asyncio.run(episodes(urls["transformers"], n, args.concurrency)),
                 lambda: asyncio.run(episodes(urls["gateway"], n, args.concurrency))]  # fmt: skip
        lm, scripted = interleave(args.reps, sides, warmup=1)
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)
    named = ((f"transformers ({model.name})", lm), ("scripted", scripted))
    rows = [[name, spread([r["rate"] for r in runs], "{:.2f}".format),
             spread([r["tokens"] for r in runs], "{:.0f}".format),
             spread([r["p50"] * 1000 for r in runs], "{:.0f} ms".format)]
            for name, runs in named]  # fmt: skip
    cost = spread(ratios([r["rate"] for r in scripted], [r["rate"] for r in lm]), "{:.1f}x".format)
    notes = (
        f"{n} episodes of {EPISODE_TURNS} calls per side and repetition, {args.concurrency} in "
        f"flight, through a gateway process each (HttpModelClient); the transformers backend "
        f"generates up to {EPISODE_TOKENS} new tokens a call (greedy, max_concurrency 1: one "
        "generation at a time, as configured by default); the scripted one returns a canned "
        f"tool call. Sides A B ({order_text(2)}) after one untimed round each; median (min-max) "
        f"of {args.reps} repetitions. Scripted / transformers episodes per second, pair by "
        f"pair: {cost}: what real inference costs on this machine's CPU."
    )
    report("gateway_episodes", "Model gateway: episodes per second, real model against scripted",
           ["backend", "episodes/s", "completion tokens / episode", "episode P50"], rows, notes,
           args=args, reps=args.reps)  # fmt: skip
