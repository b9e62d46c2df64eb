"""Before/after in one run: the working tree's mlfuse against a git revision's, call by call.

    python -m bench.ab --base HEAD~3                       # layernorm, softmax, row/col sum
    python -m bench.ab --base main --graphs layernorm --size 16384x1024 --rounds 21
    python -m bench.ab --base HEAD~1 --onnx /tmp/unet.onnx --paths allocating    # whole models

Noisy shared machines make two separate runs incomparable, so both compilers run
side by side: the revision is checked out into a temporary worktree and imported
by one worker process, the working tree by another. The workers compile the same
graph text (built once by this tree's bench.workloads; or `--onnx` files, each compiled
from its path, inputs random: normal floats, integers 0 or 1), then the parent asks them
in turn, round after round (the order alternates), for one call each of every
call path:

  out=aligned   outputs preallocated 64-byte aligned (the benchmark's path)
  allocating    `y = f(x, ...)`: the runtime allocates the outputs
  out=np.empty  outputs from np.empty (16-byte aligned)
  2 threads     two Python threads, each one call with its own aligned out= (wall time)

Each timed call follows an untimed one. Before the rounds each worker calls every
graph back to back (--warm-ms, at least 16 calls), and each request waits --gap-ms
first: at 2 threads, the other worker's team spins for a while after its call and
takes a core, which a runtime that adapts (the team sizer) answers and one that does
not ignores, so without the gap the comparison measured that reaction (LayerNorm
1.08, 1.42 and 1.04 in three runs against an A/A of 1.00). The table gives medians in
ms and the ratio after/before (below 1.0: the working tree is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PATHS = ("out=aligned", "allocating", "out=np.empty", "2 threads")

WORKER = r"""
import json, sys, time
import numpy as np
import mlfuse
from mlfuse.api import aligned_empty
from mlfuse.backend import cpu
cpu.set_num_threads(int(sys.argv[1]))
fns = {}
for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "compile":
        f = mlfuse.compile(req["text"])
        rng = np.random.default_rng(0)
        xs = [rng.integers(0, 2, s.shape).astype(s.dtype) if np.dtype(s.dtype).kind in "iub"
              else rng.standard_normal(s.shape).astype(s.dtype) for s in f.inputs]
        fns[req["name"]] = (f, xs)
        print(json.dumps({"file": mlfuse.__file__}), flush=True)
        continue
    f, xs = fns[req["name"]]
    if req["path"] == "out=aligned":
        outs = [aligned_empty(s.shape, s.dtype) for s in f.outputs]
        call = lambda: f(*xs, out=outs)
    elif req["path"] == "out=np.empty":
        outs = [np.empty(s.shape, s.dtype) for s in f.outputs]
        call = lambda: f(*xs, out=outs)
    elif req["path"] == "2 threads":
        import threading
        outs2 = [[aligned_empty(s.shape, s.dtype) for s in f.outputs] for _ in range(2)]
        def call():
            ts = [threading.Thread(target=f, args=xs, kwargs={"out": o}) for o in outs2]
            [t.start() for t in ts]
            [t.join() for t in ts]
    else:
        call = lambda: f(*xs)
    # back to back, so that a runtime that adapts (the team sizer) settles; mlfuse_bench.warm_up
    # does the same, but this worker imports only the revision's mlfuse, which may predate it
    if req["op"] == "warm":
        calls, end = 0, time.perf_counter() + req["ms"] / 1e3
        while calls < req["calls"] or time.perf_counter() < end:
            call()
            calls += 1
        print(json.dumps({"calls": calls}), flush=True)
        continue
    call()
    t = time.perf_counter(); call(); t = time.perf_counter() - t
    print(json.dumps({"ms": t * 1e3}), flush=True)
"""


def package_root(rev: str, workdir: Path) -> Path:
    """A directory whose `mlfuse` package is `rev`'s, laid out as pyproject's package-dir maps it."""
    tree = workdir / "tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-f", str(tree), rev],
                   check=True, capture_output=True)
    for sub in ("dialects", "passes"):  # mlfuse.dialects and mlfuse.passes live at the top of the tree
        os.symlink(tree / sub, tree / "mlfuse" / sub)
    return tree


class Worker:
    def __init__(self, label: str, pythonpath: str | None, threads: int, cache: str):
        env = dict(os.environ, MLFUSE_CACHE_DIR=cache)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        self.label = label
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER, str(threads)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env, cwd=tempfile.gettempdir())

    def ask(self, **req) -> dict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the {self.label} worker died")
        return json.loads(line)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="git revision to compare the working tree against")
    ap.add_argument("--graphs", nargs="+", default=["layernorm", "softmax", "row_sum", "col_sum"])
    ap.add_argument("--onnx", nargs="+", type=Path, default=[], help="ONNX models to compare instead of --graphs")
    ap.add_argument("--size", default="65536x1024")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    ap.add_argument("--gap-ms", type=float, default=20.0, help="sleep before each request (default 20)")
    ap.add_argument("--warm-ms", type=float, default=300.0, help="back-to-back calls per graph and path "
                    "before the rounds (default 300, at least 16 calls)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from bench.workloads import WORKLOADS
    from mlfuse.api import module_text

    rows, cols = (int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="mlfuse-ab-") as tmp:
        base_root = package_root(args.base, Path(tmp))
        try:
            workers = [Worker("before", str(base_root), args.threads, f"{tmp}/cache-before"),
                       Worker("after", None, args.threads, f"{tmp}/cache-after")]
            times: dict[tuple[str, str, str], list[float]] = {}
            sources = {p.stem: str(p.resolve()) for p in args.onnx} or {
                name: module_text(WORKLOADS[name].build(rows, cols)) for name in args.graphs}
            for name, text in sources.items():
                for w in workers:
                    where = w.ask(op="compile", name=name, text=text)["file"]
                    if (w.label == "before") != where.startswith(str(base_root)):
                        raise SystemExit(f"the {w.label} worker imported the wrong mlfuse: {where}")
            for name in sources:
                for path in args.paths:
                    for w in workers:
                        w.ask(op="warm", name=name, path=path, ms=args.warm_ms, calls=16)
            for r in range(args.rounds):
                order = workers if r % 2 == 0 else workers[::-1]
                for name in sources:
                    for path in args.paths:
                        for w in order:
                            time.sleep(args.gap_ms / 1e3)
                            times.setdefault((name, path, w.label), []).append(w.ask(op="call", name=name, path=path)["ms"])
            for w in workers:
                assert w.proc.stdin
                w.proc.stdin.close()
                w.proc.wait()
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(Path(tmp) / "tree")],
                           capture_output=True)
    size = "ONNX models" if args.onnx else f"{args.size} f32"
    print(f"base {args.base} vs working tree; {size}, {args.threads} threads, {args.rounds} rounds, median ms")
    print("| graph | call path | before | after | after/before |\n|---|---|---:|---:|---:|")
    for name in sources:
        for path in args.paths:
            b = statistics.median(times[(name, path, "before")])
            a = statistics.median(times[(name, path, "after")])
            print(f"| {name} | {path} | {b:.2f} | {a:.2f} | {a / b:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
