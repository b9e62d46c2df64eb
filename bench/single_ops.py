"""Every graph op alone on 16M f32 elements: mlfuse (unfused CPU backend) against numpy.

    .venv/bin/python bench/single_ops.py [--size 4096] [--repeat 7] [--threads 1,2]
    .venv/bin/python bench/single_ops.py --transcendentals [--threads 2] [--rounds 15]
    .venv/bin/python bench/single_ops.py --ab REV [--rounds 15]
    .venv/bin/python bench/single_ops.py --expansions-from OLD.py [--size 512 --threads 1 --repeat 10]

Prints, per op and thread count, the medians of interleaved runs (mlfuse into a
preallocated output, numpy allocating its result as users call it, and numpy
with `out=` where it has one) and the ratio numpy / mlfuse. The CPU backend's
goal: every op within 1.5x of numpy (ratio >= 0.67), transcendentals far ahead
(they vectorize). Machines here are shared: read ratios, not absolute times.

--transcendentals times copy, exp, tanh and erf (issue #14: each within 1.5x of a
copy, the data coming from memory) call by call, round robin, into aligned
`out=` arrays, with numpy's np.copyto/np.exp/np.tanh/scipy's erf (all with out=)
in the same rounds; it prints medians and the ratios to mlfuse's copy, of wall
time and of the process's CPU time (all threads: on a busy shared machine the
wall time also counts the time the threads waited for a core, CPU time does not).
--ab REV runs bench.ab (the working tree against revision REV, side by side in
one run) on the same four graphs.
--expansions-from OLD.py compiles exp, tanh and erf twice in one process, with the
F32Emitter of OLD.py (e.g. `git show HEAD:mlfuse/conversion/expand_math.py`) and with
this tree's, and times them call by call, round robin (`--repeat` calls per sample),
next to a copy: only the expansions differ. Medians of wall and CPU time.
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


TRANSCENDENTALS = ("copy", "exp", "tanh", "erf")


def unary_graph(op: str, n: int) -> str:
    t = f"tensor<{n}x{n}xf32>"
    if op == "copy":  # the output is the input: the runtime's kernel copies it
        return f"func.func @main(%x: {t}) -> {t} {{\n  func.return %x : {t}\n}}"
    return f"func.func @main(%x: {t}) -> {t} {{\n  %y = graph.{op} %x : {t}\n  func.return %y : {t}\n}}"


def transcendentals(n: int, threads: list[int], rounds: int) -> None:
    """copy, exp, tanh, erf: mlfuse and numpy call by call in the same rounds."""
    x = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    numpy_ops = {
        "copy": lambda o: np.copyto(o, x),
        "exp": lambda o: np.exp(x, out=o),
        "tanh": lambda o: np.tanh(x, out=o),
        "erf": lambda o: special.erf(x, out=o),
    }
    fns = {op: mlfuse.compile(unary_graph(op, n), fuse=False) for op in TRANSCENDENTALS}
    out = aligned_empty((n, n), np.float32)
    print(f"{n}x{n} f32 ({n * n / 2**20:.0f}M), aligned out=, medians of {rounds} rounds; "
          "x copy = time / mlfuse's copy time")
    for t in threads:
        cpu.set_num_threads(t)
        times: dict[tuple[str, str], list[float]] = {}
        calls = [(("mlfuse", op), lambda f=fns[op]: f(x, out=[out])) for op in TRANSCENDENTALS]
        calls += [(("numpy", op), lambda g=numpy_ops[op]: g(out)) for op in TRANSCENDENTALS]
        for _, call in calls:  # warm up the thread team, the pages and numpy
            call()
        cpu_times: dict[tuple[str, str], list[float]] = {}
        for r in range(rounds):
            for key, call in calls if r % 2 == 0 else calls[::-1]:
                start, start_cpu = time.perf_counter(), time.process_time()
                call()
                times.setdefault(key, []).append(1e3 * (time.perf_counter() - start))
                cpu_times.setdefault(key, []).append(1e3 * (time.process_time() - start_cpu))
        med = {k: float(np.median(v)) for k, v in times.items()}
        med_cpu = {k: float(np.median(v)) for k, v in cpu_times.items()}
        copy, copy_cpu = med[("mlfuse", "copy")], med_cpu[("mlfuse", "copy")]
        print(f"\n{t} thread{'s' if t > 1 else ''}")
        print("| op | mlfuse ms | x copy | CPU ms, all threads | x copy (CPU) | numpy ms (1 thread) | numpy / mlfuse |\n"
              "|---|---:|---:|---:|---:|---:|---:|")
        for op in TRANSCENDENTALS:
            m, c, p = med[("mlfuse", op)], med_cpu[("mlfuse", op)], med[("numpy", op)]
            print(f"| {op} | {m:.2f} | {m / copy:.2f} | {c:.1f} | {c / copy_cpu:.2f} | {p:.2f} | {p / m:.2f} |")


def ab(base: str, n: int, threads: int, rounds: int) -> None:
    """bench.ab on copy/exp/tanh/erf: this tree against `base`, side by side."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench import ab as ab_mod
    from bench import workloads
    from mlfuse.ir import parse_module

    for op in TRANSCENDENTALS:
        text = unary_graph(op, n)
        workloads.WORKLOADS[f"single_{op}"] = workloads.Workload(
            f"single_{op}", f"graph.{op} alone", lambda rows, cols, text=text: parse_module(text),
            lambda lib, x: (x,))
    ab_mod.main(["--base", base, "--size", f"{n}x{n}", "--threads", str(threads), "--rounds", str(rounds),
                 "--paths", "out=aligned", "--graphs", *(f"single_{op}" for op in TRANSCENDENTALS)])


