"""The main job: a LayerNorm graph through mlfuse, from text IR to a fused CPU kernel.

1. parse and canonicalize the graph, print it;
2. plan the fusion (when the planner is installed) and print the plan;
3. compile for this CPU, run on random data, check against the numpy reference;
4. time it against numpy op by op (medians of interleaved runs, 2 threads).
"""

import os
import sys
import time

import numpy as np

import mlfuse
from mlfuse.api import module_text, run_pipeline
from mlfuse.universe import MLFUSE_PASSES

HERE = os.path.dirname(os.path.abspath(__file__))


def numpy_layernorm(x, gamma, beta):
    mean = x.mean(axis=1, keepdims=True)
    d = x - mean
    var = (d * d).mean(axis=1, keepdims=True)
    return d / np.sqrt(var + 1e-5) * gamma + beta


def main() -> int:
    path = os.path.join(HERE, "layernorm.mlir")
    module = mlfuse.parse(path)
    run_pipeline(module, ["canonicalize", "cse"])
    print("== canonicalized graph ==")
    print(module_text(module))
    if "fusion-plan" in MLFUSE_PASSES:
        planned = module.clone()
        run_pipeline(planned, ["fusion-plan{planner=ilp target=cpu}"])
        print("== fusion plan (ilp) ==")
        print(module_text(planned))

    rng = np.random.default_rng(0)
    x = rng.standard_normal((4096, 1024)).astype(np.float32)
    gamma = rng.standard_normal(1024).astype(np.float32)
    beta = rng.standard_normal(1024).astype(np.float32)

    start = time.perf_counter()
    fn = mlfuse.compile(module)
    print(f"== compiled in {time.perf_counter() - start:.2f} s ==")
    (y,) = fn(x, gamma, beta)
    (ref,) = mlfuse.reference(module)(x, gamma, beta)
    err = float(np.max(np.abs(y - ref)))
    ok = err < 1e-4
    print(f"reference output, first row: {np.array2string(ref[0, :6], precision=4)} ...")
    print(f"compiled output,  first row: {np.array2string(y[0, :6], precision=4)} ...")
    print(f"reference check: max abs error {err:.2e} ({'ok' if ok else 'MISMATCH'})")

    out = [np.empty_like(x)]
    times = {"mlfuse": [], "numpy": []}
    for _ in range(7):
        t = time.perf_counter()
        fn(x, gamma, beta, out=out)
        times["mlfuse"].append(time.perf_counter() - t)
        t = time.perf_counter()
        numpy_layernorm(x, gamma, beta)
        times["numpy"].append(time.perf_counter() - t)
    med = {k: 1e3 * float(np.median(v)) for k, v in times.items()}
    print(f"median of 7: mlfuse {med['mlfuse']:.1f} ms, numpy op-by-op {med['numpy']:.1f} ms "
          f"({med['numpy'] / med['mlfuse']:.1f}x)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
