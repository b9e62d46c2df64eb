"""Run every GPU test graph on the device: correctness against numpy, and timings.

Times (median of CUDA-event-timed calls, inputs already on the device) are
compared with a device-to-device copy of the bytes the graph must read and write
(its memory roofline) and, where torch is installed, torch eager on the same
inputs through the numpy reference's op sequence is left to bench/ (see notes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mlfuse.backend.gpu.runtime import compile_gpu  # noqa: E402
from mlfuse.dialects import graph  # noqa: E402
from mlfuse.ir import parse_module  # noqa: E402
from mlfuse.reference import find_function, reference  # noqa: E402


def random_inputs(text: str, rng) -> list[np.ndarray]:
    fn = find_function(parse_module(text), "main")
    arrays = []
    for t in fn.function_type.inputs.data:
        dtype = graph.numpy_dtype(t.get_element_type())
        shape = tuple(t.get_shape())
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype == np.bool_:
            arrays.append(rng.random(shape) < 0.5)
        else:
            arrays.append(rng.integers(-100, 100, shape).astype(dtype))
    return arrays


def copy_time(exe, nbytes: int, repeat: int = 20) -> float:
    d = exe.driver
    src, dst = d.alloc(nbytes), d.alloc(nbytes)
    samples = []
    for _ in range(repeat):
        start, end = d.event(), d.event()
        d.record(start)
        d.copy(d.pointer(dst), d.pointer(src), nbytes)
        d.record(end)
        samples.append(d.elapsed(start, end))
    return float(np.median(samples))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="bench/results/gpu-check.json")
    args = parser.parse_args()
    graphs = sorted((ROOT / "tests" / "gpu_graphs").glob("*.mlir")) + sorted((ROOT / "bench" / "suite").glob("*.mlir"))
    rng = np.random.default_rng(0)
    results, failures = [], 0
    for path in graphs:
        text = path.read_text()
        row = {"graph": path.stem}
        try:
            t0 = time.perf_counter()
            exe = compile_gpu(text)
            row["compile_s"] = round(time.perf_counter() - t0, 3)
            row["driver"] = exe.driver.name
            inputs = random_inputs(text, rng)
            got = exe(*inputs)
            want = reference(text)(*inputs)
            errors = [float(np.max(np.abs(g.astype(np.float64) - w)) / (1 + np.max(np.abs(w)))) for g, w in zip(got, want)]
            row["max_rel_error"] = max(errors)
            row["ok"] = row["max_rel_error"] < 1e-4
            row["mlfuse_s"] = exe.time(*inputs)
            nbytes = sum(a.nbytes for a in inputs) + sum(w.nbytes for w in want)
            row["copy_s"] = copy_time(exe, nbytes // 2)  # a copy reads and writes: half the bytes each way
            row["fraction_of_copy_bandwidth"] = row["copy_s"] / row["mlfuse_s"]
        except Exception as e:  # report and go on: the device keeps nothing
            row["ok"] = False
            row["error"] = f"{type(e).__name__}: {e}"
        failures += not row.get("ok", False)
        print(json.dumps(row), flush=True)
        results.append(row)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(f"{len(results) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
