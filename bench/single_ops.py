"""Every graph op alone on 16M f32 elements: mlfuse (unfused CPU backend) against numpy.

    .venv/bin/python bench/single_ops.py [--size 4096] [--repeat 7] [--threads 1,2]

Prints, per op and thread count, the medians of interleaved runs (mlfuse into a
preallocated output, numpy allocating its result as users call it, and numpy
with `out=` where it has one) and the ratio numpy / mlfuse. The CPU backend's
goal: every op within 1.5x of numpy (ratio >= 0.67), transcendentals far ahead
(they vectorize). Machines here are shared: read ratios, not absolute times.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import special

import mlfuse
from mlfuse.api import aligned_empty
from mlfuse.backend import cpu


def workloads(n: int):
    t = f"tensor<{n}x{n}xf32>"
    unary = {
        "exp": np.exp,
        "log": lambda x: np.log(np.abs(x) + 1),
        "tanh": np.tanh,
        "erf": special.erf,
        "sigmoid": special.expit,
        "sqrt": lambda x: np.sqrt(np.abs(x)),
        "relu": lambda x: np.maximum(x, 0),
        "neg": np.negative,
        "gelu": lambda x: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3))),
    }
    for op, ref in unary.items():
        attrs = ' {approximate = "tanh"}' if op == "gelu" else ""
        prep = {"log": lambda x: np.abs(x) + 1, "sqrt": np.abs}.get(op, lambda x: x)
        src = f"func.func @main(%x: {t}) -> {t} {{\n  %y = graph.{op} %x{attrs} : {t}\n  func.return %y : {t}\n}}"
        yield op, src, ref, 1, prep
    for op, ref in {"add": np.add, "mul": np.multiply, "div": np.divide, "max": np.maximum}.items():
        src = f"func.func @main(%x: {t}, %y: {t}) -> {t} {{\n  %z = graph.{op} %x, %y : {t}\n  func.return %z : {t}\n}}"
        yield op, src, ref, 2, lambda x: x
    for kind, ref in {"sum": np.sum, "max": np.max}.items():
        for axis in (0, 1):
            src = (
                f"func.func @main(%x: {t}) -> tensor<{n}xf32> {{\n"
                f"  %y = graph.reduce_{kind} %x {{axes = array<i64: {axis}>}} : {t} -> tensor<{n}xf32>\n"
                f"  func.return %y : tensor<{n}xf32>\n}}"
            )
            yield f"reduce_{kind} axis {axis}", src, (lambda x, a=axis, f=ref: f(x, axis=a)), 1, lambda x: x
    src = (
        f"func.func @main(%x: {t}) -> {t} {{\n"
        f"  %y = graph.transpose %x {{perm = array<i64: 1, 0>}} : {t} -> {t}\n  func.return %y : {t}\n}}"
    )
    yield "transpose", src, lambda x: np.ascontiguousarray(x.T), 1, lambda x: x


def median_ms(fn, args, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=4096, help="n for n x n f32 operands")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--ops", nargs="*", help="only the ops whose names start with these")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n = args.size
    print(f"{n}x{n} f32, medians of {args.repeat}; ratio = numpy / mlfuse (> 1: mlfuse faster)")
    print(f"{'op':20s} {'thr':>3s} {'mlfuse ms':>10s} {'numpy ms':>10s} {'ratio':>6s}")
    for name, src, ref, arity, prep in workloads(n):
        if args.ops and not name.startswith(tuple(args.ops)):
            continue
        inputs = [prep(rng.standard_normal((n, n)).astype(np.float32)) for _ in range(arity)]
        fn = mlfuse.compile(src, fuse=False)
        out = [aligned_empty(s.shape, s.dtype) for s in fn.outputs]
        for threads in (int(t) for t in args.threads.split(",")):
            cpu.set_num_threads(threads)
            fn(*inputs, out=out)  # warm up the thread team and the pages
            mine, theirs = [], []
            for _ in range(3):  # interleave: the machine's noise hits both alike
                mine.append(median_ms(lambda *a: fn(*a, out=out), inputs, args.repeat))
                theirs.append(median_ms(ref, inputs, args.repeat))
            m, t = float(np.median(mine)), float(np.median(theirs))
            print(f"{name:20s} {threads:3d} {m:10.2f} {t:10.2f} {t / m:6.2f}")


if __name__ == "__main__":
    main()
