"""``megaflow bench``: run the benchmarks in ``benchmarks/`` and gather their tables."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import typer

from megaflow.cli.common import console, fail


def _gather(bench_dir: Path) -> Path:
    results = sorted((bench_dir / "results").glob("*.md"))
    out = bench_dir / "RESULTS.md"
    parts = [
        "# Benchmark results",
        "",
        "Written by `make bench` (`megaflow bench`). Every figure was measured on the machine",
        "and date given under its table, with its peer measured in the same run.",
        "",
    ]
    parts += [p.read_text() for p in results]
    out.write_text("\n".join(parts))
    return out


def bench(
    names: list[str] = typer.Argument(None, help="Benchmarks to run (e.g. store); all if none."),
    quick: bool = typer.Option(False, "--quick", help="Short runs, for a smoke test."),
    bench_dir: Path = typer.Option(Path("benchmarks"), help="The benchmarks directory."),
) -> None:
    """Run benchmarks (each prints a table) and write benchmarks/RESULTS.md."""
    if not bench_dir.is_dir():
        fail(f"no benchmarks directory at {bench_dir}; run from a MegaFlow checkout")
    scripts = sorted(bench_dir.glob("bench_*.py"))
    if names:
        wanted = {f"bench_{n.removeprefix('bench_').removesuffix('.py')}.py" for n in names}
        unknown = wanted - {s.name for s in scripts}
        if unknown:
            fail(
                f"unknown benchmark(s): {', '.join(sorted(unknown))}; have: "
                f"{', '.join(s.stem.removeprefix('bench_') for s in scripts)}"
            )
        scripts = [s for s in scripts if s.name in wanted]
    failed = []
    for script in scripts:
        console.rule(f"[bold]{script.stem}")
        t0 = time.monotonic()
        cmd = [sys.executable, str(script)] + (["--quick"] if quick else [])
        if subprocess.run(cmd, check=False).returncode != 0:
            failed.append(script.stem)
        console.print(f"[dim]{script.stem} took {time.monotonic() - t0:.0f} s[/]")
    out = _gather(bench_dir)
    console.print(f"results gathered in {out}")
    if failed:
        fail(f"benchmarks failed: {', '.join(failed)}", code=1)
