"""Run every GPU test graph and suite graph on the device: correctness against numpy, and timings.

For each graph (tests/gpu_graphs/*.mlir as they are, bench/graphs as
fusion-plan{target=gpu} groups them): mlfuse's kernels run on random inputs and
are compared with the numpy reference (rtol 1e-4, atol 1e-5 of the output's
magnitude: reductions over thousands of elements reassociate). Then, inputs on
the device, median times of CUDA-event-timed calls:

- mlfuse: all launches of one call (intermediates preallocated);
- torch eager and torch.compile of the same graph (bench/gpu/torch_graph.py),
  fp32 matmuls without TF32, as mlfuse computes them;
- a device-to-device copy of the bytes the graph must move (its inputs and
  outputs): the memory roofline.

All graphs are checked first, then timed (torch.compile for the suite graphs
only: it takes seconds per graph). Rows are appended to OUT/gpu-check.jsonl as
they finish (a graph's last line is its final row; a hang loses only the rest;
graphs with a grid barrier are checked last); OUT/gpu-check.json and OUT/gpu-check.md summarise. `--budget-s` is the
time this script may take: timing stops when it runs out, torch.compile a minute
before.

    python bench/gpu/check.py --out OUT [--budget-s 330] [--graphs a,b] [--no-timing]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.graphs import SUITE, random_inputs  # noqa: E402
from mlfuse.api import run_pipeline  # noqa: E402
from mlfuse.ir import parse_module  # noqa: E402
from mlfuse.reference import reference  # noqa: E402

GPU_PLAN = ["canonicalize", "cse", "fusion-plan{target=gpu}"]
COOPERATIVE_LAST = ("gpu_graphs/center_global", "suite/layernorm_backward")
RTOL, ATOL_OF_MAGNITUDE = 1e-4, 1e-5


def graph_ids() -> list[str]:
    ids = [f"gpu_graphs/{p.stem}" for p in sorted((ROOT / "tests" / "gpu_graphs").glob("*.mlir"))]
    suite = sorted(SUITE, key=lambda n: (n == "stacked_bert", n))
    ids += [f"suite/{n}" for n in suite]
    return [g for g in ids if g not in COOPERATIVE_LAST] + [g for g in COOPERATIVE_LAST if g in ids]


def load(graph_id: str):
    """(module, numpy inputs) of a graph."""
    kind, name = graph_id.split("/")
    if kind == "gpu_graphs":
        module = parse_module((ROOT / "tests" / "gpu_graphs" / f"{name}.mlir").read_text())
        positive: tuple[str, ...] = ()
    else:
        module = SUITE[name].build()
        run_pipeline(module, GPU_PLAN)
        positive = SUITE[name].positive_inputs
    return module, random_inputs(module, seed=0, positive=positive)


def errors(got, want) -> tuple[float, bool]:
    """Largest error relative to each output's magnitude, and whether all are within tolerance."""
    worst, ok = 0.0, True
    for g, w in zip(got, want):
        g = np.asarray(g, dtype=np.float64)
        w = np.asarray(w, dtype=np.float64)
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        scale = scale if scale > 0 else 1.0
        worst = max(worst, float(np.max(np.abs(g - w))) / scale if w.size else 0.0)
        ok = ok and g.shape == w.shape and bool(np.allclose(g, w, rtol=RTOL, atol=ATOL_OF_MAGNITUDE * scale))
    return worst, ok


