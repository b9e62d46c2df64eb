"""mlfuse-bench --models: whole zoo models (bench/models), mlfuse.compile of their ONNX export
against onnxruntime, torch eager and torch.compile, at 1 and 2 threads.

    mlfuse-bench --models                          # every zoo model, full inference shapes (batch 1), 1 and 2 threads
    mlfuse-bench --models bert resnet18 --threads 2 --repeat 21
    mlfuse-bench --models --quick                  # smoke run: small shapes, textcnn and mlp_mixer, 3 rounds

Each model is built once (random seeded weights, eval mode) and exported to ONNX once, in
the parent (torch's legacy exporter, the dynamo one where that fails: gpt2). Then one worker
process per thread count N (pinned to N CPUs; OMP_NUM_THREADS=N; glibc's default allocator
unless --allocator warm) runs, per model, every path in one process:

  mlfuse          y = f(*inputs): mlfuse.compile(onnx path), the allocating call (the headline)
  mlfuse out=     f(*inputs, out=outs): outputs preallocated once, 64-byte aligned
  onnxruntime     the same ONNX file; CPU provider, intra-op threads N, sequential execution
  torch eager     the torch module under torch.no_grad(), torch.set_num_threads(N)
  inductor        torch.compile(module) (default mode), inductor's caches off

Every path's outputs are compared with onnxruntime's (max |got - ort| / max |ort|; above
1e-3 is marked MISMATCH). Then the calls are interleaved round-robin, the order rotating
each round; each turn sleeps --gap-ms, times one call (the first after idle, in the JSON),
calls back to back for --warm-ms (the previous path's team, onnxruntime's spinning pool
for one, has gone quiet by then) and times the next call (steady, the table); the previous
result is alive during a timed call, as in a loop `y = f(x)`. Tables give medians.

--busy-core (at 2 or more threads): after the round robin, mlfuse's allocating call and
onnxruntime each run loops of back-to-back calls (turns rotating, --repeat each), quiet and
then with a neighbour process spinning on one of the worker's CPUs (another user's job on
a shared machine); the table gives each one's mean call busy over quiet (the issue asks
for mlfuse within 2.2x) and the busy speed ratio. A loop's mean, not one timed call: on a
busy core a team's slow calls (waiting a scheduler slice at a barrier) are rare and long.

Compile seconds, apart from the medians:
  mlfuse cold     mlfuse.compile(path) with an empty disk cache (a fresh MLFUSE_CACHE_DIR per model),
                  in a worker that has compiled a tiny conv graph first: what the first compile
                  of a process pays once (imports: onnx, scipy's HiGHS, xDSL's interpreters)
                  is reported apart ("first compile"), not in the first model's time
  mlfuse warm     mlfuse.compile(path) in a fresh process from that disk cache (imports not counted)
  ORT session     onnxruntime.InferenceSession(path)
  inductor        torch.compile's first call minus a steady call, inductor's caches off

The GEMM roofline: each model's matmul and conv FLOPs (counted on mlfuse's import of the
file: 2 x output elements x reduction length) over each path's median, against the rate
of a 1024^3 sgemm through numpy's BLAS in the same worker (OpenBLAS, N threads): how
near a GEMM-bound model runs to the machine, and how far any runtime could pass another.

Speed ratios are "mlfuse speed vs X" = X's median / mlfuse's median: above 1.0x mlfuse is faster.
Results go to bench/results/models.json and .md (quick: models-quick.*) unless --json/--md
say otherwise; the README's table is the latest full run's summary (bench/results/models-epyc-zen4.md).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlfuse.tools import mlfuse_bench as mb

QUICK_MODELS = ["textcnn", "mlp_mixer"]
PATHS = ["mlfuse", "mlfuse out=", "onnxruntime", "torch eager", "inductor"]
PEERS = ["onnxruntime", "torch eager", "inductor"]
TOLERANCE = 1e-3


# --- command line -----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    mb._import_bench()
    from bench.models import ZOO

    doc = (__doc__ or "").split("\n\n")
    p = argparse.ArgumentParser(prog="mlfuse-bench --models", description=doc[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog="\n\n".join(doc[1:]))
    p.add_argument("--models", nargs="*", choices=list(ZOO), metavar="MODEL",
                   help=f"zoo models (none named: all; --quick: {' '.join(QUICK_MODELS)}): {', '.join(ZOO)}")
    p.add_argument("--size", choices=("full", "small"), help="model size: full (224x224 images, sequences of 128; "
                   "the default) or small (32x32, 16; --quick)")
    p.add_argument("--threads", type=mb.parse_threads, default=[1, 2], help="thread counts, one worker each (default 1,2)")
    p.add_argument("--repeat", type=mb.parse_positive, help="timed rounds (default 15; --quick: 3)")
    p.add_argument("--gap-ms", type=float, default=20.0, help="idle milliseconds before each turn (default 20)")
    p.add_argument("--warm-ms", type=float, default=150.0, help="milliseconds of back-to-back calls before a turn's "
                   "steady call (default 150): longer than another runtime's team spins after its call")
    p.add_argument("--quick", action="store_true", help=f"smoke run: small sizes, {' '.join(QUICK_MODELS)}")
    p.add_argument("--peers", default=",".join(PEERS), help=f"comma-separated peers (default {','.join(PEERS)})")
    p.add_argument("--no-out", action="store_true", help="skip mlfuse's out= call")
    p.add_argument("--no-warm", action="store_true", help="skip the warm compile (a fresh process per model)")
    p.add_argument("--busy-core", action="store_true", help="at 2 or more threads, time mlfuse and onnxruntime again "
                   "with a neighbour process spinning on one of the worker's CPUs (busy / quiet)")
    p.add_argument("--allocator", choices=("warm", "default"), default="default",
                   help="glibc malloc (default: glibc's own, what users get; warm: as in mlfuse-bench)")
    p.add_argument("--json", type=Path, help="result file (default bench/results/models.json)")
    p.add_argument("--md", type=Path, help="markdown tables (default next to the JSON)")
    p.add_argument("--render", type=Path, metavar="JSON", help="only write the markdown of an earlier result file "
                   "(next to it)")
    p.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--worker-threads", type=int, help=argparse.SUPPRESS)
    p.add_argument("--onnx-dir", type=Path, help=argparse.SUPPRESS)
    return p


def resolve(args: argparse.Namespace) -> argparse.Namespace:
    from bench.models import ZOO

    if not args.models:
        args.models = QUICK_MODELS if args.quick else list(ZOO)
    args.size = args.size or ("small" if args.quick else "full")
    args.repeat = args.repeat or (3 if args.quick else 15)
    args.peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = set(args.peers) - set(PEERS)
    if unknown:
        raise SystemExit(f"mlfuse-bench --models: unknown peers {sorted(unknown)}; choose from {PEERS}")
    args.json = args.json or mb.RESULTS / ("models-quick.json" if args.quick else "models.json")
    args.md = args.md or args.json.with_suffix(".md")
    return args


# --- the parent: exports --------------------------------------------------------------------------


def export_all(args: argparse.Namespace, folder: Path) -> dict[str, dict]:
    """Every model exported once (legacy exporter, else dynamo); {name: {onnx, exporter, export_s} or {error}}."""
    from bench.frontends import _short, export_onnx
    from bench.models import ZOO

    exports = {}
    for name in args.models:
        print(f"export {name} ({args.size}) ...", file=sys.stderr, flush=True)
        try:
            module, inputs = ZOO[name].build(args.size)
            module.eval()
            path, exporter, seconds = export_onnx(name, module, inputs, ZOO[name].input_names, str(folder))
            exports[name] = {"onnx": str(path), "exporter": exporter, "export_s": seconds,
                             "onnx_MB": path.stat().st_size / 2**20}
        except Exception as e:  # torch cannot export it: a row that says so
            exports[name] = {"error": f"export: {_short(e)}"}
    return exports


# --- the worker: one process per thread count ---------------------------------------------------


def mlfuse_paths(onnx: str, feeds: list, threads: int, args: argparse.Namespace, record: dict) -> list[tuple[str, Callable]]:
    import mlfuse
    from mlfuse.api import aligned_empty
    from mlfuse.backend import cpu

    cpu.set_num_threads(threads)
    cache = tempfile.mkdtemp(prefix="mlfuse-cache-", dir=args.onnx_dir)
    os.environ["MLFUSE_CACHE_DIR"] = cache  # empty: a cold compile
    start = time.perf_counter()
    fn = mlfuse.compile(onnx)
    record["compile"]["mlfuse cold"] = time.perf_counter() - start
    if not args.no_warm:
        record["compile"]["mlfuse warm"] = warm_compile(onnx, cache)
    paths = [("mlfuse", lambda: fn(*feeds))]
    if not args.no_out:
        outs = [aligned_empty(s.shape, s.dtype) for s in fn.outputs]
        paths.append(("mlfuse out=", lambda: fn(*feeds, out=outs)))
    return paths


WARM = """import sys, time
import mlfuse, mlfuse.api, mlfuse.frontend.onnx, mlfuse.backend.cpu, mlfuse.pipelines, onnx
from mlfuse import cache
start = time.perf_counter()
mlfuse.compile(sys.argv[1])
print(time.perf_counter() - start, cache.compiler_fingerprint())
"""


def warm_compile(onnx: str, cache: str) -> float | str:
    """mlfuse.compile(onnx) in a fresh process whose disk cache is `cache`; seconds (imports excluded).
    Cache keys hash mlfuse's sources: if they changed since this process compiled (someone
    edits the checkout mid-run), the fresh process cannot hit the cache, and says so."""
    from mlfuse.cache import compiler_fingerprint

    env = dict(os.environ, MLFUSE_CACHE_DIR=cache)
    proc = subprocess.run([sys.executable, "-c", WARM, onnx], env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        return f"failed: {proc.stderr.strip().splitlines()[-1][:200] if proc.stderr.strip() else proc.returncode}"
    seconds, fingerprint = proc.stdout.strip().splitlines()[-1].split()
    if fingerprint != compiler_fingerprint():
        return f"n/a: mlfuse's sources changed mid-run ({float(seconds):.2f} s uncached)"
    return float(seconds)


def ort_path(onnx: str, feeds: list, threads: int, record: dict) -> list[tuple[str, Callable]]:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    start = time.perf_counter()
    session = onnxruntime.InferenceSession(onnx, options, providers=["CPUExecutionProvider"])
    record["compile"]["ORT session"] = time.perf_counter() - start
    named = {i.name: a for i, a in zip(session.get_inputs(), feeds)}
    return [("onnxruntime", lambda: session.run(None, named))]


def torch_paths(module, inputs: tuple, threads: int, args: argparse.Namespace) -> list[tuple[str, Callable]]:
    import torch

    torch.set_num_threads(threads)

    def eager():
        with torch.no_grad():
            return module(*inputs)

    paths = [("torch eager", eager)] if "torch eager" in args.peers else []
    if "inductor" in args.peers:
        compiled = torch.compile(module, dynamic=False)

        def inductor():
            with torch.no_grad():
                return compiled(*inputs)

        paths.append(("inductor", inductor))
    return paths


def first_calls(makers: list[tuple[str, Callable[[], list]]], record: dict) -> tuple[list, dict, dict]:
    """Make each path, call it twice (the first call compiles inductor); the paths that work,
    their outputs as numpy, and their first-call seconds. Failures go to record['skipped']."""
    import numpy as np

    from bench.frontends import _numpy_outputs, _short

    paths, outputs, first = [], {}, {}
    for what, make in makers:
        try:
            made = make()
        except Exception as e:  # one path failing is a table cell, not a failed run
            record["skipped"][what] = f"failed: {_short(e)}"
            continue
        for name, call in made:
            try:
                start = time.perf_counter()
                out = call()
                first[name] = time.perf_counter() - start
                outputs[name] = [np.array(o, copy=True) for o in _numpy_outputs(out)]
                del out
                call()
                paths.append((name, call))
            except Exception as e:
                record["skipped"][name] = f"failed: {_short(e)}"
        gc.collect()
    return paths, outputs, first


def run_model(name: str, export: dict, args: argparse.Namespace, threads: int) -> dict:
    import numpy as np
    import torch

    from bench.frontends import rel_error
    from bench.models import ZOO

    module, inputs = ZOO[name].build(args.size)
    module.eval()
    feeds = [t.numpy() for t in inputs]
    record: dict = {"name": name, "input_shapes": [list(t.shape) for t in inputs], "compile": {}, "skipped": {},
                    "parameters": int(sum(p.numel() for p in module.parameters())),
                    **{k: export[k] for k in ("exporter", "export_s", "onnx_MB")}}
    onnx = export["onnx"]
    record["gemm_flops"] = contraction_flops(onnx)
    makers: list[tuple[str, Callable[[], list]]] = [("mlfuse", lambda: mlfuse_paths(onnx, feeds, threads, args, record))]
    if "onnxruntime" in args.peers:
        makers.append(("onnxruntime", lambda: ort_path(onnx, feeds, threads, record)))
    makers.append(("torch", lambda: torch_paths(module, inputs, threads, args)))
    with torch.no_grad():
        paths, outputs, first = first_calls(makers, record)
        reference = outputs.get("onnxruntime")
        errors = {n: rel_error(o, reference) for n, o in outputs.items()} if reference is not None else {}
        record["output_shapes"] = [list(o.shape) for o in next(iter(outputs.values()), [])]
        del outputs, reference
        gc.collect()
        steady, idle = _round_robin(paths, args)
        busy = busy_round_robin(paths, args) if args.busy_core and threads > 1 else {}
    record["paths"] = {}
    for n, _ in paths:
        median = float(np.median(steady[n]))
        record["paths"][n] = {"median_s": median, "times_s": steady[n], "after_idle_median_s": float(np.median(idle[n])),
                              "after_idle_s": idle[n], "first_s": first[n], "max_rel_err_vs_ort": errors.get(n)}
    for n, phases in busy.items():
        record["paths"][n]["loop_mean_s"] = {phase: {"median_s": float(np.median(ts)), "times_s": ts}
                                             for phase, ts in phases.items()}
    if "inductor" in record["paths"]:
        record["compile"]["inductor"] = max(0.0, first["inductor"] - record["paths"]["inductor"]["median_s"])
    return record


def _round_robin(paths: list, args: argparse.Namespace) -> tuple[dict, dict]:
    from bench.frontends import round_robin

    return round_robin(paths, args.repeat, args.gap_ms, args.warm_ms)


BUSY_PATHS = ("mlfuse", "onnxruntime")
BUSY_SPAN_S = 0.5  # back-to-back calls per turn: a loop's mean call, team probes and stalls included
# a neighbour that keeps one CPU busy: a process of the same priority, as another user's job is
SPIN = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


def loop_mean(call: Callable[[], Any], seconds: float) -> float:
    """Seconds per call of `call` run back to back for `seconds`: what a loop `y = f(x)` gets."""
    calls, start = 0, time.perf_counter()
    held = None
    while time.perf_counter() - start < seconds or not calls:
        del held
        held = call()
        calls += 1
    return (time.perf_counter() - start) / calls


def busy_round_robin(paths: list, args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    """Per BUSY_PATHS runtime, the mean call of BUSY_SPAN_S back-to-back calls, turns
    rotating as in the round robin: `repeat` turns quiet, then `repeat` turns with a process
    spinning on the last of this worker's CPUs (issue #14: within 2.2x of the quiet time
    when one of two cores is taken). A mean, not one timed call: on a busy core the
    runtimes' slow calls (a team waiting a scheduler slice at a barrier) are rare and long."""
    chosen = [(n, call) for n, call in paths if n in BUSY_PATHS]
    times: dict[str, dict[str, list[float]]] = {n: {"quiet": [], "busy": []} for n, _ in chosen}

    def turns(phase: str) -> None:
        from bench.frontends import rotation

        for r in range(args.repeat):
            for name, call in rotation(chosen, r):
                times[name][phase].append(loop_mean(call, BUSY_SPAN_S))

    turns("quiet")
    cpu = sorted(os.sched_getaffinity(0))[-1]
    neighbour = subprocess.Popen([sys.executable, "-c", SPIN, str(cpu)])
    try:
        time.sleep(0.3)  # the neighbour's interpreter has started and is spinning
        turns("busy")
    finally:
        neighbour.kill()
        neighbour.wait()
    return times


