"""The ONNX backend node suite against mlfuse, generated from the installed onnx package.

    python -m bench.onnx_conformance                 # every case, table to bench/results/onnx_conformance.md
    python -m bench.onnx_conformance --only test_add  # cases whose name starts with test_add

onnx ships its node tests as generators (`onnx.backend.test.case.node`): a one-node
(or few-node) model and its expected outputs per case. Nothing of them is committed
here; they are generated at run time. A case is *in table* when all its operators
are in mlfuse's ONNX table, and *in scope* when, besides, every tensor it touches
has a type mlfuse supports (SUPPORTED_TYPES). Each in-table case is imported,
compiled for the CPU and run in a forked child (a crash kills the child, not the
run), and ends in one of:

  pass        outputs match onnx's expected ones within the case's rtol/atol
  rejected    a Diagnostic naming the node (or the model) and the reason
  wrong       compiled and ran, but an output differs: a bug
  crash       an exception that is not a Diagnostic, an internal error (a Diagnostic that
              says so: a pass raised), a signal, or a timeout: a bug
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import pickle
import re
import signal
import sys
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "onnx_conformance.md"
TIMEOUT_S = 120
STATUSES = ("pass", "rejected", "wrong", "crash")


@dataclass(frozen=True)
class Outcome:
    name: str
    ops: tuple[str, ...]
    in_scope: bool
    status: str
    detail: str = ""


def supported_types() -> set[int]:
    """The ONNX element types of mlfuse's ONNX table, and the narrow ones it carries as storage."""
    from mlfuse.frontend.onnx_narrow import NARROW
    from mlfuse.frontend.onnx_ops import ELEMENT_TYPES

    return set(ELEMENT_TYPES) | set(NARROW)


def model_types(model) -> set[int]:
    """Every element type a model's inputs, outputs, initializers and value infos use."""
    g = model.graph
    infos = [*g.input, *g.output, *g.value_info]
    types = {i.type.tensor_type.elem_type for i in infos if i.type.HasField("tensor_type")}
    types |= {t.data_type for t in g.initializer}
    for node in g.node:
        for a in node.attribute:
            if a.HasField("t"):
                types.add(a.t.data_type)
    return types - {0}


def in_table_cases(prefix: str = "") -> list:
    """The cases whose operators mlfuse's table has, or whose schema defines by a
    function body that the importer expands (mlfuse/frontend/onnx_functions.py), or that
    onnx's version converter replaces (REPLACED_BY_UPGRADE)."""
    from onnx.backend.test.case.node import collect_testcases

    from mlfuse.frontend.onnx import REPLACED_BY_UPGRADE
    from mlfuse.frontend.onnx_functions import function_schema
    from mlfuse.frontend.onnx_ops import OPS, op_key

    def known(node, model) -> bool:
        versions = {o.domain: o.version for o in model.opset_import}
        return (op_key(node) in OPS or node.op_type in REPLACED_BY_UPGRADE
                or function_schema(node, opset(model), versions) is not None)

    with np.errstate(all="ignore"):
        cases = collect_testcases()
    def opset(model) -> int:
        return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=1)

    return [c for c in cases if c.model is not None and c.name.startswith(prefix)
            and all(known(n, c.model) for n in c.model.graph.node)]


def as_array(value):
    """Node-test data is a numpy array or, for some cases (Cast), a TensorProto; a
    sequence (a list) stays a list, for mlfuse to reject at its input."""
    from onnx import TensorProto, numpy_helper

    if isinstance(value, list):
        return value
    return numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.asarray(value)


