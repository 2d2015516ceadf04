"""Model gateway overhead: MegaFlow's recording gateway against a bare FastAPI server.

Agents call ``/v1/chat/completions`` with an agent-sized conversation (10
messages) and get a canned tool call back, ``--concurrency`` calls in flight:

- in-process: ``InProcessModelClient`` -> ModelService (route + record) ->
  scripted backend; no HTTP at all;
- gateway: ``HttpModelClient`` -> MegaFlow gateway (scripted backend), in its
  own process;
- peer: the same client -> a bare FastAPI + uvicorn endpoint returning the
  same completion, written as a user would, no routing or recording;
- relay: ``HttpModelClient`` -> MegaFlow gateway (``openai`` backend) -> the
  bare endpoint: what fronting a vLLM-like server adds per call.

Figures: calls per second, latency P50 and P99; gateway/peer throughput ratio.

``--mode episodes``: what real inference costs. Agent episodes of
``EPISODE_TURNS`` model calls each (the same requests on both sides, the
conversation growing turn by turn) through a gateway process serving the
``transformers`` backend with a real small model (``--model``, default the
quickstart policy ``make run`` builds at ``.megaflow/models/settings-fix``), and
through one serving the scripted backend; episodes per second, completion
tokens per episode and episode P50, the sides alternating after one untimed
round each (``ab.interleave``); table ``gateway_episodes``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from fastapi import FastAPI, Request

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab import ratios, spread
from gateway_episodes import EPISODE_TOKENS, episodes_mode
from megaflow.core.errors import MegaFlowError
from megaflow.model.client import HttpModelClient, InProcessModelClient
from megaflow.model.config import OpenAIModelConfig
from megaflow.model.routing import Router
from megaflow.model.scripted import ScriptedBackend, tool_call
from megaflow.model.service import ModelService
from report import LOAD_AT_START, add_rule_args, begin, report

ANSWER = tool_call(
    "bash", {"command": "cd /workspace && python -m pytest -x -q tests/" + "x" * 120}
)
MESSAGES = [{"role": "system", "content": "You fix bugs. " * 40}] + [
    {"role": "user" if i % 2 else "assistant", "content": f"step {i}: " + "output line\n" * 40}
    for i in range(9)
]


def _bare_app() -> FastAPI:
    app = FastAPI()
    body = {
        "id": "chatcmpl-bare",
        "object": "chat.completion",
        "created": 0,
        "model": "bare",
        "choices": [{"index": 0, "message": ANSWER, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }

    @app.get("/v1/models")
    async def models() -> dict[str, object]:
        return {"object": "list", "data": [{"id": "bare", "object": "model"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, object]:
        await request.json()
        return body

    return app


def serve(kind: str, port: int, upstream: str) -> None:
    import uvicorn

    from megaflow.model.factory import make_model_service
    from megaflow.model.gateway import create_app

    if kind == "bare":
        app = _bare_app()
    elif kind == "gateway":
        app = create_app(ModelService("scripted", Router([ScriptedBackend([ANSWER])])))
    elif kind == "transformers":
        from megaflow.model.config import TransformersModelConfig

        lm = TransformersModelConfig(model=upstream, max_new_tokens=EPISODE_TOKENS, name="lm")
        app = create_app(make_model_service(lm))
    else:
        cfg = OpenAIModelConfig(base_url=upstream, model="bare", name="relay", max_concurrency=256)
        service = make_model_service(cfg)
        app = create_app(service)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(kind: str, upstream: str = "") -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind, "--port", str(port), "--upstream", upstream],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{kind} server did not start")


async def drive(
    call: Callable[[int], Awaitable[object]], calls: int, conc: int
) -> dict[str, float]:
    latencies: list[float] = []
    next_id = 0
    errors = 0

    async def worker() -> None:
        nonlocal next_id, errors
        while next_id < calls:
            i = next_id
            next_id += 1
            t0 = time.perf_counter()
            try:
                await call(i)
            except MegaFlowError:
                errors += 1
                continue
            latencies.append(time.perf_counter() - t0)

    for i in range(min(50, calls)):  # warm up connections and code paths
        await call(-i - 1)
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    wall = time.perf_counter() - t0
    latencies.sort() if latencies else latencies.append(float("nan"))
    return {
        "rate": len(latencies) / wall,
        "errors": errors,
        "p50": latencies[len(latencies) // 2],
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
    }


async def measure(calls: int, conc: int, reps: int) -> dict[str, list[dict[str, float]]]:
    """Each mode's figures per repetition; the HTTP modes interleaved (gateway, bare,
    relay, gateway, ...) on servers started once, before any timing."""
    out: dict[str, list[dict[str, float]]] = {}
    service = ModelService("scripted", Router([ScriptedBackend([ANSWER])], max_concurrency=conc))
    async with InProcessModelClient(service) as c:

        async def inproc(i: int) -> object:
            r = await c.chat(MESSAGES, trajectory_id=f"t{i % 1000}")
            service.recorder.release(f"t{i % 1000}") if i % 1000 == 999 else None
            return r

        name = "in-process (route + record)"
        out[name] = [await drive(inproc, calls, conc) for _ in range(reps)]

    procs: list[subprocess.Popen[bytes]] = []
    try:
        bare, bare_url = start("bare")
        procs.append(bare)
        gw, gw_url = start("gateway")
        procs.append(gw)
        relay, relay_url = start("relay", bare_url)
        procs.append(relay)
        modes = (
            ("MegaFlow gateway (scripted)", gw_url),
            ("peer: bare FastAPI endpoint", bare_url),
            ("relay: gateway -> bare endpoint", relay_url),
        )
        for _ in range(reps):
            for name, url in modes:
                async with HttpModelClient(url) as h:

                    async def over_http(i: int, h: HttpModelClient = h) -> object:
                        return await h.chat(MESSAGES, trajectory_id=f"t{i % 1000}")

                    out.setdefault(name, []).append(await drive(over_http, calls, conc))
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a short run (500 calls each)")
    ap.add_argument("--calls", type=int, default=None, help="calls per mode (default 2,000)")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions (>= 3)")
    ap.add_argument("--mode", choices=["all", "calls", "episodes"], default="all",
                    help="calls: the gateway's calls/s; episodes: agent episodes through a real "
                    "small model; all (make bench): both tables")  # fmt: skip
    ap.add_argument("--model", default=".megaflow/models/settings-fix", help="episodes: model dir")
    ap.add_argument("--episodes", type=int, default=None, help="episodes (default 16; quick 4)")
    add_rule_args(ap)
    ap.add_argument("--serve", choices=["bare", "gateway", "relay", "transformers"],
                    help=argparse.SUPPRESS)  # fmt: skip
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--upstream", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.upstream)
        return
    if args.mode != "calls" and not Path(args.model).is_dir():
        raise SystemExit(
            f"error: no model at {args.model} for the episodes table: `make run` builds it "
            "(`make bench` does first); or pass --model DIR, or --mode calls"
        )
    if args.mode == "episodes":
        begin(args)
        args.reps = max(3, args.reps)
        episodes_mode(args, start)
        return
    calls = args.calls or (500 if args.quick else 2000)
    reps = max(3, args.reps)
    results = asyncio.run(measure(calls, args.concurrency, reps))

    def med(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    msec = "{:.2f} ms".format
    rows = [
        [name, spread([r["rate"] for r in runs], "{:.0f}".format),
         msec(med(runs, "p50") * 1000), msec(med(runs, "p99") * 1000),
         f"{sum(r['errors'] for r in runs):.0f}"]
        for name, runs in results.items()
    ]  # fmt: skip
    rates = {name: [r["rate"] for r in runs] for name, runs in results.items()}
    pair = ratios(rates["MegaFlow gateway (scripted)"], rates["peer: bare FastAPI endpoint"])
    ratio = spread(pair, "{:.2f}x".format)
    notes = (
        f"{calls} calls per mode and repetition, {args.concurrency} in flight, 10-message "
        f"requests; calls/s is the median (min-max) of {reps} repetitions, P50 and P99 the "
        "medians, errors the sum. The HTTP modes are interleaved (gateway, bare, relay, "
        "gateway, ...) on servers started once before any timing, with the same client, "
        f"warm-up and request. Gateway throughput / bare FastAPI peer, pair by pair: {ratio}. "
        "Servers run in their own processes; the client runs in this one."
    )
    report(
        "gateway",
        "Model gateway: calls per second and latency",
        ["mode", "calls/s", "P50", "P99", "errors"],
        rows,
        notes,
        load_before=LOAD_AT_START,
    )
    print(json.dumps({"ratio_gateway_over_peer": round(statistics.median(pair), 3)}))
    if args.mode == "all":  # the second table: episodes through a real model
        args.reps = max(3, args.reps)
        episodes_mode(args, start)


if __name__ == "__main__":
    main()
