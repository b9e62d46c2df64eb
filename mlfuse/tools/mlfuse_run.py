"""mlfuse-run: compile a graph (.mlir or .onnx), run it on given or random inputs, check it.

    mlfuse-run model.mlir --check --repeat 10
    mlfuse-run model.onnx --inputs in.npz --outputs out.npz --shape input=2x128x768
    mlfuse-run model.mlir --target gpu-sim --check

Random inputs are standard normal floats (integers in [-8, 8), booleans at
random), drawn from --seed. --check compares every output with the numpy
reference (mlfuse.reference) and exits 1 on a mismatch, printing the largest
absolute and relative errors. Errors in the input are reported without a
traceback, with exit status 1.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence

import numpy as np

from mlfuse.diagnostics import MAX_DIM, MAX_ELEMENTS, Diagnostic, internal_error

# Tolerances of --check against the float64 reference: elementwise floor values,
# widened by the reduction length and the output's scale (see `tolerances`).
RTOL = 1e-4
ATOL = 1e-5


def parse_shapes(items: Sequence[str]) -> dict[str, list[int]]:
    """`--shape NAME=2x128x768` options; dimensions within the parser's limits (MAX_DIM, MAX_ELEMENTS)."""
    shapes = {}
    for item in items:
        name, _, dims = item.partition("=")
        try:
            shapes[name] = [int(d) for d in dims.split("x")]
        except ValueError:
            raise Diagnostic(f"--shape expects NAME=2x128x768, got '{item}'", "<command line>") from None
        if not name or any(d < 0 for d in shapes[name]):
            raise Diagnostic(f"--shape expects NAME=2x128x768, got '{item}'", "<command line>")
        if any(d > MAX_DIM for d in shapes[name]) or math.prod(shapes[name]) > MAX_ELEMENTS:
            raise Diagnostic(f"--shape '{item}' is too large (dimensions up to 2^31 - 1, 2^40 elements in all)", "<command line>")
    return shapes


def parse_input(path: str, shapes: dict[str, list[int]]):
    """The verified module in `path`: ONNX by its extension, else IR text whatever the name."""
    from mlfuse.api import parse

    if path.endswith(".onnx"):
        return parse(path, input_shapes=shapes or None)
    from mlfuse.diagnostics import parse_located, verify_located
    from mlfuse.ir import make_context

    try:
        with open(path, "rb") as f:
            source = f.read()
    except FileNotFoundError:
        raise Diagnostic("no such file", path) from None
    except OSError as e:
        raise Diagnostic(f"could not open input file: {e.strerror or e}", path) from None
    module = parse_located(make_context(), source, path)
    verify_located(module)
    return module


def random_input(spec, rng: np.random.Generator) -> np.ndarray:
    if spec.dtype == np.bool_:
        return rng.random(spec.shape) < 0.5
    if spec.dtype.kind in "iu":
        low = 0 if spec.dtype.kind == "u" else -8
        return rng.integers(low, 8, size=spec.shape).astype(spec.dtype)
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


def tolerances(dtype: np.dtype, reduction_length: int, scale: float) -> tuple[float, float]:
    """(rtol, atol) for a correct `dtype` program against the float64 reference.

        rtol = max(RTOL, 8 eps)
        atol = ATOL + eps * sqrt(n) * log2(2n) * scale

    eps is the output dtype's machine epsilon, n the longest reduction in the graph
    (mlfuse.reference: reductions, GEMM depth, conv windows) and scale the largest
    finite |reference| in the output. A blocked or pairwise sum of n terms errs by at
    most about eps * log2(n) * sum|x_i|, and sum|x_i| is about sqrt(n) * max|sum| for
    zero-mean data (about max|sum| for data of one sign); normalizations inherit the
    error of their sums relative to the same scale. For n = 1 this is the
    elementwise tolerance (a few hundred ulps of f32: chains of transcendentals).
    """
    eps = float(np.finfo(dtype).eps)
    n = max(int(reduction_length), 1)
    return max(RTOL, 8 * eps), ATOL + eps * math.sqrt(n) * math.log2(2 * n) * scale


def compare(got: np.ndarray, want: np.ndarray, reduction_length: int = 1) -> tuple[bool, float, float]:
    """Whether `got` is a correct result for the (preferably float64) reference `want`;
    also the largest absolute and relative errors. Integers and booleans must match
    exactly. Floats: NaN where the reference, rounded to got's dtype, is NaN; the same
    infinity where it overflows (exp(89) is inf in f32); elsewhere within `tolerances`.
    """
    narrow = got.dtype.type.__module__ == "ml_dtypes"  # a narrow ONNX type: the reference gives its storage
    if narrow:
        want = np.ascontiguousarray(want).view(got.dtype)
        if got.dtype.name.startswith(("int", "uint")):
            got, want = got.astype(np.int64), want.astype(np.int64)
    if got.dtype.kind in "biu":
        bad = int(np.sum(got != want))
        return bad == 0, float(bad), float(bad)
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(over="ignore"):
        w_rounded = want.astype(got.dtype).astype(np.float64)
    special = ~np.isfinite(w_rounded) | ~np.isfinite(g)
    same = (g == w_rounded) | (np.isnan(g) & np.isnan(w_rounded))
    finite = ~special
    scale = float(np.abs(w[finite]).max(initial=0))
    if narrow:  # both rounded to the narrow type once, at the end: one of its ulps apart at most
        import ml_dtypes  # there with its arrays (onnx's dependency)

        info = ml_dtypes.finfo(got.dtype)
        rtol, atol = float(info.eps), float(info.smallest_subnormal)
    else:
        rtol, atol = tolerances(got.dtype, reduction_length, scale)
    g, w = g[finite], w[finite]
    err = np.abs(g - w)
    ok = bool(np.all(same[special]) and np.all(err <= atol + rtol * np.abs(w)))
    rel_err = err / np.maximum(np.abs(w), atol)
    return ok, float(err.max(initial=0)), float(rel_err.max(initial=0))


