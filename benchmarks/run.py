"""Benchmarks: every figure is measured side by side with its baseline in the same run.

    python -m benchmarks.run            # full suite, rewrites benchmarks/RESULTS.md (+ .json)
    python -m benchmarks.run --quick    # small sizes, for CI: checks that the suite runs

Data are generated deterministically under benchmarks/out/ (not committed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from importlib.metadata import version
from pathlib import Path

from benchmarks.common import ROOT, Row, compile_bytecode, compile_reference
from benchmarks.solving import (
    memory,
    overhead,
    pathgame_solver,
    pipeline_rate,
    scaling,
    stage_rates,
    startup,
    strgame_solver,
)

# --- the groups of other modules, imported when they run (some need dev dependencies) ---------


def _big_inputs(data: Path, ref: dict[str, Path] | None, quick: bool) -> list[Row]:
    from benchmarks.big import big_inputs

    return big_inputs(data, ref, quick)


def _chunk_costs(data: Path, quick: bool) -> list[Row]:
    from benchmarks.stages import chunk_costs

    return chunk_costs(data, quick)


def _soak(data: Path, quick: bool) -> list[Row]:
    from benchmarks.soak import soak

    return soak(data, quick)


def _http_service(data: Path, quick: bool) -> list[Row]:
    from benchmarks.http import http_service

    return http_service(data, quick)


def _grading(data: Path, ref: dict[str, Path] | None, quick: bool) -> list[Row]:
    from benchmarks.grading import grading

    return grading(data, ref, quick)


def _judging(data: Path, quick: bool) -> list[Row]:
    from benchmarks.judging import judging

    return judging(data, quick)


def _transports(data: Path, quick: bool) -> list[Row]:
    from benchmarks.transports import transports

    return transports(data, quick)


def _packages(data: Path, quick: bool) -> list[Row]:
    from benchmarks.packages import packages

    return packages(data, quick)


def _cluster(data: Path, quick: bool) -> list[Row]:
    from benchmarks.cluster import cluster

    return cluster(data, quick)


def _shards(data: Path, quick: bool) -> list[Row]:
    from benchmarks.shards import shards

    return shards(data, quick)


def suites(
    data: Path, ref: dict[str, Path] | None, quick: bool
) -> dict[str, Callable[[], list[Row]]]:
    """Every group, by the name `--only` takes, in the order they run."""
    return {
        "strgame_solver": lambda: strgame_solver(data, ref, quick),
        "pathgame_solver": lambda: pathgame_solver(data, ref, quick),
        "pipeline_rate": lambda: pipeline_rate(data, ref, quick),
        "overhead": lambda: overhead(data, quick),
        "memory": lambda: memory(data, quick),
        "startup": lambda: startup(data, quick),
        "stage_rates": lambda: stage_rates(data, quick),
        "scaling": lambda: scaling(data, ref, quick),
        "big_inputs": lambda: _big_inputs(data, ref, quick),
        "chunk_costs": lambda: _chunk_costs(data, quick),
        "soak": lambda: _soak(data, quick),
        "http_service": lambda: _http_service(data, quick),
        "grading": lambda: _grading(data, ref, quick),
        "judging": lambda: _judging(data, quick),
        "packages": lambda: _packages(data, quick),
        "transports": lambda: _transports(data, quick),
        "cluster": lambda: _cluster(data, quick),
        "shards": lambda: _shards(data, quick),
    }


# --- report ------------------------------------------------------------------------------------


def machine() -> dict[str, str]:
    """What the figures were measured on."""

    def command_version(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.split(
                "\n"
            )[0]
        except OSError:
            return "not found"

    from pipeline.games import strgame

    return {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cpus": str(os.cpu_count()),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "celery": version("celery"),
        "redis-py": version("redis"),
        "redis-server": command_version("redis-server", "--version"),
        "g++": command_version("g++", "--version"),
        "strgame kernel": "C" if hasattr(strgame, "_trie") else "pure Python",
        "bytecode": "compiled before the run, as an installed package has it",
    }


def markdown(info: dict[str, str], rows: list[Row], quick: bool) -> str:
    """The results table."""
    lines = ["# Benchmark results", "", f"Mode: {'quick' if quick else 'full'}. "
             "Times are wall-clock seconds, best of several runs; a ratio is ours / baseline "
             "(lower is better) unless the unit says otherwise. Baselines were run in the same "
             "session, side by side.", ""]  # fmt: skip
    lines += [f"- {k}: {v}" for k, v in info.items()]
    lines += ["", "| group | figure | ours | baseline | ratio | target | met | note |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in rows:
        base = "" if r.baseline is None else f"{r.baseline:.4g} {r.unit}"
        ratio = "" if r.ratio is None else f"{r.ratio:.3g}"
        met = {True: "yes", False: "NO", None: ""}[r.met]
        lines.append(f"| {r.group} | {r.name} | {r.ours:.4g} {r.unit} | {base} | {ratio} |"
                     f" {r.target} | {met} | {r.note} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI)")
    parser.add_argument("--only", nargs="*", help="run only these groups (function names)")
    args = parser.parse_args()
    out = ROOT / "benchmarks" / "out"
    data = out / ("quick" if args.quick else "full")
    data.mkdir(parents=True, exist_ok=True)
    ref = compile_reference(out)
    compile_bytecode()
    if ref is None:
        print("note: no g++ or ../shared/reference: figures against the reference are skipped")
    rows: list[Row] = []
    for name, suite in suites(data, ref, args.quick).items():
        if args.only and name not in args.only:
            continue
        print(f"running {name} ...", flush=True)
        rows += suite()
    info = machine()
    table = markdown(info, rows, args.quick)
    print(table)
    (out / "results.json").write_text(
        json.dumps({"machine": info, "rows": [asdict(r) for r in rows]}, indent=1)
    )
    if not args.quick and not args.only:
        (ROOT / "benchmarks" / "RESULTS.md").write_text(table)
        (ROOT / "benchmarks" / "results.json").write_text(
            json.dumps({"machine": info, "rows": [asdict(r) for r in rows]}, indent=1) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