def compile_case(model, inputs: list[np.ndarray]):
    """mlfuse.compile(model), with graph inputs that must be known at compile time (the axes,
    shapes, pads... that node tests pass as inputs) frozen to this data set's values, as a
    user does with `input_values`. The compiled function and the inputs it still takes."""
    import mlfuse
    from mlfuse.diagnostics import Diagnostic
    from mlfuse.frontend.onnx import import_onnx

    names = [vi.name for vi in model.graph.input if vi.name not in {t.name for t in model.graph.initializer}]
    given = dict(zip(names, inputs))
    frozen: dict[str, np.ndarray] = {}
    while True:
        try:
            f = mlfuse.compile(import_onnx(model, input_values=frozen))
            return f, [v for n, v in given.items() if n not in frozen]
        except Diagnostic as d:
            wanted = re.search(r"must be a constant", d.message) and re.search(r"'([^']+)'\) must be", d.message)
            if not wanted or wanted.group(1) in frozen:
                raise
            if wanted.group(1) in given:
                frozen[wanted.group(1)] = given[wanted.group(1)]
                continue
            # computed from inputs (CenterCropPad's pads from its `shape` input): freeze the
            # small integer inputs, which is what such computations start from
            small = {n: v for n, v in given.items() if v.dtype.kind in "iu" and v.size <= 16 and n not in frozen}
            if not small:
                raise
            frozen.update(small)