def run(args: argparse.Namespace) -> int:
    import mlfuse
    from mlfuse.api import signature
    from mlfuse.ir import find_function
    from mlfuse.target import get_target

    try:
        target = get_target(args.target)  # an unknown name fails before the input is read
    except Diagnostic as d:
        raise Diagnostic(f"--target: {d.message}", "<command line>") from None
    shapes = parse_shapes(args.shape)
    module = parse_input(args.file, shapes)
    if args.threads:
        from mlfuse.backend import cpu

        cpu.set_num_threads(args.threads)
    input_specs, output_specs = signature(find_function(module, args.entry))
    start = time.perf_counter()
    fn = target.compile(module, args.entry, fuse=not args.no_fuse)
    compile_s = time.perf_counter() - start
    rng = np.random.default_rng(args.seed)
    inputs = load_inputs(args.inputs, input_specs) if args.inputs else [random_input(s, rng) for s in input_specs]
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
    for spec, out in zip(output_specs, outputs):
        stats = f"min {out.min():.6g} max {out.max():.6g}" if out.size and out.dtype != np.bool_ else ""
        print(f"output {spec.name}: {out.dtype}{list(out.shape)} {stats}")
    if args.outputs:
        np.savez(args.outputs, **{s.name: o for s, o in zip(output_specs, outputs)})
        print(f"wrote {args.outputs}")
    if not args.check:
        return 0
    oracle = mlfuse.reference(module, args.entry)
    expected, longest = oracle.widened(*inputs), oracle.longest_reduction()
    status = 0
    for spec, got, want in zip(output_specs, outputs, expected):
        ok, abs_err, rel_err = compare(got, want, longest)
        verdict = "ok" if ok else "MISMATCH"
        print(f"check {spec.name}: {verdict} (max abs error {abs_err:.3g}, max rel error {rel_err:.3g}; "
              f"float64 reference, reductions of {longest})")
        status |= 0 if ok else 1
    return status


def count(text: str) -> int:
    """An argparse type: a whole number >= 0 (--repeat, --threads)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {n}")
    return n


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mlfuse-run", description=__doc__.split("\n")[0])
    parser.error = lambda message: (print(f"mlfuse-run: error: {message}", file=sys.stderr), sys.exit(1))  # type: ignore[method-assign]
    parser.add_argument("file", help=".mlir or .onnx file")
    parser.add_argument("--entry", default="main")
    parser.add_argument("--target", default="cpu", help="compile target: cpu (default), gpu or gpu-sim (mlfuse.target)")
    parser.add_argument("--inputs", help=".npz with one array per input (by name, argN or arr_N)")
    parser.add_argument("--outputs", help="write the outputs to this .npz, keyed by output name")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check", action="store_true", help="compare with the numpy reference")
    parser.add_argument("--repeat", type=count, default=0, help="time this many extra runs")
    parser.add_argument("--threads", type=count, default=0, help="bound the thread team (default, 0: all cores)")
    parser.add_argument("--no-fuse", action="store_true", help="compile every op as its own kernel")
    parser.add_argument("--shape", action="append", default=[], help="NAME=2x128x768 for symbolic ONNX dims")
    args = parser.parse_args(argv)
    try:
        status = run(args)
    except Diagnostic as d:
        d.location = d.location or args.file  # e.g. a bad signature: the input is to blame
        status = report(d)
    except (ValueError, OSError) as e:  # bad inputs, files (a bad entry name is a Diagnostic)
        status = report(Diagnostic(str(e), args.file))
    except MemoryError:
        status = report(Diagnostic("out of memory (the inputs, outputs or reference values are too large)", args.file))
    except Exception as e:  # mlfuse's own bug: said so, with the input as reproducer
        status = report(internal_error(e, "mlfuse-run", read_text(args.file), [f"RUN: mlfuse-run %s {' '.join(argv_tail(argv))}"]))
    sys.exit(status)


def report(d: Diagnostic) -> int:
    print(d, file=sys.stderr)
    return 1


def read_text(path: str) -> str | None:
    """The input as reproducer text; None for ONNX (binary) or an unreadable file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return None if path.endswith(".onnx") else data.decode("utf-8", "replace")


def argv_tail(argv: Sequence[str] | None) -> list[str]:
    """The options of this run, without the input file (the reproducer is the input)."""
    args = list(sys.argv[1:] if argv is None else argv)
    return [a for a in args if not a.endswith((".mlir", ".onnx"))]


if __name__ == "__main__":
    main()
