"""mlfuse-bench: mlfuse against numpy and the installed peers, at sizes beyond the last-level cache.

    python -m bench                                # every workload, 65536x1024 f32, 1 and 2 threads
    python -m bench --quick                        # a small smoke run (under 2 minutes)
    python -m bench --graphs layernorm softmax --threads 2 --repeat 11
    python -m bench --frontends                    # torch.compile / mlfuse.jax.jit paths (bench/frontends.py)
    python -m bench --models                       # whole zoo models vs onnxruntime, torch (bench/models_bench.py)
    python -m bench --call-paths                   # aligned out=, allocating, np.empty calls (bench/call_paths.py)

It runs from the repository checkout (`make bench`): its workloads are in bench/, which
is not part of the installed package, so pip installs no mlfuse-bench command.

Per thread count one worker process runs every workload: mlfuse (preallocated outputs,
its arena reused), numpy op by op, and each installed peer (numexpr, torch eager,
torch.compile, jax.jit). Calls are interleaved round-robin (the order rotates each
round) with one non-temporal copy per round. Each turn sleeps a short gap (so no
runtime's spinning worker threads steal the next one's cores), makes one call that
is timed as "cold" (the first call after idle: sleeping threads and cores wake up,
on this VM often 1-4 ms late), then times one more call right after it: the steady
state a training or serving loop sees, which the table reports (medians). The cold
medians are in the JSON and in a line per workload of the markdown. Before the rounds
each contestant runs back to back for --warm-ms and at least WARM_CALLS calls, so that
runtimes that adapt reach their steady state first: mlfuse's team sizer tries one
thread for a few calls and probes at doubling gaps, and in the 7 rounds of a run
those first probes (and the team's wake-up after each) were half the timed calls:
GELU MLP tail 6.2 ms against 3.3 with the team, SwiGLU and the BERT layer at their
one-thread times in some runs.

  x floor   median / bandwidth floor; the floor is (input + output bytes) divided by
            the copy bandwidth measured in the same run (bench/bandwidth.py; each
            round times a copy right after an untimed one, like the calls). For
            GEMM-bearing graphs it is not a bound, only a scale.
  x numpy   numpy op-by-op median / this median (speedup)
  compile   seconds to compile (mlfuse.compile; jax lower+compile; torch.compile's
            first call minus one steady call); separate from the medians
  kernels   memory-intensive/all kernels (mlfuse's loop kernels; XLA's entry
            computation, from jax.jit(...).lower(...).compile().as_text())

Threads: the worker is pinned to the first N CPUs (sched_setaffinity) before any
runtime starts, OMP_NUM_THREADS/OPENBLAS_NUM_THREADS are N, mlfuse, torch and
numexpr are told N, and with N=1 XLA gets `--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1` (its pool otherwise follows the affinity).
Allocator: with `--allocator warm` (default) the worker runs with glibc's mmap
disabled and trimming off (GLIBC_TUNABLES), so the large buffers that numpy, torch
and XLA allocate per call are reused instead of mapped and faulted in anew: the
best configuration of the peers, without jemalloc. `--allocator default` is glibc's.

Results go to bench/results/ (NAME.json, NAME.png, NAME.md; NAME is `latest`, or
`quick` for --quick) unless --json/--png/--md say otherwise.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results"
FULL_SIZE = (65536, 1024)
QUICK_SIZE = (2048, 512)
QUICK_GRAPHS = ["layernorm", "softmax", "gelu_bias", "col_sum"]
ORDER = ["mlfuse", "numpy", "numexpr", "torch eager", "torch.compile", "torch.compile max-autotune", "jax.jit"]
WARM_MALLOC = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=137438953472"
# back-to-back calls each contestant makes at least before the rounds (see --warm-ms): enough
# for mlfuse's team sizer to settle (backend/team.py: one-thread trials, then probes at gaps
# of 2, 4, 8 and 16 calls)
WARM_CALLS = 16
MAX_WARM_S = 3.0  # ... but no more than this long (numpy's op-by-op Adam takes 0.3 s a call)
TOLERANCE = 1e-3  # max |error| / max(1, max |numpy|): peers and mlfuse agree with numpy op by op


def _import_bench():
    """bench/ lives in the repository, next to the mlfuse package: a checkout is needed."""
    if not (REPO / "bench" / "workloads.py").exists():
        sys.exit(f"mlfuse-bench needs the repository checkout (no bench/workloads.py under {REPO})")
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))


def parse_size(text: str) -> tuple[int, int]:
    try:
        rows, cols = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must be ROWSxCOLS (e.g. 65536x1024), got {text!r}") from None
    if rows < 1 or cols < 1:
        raise argparse.ArgumentTypeError(f"size must be positive, got {text!r}")
    return rows, cols


def parse_positive(text: str) -> int:
    """A count that must be at least 1 (--repeat): 0 rounds would time nothing."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def parse_threads(text: str) -> list[int]:
    try:
        threads = [int(t) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"threads must be a comma-separated list like 1,2, got {text!r}") from None
    if any(t < 1 for t in threads):
        raise argparse.ArgumentTypeError("thread counts must be >= 1")
    return threads


