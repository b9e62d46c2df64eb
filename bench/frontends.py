"""mlfuse-bench --frontends: mlfuse reached from torch and jax, against their own compilers.

    mlfuse-bench --frontends                       # 5 memory-bound graphs at 16384x1024, 4 zoo models (small), 2 threads
    mlfuse-bench --frontends --full                # the zoo models at their full inference shapes
    mlfuse-bench --frontends --graphs layernorm --models bert vit --threads 1,2
    mlfuse-bench --frontends --models              # graphs only (--graphs with no names: models only)

In one worker process per thread count (pinned, threads and allocator as in
mlfuse-bench), each graph or model runs through every path at once:

  torch eager       the torch module, under torch.no_grad()
  inductor          torch.compile(module) (default mode)
  mlfuse backend    torch.compile(module, backend="mlfuse"): AOTAutograd, core ATen, mlfuse kernels
  dynamo floor      models only: torch.compile with a backend that returns outputs computed once,
                    so a call is dynamo's own work (guards, frames), which any backend pays; a
                    lower bound: timed right after another such call, its data is in cache, while
                    after a model's kernel it is not (BERT at 128 tokens: 0.45 ms, 1.0 ms after
                    an ONNX-path call)
  mlfuse onnx       the same module exported to ONNX (bench.models.export: legacy exporter,
                    the dynamo one if that fails), mlfuse.compile(path), called on numpy views
  onnxruntime       the same ONNX file (CPU provider, intra-op threads = N)
  jax.jit           graphs only: the computation of bench/workloads.py with jax.numpy
  mlfuse.jax.jit    graphs only: the same jax function through StableHLO into mlfuse (numpy in and out)
  mlfuse graph      graphs only: the graph-dialect module of mlfuse-bench (bench/results/latest.md),
                    fresh outputs here (no out=), so that every path allocates its results

The graphs are the memory-bound workloads of bench/workloads.py as small torch modules
(torch's native fused ops where it has them: F.layer_norm, softmax, F.rms_norm, F.gelu,
as a torch user writes them; every array is a forward argument); the models are
bench.models.ZOO, random weights.

Every path is first checked against torch eager (max |got - eager| / max |eager| over the
outputs; above 1e-3 is marked MISMATCH). Then the calls are interleaved round-robin (the
order rotates each round); each turn sleeps --gap-ms, makes one untimed call and times
the call right after it; the table reports the median of those steady calls. Compile
seconds are separate: setup (export excluded, mlfuse.compile of the ONNX file, the ORT
session) plus the first call minus a steady call (torch.compile and the jits compile on
their first call). With --cold-compile on (the default, off for --quick) mlfuse's and
inductor's disk caches are off, so their compiles are cold.

Results go to bench/results/frontends.json and .md (quick: frontends-quick.*), unless
--json/--md say otherwise.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlfuse.tools import mlfuse_bench as mb

GRAPHS = ["layernorm", "softmax", "rmsnorm", "gelu_bias", "bias_residual_layernorm"]
MODELS = ["resnet18", "bert", "vit", "mlp_mixer"]
SIZE = (16384, 1024)
QUICK_SIZE = (1024, 256)
QUICK_GRAPHS = ["layernorm", "softmax"]
QUICK_MODELS = ["mlp_mixer"]
ORDER = ["torch eager", "inductor", "mlfuse backend", "dynamo floor", "mlfuse onnx", "onnxruntime", "jax.jit", "mlfuse.jax.jit",
         "mlfuse graph"]
TOLERANCE = 1e-3


# --- command line -----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    mb._import_bench()
    from bench.models import ZOO
    from bench.workloads import WORKLOADS

    p = argparse.ArgumentParser(prog="mlfuse-bench --frontends", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--frontends", action="store_true", help="this benchmark (required)")
    p.add_argument("--graphs", nargs="*", choices=list(WORKLOADS), metavar="GRAPH",
                   help=f"workloads of bench/workloads.py (default {' '.join(GRAPHS)}; none: models only)")
    p.add_argument("--models", nargs="*", choices=list(ZOO), metavar="MODEL",
                   help=f"zoo models (default {' '.join(MODELS)}; none: graphs only); any of {', '.join(ZOO)}")
    p.add_argument("--size", type=mb.parse_size, help=f"ROWSxCOLS of the graphs (default {SIZE[0]}x{SIZE[1]}; "
                   f"--quick: {QUICK_SIZE[0]}x{QUICK_SIZE[1]})")
    p.add_argument("--full", action="store_true", help="zoo models at their full sizes (224x224 images, "
                   "sequences of 128) instead of small")
    p.add_argument("--threads", type=mb.parse_threads, default=[2], help="thread counts, one worker each (default 2)")
    p.add_argument("--repeat", type=mb.parse_positive, help="timed rounds (default 9; --quick: 3)")
    p.add_argument("--gap-ms", type=float, default=20.0, help="idle milliseconds before each turn (default 20)")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke run: {QUICK_SIZE[0]}x{QUICK_SIZE[1]}, {' '.join(QUICK_GRAPHS)}, {' '.join(QUICK_MODELS)}")
    p.add_argument("--no-jax", action="store_true", help="skip jax.jit and mlfuse.jax.jit")
    p.add_argument("--no-ort", action="store_true", help="skip onnxruntime")
    p.add_argument("--allocator", choices=("warm", "default"), default="warm", help="as in mlfuse-bench")
    p.add_argument("--cold-compile", choices=("on", "off", "auto"), default="auto",
                   help="disable mlfuse's and inductor's disk caches (default: on, off for --quick)")
    p.add_argument("--json", type=Path, help="result file (default bench/results/frontends.json)")
    p.add_argument("--md", type=Path, help="markdown table (default next to the JSON)")
    p.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--worker-threads", type=int, help=argparse.SUPPRESS)
    return p


def resolve(args: argparse.Namespace) -> argparse.Namespace:
    if args.graphs is None:
        args.graphs = QUICK_GRAPHS if args.quick else GRAPHS
    if args.models is None:
        args.models = QUICK_MODELS if args.quick else MODELS
    args.size = args.size or (QUICK_SIZE if args.quick else SIZE)
    args.model_size = "full" if args.full else "small"
    args.repeat = args.repeat or (3 if args.quick else 9)
    if args.cold_compile == "auto":
        args.cold_compile = "off" if args.quick else "on"
    args.json = args.json or mb.RESULTS / ("frontends-quick.json" if args.quick else "frontends.json")
    args.md = args.md or args.json.with_suffix(".md")
    return args


# --- contestants --------------------------------------------------------------------------------


class Unavailable(Exception):
    """This path cannot run here (the message goes into the table)."""


@dataclass
class Contender:
    """One way to run a graph or model: a no-argument call, and how its results become numpy."""

    name: str
    call: Callable[[], Any]
    setup_s: float = 0.0  # compile work done before the first call
    note: str = ""
    extra: dict = field(default_factory=dict)


def _numpy_outputs(out: Any) -> list:
    import numpy as np

    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _numpy_outputs(o)]
    if hasattr(out, "detach"):  # torch
        return [out.detach().numpy()]
    return [np.asarray(out)]


def rel_error(got: list, want: list) -> float:
    import numpy as np

    if len(got) != len(want):
        return float("inf")
    worst = 0.0
    for g, w in zip(got, want):
        if g.shape != w.shape:
            return float("inf")
        if w.dtype.kind not in "fc":
            worst = max(worst, 0.0 if np.array_equal(g, w) else float("inf"))
            continue
        scale = max(float(np.max(np.abs(w), initial=0.0)), 1e-30)
        worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w), initial=0.0)) / scale)
    return worst


class WorkloadModule:
    """A bench/workloads.py computation as a torch module (every array a forward argument)."""

    @staticmethod
    def make(w) -> Any:
        import torch

        from bench.workloads import torch_lib, torch_native

        native = torch_native(w.name)
        lib = torch_lib()
        fn = native if native is not None else (lambda *a: w.compute(lib, *a))

        class Workload(torch.nn.Module):
            def forward(self, *arrays):
                out = fn(*arrays)
                return out[0] if len(out) == 1 else out

        Workload.__name__ = Workload.__qualname__ = "".join(p.title() for p in w.name.split("_"))
        return Workload().eval(), ("native ops" if native is not None else "torch ops")


def torch_paths(module, inputs: tuple, threads: int) -> list[tuple[str, Callable[[], Contender]]]:
    import torch

    torch.set_num_threads(threads)

    def eager() -> Contender:
        def call():
            with torch.no_grad():
                return module(*inputs)

        return Contender("torch eager", call)

    def compiled(backend: str, name: str) -> Callable[[], Contender]:
        def make() -> Contender:
            fn = torch.compile(module, backend=backend, dynamic=False)

            def call():
                with torch.no_grad():
                    return fn(*inputs)

            return Contender(name, call, note="compiles on the first call")

        return make

    return [("torch eager", eager), ("inductor", compiled("inductor", "inductor")),
            ("mlfuse backend", compiled("mlfuse", "mlfuse backend"))]


def dynamo_floor(module, inputs: tuple) -> tuple[str, Callable[[], Contender]]:
    """torch.compile with a backend that runs nothing: its graph's outputs, computed once at
    compile time, are returned on every call. What a call costs is dynamo's alone (guard
    checks, frame and wrapper entry), a floor under every torch.compile backend (warm: see
    the module docstring)."""
    import torch

    def backend(gm, example_inputs):
        with torch.no_grad():
            outputs = tuple(gm(*example_inputs))
        return lambda *args: outputs

    def make() -> Contender:
        def floor(*args):  # a code object of its own: no dynamo cache entries shared with the other paths
            return module(*args)

        fn = torch.compile(floor, backend=backend, dynamic=False)

        def call():
            with torch.no_grad():
                return fn(*inputs)

        return Contender("dynamo floor", call, note="outputs computed at compile time")

    return ("dynamo floor", make)


def export_onnx(name: str, module, inputs: tuple, input_names: tuple, folder: str) -> tuple[Path, str, float]:
    """The same module instance exported (legacy exporter, else dynamo): path, exporter, seconds."""
    import contextlib
    import io

    from bench.models import ZooModel, export

    zoo = ZooModel(name, lambda size: (module, inputs), tuple(input_names))
    # torch.onnx.export puts the module back in the mode its root had, recursively: a root
    # left in training mode above eval submodules (the zoo's transformers wrapper) would
    # come back with dropout on. Every submodule's own mode is restored here.
    modes = [(m, m.training) for m in module.modules()]
    errors = []
    try:
        for exporter in ("legacy", "dynamo"):
            start = time.perf_counter()
            try:
                with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()):
                    warnings.simplefilter("ignore")
                    path = export(zoo, "bench", exporter, folder)
                return path, exporter, time.perf_counter() - start
            except Exception as e:  # the exporter's failure, not mlfuse's: try the other one
                errors.append(f"{exporter}: {type(e).__name__}: {str(e).splitlines()[0][:150] if str(e) else ''}")
    finally:
        for m, training in modes:
            m.training = training
    raise RuntimeError("ONNX export failed (" + "; ".join(errors) + ")")


def onnx_paths(onnx: Path, feeds: list, threads: int, note: str, with_ort: bool) -> list[tuple[str, Callable[[], Contender]]]:
    def ml() -> Contender:
        import mlfuse
        from mlfuse.backend import cpu

        cpu.set_num_threads(threads)
        start = time.perf_counter()
        fn = mlfuse.compile(str(onnx))
        return Contender("mlfuse onnx", lambda: fn(*feeds), setup_s=time.perf_counter() - start, note=note)

    def ort() -> Contender:
        try:
            import onnxruntime
        except ImportError:
            raise Unavailable("onnxruntime not installed") from None
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        start = time.perf_counter()
        session = onnxruntime.InferenceSession(str(onnx), options, providers=["CPUExecutionProvider"])
        named = {i.name: a for i, a in zip(session.get_inputs(), feeds)}
        return Contender("onnxruntime", lambda: session.run(None, named), setup_s=time.perf_counter() - start, note=note)

    return [("mlfuse onnx", ml)] + ([("onnxruntime", ort)] if with_ort else [])


def jax_paths(w, arrays: list) -> list[tuple[str, Callable[[], Contender]]]:
    def jit() -> Contender:
        try:
            import jax
        except ImportError:
            raise Unavailable("jax not installed") from None
        from bench.workloads import jax_lib

        lib = jax_lib()
        args = [jax.device_put(a) for a in arrays]
        fn = jax.jit(lambda *a: w.compute(lib, *a))
        return Contender("jax.jit", lambda: jax.block_until_ready(fn(*args)), note="XLA, jax arrays in")

    def ml_jit() -> Contender:
        try:
            import mlfuse.jax
        except ImportError as e:
            raise Unavailable(str(e)) from None
        from bench.workloads import jax_lib

        lib = jax_lib()
        fn = mlfuse.jax.jit(lambda *a: w.compute(lib, *a))
        return Contender("mlfuse.jax.jit", lambda: fn(*arrays), note="StableHLO -> mlfuse, numpy in and out")

    return [("jax.jit", jit), ("mlfuse.jax.jit", ml_jit)]


def graph_path(w, module, arrays: list, threads: int) -> tuple[str, Callable[[], Contender]]:
    def make() -> Contender:
        import mlfuse
        from mlfuse.backend import cpu

        cpu.set_num_threads(threads)
        start = time.perf_counter()
        fn = mlfuse.compile(module.clone())
        return Contender("mlfuse graph", lambda: fn(*arrays), setup_s=time.perf_counter() - start,
                     note="graph-dialect module of mlfuse-bench")

    return ("mlfuse graph", make)


# --- timing ---------------------------------------------------------------------------------------


def _short(e: BaseException) -> str:
    text = str(e).splitlines()[0][:200] if str(e) else ""
    return f"{type(e).__name__}: {text}"


def rotation(calls: list, turn: int) -> list:
    """`calls` starting at the `turn`-th (mod their number): each goes first in turn."""
    k = turn % max(1, len(calls))
    return calls[k:] + calls[:k]


def round_robin(calls: list[tuple[str, Callable[[], Any]]], repeat: int, gap_ms: float, warm_ms: float = 0.0,
                ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Time `calls` interleaved: `repeat` rounds, the order rotating each round. Each turn
    sleeps `gap_ms` and times one call (the first after idle); then it calls back to back
    until `warm_ms` have passed since the turn began, and times the call after that
    (steady). The previous call's result stays alive during a timed call, as `y = f(x)`
    in a loop keeps it. Returns (steady, after idle) seconds per name.

    Why warm up: a runtime's team spins for a while after its call (onnxruntime's pool
    20-80 ms, libgomp's GOMP_SPINCOUNT less), so the call after another runtime's
    shares the cores with its spinning threads: on 2 CPUs, mlfuse's GPT-2 at 2 threads
    took 5.1 ms right after onnxruntime and 1.9 ms in a loop of its own calls, and
    MobileNetV2's team calls took 2.1x their time for 60 ms after onnxruntime's last
    call and 1.57x at 60-80 ms (medians of 20 turns; the models bench warms 150 ms). A
    longer gap does not help: idle CPUs (of a VM) wake slowly, and both took 2-4x longer."""
    steady: dict[str, list[float]] = {name: [] for name, _ in calls}
    idle: dict[str, list[float]] = {name: [] for name, _ in calls}
    for r in range(repeat):
        for name, call in rotation(calls, r):
            time.sleep(gap_ms / 1e3)
            start = time.perf_counter()
            held = call()
            idle[name].append(time.perf_counter() - start)
            while time.perf_counter() - start < warm_ms / 1e3:
                del held
                held = call()
            middle = time.perf_counter()
            out = call()
            steady[name].append(time.perf_counter() - middle)
            del held, out
    return steady, idle