def cuda_time(torch, fn, repeat: int = 30, warmup: int = 3) -> float:
    """Median seconds of fn() between CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3)
    return float(np.median(samples))


def check_graph(graph_id: str) -> tuple[dict, tuple]:
    """Phase 1: compile, run once, compare with numpy. Returns the row and what timing needs."""
    from mlfuse.backend.gpu.runtime import compile_gpu

    row: dict = {"graph": graph_id}
    t0 = time.perf_counter()
    module, inputs = load(graph_id)
    want = reference(module)(*inputs)
    row["plan_and_reference_s"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    exe = compile_gpu(module)
    row["compile_s"] = round(time.perf_counter() - t0, 2)
    row["driver"] = exe.driver.name
    row["kernels"] = len(exe.kernels)
    row["cooperative"] = sorted(exe.wave)
    got = exe(*inputs)
    row["max_rel_error"], row["ok"] = errors(got, want)
    return row, (module, inputs, want, exe)


def time_graph(row: dict, state: tuple, deadline: float, torch) -> None:
    """Phase 2: mlfuse, torch eager, torch.compile (suite graphs) and a copy, inputs on the device."""
    module, inputs, want, exe = state
    device_inputs = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in inputs]
    row["mlfuse_us"] = round(exe.time(*device_inputs, repeat=30) * 1e6, 2)
    nbytes = sum(a.nbytes for a in inputs) + sum(np.asarray(w).nbytes for w in want)
    row["bytes"] = int(nbytes)
    src = torch.empty(max(1, nbytes // 2), dtype=torch.uint8, device="cuda")  # read + write = nbytes
    dst = torch.empty_like(src)
    row["copy_us"] = round(cuda_time(torch, lambda: dst.copy_(src)) * 1e6, 2)
    row["mlfuse_GBps"] = round(nbytes / (row["mlfuse_us"] * 1e-6) / 1e9, 1)
    row["fraction_of_copy"] = round(row["copy_us"] / row["mlfuse_us"], 3)

    from bench.gpu.torch_graph import torch_function

    fn = torch_function(module)
    eager_out = fn(*device_inputs)
    row["torch_max_rel_error"], _ = errors([t.float().cpu().numpy() for t in eager_out], want)
    row["torch_eager_us"] = round(cuda_time(torch, lambda: fn(*device_inputs)) * 1e6, 2)
    row["speedup_vs_eager"] = round(row["torch_eager_us"] / row["mlfuse_us"], 2)
    if not row["graph"].startswith("suite/"):
        return
    if time.monotonic() > deadline - 60:
        row["torch_compile"] = "skipped: time budget"
        return
    try:
        compiled = torch.compile(fn)
        t0 = time.perf_counter()
        compiled(*device_inputs)
        torch.cuda.synchronize()
        row["torch_compile_s"] = round(time.perf_counter() - t0, 1)
        row["torch_compile_us"] = round(cuda_time(torch, lambda: compiled(*device_inputs)) * 1e6, 2)
        row["speedup_vs_compile"] = round(row["torch_compile_us"] / row["mlfuse_us"], 2)
    except Exception as e:  # a baseline failing is reported, not fatal
        row["torch_compile"] = f"failed: {type(e).__name__}: {str(e)[:200]}"


def markdown(rows: list[dict]) -> str:
    head = "| graph | ok | max rel error | kernels | mlfuse us | torch eager us | torch.compile us | copy us | GB/s | x eager | x compile |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        cells = [r["graph"], "yes" if r.get("ok") else "NO: " + r.get("error", "wrong values")[:60]]
        for key in ("max_rel_error", "kernels", "mlfuse_us", "torch_eager_us", "torch_compile_us", "copy_us",
                    "mlfuse_GBps", "speedup_vs_eager", "speedup_vs_compile"):
            value = r.get(key, "")
            cells.append(f"{value:.1e}" if key == "max_rel_error" and value != "" else str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--budget-s", type=float, default=330)
    parser.add_argument("--graphs", default="", help="comma-separated ids (gpu_graphs/NAME, suite/NAME)")
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("--tag", default="gpu-check", help="file name stem of the results")
    args = parser.parse_args()
    deadline = time.monotonic() + args.budget_s
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 matmuls, as mlfuse computes them
        torch.backends.cudnn.allow_tf32 = False
        if not torch.cuda.is_available():
            torch = None
    except ImportError:
        torch = None
    ids = [g for g in graph_ids() if not args.graphs or g in args.graphs.split(",")]
    jsonl = out / f"{args.tag}.jsonl"
    jsonl.write_text("")

    def record(row: dict) -> None:
        print(json.dumps(row), flush=True)
        with jsonl.open("a") as f:
            f.write(json.dumps(row) + "\n")

    # phase 1: every graph's values first (graphs with a grid barrier last: a hang loses only them)
    rows: list[dict] = []
    states: dict[str, tuple] = {}
    for graph_id in ids:
        if time.monotonic() > deadline - 15:
            row = {"graph": graph_id, "ok": False, "error": "not run: time budget"}
        else:
            try:
                row, states[graph_id] = check_graph(graph_id)
            except Exception as e:  # report and go on: the device keeps nothing
                row = {"graph": graph_id, "ok": False, "error": f"{type(e).__name__}: {e}"}
                traceback.print_exc()
        record(row)
        rows.append(row)
    # phase 2: timings, while the budget lasts
    if not args.no_timing and torch is not None:
        for row in rows:
            if row["graph"] not in states or time.monotonic() > deadline - 20:
                continue
            try:
                time_graph(row, states[row["graph"]], deadline, torch)
            except Exception as e:
                row["timing_error"] = f"{type(e).__name__}: {e}"
                traceback.print_exc()
            record(row)
    failures = sum(not row.get("ok", False) for row in rows)
    (out / f"{args.tag}.json").write_text(json.dumps(rows, indent=1))
    (out / f"{args.tag}.md").write_text(markdown(rows))
    print(f"{len(rows) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
