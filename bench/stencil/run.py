"""Post-tiling fusion benchmarks: peers side by side, in one run, on this machine.

    PYTHONPATH=. .venv/bin/python -m bench.stencil.run                # all apps, 2 threads
    PYTHONPATH=. .venv/bin/python -m bench.stencil.run --apps unsharp,harris --rounds 11
    PYTHONPATH=. .venv/bin/python -m bench.stencil.run --small        # quick check of the harness

Peers, all on the same inputs and threads (numpy's BLAS, mlfuse's OpenMP team and
Halide's thread pool are limited to --threads):
  numpy              the definition in apps.py run op by op with numpy
  mlfuse             mlfuse's default CPU pipeline (fusion planner + stitching; no post-tiling fusion)
  mlfuse-taf         cpu_stencil_pipeline("tile-after-fuse"): fuse where legal, then tile each nest
  mlfuse-ptf         cpu_stencil_pipeline("post-tile"): tile live-outs, post-tiling fusion, storage reduction
  halide-<sched>     Halide (PyPI `halide`) auto-scheduled by Mullapudi2016, Li2018 and Adams2019

Halide schedules are first tried in a child process with a memory limit (some
auto-schedulers exhaust memory or crash on some pipelines); failures are reported.
Timing: three blocks per peer, interleaved (load changes on a shared machine hit
all peers alike, and the thread pools of the runtimes do not fight call by call),
each block a warm-up call and rounds/3 timed calls; the tables show medians in ms
(and the best call, less sensitive to other processes on a shared machine) and ratios (peer time / mlfuse-ptf time: > 1 means post-tiling fusion
is faster). Every peer's output is checked against numpy first. Results go to
stdout (markdown) and, with --json, to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--apps", default="blur,unsharp,harris,convnet,2mm,gemver")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--small", action="store_true", help="small sizes (a harness check, not a benchmark)")
    ap.add_argument("--no-halide", action="store_true")
    ap.add_argument("--json", default="")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    # thread counts must be fixed before numpy / Halide load their runtimes
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "HL_NUM_THREADS"):
        os.environ[var] = str(args.threads)

    import numpy  # noqa: F401 - loaded first, under the thread limits above

    from mlfuse.backend import cpu

    cpu.set_num_threads(args.threads)
    halide_version = None if args.no_halide else load_halide()
    results = []
    for name in args.apps.split(","):
        results.append(bench_app(name, args, halide_version))
        print_app(results[-1])
    print_summary(results, args, halide_version)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "rounds": args.rounds, "halide": halide_version, "results": results}, f, indent=1)
    return 0


def load_halide() -> str | None:
    """Halide's version, or None (with the reason on stderr) when it cannot be loaded."""
    try:
        from importlib.metadata import version

        from bench.stencil import halide_apps

        halide_apps.halide()
        return version("halide")
    except Exception as e:  # noqa: BLE001 - Halide is optional
        print(f"Halide unavailable: {e}", file=sys.stderr)
        return None


Peers = dict[str, Callable[[], object]]


def bench_app(name: str, args: argparse.Namespace, halide_version: str | None) -> dict:
    """Compile, check and time every peer on one app; returns its row of results."""
    import numpy as np

    from bench.stencil.apps import APPS

    app = APPS[name]
    inputs = app.inputs(seed=1, small=args.small)
    want = app.numpy(*inputs)[0]
    peers: Peers = {"numpy": lambda a=app, i=inputs: a.numpy(*i)[0]}
    notes: dict[str, str] = {}
    add_mlfuse_peers(app, inputs, args.small, peers, notes)
    if halide_version:
        add_halide_peers(name, inputs, want, args.threads, peers, notes)
    errors = check_peers(name, want, peers, notes)
    load = os.getloadavg()[0]
    times = time_peers(peers, args.rounds)
    medians = {label: float(np.median(ts)) * 1e3 for label, ts in times.items()}
    best = {label: float(np.min(ts)) * 1e3 for label, ts in times.items()}
    return {"app": name, "description": app.description, "median_ms": medians, "best_ms": best, "errors": errors,
            "notes": notes, "load_before": load, "load_after": os.getloadavg()[0]}


def add_mlfuse_peers(app, inputs: list, small: bool, peers: Peers, notes: dict[str, str]) -> None:
    """mlfuse's default pipeline and its two stencil pipelines, compiled (the compile time noted)."""
    from mlfuse import compile as mlfuse_compile
    from mlfuse import pipelines
    from mlfuse.api import aligned_empty

    module = app.module(small=small)
    for label, passes in (
        ("mlfuse", None),
        ("mlfuse-taf", pipelines.cpu_stencil_pipeline("tile-after-fuse", app.tile_sizes)),
        ("mlfuse-ptf", pipelines.cpu_stencil_pipeline("post-tile", app.tile_sizes)),
    ):
        t0 = time.perf_counter()
        fn = mlfuse_compile(module, passes=passes)
        notes[label] = f"compiled in {time.perf_counter() - t0:.1f} s"
        out = [aligned_empty(s.shape, s.dtype) for s in fn.outputs]
        peers[label] = lambda f=fn, i=inputs, o=out: f(*i, out=o)[0]