def worker(args: argparse.Namespace) -> int:
    warnings.filterwarnings("ignore")
    import logging

    import torch

    from bench.frontends import _short

    logging.getLogger("torch").setLevel(logging.ERROR)
    threads = args.worker_threads
    exports = json.loads((args.onnx_dir / "exports.json").read_text())
    run = {"threads": threads, "cpus": sorted(os.sched_getaffinity(0)), "size": args.size, "repeat": args.repeat,
           "gap_ms": args.gap_ms, "warm_ms": args.warm_ms, "allocator": args.allocator, "loadavg_start": list(os.getloadavg()), "models": []}
    run["first_compile_s"] = first_compile(args.onnx_dir)
    run["sgemm_flops_per_s"] = sgemm_rate()
    for name in args.models:
        print(f"[{threads} thread{'s' * (threads > 1)}] {name} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        if "error" in exports[name]:
            record = {"name": name, "error": exports[name]["error"]}
        else:
            try:
                record = run_model(name, exports[name], args, threads)
            except Exception as e:  # a model that cannot be built is reported, the run goes on
                record = {"name": name, "error": _short(e)}
        record["wall_s"] = time.perf_counter() - start
        run["models"].append(record)
        torch._dynamo.reset()
        gc.collect()
    run["loadavg_end"] = list(os.getloadavg())
    args.worker.write_text(json.dumps(run, indent=1) + "\n")
    return 0


def contraction_flops(onnx: str) -> int:
    """The FLOPs of an ONNX model's matmuls and convs (2 x output elements x reduction
    length), as the fusion planner counts them (op_classes.classify) on mlfuse's import."""
    from mlfuse.analysis.op_classes import classify
    from mlfuse.dialects import graph
    from mlfuse.frontend.onnx import import_onnx

    infos = [(op, classify(op)) for op in import_onnx(onnx).walk()]
    return sum(info.gemm_flops + (info.window_flops if isinstance(op, graph.Conv2dOp) else 0) for op, info in infos)


def sgemm_rate(n: int = 1024, rounds: int = 7) -> float:
    """FLOP/s of the best of `rounds` n^3 float32 products through numpy's BLAS (its threads:
    the worker's OPENBLAS_NUM_THREADS): what this machine's cores give a large GEMM now."""
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    a @ b
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def first_compile(folder: Path) -> float:
    """Seconds of this process's first mlfuse.compile, of a tiny conv -> relu -> gemm ONNX
    graph without the disk cache: the imports and set-up every process pays once, which
    would otherwise land in the first model's cold compile (on a slow 2-vCPU host, 3.9 s
    of ResNet-18's 12.2: `import onnx` alone pulls in ml_dtypes, 1.2-1.5 s there)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import mlfuse

    rng = np.random.default_rng(0)
    weights = {"w": rng.standard_normal((4, 3, 3, 3)), "b": rng.standard_normal(4), "fc": rng.standard_normal((4, 2))}
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("GlobalAveragePool", ["r"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
         helper.make_node("Gemm", ["f", "fc"], ["y"])],
        "first_compile", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()])
    path = folder / "first_compile.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    os.environ["MLFUSE_CACHE_DIR"] = "off"  # each model sets its own (mlfuse_paths)
    start = time.perf_counter()
    mlfuse.compile(str(path))
    return time.perf_counter() - start


def run_worker(threads: int, args: argparse.Namespace, argv: list[str], folder: Path) -> dict:
    out = folder / f"run-{threads}.json"
    cmd = [sys.executable, "-m", "mlfuse.tools.mlfuse_bench", *argv, "--worker", str(out),
           "--worker-threads", str(threads), "--onnx-dir", str(folder)]
    env = mb.worker_env(threads, argparse.Namespace(allocator=args.allocator, cold_compile="off"))
    env["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"  # inductor compiles cold; mlfuse's cache is per model (above)
    proc = subprocess.run(cmd, env=env, cwd=mb.REPO)
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"mlfuse-bench --models: the {threads}-thread worker failed (exit {proc.returncode})")
    return json.loads(out.read_text())


# --- tables --------------------------------------------------------------------------------------


def _ms(path: dict | None) -> str:
    if path is None:
        return "—"
    err = path.get("max_rel_err_vs_ort")
    return f"{path['median_s'] * 1e3:.2f}" + (" ⚠" if err is not None and err > TOLERANCE else "")


def speed(ps: dict, peer: str, mine: str = "mlfuse") -> float | None:
    """peer's median / mlfuse's median: above 1, mlfuse is faster."""
    if mine in ps and peer in ps and ps[mine]["median_s"] > 0:
        return ps[peer]["median_s"] / ps[mine]["median_s"]
    return None


def _x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


def _s(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def model_rows(run: dict) -> list[str]:
    """The main table of one thread count: medians, speed ratios, the worst error against ORT."""
    lines = ["| model | mlfuse `y = f(x)` | mlfuse out= | onnxruntime | torch eager | inductor | "
             "speed vs ORT | speed vs eager | speed vs inductor | max rel err vs ORT |",
             "|---|" + "---:|" * 9]
    for r in run["models"]:
        if "error" in r:
            lines.append(f"| {r['name']} | {r['error']} |" + " |" * 8)
            continue
        ps = r["paths"]
        errs = [p["max_rel_err_vs_ort"] for n, p in ps.items() if n.startswith("mlfuse") and p["max_rel_err_vs_ort"] is not None]
        err = f"{max(errs):.1e}" if errs else "—"
        lines.append(f"| {r['name']} | " + " | ".join(_ms(ps.get(n)) for n in PATHS) + " | " +
                     " | ".join(_x(speed(ps, peer)) for peer in PEERS) + f" | {err} |")
    return lines


def compile_rows(run: dict) -> list[str]:
    lines = ["| model | mlfuse cold | mlfuse warm (fresh process) | ORT session | inductor | export (exporter) |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in run["models"]:
        if "error" in r:
            continue
        c = r["compile"]
        lines.append(f"| {r['name']} | {_s(c.get('mlfuse cold'))} | {_s(c.get('mlfuse warm'))} | "
                     f"{_s(c.get('ORT session'))} | {_s(c.get('inductor'))} | {r['export_s']:.1f} ({r['exporter']}) |")
    return lines


def format_run(run: dict) -> list[str]:
    lines = [mb.thread_heading(run["threads"]), "",
             f"Median ms of the steady call ({run['repeat']} rounds, round-robin; the call after "
             f"{run.get('warm_ms', 0):.0f} ms of back-to-back calls), {run['size']} sizes, batch 1; "
             f"allocator {run['allocator']}; load average {run['loadavg_start'][0]:.2f} -> {run['loadavg_end'][0]:.2f}. "
             "speed vs X = X ms / mlfuse `y = f(x)` ms: above 1.0x mlfuse is faster. ⚠: error above 1e-3.", ""]
    lines += model_rows(run)
    first = run.get("first_compile_s")
    first_note = f"; the worker's first compile, a tiny conv graph, took {first:.2f} s, paid once per process" if first else ""
    lines += ["", "Compile seconds (mlfuse cold: empty disk cache, in a process that has compiled before"
              f"{first_note}; warm: a fresh process, from the disk cache; "
              "inductor: first call − steady call, caches off):", ""] + compile_rows(run)
    lines += ["", *roofline_rows(run), *busy_rows(run)]
    skipped = sorted(f"{r['name']}: {n}: {why}" for r in run["models"] for n, why in r.get("skipped", {}).items())
    lines += ([""] + [f"- skipped {s}" for s in skipped]) if skipped else []
    lines += ["", f"- {verdict(run)}", ""]
    return lines


def busy_rows(run: dict) -> list[str]:
    """--busy-core: each runtime's mean call in a loop, quiet and with a neighbour spinning on one CPU."""
    rows = [r for r in run["models"] if "loop_mean_s" in r.get("paths", {}).get("mlfuse", {})]
    if not rows:
        return []
    lines = ["", f"A busy core (`--busy-core`): the mean call of {BUSY_SPAN_S} s of back-to-back calls (medians of "
             f"{run['repeat']} turns), quiet and with a process spinning on one of the worker's CPUs; busy / quiet "
             "(issue #14: mlfuse within 2.2x):", "",
             "| model | mlfuse quiet ms | mlfuse busy ms | mlfuse busy / quiet | onnxruntime quiet ms | "
             "onnxruntime busy ms | onnxruntime busy / quiet | speed vs ORT, busy |", "|---|" + "---:|" * 7]
    for r in rows:
        means = {n: r["paths"][n].get("loop_mean_s") for n in BUSY_PATHS}
        cells = []
        for n in BUSY_PATHS:
            m = means[n]
            cells += ([f"{m['quiet']['median_s'] * 1e3:.2f}", f"{m['busy']['median_s'] * 1e3:.2f}",
                       f"{m['busy']['median_s'] / m['quiet']['median_s']:.2f}x"] if m else ["—"] * 3)
        mine, ort = means["mlfuse"], means["onnxruntime"]
        ratio = ort["busy"]["median_s"] / mine["busy"]["median_s"] if mine and ort else None
        lines.append(f"| {r['name']} | " + " | ".join(cells) + f" | {_x(ratio)} |")
    return lines


def roofline_rows(run: dict) -> list[str]:
    """GFLOP/s of each path on the model's matmuls and convs, and as a share of a large
    sgemm's rate in the same worker; the last column is that rate over onnxruntime's: no
    runtime doing the same FLOPs at that rate can be more than that much faster."""
    peak = run.get("sgemm_flops_per_s")
    if not peak:
        return []
    lines = [f"GEMM roofline: matmul and conv GFLOP/s of the steady call (a 1024^3 sgemm through numpy's BLAS "
             f"in this worker: {peak / 1e9:.0f} GFLOP/s = 100%):", "",
             "| model | GFLOP | mlfuse GFLOP/s | onnxruntime GFLOP/s | mlfuse % of sgemm | onnxruntime % of sgemm | "
             "sgemm / onnxruntime |", "|---|" + "---:|" * 6]
    for r in run["models"]:
        flops, ps = r.get("gemm_flops"), r.get("paths", {})
        if not flops or "mlfuse" not in ps or "onnxruntime" not in ps:
            continue
        mine, ort = (flops / ps[n]["median_s"] for n in ("mlfuse", "onnxruntime"))
        lines.append(f"| {r['name']} | {flops / 1e9:.2f} | {mine / 1e9:.0f} | {ort / 1e9:.0f} | {100 * mine / peak:.0f}% | "
                     f"{100 * ort / peak:.0f}% | {peak / ort:.2f}x |")
    return lines


def verdict(run: dict) -> str:
    vs = [(r["name"], speed(r["paths"], "onnxruntime")) for r in run["models"] if "paths" in r]
    vs = [(n, v) for n, v in vs if v is not None]
    ahead = [n for n, v in vs if v >= 1.0]
    return (f"mlfuse ≥ 1.0x onnxruntime on {len(ahead)}/{len(vs)} models at {run['threads']} thread(s)"
            + (f" ({', '.join(ahead)})" if ahead else ""))


def summary_rows(result: dict) -> list[str]:
    """Every thread count in one table (the README's): medians, speed vs ORT, compile seconds."""
    lines = ["| model | threads | mlfuse `y = f(x)` ms | mlfuse out= ms | onnxruntime ms | torch eager ms | inductor ms | "
             "speed vs ORT | mlfuse compile cold / warm s | ORT session s | inductor compile s |",
             "|---|---:|" + "---:|" * 9]
    for name in [r["name"] for r in result["runs"][0]["models"]]:
        for run in result["runs"]:
            r = next(m for m in run["models"] if m["name"] == name)
            if "error" in r:
                lines.append(f"| {name} | {run['threads']} | {r['error']} |" + " |" * 8)
                continue
            ps, c = r["paths"], r["compile"]
            lines.append(f"| {name} | {run['threads']} | " + " | ".join(_ms(ps.get(n)) for n in PATHS) +
                         f" | {_x(speed(ps, 'onnxruntime'))} | {_s(c.get('mlfuse cold'))} / {_s(c.get('mlfuse warm'))} | "
                         f"{_s(c.get('ORT session'))} | {_s(c.get('inductor'))} |")
    return lines


def markdown(result: dict) -> str:
    info = result["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items() if v)
    lines = ["# mlfuse-bench --models", "",
             "Whole zoo models (bench/models, random weights), exported to ONNX once and compiled by "
             "`mlfuse.compile(path)`, against onnxruntime on the same file, torch eager and torch.compile (inductor) "
             "in one process per thread count (protocol: bench/models_bench.py).", "",
             *mb.provenance_lines(info),
             f"- versions: {versions}",
             f"- load average (1 min) before/after the whole run: {result['loadavg_before'][0]:.2f} / "
             f"{result['loadavg_after'][0]:.2f}",
             f"- command: `{result['command']}`", "",
             "## Summary", "",
             "Median ms of the steady call; speed vs ORT = onnxruntime ms / mlfuse `y = f(x)` ms (above 1.0x mlfuse "
             "is faster); ⚠: error above 1e-3 against onnxruntime. Compile: seconds, mlfuse cold from an empty disk "
             "cache (a process's first compile pays its imports once, reported apart below), warm in a fresh process "
             "from that cache.", ""] + summary_rows(result) + [""]
    for run in result["runs"]:
        lines += format_run(run)
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = resolve(build_parser().parse_args(argv))
    if args.worker:
        return worker(args)
    if args.render:  # the markdown again, from a result file
        args.render.with_suffix(".md").write_text(markdown(json.loads(args.render.read_text())))
        return 0
    info = mb.machine_info()
    from importlib.metadata import PackageNotFoundError, version

    for pkg in ("onnxruntime", "onnx", "transformers"):
        try:
            info["versions"][pkg] = version(pkg)
        except PackageNotFoundError:
            info["versions"][pkg] = None
    print(f"mlfuse-bench --models on {info.get('cpu')} ({info['cpus']} CPUs), {info['date']}", flush=True)
    result = {"machine": info, "command": "mlfuse-bench " + " ".join(argv), "loadavg_before": list(os.getloadavg())}
    with tempfile.TemporaryDirectory(prefix="mlfuse-models-") as tmp:
        folder = Path(tmp)
        exports = export_all(args, folder)
        (folder / "exports.json").write_text(json.dumps(exports))
        runs = []
        for threads in args.threads:
            run = run_worker(threads, args, argv, folder)
            runs.append(run)
            print("\n" + "\n".join(format_run(run)), flush=True)
    exports = {n: {k: v for k, v in e.items() if k != "onnx"} for n, e in exports.items()}  # a deleted temporary
    result.update(loadavg_after=list(os.getloadavg()), exports=exports, runs=runs)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    args.md.write_text(markdown(result))
    print(f"wrote {args.json}, {args.md}")
    return 0