def build_parser() -> argparse.ArgumentParser:
    _import_bench()
    from bench.peers import PEERS
    from bench.workloads import WORKLOADS

    doc = (__doc__ or "").split("\n\n")
    p = argparse.ArgumentParser(prog="mlfuse-bench", description=doc[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog="\n\n".join(doc[2:]))
    p.add_argument("--graphs", nargs="+", choices=list(WORKLOADS), metavar="GRAPH",
                   help=f"workloads (default all; --quick: {' '.join(QUICK_GRAPHS)}): {', '.join(WORKLOADS)}")
    p.add_argument("--size", type=parse_size, help="ROWSxCOLS of the memory-bound workloads "
                   f"(default {FULL_SIZE[0]}x{FULL_SIZE[1]}; --quick: {QUICK_SIZE[0]}x{QUICK_SIZE[1]})")
    p.add_argument("--threads", type=parse_threads, default=[1, 2], help="thread counts, one run each (default 1,2)")
    p.add_argument("--repeat", type=parse_positive, help="timed rounds (default 7; --quick: 3)")
    p.add_argument("--gap-ms", type=float, default=50.0,
                   help="idle milliseconds before each timed call, so that the worker threads of the "
                        "previous runtime have stopped spinning (default 50)")
    p.add_argument("--warm-ms", type=float, default=150.0,
                   help=f"back-to-back calls of each contestant before the rounds (default 150; at least {WARM_CALLS} calls)")
    p.add_argument("--quick", action="store_true", help="a small, fast smoke run")
    p.add_argument("--peers", default=",".join(PEERS),
                   help=f"comma-separated peers to run if installed (default {','.join(PEERS)})")
    p.add_argument("--torch-modes", default="auto",
                   help="torch.compile modes, comma-separated (default auto: default, plus "
                        "max-autotune-no-cudagraphs for GEMM-bearing graphs)")
    p.add_argument("--planner", default="ilp", help="mlfuse fusion planner (default ilp)")
    p.add_argument("--allocator", choices=("warm", "default"), default="warm", help="glibc malloc setting (see above)")
    p.add_argument("--copy-mb", type=float, help="size of the bandwidth copy buffer (default 256; --quick: 64)")
    p.add_argument("--cold-compile", choices=("on", "off", "auto"), default="auto",
                   help="disable mlfuse's and inductor's disk caches so compile times are cold "
                        "(default: on, off for --quick)")
    p.add_argument("--json", type=Path, help="result file (default bench/results/latest.json or quick.json)")
    p.add_argument("--png", type=Path, help="plot (default next to the JSON)")
    p.add_argument("--md", type=Path, help="markdown table (default next to the JSON)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.add_argument("--frontends", action="store_true",
                   help="instead: mlfuse through torch.compile(backend='mlfuse') and mlfuse.jax.jit against inductor, "
                        "eager, jax.jit, its ONNX path and onnxruntime (own options: mlfuse-bench --frontends --help)")
    p.add_argument("--models", nargs="*", metavar="MODEL",
                   help="instead: whole zoo models (bench/models) through mlfuse.compile of their ONNX export against "
                        "onnxruntime, torch eager and torch.compile (own options: mlfuse-bench --models --help)")
    p.add_argument("--call-paths", action="store_true",
                   help="instead: one graph's aligned out=, allocating and np.empty out= calls side by side "
                        "(own options: mlfuse-bench --call-paths --help)")
    p.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # internal: run one thread count, write JSON
    p.add_argument("--worker-threads", type=int, help=argparse.SUPPRESS)
    return p


def resolve(args: argparse.Namespace) -> argparse.Namespace:
    args.graphs = args.graphs or (QUICK_GRAPHS if args.quick else None)
    if args.graphs is None:
        from bench.workloads import WORKLOADS

        args.graphs = list(WORKLOADS)
    args.size = args.size or (QUICK_SIZE if args.quick else FULL_SIZE)
    args.repeat = args.repeat or (3 if args.quick else 7)
    args.copy_mb = args.copy_mb or (64 if args.quick else 256)
    if args.cold_compile == "auto":
        args.cold_compile = "off" if args.quick else "on"
    name = "quick" if args.quick else "latest"
    args.json = args.json or RESULTS / f"{name}.json"
    args.png = args.png or args.json.with_suffix(".png")
    args.md = args.md or args.json.with_suffix(".md")
    return args


# --- the worker: one process per thread count -------------------------------------------------


def worker_env(threads: int, args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_MAX_THREADS"):
        env[var] = str(threads)
    env["JAX_PLATFORMS"] = "cpu"
    if threads == 1:
        flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flags}".strip()
    if args.allocator == "warm":
        env["GLIBC_TUNABLES"] = ":".join(filter(None, [env.get("GLIBC_TUNABLES"), WARM_MALLOC]))
    if args.cold_compile == "on":
        env["MLFUSE_CACHE_DIR"] = "off"
        env["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    return env


def pin(threads: int) -> list[int]:
    """Pin this process to its first `threads` allowed CPUs (before any runtime starts threads)."""
    cpus = sorted(os.sched_getaffinity(0))
    if threads > len(cpus):
        print(f"warning: {threads} threads on {len(cpus)} CPUs", file=sys.stderr)
        return cpus
    os.sched_setaffinity(0, cpus[:threads])
    return cpus[:threads]


def contestants_for(w, module, inputs, threads: int, args, notes: dict):
    from bench import peers

    peer_list = [p.strip() for p in args.peers.split(",") if p.strip()]
    makers = [("mlfuse", lambda: peers.make_mlfuse(w, module, inputs, threads, args.planner))]
    if "numpy" in peer_list:
        makers.append(("numpy", lambda: peers.make_numpy(w, module, inputs, threads)))
    if "numexpr" in peer_list:
        makers.append(("numexpr", lambda: peers.make_numexpr(w, module, inputs, threads)))
    if "torch" in peer_list:
        makers.append(("torch eager", lambda: peers.make_torch_eager(w, module, inputs, threads)))
    if "torch.compile" in peer_list:
        modes = ["default"] + ([] if w.memory_bound else ["max-autotune-no-cudagraphs"])
        if args.torch_modes != "auto":
            modes = [m.strip() for m in args.torch_modes.split(",") if m.strip()]
        for mode in modes:
            name = "torch.compile" if mode == "default" else f"torch.compile {mode.replace('-no-cudagraphs', '')}"
            makers.append((name, lambda mode=mode: peers.make_torch_compile(w, module, inputs, threads, mode)))
    if "jax" in peer_list:
        makers.append(("jax.jit", lambda: peers.make_jax(w, module, inputs, threads)))
    result = []
    for name, make in makers:
        try:
            result.append(make())
        except peers.Unavailable as e:
            notes[name] = str(e)
        except Exception as e:  # a peer that fails is reported, not fatal
            notes[name] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    return result


def warm_up(call, seconds: float) -> None:
    """Call back to back for `seconds` and at least WARM_CALLS times, at most MAX_WARM_S."""
    start = time.perf_counter()
    calls = 0
    while calls < WARM_CALLS or time.perf_counter() - start < seconds:
        call()
        calls += 1
        if time.perf_counter() - start > MAX_WARM_S:
            return


def output_error(got, want) -> float:
    import numpy as np

    if len(got) != len(want):
        return float("inf")
    worst = 0.0
    for g, r in zip(got, want):
        if g.shape != r.shape:
            return float("inf")
        scale = max(1.0, float(np.max(np.abs(r), initial=0.0)))
        worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - r), initial=0.0)) / scale)
    return worst