def expansions_ab(path: str, n: int, threads: int, rounds: int, calls: int) -> None:
    """exp, tanh, erf with OLD.py's expansions and with this tree's, side by side."""
    import importlib.util
    import os

    from mlfuse.conversion import expand_math

    os.environ["MLFUSE_CACHE_DIR"] = "off"  # the graph cache keys on this tree's sources
    spec = importlib.util.spec_from_file_location("old_expand_math", path)
    assert spec is not None and spec.loader is not None, path
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    x = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    out = aligned_empty((n, n), np.dtype(np.float32))
    fns = {"copy": mlfuse.compile(unary_graph("copy", n), fuse=False)}
    for op in TRANSCENDENTALS[1:]:
        fns[f"{op} after"] = mlfuse.compile(unary_graph(op, n), fuse=False)
        current = expand_math.F32Emitter
        expand_math.F32Emitter = old.F32Emitter
        try:
            fns[f"{op} before"] = mlfuse.compile(unary_graph(op, n), fuse=False)
        finally:
            expand_math.F32Emitter = current
    cpu.set_num_threads(threads)
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in fns}
    for f in fns.values():
        f(x, out=[out])
    for r in range(rounds):
        for key in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(calls):
                fns[key](x, out=[out])
            times[key].append((1e3 * (time.perf_counter() - start) / calls, 1e3 * (time.process_time() - start_cpu) / calls))
    wall = {k: float(np.median([t[0] for t in v])) for k, v in times.items()}
    cpu_ms = {k: float(np.median([t[1] for t in v])) for k, v in times.items()}
    print(f"{n}x{n} f32, {threads} thread(s), medians of {rounds} rounds of {calls} calls\n"
          "| graph | ms | x copy | CPU ms | x copy (CPU) |\n|---|---:|---:|---:|---:|")
    for k in fns:
        print(f"| {k} | {wall[k]:.3f} | {wall[k] / wall['copy']:.2f} | {cpu_ms[k]:.3f} | {cpu_ms[k] / cpu_ms['copy']:.2f} |")


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
    parser.add_argument("--transcendentals", action="store_true", help="copy, exp, tanh, erf against copy")
    parser.add_argument("--ab", metavar="REV", help="copy, exp, tanh, erf: working tree against REV (bench.ab)")
    parser.add_argument("--rounds", type=int, default=15, help="rounds for --transcendentals and --ab")
    parser.add_argument("--expansions-from", metavar="OLD.py", help="exp, tanh, erf: OLD.py's expansions against this tree's")
    args = parser.parse_args()
    if args.expansions_from:
        expansions_ab(args.expansions_from, args.size, int(args.threads.split(",")[-1]), args.rounds, args.repeat)
        return
    if args.transcendentals:
        transcendentals(args.size, [int(t) for t in args.threads.split(",")], args.rounds)
        return
    if args.ab:
        ab(args.ab, args.size, int(args.threads.split(",")[-1]), args.rounds)
        return
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
                mine.append(median_ms(lambda *a, fn=fn, out=out: fn(*a, out=out), inputs, args.repeat))
                theirs.append(median_ms(ref, inputs, args.repeat))
            m, t = float(np.median(mine)), float(np.median(theirs))
            print(f"{name:20s} {threads:3d} {m:10.2f} {t:10.2f} {t / m:6.2f}")


if __name__ == "__main__":
    main()