def measure(makers: list[tuple[str, Callable[[], Contender]]], args: argparse.Namespace, record: dict) -> None:
    """Set up, check against torch eager, then time round-robin; fills record['paths']/['skipped']."""
    import numpy as np

    import mlfuse.torch_backend as tb

    skipped: dict[str, str] = record.setdefault("skipped", {})
    paths: list[Contender] = []
    first: dict[str, float] = {}
    outputs: dict[str, list] = {}
    for name, make in makers:
        try:
            p = make()
            before = len(tb.reports())
            start = time.perf_counter()
            out = p.call()
            first[name] = time.perf_counter() - start
            outputs[name] = [np.array(o, copy=True) for o in _numpy_outputs(out)]
            del out
            if name == "mlfuse backend":
                reports = tb.reports()[before:]
                p.extra["report"] = [r.summary() for r in reports]
                p.extra["kernels"] = sum(len(r.kernels) for r in reports)
                p.extra["kernel_errors"] = [k.error for r in reports for k in r.kernels if k.error]
                p.extra["eager_ops"] = sum(len(r.eager) for r in reports)
                p.extra["fallbacks"] = [r.fallback for r in reports if r.fallback]
                p.extra["graphs"] = len(reports)
            p.call()
            paths.append(p)
        except Unavailable as e:
            skipped[name] = str(e)
        except Exception as e:  # one path failing is a table cell, not a failed run
            skipped[name] = f"failed: {_short(e)}"
        gc.collect()
    reference = outputs.get("torch eager")
    errors = {n: rel_error(o, reference) for n, o in outputs.items()} if reference is not None else {}
    record["output_shapes"] = [list(o.shape) for o in reference] if reference is not None else None
    del outputs, reference
    gc.collect()
    times, _ = round_robin([(p.name, p.call) for p in paths], args.repeat, args.gap_ms)
    record["paths"] = {}
    for p in paths:
        median = float(np.median(times[p.name]))
        error = errors.get(p.name)
        note = p.note + (f"; MISMATCH: error {error:.1e}" if error is not None and error > TOLERANCE else "")
        record["paths"][p.name] = {
            "median_s": median, "times_s": times[p.name], "first_s": first[p.name], "setup_s": p.setup_s,
            "compile_s": p.setup_s + max(0.0, first[p.name] - median), "max_rel_err": error, "note": note.strip("; "),
            **p.extra,
        }