def run_workload(w, size, threads: int, args, meter) -> dict:
    import numpy as np

    from mlfuse.api import signature
    from mlfuse.ir import find_function

    module = w.build(*size)
    inputs = w.inputs(module)
    in_specs, out_specs = signature(find_function(module, "main"))
    nbytes = sum(a.nbytes for a in inputs) + sum(int(np.prod(s.shape)) * s.dtype.itemsize for s in out_specs)
    notes: dict[str, str] = {}
    contestants = contestants_for(w, module, inputs, threads, args, notes)
    record = {"name": w.name, "description": w.description, "memory_bound": w.memory_bound,
              "shapes": [list(a.shape) for a in inputs][:4], "inputs": len(inputs), "outputs": len(out_specs),
              "bytes": nbytes, "contestants": {}, "skipped": notes, "copy_s": []}
    # warm-up: the first call compiles for torch.compile; check every result against numpy (or mlfuse)
    first, outputs = {}, {}
    for c in list(contestants):
        try:
            start = time.perf_counter()
            out = c.call()
            first[c.name] = time.perf_counter() - start
            outputs[c.name] = c.to_numpy(out)
            c.call()
        except Exception as e:
            notes[c.name] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            contestants.remove(c)
    reference = outputs.get("numpy") or outputs.get("mlfuse")
    errors = {name: output_error(out, reference) for name, out in outputs.items()} if reference else {}
    del outputs
    gc.collect()
    for c in contestants:
        warm_up(c.call, args.warm_ms / 1e3)
    times: dict[str, list[float]] = {c.name: [] for c in contestants}
    cold: dict[str, list[float]] = {c.name: [] for c in contestants}
    for r in range(args.repeat):
        k = r % max(1, len(contestants))
        for c in contestants[k:] + contestants[:k]:
            time.sleep(args.gap_ms / 1e3)  # let the previous runtime's worker threads stop spinning
            for series in (cold, times):  # the first call after the gap, then the steady one
                start = time.perf_counter()
                c.call()
                series[c.name].append(time.perf_counter() - start)
        meter.copy()  # like the contestants: the steady copy right after a first one
        record["copy_s"].append(meter.copy())
    for c in contestants:
        median = float(np.median(times[c.name]))
        compile_s = c.compile_s
        if c.compile_includes_first_run:
            compile_s = max(0.0, first[c.name] - median)
        error = errors.get(c.name, 0.0)
        note = c.note + (f"; MISMATCH: error {error:.1e}" if error > TOLERANCE else "")
        record["contestants"][c.name] = {
            "median_s": median, "times_s": times[c.name], "compile_s": compile_s,
            "cold_median_s": float(np.median(cold[c.name])), "cold_times_s": cold[c.name],
            "kernels": list(c.kernels) if c.kernels else None, "note": note, "max_error": error,
            "config": c.config,
        }
    return record