def outputs_match(got: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> bool:
    """As onnx's backend test runner compares: floats within the case's tolerances (NaN
    equal to NaN), bfloat16 within two of its ulps at least; the rest exactly. ml_dtypes'
    narrow types are compared as their values."""
    if expected.dtype.type.__module__ == "ml_dtypes":
        if expected.dtype.name.startswith(("int", "uint")):
            got, expected = got.astype(np.int32), expected.astype(np.int32)
        else:
            if expected.dtype.name == "bfloat16":
                rtol = max(rtol, 2**-6)
            got, expected = got.astype(np.float32), expected.astype(np.float32)
    if expected.dtype.kind in "fc":
        return np.allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    return np.array_equal(got, expected)


def run_in_process(case) -> tuple[str, str]:
    """(status, detail) of one case; only a Diagnostic counts as a rejection."""
    from mlfuse.diagnostics import Diagnostic

    try:
        for inputs, expected in case.data_sets:
            inputs, expected = [as_array(a) for a in inputs], [as_array(a) for a in expected]
            f, inputs = compile_case(case.model, inputs)
            with np.errstate(all="ignore"):
                got = f(*inputs)
            for i, (g, e) in enumerate(zip(got, expected, strict=True)):
                e = np.asarray(e)
                if g.shape != e.shape or g.dtype != e.dtype:
                    return "wrong", f"output {i}: {g.dtype}{list(g.shape)} != expected {e.dtype}{list(e.shape)}"
                if not outputs_match(g, e, case.rtol, case.atol):
                    return "wrong", f"output {i} differs (rtol {case.rtol}, atol {case.atol})"
        return "pass", ""
    except Diagnostic as d:  # an internal error (internal_error's message) is a pass that raised
        return ("crash" if d.message.startswith("internal error:") else "rejected"), str(d).split("\n")[0]
    except Exception:
        return "crash", traceback.format_exc(limit=-3)


def run_forked(case) -> tuple[str, str]:
    """run_in_process in a child: a segfault or a hang is a crash of this case only."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read)
        try:
            result = run_in_process(case)
        except BaseException as e:  # noqa: BLE001 - the child must always answer
            result = ("crash", repr(e))
        with os.fdopen(write, "wb") as w:
            pickle.dump(result, w)
        os._exit(0)
    os.close(write)
    signal.signal(signal.SIGALRM, lambda *_: os.kill(pid, signal.SIGKILL))
    signal.alarm(TIMEOUT_S)
    try:
        with os.fdopen(read, "rb") as r:
            data = r.read()
        _, status = os.waitpid(pid, 0)
    finally:
        signal.alarm(0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return "crash", "timeout" if sig == signal.SIGKILL else f"signal {signal.Signals(sig).name}"
    return pickle.loads(data)


def run_case(case, supported: set[int]) -> Outcome:
    ops = tuple(sorted({n.op_type for n in case.model.graph.node}))
    status, detail = run_forked(case)
    return Outcome(case.name, ops, model_types(case.model) <= supported, status, detail)


# Cases whose expected outputs differ from the exact result by more than their tolerance
# (tests/test_onnx_node_suite.py expects them to fail).
EXPECTED_OUTPUTS_OFF = {
    name: "the expected outputs are numpy's float32 FFT (numpy 2 transforms float32 data in float32): 1.9e-7 where the "
          "exact inverse is 0, against an atol of 1e-7; mlfuse's float64 product gives 5.6e-16"
    for name in ("test_dft_inverse", "test_dft_inverse_opset19")
}


def reason_of(detail: str) -> str:
    """A rejection's reason without the node name and numbers, to group them."""
    reason = detail.split("error: ", 1)[-1]
    return re.sub(r"\d+", "N", reason)[:110]


def table(outcomes: Iterable[Outcome]) -> str:
    outcomes = list(outcomes)
    scoped = [o for o in outcomes if o.in_scope]
    count = collections.Counter(o.status for o in scoped)
    lines = [
        "# ONNX backend node suite (generated by `python -m bench.onnx_conformance`)", "",
        f"onnx {__import__('onnx').__version__}; {len(outcomes)} cases whose operators are all in mlfuse's table or expand into their schema's function body, "
        f"{len(scoped)} of them in scope (every tensor type supported).", "",
        "| in scope | " + " | ".join(STATUSES) + " | pass rate |", "|---|" + "---:|" * (len(STATUSES) + 1),
        f"| {len(scoped)} | " + " | ".join(str(count[s]) for s in STATUSES)
        + f" | {100 * count['pass'] / max(1, len(scoped)):.1f}% |", "",
        "## Per operator (in-scope cases)", "", "| operator | cases | pass | rejected | wrong | crash |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    by_op: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for o in scoped:
        for op in o.ops:
            by_op[op][o.status] += 1
    for op in sorted(by_op):
        c = by_op[op]
        lines.append(f"| {op} | {sum(c.values())} | " + " | ".join(str(c[s]) for s in STATUSES) + " |")
    lines += ["", "## Why in-scope cases are rejected", "", "| reason | cases |", "|---|---:|"]
    for reason, n in collections.Counter(reason_of(o.detail) for o in scoped if o.status == "rejected").most_common():
        lines.append(f"| {reason.replace('|', '/')} | {n} |")
    bad = [o for o in outcomes if o.status in ("wrong", "crash")]
    lines += ["", "## Wrong results and crashes", ""]
    lines += [f"- `{o.name}` ({o.status}): {o.detail.strip().splitlines()[-1] if o.detail else ''}"
              + (f" (known: {EXPECTED_OUTPUTS_OFF[o.name]})" if o.name in EXPECTED_OUTPUTS_OFF else "") for o in bad] or ["none"]
    out_of_scope = sorted(o.name for o in outcomes if not o.in_scope)
    lines += ["", f"## Out of scope ({len(out_of_scope)}: a tensor type mlfuse does not support)", "",
              ", ".join(f"`{n}`" for n in out_of_scope) or "none", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="run the cases whose name starts with this")
    ap.add_argument("--md", default=str(RESULTS))
    ap.add_argument("--jobs", type=int, default=2, help="cases run side by side (each in a forked child)")
    args = ap.parse_args(argv)
    import multiprocessing

    import mlfuse.api  # noqa: F401 - imported once here, inherited by every forked case
    import mlfuse.frontend.onnx  # noqa: F401

    supported = supported_types()
    outcomes = []
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        for o in pool.imap(functools.partial(run_case, supported=supported), in_table_cases(args.only)):
            outcomes.append(o)
            print(f"{o.status:9s} {o.name} {o.detail.strip().splitlines()[-1] if o.detail else ''}"[:200], flush=True)
    Path(args.md).write_text(table(outcomes))
    counts = collections.Counter(o.status for o in outcomes if o.in_scope)
    print(", ".join(f"{s} {counts[s]}" for s in STATUSES), f"(in scope: {sum(counts.values())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
