"""Weight sync: from "the trainer has new weights" to "every replica serves them".

One push of the policy's full state dict, timed around ``WeightSync.push``,
which returns only once every replica reports the new version, for each sync
(``train.weight_sync``):

- ``in_process``: the replicas are ``transformers`` backends in this process;
  the tensors are copied into each live model.
- ``disk (local)``: a safetensors checkpoint under a local directory, which
  every engine loads by path.
- ``disk (S3)``: the same checkpoint uploaded to an S3 artifact store (a real
  ``moto_server`` on loopback); every engine downloads it, checks each object's
  SHA-256, and loads it.
- ``broadcast``: the bench's rank 0 and every engine in one gloo group; each
  tensor is broadcast over loopback and staged by each engine before the swap.

For the last three the replicas are ``megaflow serve model`` engines, each its
own process, driven the way ``megaflow train`` drives them: through the
``openai`` client (``weight_sync: megaflow``) and the gateway's weight routes.
Two model sizes: the quickstart's policy (``PolicyConfig()``) and a ~100M
parameter Llama built here from a config (random weights); 1 and 2 replicas.
Each sync pushes once untimed (the warm-up: the broadcast group forms there,
the disk sync builds its model shell), then ``--reps`` times, the order of the
syncs reversed every other repetition. Throughput is the model's bytes over
the median time (each replica receives that many).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab import spread
from report import report

TOKEN = "bench-weight-sync-token-0123456789abcdef"
CLI = [sys.executable, "-c", "from megaflow.cli.main import main; main()"]
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
SIZES = {  # name -> PolicyConfig fields
    "quickstart": {},
    "~100M": {"hidden": 768, "layers": 12, "heads": 12, "intermediate": 2560},
}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build(size: str, out: Path) -> Path:
    from megaflow.train.quickstart_model import PolicyConfig, build_policy

    words = "fix the setting in the config file then run the tests and submit the patch"
    texts = [f"{words} {i} {words[::-1]}" for i in range(200)]
    return build_policy(out, texts, PolicyConfig(**SIZES[size]))  # type: ignore[arg-type]


@contextmanager
def moto(workdir: Path) -> Iterator[str]:
    beside = Path(sys.executable).parent / "moto_server"  # the venv's, from moto[server]
    binary = str(beside) if beside.exists() else shutil.which("moto_server") or "moto_server"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (workdir / "moto.log").open("wb")
    proc = subprocess.Popen([binary, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/moto-api/", timeout=2).close()
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


@asynccontextmanager
async def engines(model: Path, n: int, workdir: Path, env: dict[str, str]) -> Any:
    """``n`` ``megaflow serve model`` processes on ``model``; their OpenAI base URLs."""
    from megaflow.rpc.config import ClusterConfig
    from megaflow.rpc.health import check_health

    procs, cfgs = [], []
    try:
        for i in range(n):
            raw = {
                "auth": {"token": TOKEN},
                "model": {
                    "port": free_port(), "http_port": free_port(),
                    "config": {"type": "transformers", "model": str(model), "max_new_tokens": 4},
                },
            }  # fmt: skip
            where = workdir / f"engine-{i}"
            where.mkdir(parents=True, exist_ok=True)
            (where / "cluster.yaml").write_text(yaml.safe_dump(raw))
            log = (where / "engine.log").open("wb")
            procs.append(
                subprocess.Popen(
                    [*CLI, "serve", "model", "-c", "cluster.yaml"],
                    cwd=where,
                    stdout=log,
                    stderr=log,
                    env={**os.environ, **env},
                )
            )
            cfgs.append(ClusterConfig.model_validate(raw))
        for cfg in cfgs:
            await check_health(cfg, "model", TOKEN, timeout=600)
        yield [c.model.base_url() for c in cfgs]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()


async def measure(
    model: Path, replicas: int, reps: int, workdir: Path, s3_url: str
) -> dict[str, list[float]]:
    """Seconds per push of each sync, ``reps`` times after one warm-up each."""
    from transformers import AutoModelForCausalLM

    from megaflow.model.control import LocalModelControl
    from megaflow.model.openai_compat import OpenAIBackend
    from megaflow.model.routing import Router
    from megaflow.model.transformers_lm import TransformersBackend
    from megaflow.storage.s3_artifacts import S3ArtifactStore
    from megaflow.train.weight_sync.config import (
        BroadcastSyncConfig,
        DiskSyncConfig,
        InProcessSyncConfig,
    )

    weights = dict(AutoModelForCausalLM.from_pretrained(model, local_files_only=True).state_dict())
    local = [TransformersBackend(str(model)) for _ in range(replicas)]
    for b in local:
        await b.start()
    store = S3ArtifactStore(
        f"weights-{replicas}-{time.monotonic_ns()}", endpoint_url=s3_url, region="us-east-1",
        access_key_id="testing", secret_access_key="testing", create_bucket=True,
    )  # fmt: skip
    env = {**S3_ENV, "AWS_ENDPOINT_URL": s3_url}
    async with store, engines(model, replicas, workdir / f"r{replicas}", env) as urls:
        clients = [OpenAIBackend(u, "default", api_key=TOKEN, weight_sync="megaflow") for u in urls]
        remote = {"engines": LocalModelControl(Router(list(clients), retries=0))}
        here = {"in-process": LocalModelControl(Router(list(local), retries=0))}
        kw: dict[str, Any] = {"base_model": model, "run_id": f"bench-{replicas}"}
        syncs = {
            "in_process": InProcessSyncConfig().build(here, **kw),
            "disk (local)": DiskSyncConfig(root=str(workdir / "w"), keep=1).build(remote, **kw),
            "disk (S3)": DiskSyncConfig(
                root=str(workdir / "staging"), store="artifacts", keep=1
            ).build(remote, artifacts=store, **kw),
            "broadcast": BroadcastSyncConfig(timeout_s=600).build(remote, **kw),
        }
        version = {"in_process": 0, "remote": 0}
        times: dict[str, list[float]] = {name: [] for name in syncs}

        async def push(name: str) -> float:
            side = "in_process" if name == "in_process" else "remote"
            version[side] += 1
            t0 = time.perf_counter()
            result = await syncs[name].push(weights, version[side])
            seconds = time.perf_counter() - t0
            assert sorted(result.served.values()) == [version[side]] * replicas, result
            return seconds

        order = list(syncs)
        for name in order:
            await push(name)  # warm-up
        for rep in range(reps):
            for name in order if rep % 2 == 0 else order[::-1]:
                times[name].append(await push(name))
        for sync in syncs.values():
            await sync.close()
        for c in clients:
            await c.stop()
    for b in local:
        await b.stop()
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="the quickstart size, 1 repetition")
    ap.add_argument("--reps", type=int, default=None)
    args = ap.parse_args()
    reps = 1 if args.quick else (args.reps or 3)
    sizes = ["quickstart"] if args.quick else list(SIZES)
    import torch

    torch.set_num_threads(1)  # the engines and the bench share the cores
    rows = []
    with tempfile.TemporaryDirectory(prefix="mf-bench-wsync-") as tmp, moto(Path(tmp)) as s3:
        for size in sizes:
            model = build(size, Path(tmp) / size)
            from transformers import AutoModelForCausalLM

            shell = AutoModelForCausalLM.from_pretrained(model, local_files_only=True)
            params = sum(p.numel() for p in shell.parameters())
            nbytes = sum(p.numel() * p.element_size() for p in shell.parameters())
            del shell
            for replicas in (1, 2):
                times = asyncio.run(measure(model, replicas, reps, Path(tmp) / size, s3))
                for name, ts in times.items():
                    mid = sorted(ts)[len(ts) // 2]
                    rows.append([
                        size, f"{params / 1e6:.1f}M ({nbytes / 1e6:.0f} MB)", str(replicas),
                        name, spread(ts, "{:.3f}".format), f"{nbytes / mid / 1e6:.0f}",
                    ])  # fmt: skip
    notes = " ".join([
        f"{reps} timed push(es) per sync after one warm-up, order reversed every other",
        "repetition; seconds are median (min-max) from the start of WeightSync.push to every",
        "replica reporting the new version; MB/s is the model's fp32 bytes over the median",
        "(each replica receives that many). in_process: replicas in the bench's process;",
        "disk and broadcast: each replica a megaflow serve model process on this machine,",
        "reached through the openai client and the gateway's weight routes; S3 is a",
        "moto_server on loopback; broadcast is gloo over loopback, its group formed in the",
        "warm-up. CPU only, torch at 1 thread in the bench. Anchors, not measured here",
        "(GPUs, NCCL): checkpoint-engine updates a 0.6B model in 0.18 s; verl's delta sync",
        "takes 2.2 s for 8B.",
    ])  # fmt: skip
    report(
        "weight_sync",
        "Weight sync: new weights in the trainer to every replica serving them",
        ["model", "parameters", "replicas", "sync", "seconds", "MB/s"],
        rows,
        notes,
    )


if __name__ == "__main__":
    main()
