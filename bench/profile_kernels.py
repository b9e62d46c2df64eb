"""Where a compiled model's time goes, kernel by kernel: perf samples of the JIT code.

    python -m bench.profile_kernels mobilenet_v2             # zoo model, small size, 1 thread
    python -m bench.profile_kernels resnet18 --size full --threads 2 --calls 50

The model is exported to ONNX (bench.models), compiled with an empty disk cache, and
called in a loop while `perf record` samples this process. A perf map
(/tmp/perf-PID.map, perf's convention for JIT code) names every function of the
compiled objects, so the report lists kernels by their symbols, which carry their ops
(mlfuse_k_<hash>_fused_conv2d_add_max_min_conv_matmul, mlfuse_gemm_f32_1x1x1000x1280).
Needs Linux `perf` and `nm`; perf_event_paranoid must allow sampling one's own process.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def symbols(jit, folder: Path) -> list[tuple[int, int, str]]:
    """(address, size, name) of every function the JIT module's objects define."""
    objects = jit.object_code if isinstance(jit.object_code, list) else [jit.object_code]
    found = []
    for i, obj in enumerate(objects):
        path = folder / f"unit{i}.o"
        path.write_bytes(obj)
        listing = subprocess.run(["nm", "-S", "--defined-only", str(path)], capture_output=True, text=True).stdout
        for line in listing.splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[2] in "tT":
                address = jit.engine.get_function_address(parts[3])
                if address:
                    found.append((address, int(parts[1], 16), parts[3]))
    return sorted(found)


def write_perf_map(entries: list[tuple[int, int, str]]) -> Path:
    path = Path(f"/tmp/perf-{os.getpid()}.map")
    path.write_text("".join(f"{a:x} {s:x} {name}\n" for a, s, name in entries))
    return path


def sample(call, calls: int, folder: Path) -> tuple[float, str]:
    """Seconds per call while perf samples this process, and perf's report by symbol."""
    data = folder / "perf.data"
    recorder = subprocess.Popen(["perf", "record", "-F", "4999", "-o", str(data), "-p", str(os.getpid())],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # perf attaches
    start = time.perf_counter()
    for _ in range(calls):
        call()
    elapsed = (time.perf_counter() - start) / calls
    recorder.send_signal(2)
    recorder.wait()
    report = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--sort", "sym", "--no-children"],
                            capture_output=True, text=True).stdout
    return elapsed, report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile_kernels", description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("model", help="a zoo model (bench.models.ZOO)")
    p.add_argument("--size", default="small", choices=("small", "full"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--top", type=int, default=25, help="rows of the report")
    args = p.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="mlfuse-profile-"))
    os.environ["MLFUSE_CACHE_DIR"] = str(folder / "cache")  # a cold compile: every object in the map
    import mlfuse
    from bench.models import ZOO, export
    from mlfuse.backend import cpu

    cpu.set_num_threads(args.threads)
    model = ZOO[args.model]
    try:
        path = export(model, args.size, "legacy", folder)
    except Exception:  # what the legacy exporter cannot take (gpt2), as the models bench does
        path = export(model, args.size, "dynamo", folder)
    fn = mlfuse.compile(str(path))
    inputs = [t.numpy() for t in model.build(args.size)[1]]
    write_perf_map(symbols(fn.jit, folder))
    for _ in range(10):  # warm
        fn(*inputs)
    per_call, report = sample(lambda: fn(*inputs), args.calls, folder)
    rows = [line for line in report.splitlines() if line.strip() and not line.startswith("#")]
    print(f"{args.model} ({args.size}, {args.threads} thread(s)): {per_call * 1e3:.3f} ms per call; share of samples:")
    print("\n".join(rows[: args.top]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