def _reset() -> None:
    import torch

    torch._dynamo.reset()
    if "jax" in sys.modules:
        import jax

        jax.clear_caches()
    gc.collect()


def run_graph(name: str, args: argparse.Namespace, threads: int, folder: str) -> dict:
    import torch

    from bench.workloads import WORKLOADS

    w = WORKLOADS[name]
    size = args.size if w.scales else None
    module = w.build(*args.size)
    arrays = w.inputs(module)
    tensors = tuple(torch.from_numpy(a) for a in arrays)
    torch_module, how = WorkloadModule.make(w)
    record: dict = {"name": name, "kind": "graph", "description": w.description, "size": list(size) if size else None,
                    "input_shapes": [list(a.shape) for a in arrays], "torch_ops": how,
                    "bytes_in": int(sum(a.nbytes for a in arrays))}
    makers = torch_paths(torch_module, tensors, threads)
    try:
        onnx, exporter, export_s = export_onnx(name, torch_module, tensors,
                                               tuple(f"in{i}" for i in range(len(arrays))), folder)
        record.update(exporter=exporter, export_s=export_s)
        makers += onnx_paths(onnx, arrays, threads, f"{exporter} exporter", not args.no_ort)
    except Exception as e:
        record["skipped"] = {"mlfuse onnx": f"export: {_short(e)}", "onnxruntime": "export failed"}
    if not args.no_jax:
        makers += jax_paths(w, arrays)
    makers.append(graph_path(w, module, arrays, threads))
    measure(makers, args, record)
    return record