def worker(args: argparse.Namespace) -> int:
    threads = args.worker_threads
    cpus = sorted(os.sched_getaffinity(0))
    import warnings

    import numpy as np

    warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")

    from bench.bandwidth import CopyMeter
    from bench.workloads import WORKLOADS

    meter = CopyMeter(args.copy_mb, threads)
    numpy_copy = [meter.numpy_copy() for _ in range(3)]
    run = {"threads": threads, "cpus": cpus, "size": list(args.size), "repeat": args.repeat, "gap_ms": args.gap_ms, "warm_ms": args.warm_ms,
           "allocator": args.allocator, "cold_compile": args.cold_compile,
           "copy_mb": meter.nbytes / 2**20, "numpy_copy_s": numpy_copy,
           "loadavg_start": list(os.getloadavg()), "workloads": []}
    for name in args.graphs:
        w = WORKLOADS[name]
        size = args.size if w.scales else None
        print(f"[{threads} thread{'s' * (threads > 1)}] {name} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            record = run_workload(w, args.size, threads, args, meter)
        except Exception as e:  # a workload that cannot even be built is reported, and the run goes on
            record = {"name": name, "error": f"{type(e).__name__}: {e}"}
        record["wall_s"] = time.perf_counter() - start
        record["size"] = list(size) if size else None
        run["workloads"].append(record)
        gc.collect()
        _reset_peers()
    all_copies = [s for wl in run["workloads"] for s in wl.get("copy_s", [])] or [meter.copy() for _ in range(5)]
    run["copy_s_median"] = float(np.median(all_copies))
    run["bandwidth_GBps"] = meter.bandwidth(run["copy_s_median"]) / 1e9
    run["numpy_copy_bandwidth_GBps"] = meter.bandwidth(float(np.median(numpy_copy))) / 1e9
    run["loadavg_end"] = list(os.getloadavg())
    meter.close()
    args.worker.write_text(json.dumps(run, indent=1) + "\n")
    return 0


def _reset_peers() -> None:
    """Free what compiled peers hold between workloads (their code caches)."""
    if "torch" in sys.modules:
        import torch

        torch._dynamo.reset()
    if "jax" in sys.modules:
        import jax

        jax.clear_caches()


# --- the parent: a worker per thread count, tables, JSON, plot --------------------------------


def run_worker(threads: int, args: argparse.Namespace, argv: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        cmd = [sys.executable, "-m", "mlfuse.tools.mlfuse_bench", *argv, "--worker", str(out),
               "--worker-threads", str(threads)]
        proc = subprocess.run(cmd, env=worker_env(threads, args), cwd=REPO)
        if proc.returncode != 0 or not out.exists():
            raise SystemExit(f"mlfuse-bench: the {threads}-thread worker failed (exit {proc.returncode})")
        return json.loads(out.read_text())


def machine_info() -> dict:
    info = {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        info["cpu"] = next(line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name"))
        mem_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                      if line.startswith("MemTotal"))
        info["memory_GiB"] = round(mem_kb / 2**20, 1)
    except (OSError, StopIteration):
        info["cpu"] = platform.processor()
    try:
        import subprocess as sp

        info["llc"] = sp.run(["lscpu"], capture_output=True, text=True).stdout.split("L3 cache:")[1].splitlines()[0].strip()
    except (OSError, IndexError):
        pass
    try:
        info["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                        text=True).stdout.strip()
    except OSError:
        pass
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for pkg in ("mlfuse", "numpy", "numexpr", "torch", "jax", "jaxlib", "llvmlite", "xdsl"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    info["versions"] = versions
    return info


def derived(run: dict) -> list[dict]:
    """Rows per workload and contestant: median ms, x floor, x numpy, compile s, kernels, note."""
    bandwidth = run["bandwidth_GBps"] * 1e9
    rows = []
    for wl in run["workloads"]:
        if "error" in wl:
            rows.append({"workload": wl["name"], "impl": "-", "note": f"workload failed: {wl['error']}"})
            continue
        floor_s = wl["bytes"] / bandwidth
        cs = wl["contestants"]
        numpy_s = cs.get("numpy", {}).get("median_s")
        names = [n for n in ORDER if n in cs or n in wl["skipped"]] + [n for n in cs if n not in ORDER]
        for name in names:
            if name in cs:
                c = cs[name]
                rows.append({"workload": wl["name"], "impl": name, "ms": c["median_s"] * 1e3, "floor_ms": floor_s * 1e3,
                             "x_floor": c["median_s"] / floor_s, "x_numpy": numpy_s / c["median_s"] if numpy_s else None,
                             "compile_s": c["compile_s"], "kernels": c["kernels"], "note": c["note"],
                             "memory_bound": wl["memory_bound"]})
            else:
                rows.append({"workload": wl["name"], "impl": name, "note": f"skipped: {wl['skipped'][name]}",
                             "floor_ms": floor_s * 1e3, "memory_bound": wl["memory_bound"]})
    return rows


def _fmt(value, spec: str, missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def format_table(run: dict) -> str:
    t = run["threads"]
    size = "x".join(map(str, run["size"]))
    lines = [f"== mlfuse-bench: {t} thread{'s' * (t > 1)}, memory-bound workloads at {size} f32, "
             f"allocator {run['allocator']} ==",
             f"copy bandwidth {run['bandwidth_GBps']:.1f} GB/s (non-temporal stores, {run['copy_mb']:.0f} MB buffer; "
             f"np.copyto {run['numpy_copy_bandwidth_GBps']:.1f} GB/s), load average {run['loadavg_start'][0]:.1f}"
             f" -> {run['loadavg_end'][0]:.1f}"]
    head = (f"{'workload':<24}{'impl':<28}{'median ms':>10}{'x floor':>9}{'x numpy':>9}{'compile s':>11}"
            f"{'kernels':>9}  note")
    lines += [head, "-" * len(head)]
    previous = None
    for r in derived(run):
        label = ""
        if r["workload"] != previous:
            label = r["workload"]
            if "floor_ms" in r:
                label_floor = f"floor {r['floor_ms']:.1f} ms" + ("" if r.get("memory_bound") else " (GEMMs)")
                lines.append(f"{label:<24}{label_floor}")
            label = ""
            previous = r["workload"]
        kernels = f"{r['kernels'][0]}/{r['kernels'][1]}" if r.get("kernels") else ""
        lines.append(f"{label:<24}{r['impl']:<28}{_fmt(r.get('ms'), '10.2f', ' ' * 9 + '-')}"
                     f"{_fmt(r.get('x_floor'), '9.2f', ' ' * 8 + '-')}{_fmt(r.get('x_numpy'), '9.1f', ' ' * 8 + '-')}"
                     f"{_fmt(r.get('compile_s'), '11.2f', ' ' * 10 + '-')}{kernels:>9}  {r.get('note', '')}")
    lines.append("")
    lines += summary_lines(run)
    return "\n".join(lines)


def summary_lines(run: dict) -> list[str]:
    """mlfuse against the best compiler per workload, and the kernel counts of the BERT layer."""
    out = []
    compilers = ("torch.compile", "torch.compile max-autotune", "jax.jit")
    for wl in run["workloads"]:
        cs = wl.get("contestants", {})
        if "mlfuse" not in cs:
            continue
        best = min(((cs[n]["median_s"], n) for n in compilers if n in cs), default=None)
        if best:
            ratio = best[0] / cs["mlfuse"]["median_s"]
            verdict = "faster" if ratio > 1 else "SLOWER"
            out.append(f"{wl['name']}: mlfuse {cs['mlfuse']['median_s'] * 1e3:.2f} ms, best compiler {best[1]} "
                       f"{best[0] * 1e3:.2f} ms -> mlfuse {ratio:.2f}x ({verdict})")
        if best and "cold_median_s" in cs["mlfuse"]:
            cold_best = min((cs[n]["cold_median_s"], n) for n in compilers if n in cs)
            out.append(f"  first call after {run.get('gap_ms', 50):.0f} ms idle: mlfuse {cs['mlfuse']['cold_median_s'] * 1e3:.2f} ms, "
                       f"{cold_best[1]} {cold_best[0] * 1e3:.2f} ms")
        if wl["name"] == "bert_layer" and cs["mlfuse"]["kernels"] and cs.get("jax.jit", {}).get("kernels"):
            m, x = cs["mlfuse"]["kernels"], cs["jax.jit"]["kernels"]
            mark = "fewer" if m[0] < x[0] else "NOT FEWER"
            out.append(f"bert_layer kernels, memory-intensive/all: mlfuse {m[0]}/{m[1]}, XLA {x[0]}/{x[1]} ({mark})")
    return out


def provenance_lines(info: dict) -> list[str]:
    """The date, commit and machine lines that head every result file."""
    return [f"- date: {info['date']}" + (f", commit {info['commit']}" if info.get("commit") else ""),
            f"- machine: {info.get('cpu')}, {info['cpus']} CPUs, {info.get('memory_GiB')} GiB, "
            f"L3 {info.get('llc', '?')}; {info['platform']}"]


def thread_heading(threads: int) -> str:
    return f"## {threads} thread{'s' * (threads > 1)}"


def markdown(runs: list[dict], info: dict, png_name: str | None, command: str) -> str:
    v = info["versions"]
    lines = ["# mlfuse-bench results", "",
             *provenance_lines(info),
             "- versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val),
             f"- command: `{command}`", ""]
    if png_name:
        lines += [f"![mlfuse-bench]({png_name})", ""]
    for run in runs:
        lines += [thread_heading(run["threads"]), "",
                  f"Memory-bound workloads at {'x'.join(map(str, run['size']))} f32; copy bandwidth "
                  f"{run['bandwidth_GBps']:.1f} GB/s (non-temporal stores; np.copyto "
                  f"{run['numpy_copy_bandwidth_GBps']:.1f} GB/s); allocator {run['allocator']}; load average "
                  f"{run['loadavg_start'][0]:.1f} -> {run['loadavg_end'][0]:.1f}. "
                  "Cells: median ms (multiple of the bandwidth floor). GEMM graphs: BERT-base shapes, seq 128.", ""]
        rows = derived(run)
        impls = [n for n in ORDER if any(r["impl"] == n for r in rows)]
        lines.append("| workload | floor ms | " + " | ".join(impls) + " | mlfuse vs numpy | kernels mlfuse / XLA |")
        lines.append("|---|---:|" + "---:|" * len(impls) + "---:|---:|")
        for wl in run["workloads"]:
            mine = [r for r in rows if r["workload"] == wl["name"]]
            if "error" in wl:
                lines.append(f"| {wl['name']} | failed: {wl['error']} |")
                continue
            cells = []
            for name in impls:
                r = next((r for r in mine if r["impl"] == name), None)
                if r is None or "ms" not in r:
                    cells.append("—")
                else:
                    mark = " ⚠" if "MISMATCH" in r["note"] else ""
                    cells.append(f"{r['ms']:.1f} ({r['x_floor']:.2f}x){mark}")
            ml = next((r for r in mine if r["impl"] == "mlfuse" and "ms" in r), None)
            xla = next((r for r in mine if r["impl"] == "jax.jit" and r.get("kernels")), None)
            kern = (f"{ml['kernels'][0]}/{ml['kernels'][1]}" if ml and ml.get("kernels") else "—") + " / " + (
                f"{xla['kernels'][0]}/{xla['kernels'][1]}" if xla else "—")
            speed = f"{ml['x_numpy']:.1f}x" if ml and ml.get("x_numpy") else "—"
            floor = mine[0].get("floor_ms")
            lines.append(f"| {wl['name']} | {_fmt(floor, '.1f')} | " + " | ".join(cells) + f" | {speed} | {kern} |")
        lines += ["", "Compile seconds: " + "; ".join(
            f"{wl['name']}: " + ", ".join(f"{n} {c['compile_s']:.1f}" for n, c in wl["contestants"].items()
                                          if c["compile_s"] is not None)
            for wl in run["workloads"] if "contestants" in wl), ""]
        skipped = sorted({f"{n}: {why}" for wl in run["workloads"] for n, why in wl.get("skipped", {}).items()})
        if skipped:
            lines += ["Skipped: " + "; ".join(skipped), ""]
        lines += [f"- {s}" for s in summary_lines(run)] + [""]
    return "\n".join(lines)


def plot(runs: list[dict], path: Path, title: str) -> bool:
    try:
        import matplotlib  # pyright: ignore[reportMissingImports]  (optional)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # pyright: ignore[reportMissingImports]  (optional)
    except ImportError:
        print("matplotlib not installed: no plot", file=sys.stderr)
        return False
    fig, axes = plt.subplots(2, len(runs), figsize=(7 * len(runs), 9), squeeze=False)
    for col, run in enumerate(runs):
        rows = [r for r in derived(run) if "ms" in r]
        workloads = list(dict.fromkeys(r["workload"] for r in rows))
        impls = [n for n in ORDER if any(r["impl"] == n for r in rows)]
        width = 0.8 / max(1, len(impls))
        for panel, (key, label, only_memory) in enumerate([("x_floor", "multiple of the bandwidth floor (lower is better)", True),
                                                           ("x_numpy", "speedup over numpy op by op (higher is better)", False)]):
            ax = axes[panel][col]
            names = [w for w in workloads if not only_memory or any(r["workload"] == w and r["memory_bound"] for r in rows)]
            for i, impl in enumerate(impls):
                values = [next((r[key] for r in rows if r["workload"] == w and r["impl"] == impl and r.get(key)), 0)
                          for w in names]
                ax.bar([j + i * width for j in range(len(names))], values, width, label=impl)
            if key == "x_floor":
                ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_yscale("log")
            ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))], names, rotation=35, ha="right", fontsize=8)
            t = run["threads"]
            ax.set_title(f"{t} thread{'s' * (t > 1)}: {label}", fontsize=9)
            ax.grid(axis="y", which="both", alpha=0.3)
        axes[0][col].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--worker-threads" in argv:  # pin before numpy or any other runtime starts threads
        pin(int(argv[argv.index("--worker-threads") + 1]))
    if "--frontends" in argv:  # its own options and tables: bench/frontends.py
        _import_bench()
        from bench import frontends

        return frontends.main(argv)
    if "--models" in argv:  # whole zoo models against onnxruntime, torch eager, inductor: bench/models_bench.py
        _import_bench()
        from bench import models_bench

        return models_bench.main(argv)
    if "--call-paths" in argv:  # one graph's aligned out=, allocating and np.empty calls: bench/call_paths.py
        _import_bench()
        from bench import call_paths

        return call_paths.main(argv)
    args = resolve(build_parser().parse_args(argv))
    if args.worker:
        return worker(args)
    info = machine_info()
    print(f"mlfuse-bench on {info.get('cpu')} ({info['cpus']} CPUs), {info['date']}", flush=True)
    runs = []
    for threads in args.threads:
        run = run_worker(threads, args, argv)
        runs.append(run)
        print("\n" + format_table(run) + "\n", flush=True)
    result = {"machine": info, "command": "mlfuse-bench " + " ".join(argv), "runs": runs}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    size = "x".join(map(str, args.size))
    png = None
    if not args.no_plot and plot(runs, args.png, f"mlfuse-bench {size} f32 - {info.get('cpu')} - {info['date']}"):
        png = args.png
    args.md.write_text(markdown(runs, info, os.path.relpath(png, args.md.parent) if png else None, result["command"]))
    print(f"wrote {args.json}" + (f", {png}" if png else "") + f", {args.md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
