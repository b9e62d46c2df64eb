"""mlfuse-run: compile a graph (.mlir or .onnx), run it on given or random inputs, check it.

    mlfuse-run model.mlir --check --repeat 10
    mlfuse-run model.onnx --inputs in.npz --outputs out.npz --shape input=2x128x768

Random inputs are standard normal floats (integers in [-8, 8), booleans at
random), drawn from --seed. --check compares every output with the numpy
reference (mlfuse.reference) and exits 1 on a mismatch, printing the largest
absolute and relative errors. Errors in the input are reported without a
traceback, with exit status 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np

from mlfuse.diagnostics import Diagnostic

RTOL = 1e-4
ATOL = 1e-5


def parse_shapes(items: Sequence[str]) -> dict[str, list[int]]:
    shapes = {}
    for item in items:
        name, _, dims = item.partition("=")
        try:
            shapes[name] = [int(d) for d in dims.split("x")]
        except ValueError:
            raise Diagnostic(f"--shape expects NAME=2x128x768, got '{item}'") from None
        if not name or any(d < 0 for d in shapes[name]):
            raise Diagnostic(f"--shape expects NAME=2x128x768, got '{item}'")
    return shapes


def random_input(spec, rng: np.random.Generator) -> np.ndarray:
    if spec.dtype == np.bool_:
        return rng.random(spec.shape) < 0.5
    if spec.dtype.kind == "i":
        return rng.integers(-8, 8, size=spec.shape).astype(spec.dtype)
    return rng.standard_normal(spec.shape).astype(spec.dtype)


def load_inputs(path: str, specs) -> list[np.ndarray]:
    try:
        data = np.load(path)
    except (OSError, ValueError) as e:
        raise Diagnostic(f"cannot read inputs from {path}: {e}") from None
    arrays = []
    for i, spec in enumerate(specs):
        for key in (spec.name, f"arg{i}", f"arr_{i}"):
            if key in data:
                arrays.append(data[key])
                break
        else:
            raise Diagnostic(f"{path} has no array for input '{spec.name}' (keys: {', '.join(data.files)})")
    return arrays


def compare(got: np.ndarray, want: np.ndarray) -> tuple[bool, float, float]:
    if got.dtype.kind in "bi":
        bad = int(np.sum(got != want))
        return bad == 0, float(bad), float(bad)
    g, w = got.astype(np.float64), want.astype(np.float64)
    ok = bool(np.allclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True))
    finite = np.isfinite(w) & np.isfinite(g)
    abs_err = np.abs(g - w)[finite]
    rel_err = (np.abs(g - w) / np.maximum(np.abs(w), ATOL))[finite]
    return ok, float(abs_err.max(initial=0)), float(rel_err.max(initial=0))


def run(args: argparse.Namespace) -> int:
    import mlfuse
    from mlfuse.api import compile as compile_module
    from mlfuse.api import parse

    shapes = parse_shapes(args.shape)
    module = parse(args.file, input_shapes=shapes or None)
    if args.threads:
        from mlfuse.backend import cpu

        cpu.set_num_threads(args.threads)
    start = time.perf_counter()
    fn = compile_module(module, entry=args.entry, fuse=not args.no_fuse)
    compile_s = time.perf_counter() - start
    rng = np.random.default_rng(args.seed)
    inputs = load_inputs(args.inputs, fn.inputs) if args.inputs else [random_input(s, rng) for s in fn.inputs]
    try:
        outputs = fn(*inputs)
    except ValueError as e:
        raise Diagnostic(str(e)) from None
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        fn(*inputs)
        times.append(time.perf_counter() - t)
    print(f"compiled @{args.entry} in {compile_s:.3f} s")
    if times:
        print(f"ran {args.repeat} times: median {1e3 * float(np.median(times)):.3f} ms, min {1e3 * min(times):.3f} ms")
    for spec, out in zip(fn.outputs, outputs):
        stats = f"min {out.min():.6g} max {out.max():.6g}" if out.size and out.dtype != np.bool_ else ""
        print(f"output {spec.name}: {out.dtype}{list(out.shape)} {stats}")
    if args.outputs:
        np.savez(args.outputs, **{s.name: o for s, o in zip(fn.outputs, outputs)})
        print(f"wrote {args.outputs}")
    if not args.check:
        return 0
    expected = mlfuse.reference(module, args.entry)(*inputs)
    status = 0
    for spec, got, want in zip(fn.outputs, outputs, expected):
        ok, abs_err, rel_err = compare(got, want)
        verdict = "ok" if ok else "MISMATCH"
        print(f"check {spec.name}: {verdict} (max abs error {abs_err:.3g}, max rel error {rel_err:.3g}; rtol {RTOL}, atol {ATOL})")
        status |= 0 if ok else 1
    return status


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mlfuse-run", description=__doc__.split("\n")[0])
    parser.error = lambda message: (print(f"mlfuse-run: error: {message}", file=sys.stderr), sys.exit(1))  # type: ignore[method-assign]
    parser.add_argument("file", help=".mlir or .onnx file")
    parser.add_argument("--entry", default="main")
    parser.add_argument("--inputs", help=".npz with one array per input (by name, argN or arr_N)")
    parser.add_argument("--outputs", help="write the outputs to this .npz, keyed by output name")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check", action="store_true", help="compare with the numpy reference")
    parser.add_argument("--repeat", type=int, default=0, help="time this many extra runs")
    parser.add_argument("--threads", type=int, default=0, help="bound the thread team (default: all cores)")
    parser.add_argument("--no-fuse", action="store_true", help="compile every op as its own kernel")
    parser.add_argument("--shape", action="append", default=[], help="NAME=2x128x768 for symbolic ONNX dims")
    args = parser.parse_args(argv)
    from mlfuse.reference import ReferenceError as InterpreterError

    try:
        sys.exit(run(args))
    except Diagnostic as d:
        print(d, file=sys.stderr)
        sys.exit(1)
    except (InterpreterError, ValueError, OSError) as e:  # bad entry name, inputs, files
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