def run_model(name: str, args: argparse.Namespace, threads: int, folder: str) -> dict:
    import torch

    from bench.models import ZOO

    model = ZOO[name]
    module, inputs = model.build(args.model_size)
    module.eval()  # inference: the zoo's transformers wrapper leaves its own root in training mode
    record: dict = {"name": name, "kind": "model", "size": args.model_size,
                    "input_shapes": [list(t.shape) for t in inputs],
                    "parameters": int(sum(p.numel() for p in module.parameters()))}
    makers = torch_paths(module, inputs, threads) + [dynamo_floor(module, inputs)]
    try:
        onnx, exporter, export_s = export_onnx(name, module, inputs, model.input_names, folder)
        record.update(exporter=exporter, export_s=export_s)
        feeds = [t.numpy() for t in inputs]
        makers += onnx_paths(onnx, feeds, threads, f"{exporter} exporter", not args.no_ort)
    except Exception as e:
        record["skipped"] = {"mlfuse onnx": f"export: {_short(e)}", "onnxruntime": "export failed"}
    with torch.no_grad():
        measure(makers, args, record)
    return record


def worker(args: argparse.Namespace) -> int:
    warnings.filterwarnings("ignore")
    import logging

    logging.getLogger("torch").setLevel(logging.ERROR)
    threads = args.worker_threads
    run = {"threads": threads, "cpus": sorted(os.sched_getaffinity(0)), "size": list(args.size),
           "model_size": args.model_size, "repeat": args.repeat, "gap_ms": args.gap_ms,
           "allocator": args.allocator, "cold_compile": args.cold_compile, "loadavg_start": list(os.getloadavg()),
           "graphs": [], "models": []}
    with tempfile.TemporaryDirectory(prefix="mlfuse-frontends-") as folder:
        for kind, names, runner in (("graphs", args.graphs, run_graph), ("models", args.models, run_model)):
            for name in names:
                print(f"[{threads} thread{'s' * (threads > 1)}] {kind[:-1]} {name} ...", file=sys.stderr, flush=True)
                start = time.perf_counter()
                try:
                    record = runner(name, args, threads, folder)
                except Exception as e:  # a graph or model that cannot be built is reported, the run goes on
                    record = {"name": name, "kind": kind[:-1], "error": _short(e)}
                record["wall_s"] = time.perf_counter() - start
                run[kind].append(record)
                _reset()
    run["loadavg_end"] = list(os.getloadavg())
    args.worker.write_text(json.dumps(run, indent=1) + "\n")
    return 0