def add_halide_peers(name: str, inputs: list, want, threads: int, peers: Peers, notes: dict[str, str]) -> None:
    """Halide under each auto-scheduler that schedules and compiles the app (failures noted)."""
    from bench.stencil import halide_apps

    for sched in halide_apps.AUTOSCHEDULERS:
        shapes = [a.shape for a in inputs]
        status = halide_apps.probe(name, shapes, want.shape, sched, threads)
        if status != "ok":
            notes[f"halide-{sched}"] = f"failed: {status[:120]}"
            continue
        t0 = time.perf_counter()
        try:
            run = halide_apps.compile_app(name, shapes, want.shape, sched, threads)
            run(*inputs)
        except Exception as e:  # noqa: BLE001 - report and go on
            notes[f"halide-{sched}"] = f"failed: {str(e).strip().splitlines()[0][:120]}"
            continue
        notes[f"halide-{sched}"] = f"scheduled and compiled in {time.perf_counter() - t0:.1f} s"
        peers[f"halide-{sched}"] = lambda r=run, i=inputs: r(*i)


def check_peers(name: str, want, peers: Peers, notes: dict[str, str]) -> dict[str, float]:
    """Every peer's max relative error against numpy; a peer over the app's tolerance is
    noted as wrong and dropped from `peers` (not timed)."""
    import numpy as np

    errors = {}
    for label, call in list(peers.items()):
        got = np.asarray(call())
        err = float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))))
        errors[label] = err
        if not np.isfinite(err) or err > TOLERANCE.get(name, 1e-3):
            notes[label] = f"WRONG (error {err:.2g}), not timed"
            del peers[label]
    return errors


def time_peers(peers: Peers, rounds: int) -> dict[str, list[float]]:
    """Seconds of each timed call of every peer."""
    times: dict[str, list[float]] = {label: [] for label in peers}
    # Blocks of calls per peer, the blocks interleaved: load changes hit every peer, and
    # thread pools (libgomp, Halide's, BLAS) do not fight over the cores call by call.
    blocks = 3
    per_block = max(1, -(-rounds // blocks))
    for _ in range(blocks):
        for label, call in peers.items():
            call()  # warm this runtime's threads up again
            for _ in range(per_block):
                t0 = time.perf_counter()
                call()
                times[label].append(time.perf_counter() - t0)
    return times


# Unsharp mask selects the input where |input - blur| < 0.001, else the sharpened value,
# which differs by weight * |input - blur| ~ 0.003: where a peer rounds the blur
# differently (Halide contracts multiply-adds), the select can flip at the threshold.
TOLERANCE = {"unsharp": 4e-3}


def print_app(r: dict) -> None:
    base = r["median_ms"].get("mlfuse-ptf")
    print(f"\n### {r['app']}: {r['description']}  (load average {r['load_before']:.1f} -> {r['load_after']:.1f})\n")
    print("| peer | median ms | peer / mlfuse-ptf | best ms | max rel. error | note |")
    print("|---|---:|---:|---:|---:|---|")
    for label in sorted(set(r["median_ms"]) | set(r["notes"]), key=_order):
        ms = r["median_ms"].get(label)
        ratio = f"{ms / base:.2f}" if ms and base else ""
        best = f"{r['best_ms'][label]:.2f}" if label in r["best_ms"] else ""
        err = r["errors"].get(label)
        print(f"| {label} | {ms:.2f} |" if ms else f"| {label} | - |", end="")
        print(f" {ratio} | {best} | {err:.1e} | {r['notes'].get(label, '')} |" if err is not None
              else f" | | | {r['notes'].get(label, '')} |")
    sys.stdout.flush()


def _order(label: str) -> tuple:
    order = ["numpy", "mlfuse", "mlfuse-taf", "mlfuse-ptf"]
    return (order.index(label), "") if label in order else (len(order), label)


def print_summary(results: list[dict], args, halide_version: str | None) -> None:
    print(f"\n## Summary: {args.threads} threads, median of {args.rounds} calls in 3 interleaved blocks, "
          f"Halide {halide_version or 'not available'}\n")
    labels = sorted({k for r in results for k in r["median_ms"]}, key=_order)
    print("| app | " + " | ".join(labels) + " |")
    print("|---|" + "---:|" * len(labels))
    for r in results:
        base = r["median_ms"].get("mlfuse-ptf")
        cells = []
        for label in labels:
            ms = r["median_ms"].get(label)
            cells.append("-" if ms is None else (f"{ms:.1f} ({ms / base:.2f}x)" if base else f"{ms:.1f}"))
        print(f"| {r['app']} | " + " | ".join(cells) + " |")
    print("\n(ms; in parentheses: time / mlfuse-ptf time, > 1 means post-tiling fusion is faster)")


if __name__ == "__main__":
    sys.exit(main())