# --- the parent: workers, tables ---------------------------------------------------------------------


def run_worker(threads: int, args: argparse.Namespace, argv: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        cmd = [sys.executable, "-m", "mlfuse.tools.mlfuse_bench", *argv, "--worker", str(out),
               "--worker-threads", str(threads)]
        proc = subprocess.run(cmd, env=mb.worker_env(threads, args), cwd=mb.REPO)
        if proc.returncode != 0 or not out.exists():
            raise SystemExit(f"mlfuse-bench --frontends: the {threads}-thread worker failed (exit {proc.returncode})")
        return json.loads(out.read_text())


def _ms(path: dict | None) -> str:
    return "—" if path is None else f"{path['median_s'] * 1e3:.2f}" + (" ⚠" if "MISMATCH" in path["note"] else "")


def _ratio(ps: dict, a: str, b: str) -> float | None:
    if a in ps and b in ps and ps[b]["median_s"] > 0:
        return ps[a]["median_s"] / ps[b]["median_s"]
    return None


def _r(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


RATIOS = {
    "graphs": [("backend / inductor", "mlfuse backend", "inductor"), ("backend / eager", "mlfuse backend", "torch eager"),
               ("backend / onnx", "mlfuse backend", "mlfuse onnx"), ("backend / graph", "mlfuse backend", "mlfuse graph"),
               ("mlfuse.jax.jit / jax.jit", "mlfuse.jax.jit", "jax.jit")],
    "models": [("backend / inductor", "mlfuse backend", "inductor"), ("backend / eager", "mlfuse backend", "torch eager"),
               ("backend / onnx", "mlfuse backend", "mlfuse onnx"), ("floor / onnx", "dynamo floor", "mlfuse onnx"),
               ("onnx / ort", "mlfuse onnx", "onnxruntime")],
}


def section_lines(run: dict, kind: str) -> list[str]:
    records = run[kind]
    if not records:
        return []
    impls = [n for n in ORDER if any(n in r.get("paths", {}) for r in records)]
    ratios = RATIOS[kind]
    head = "| " + ("graph" if kind == "graphs" else "model") + " | " + " | ".join(impls) + " | " + \
        " | ".join(label for label, _, _ in ratios) + " |"
    lines = [head, "|---|" + "---:|" * (len(impls) + len(ratios))]
    for r in records:
        if "error" in r:
            lines.append(f"| {r['name']} | failed: {r['error']} |")
            continue
        ps = r["paths"]
        cells = [_ms(ps.get(n)) for n in impls]
        lines.append(f"| {r['name']} | " + " | ".join(cells) + " | " +
                     " | ".join(_r(_ratio(ps, a, b)) for _, a, b in ratios) + " |")
    lines += ["", "Compile seconds (setup + first call − steady call; export not included):", "",
              "| " + ("graph" if kind == "graphs" else "model") + " | " + " | ".join(impls) + " | export |",
              "|---|" + "---:|" * (len(impls) + 1)]
    for r in records:
        if "error" in r:
            continue
        ps = r["paths"]
        cells = ["—" if n not in ps else f"{ps[n]['compile_s']:.1f}" for n in impls]
        lines.append(f"| {r['name']} | " + " | ".join(cells) + f" | {r.get('export_s', 0):.1f} ({r.get('exporter', '—')}) |")
    lines += ["", "Max relative error against torch eager (max |got − eager| / max |eager|):", "",
              "| " + ("graph" if kind == "graphs" else "model") + " | " + " | ".join(impls) + " |",
              "|---|" + "---:|" * len(impls)]
    for r in records:
        if "error" in r:
            continue
        ps = r["paths"]
        cells = ["—" if n not in ps or ps[n]["max_rel_err"] is None else f"{ps[n]['max_rel_err']:.1e}" for n in impls]
        lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
    lines.append("")
    for r in records:
        backend = r.get("paths", {}).get("mlfuse backend")
        if backend:
            extra = ""
            if backend.get("eager_ops") or backend.get("fallbacks") or backend.get("kernel_errors"):
                extra = f"; {backend.get('eager_ops', 0)} op(s) in eager" + "".join(
                    f"; {x}" for x in backend.get("fallbacks", []) + backend.get("kernel_errors", []))
            lines.append(f"- {r['name']}, mlfuse backend: {backend.get('graphs', 0)} FX graph(s), "
                         f"{backend.get('kernels', 0)} mlfuse kernel(s){extra}")
    skipped = sorted({f"{r['name']}: {n}: {why}" for r in records for n, why in r.get("skipped", {}).items()})
    if skipped:
        lines += [""] + [f"- skipped {s}" for s in skipped]
    return lines + [""]


def verdict_lines(run: dict) -> list[str]:
    out = []
    graphs = [r for r in run["graphs"] if "paths" in r]
    vs_inductor = [(r["name"], _ratio(r["paths"], "mlfuse backend", "inductor")) for r in graphs]
    vs_inductor = [(n, v) for n, v in vs_inductor if v is not None]
    if vs_inductor:
        ahead = [n for n, v in vs_inductor if v < 1]
        out.append(f"memory-bound graphs: the mlfuse backend is ahead of inductor on {len(ahead)}/{len(vs_inductor)} "
                   f"({', '.join(f'{n} {v:.2f}x' for n, v in vs_inductor)})")
    jx = [(r["name"], _ratio(r["paths"], "mlfuse.jax.jit", "jax.jit")) for r in graphs]
    jx = [(n, v) for n, v in jx if v is not None]
    if jx:
        ahead = [n for n, v in jx if v < 1]
        out.append(f"memory-bound graphs: mlfuse.jax.jit is ahead of jax.jit on {len(ahead)}/{len(jx)} "
                   f"({', '.join(f'{n} {v:.2f}x' for n, v in jx)})")
    models = [r for r in run["models"] if "paths" in r]
    vs_onnx = [(r["name"], _ratio(r["paths"], "mlfuse backend", "mlfuse onnx")) for r in models]
    vs_onnx = [(n, v) for n, v in vs_onnx if v is not None]
    if vs_onnx:
        within = [n for n, v in vs_onnx if v <= 1.2]
        out.append(f"whole models: the mlfuse backend is within 1.2x of mlfuse's ONNX path on {len(within)}/{len(vs_onnx)} "
                   f"({', '.join(f'{n} {v:.2f}x' for n, v in vs_onnx)})")
        above = [(r["name"], _above_floor(r["paths"])) for r in models]
        above = [(n, v) for n, v in above if v is not None]
        if above:
            out.append("whole models, less dynamo's floor (the backend's time minus that of a torch.compile whose "
                       "backend runs nothing, over mlfuse onnx; the floor is measured warm, so this is an upper "
                       f"bound on the backend's own share): {', '.join(f'{n} {v:.2f}x' for n, v in above)}")
    return out


def _above_floor(ps: dict) -> float | None:
    if all(k in ps for k in ("mlfuse backend", "dynamo floor", "mlfuse onnx")) and ps["mlfuse onnx"]["median_s"] > 0:
        return (ps["mlfuse backend"]["median_s"] - ps["dynamo floor"]["median_s"]) / ps["mlfuse onnx"]["median_s"]
    return None


def format_run(run: dict) -> list[str]:
    lines = [mb.thread_heading(run["threads"]), "",
             f"Median ms of the steady call ({run['repeat']} rounds, round-robin); allocator {run['allocator']}, "
             f"cold compile {run['cold_compile']}, load average {run['loadavg_start'][0]:.1f} -> "
             f"{run['loadavg_end'][0]:.1f}. Ratios: time / time (below 1: the first is faster).", ""]
    if run["graphs"]:
        size = "x".join(map(str, run["size"]))
        lines += [f"### Memory-bound graphs ({size} f32)", ""] + section_lines(run, "graphs")
    if run["models"]:
        lines += [f"### Zoo models ({run['model_size']}, batch 1)", ""] + section_lines(run, "models")
    lines += [f"- {v}" for v in verdict_lines(run)] + [""]
    return lines


def markdown(runs: list[dict], info: dict, command: str) -> str:
    v = info["versions"]
    from importlib.metadata import PackageNotFoundError, version

    versions = dict(v)
    for pkg in ("onnxruntime", "transformers"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    lines = ["# mlfuse-bench --frontends", "",
             "mlfuse reached through `torch.compile(backend=\"mlfuse\")` and `mlfuse.jax.jit`, against torch eager, "
             "inductor, jax.jit, mlfuse's own ONNX path and onnxruntime on the same graphs and models "
             "(protocol: bench/frontends.py).", "",
             *mb.provenance_lines(info),
             "- versions: " + ", ".join(f"{k} {val}" for k, val in versions.items() if val),
             f"- command: `{command}`", ""]
    for run in runs:
        lines += format_run(run)
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = resolve(build_parser().parse_args(argv))
    if args.worker:
        return worker(args)
    info = mb.machine_info()
    print(f"mlfuse-bench --frontends on {info.get('cpu')} ({info['cpus']} CPUs), {info['date']}", flush=True)
    runs = []
    command = "mlfuse-bench " + " ".join(argv)
    for threads in args.threads:
        run = run_worker(threads, args, argv)
        runs.append(run)
        print("\n" + "\n".join(format_run(run)), flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"machine": info, "command": command, "runs": runs}, indent=1) + "\n")
    args.md.write_text(markdown(runs, info, command))
    print(f"wrote {args.json}, {args.md}")
    return 0
