"""The fork server: import mlfuse once, run every case in a forked child, sort the outcomes."""

from __future__ import annotations

import math
import os
import random
import re
import resource
import signal
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import corpus, mutate

# Outcomes that fail the run; "mismatch" (a wrong numeric result) is counted but is no crash.
FAILURES = ("traceback", "signal", "hang", "unlocated")
CATEGORIES = ("ok", "diagnostic", "internal-error", "mismatch", "unlocated", "traceback", "signal", "hang")

PIPELINES = [
    "canonicalize,cse",
    "canonicalize,fusion-plan{target=cpu}",
    "canonicalize,fusion-plan{target=cpu},convert-graph-to-loop,assign-buffers",
    "canonicalize,fusion-plan{target=cpu},convert-graph-to-loop,assign-buffers,convert-loop-to-scf,expand-math,convert-to-llvm",
]
RUN_MAX_ELEMENTS = 1 << 16  # mlfuse-run draws random inputs: only small shapes
LOCATED = re.compile(r"^\S.*?: error: ", re.MULTILINE)  # `file:1:2: error:`, `<pass x>: error:`, `node: error:`
TENSOR = re.compile(r"tensor<([\d?x]+)x")


@dataclass
class Case:
    """One input and the command that runs it."""

    index: int
    tool: str  # "opt", "run" or "api"
    argv: list[str]  # the tool's arguments; the input's path is argv[0] (after writing)
    data: bytes
    suffix: str  # ".mlir" or ".onnx"
    origin: str  # the seed and the mutations, for the report

    def command(self) -> str:
        tool = {"opt": "mlfuse-opt", "run": "mlfuse-run", "api": "python -c 'import mlfuse; mlfuse.compile(...)'"}
        return f"{tool[self.tool]} {' '.join(repr(a) if ' ' in a or '{' in a else a for a in self.argv)}"


@dataclass
class Outcome:
    case: Case
    category: str
    status: int | None
    stderr: str
    seconds: float


@dataclass
class Campaign:
    seed: int
    cases: int
    counts: Counter = field(default_factory=Counter)
    failures: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        rows = [f"{c:>15}: {self.counts.get(c, 0)}" for c in CATEGORIES]
        return f"fuzz: {self.cases} cases, seed {self.seed}, {self.seconds:.0f} s\n" + "\n".join(rows)


# --- making cases ---------------------------------------------------------------------------


def make_case(seed: int, index: int) -> Case:
    """Case `index` of campaign `seed`: the same pair always gives the same case."""
    rng = random.Random(f"{seed}/{index}")
    if rng.random() < 0.25:
        name, model = rng.choice(corpus.onnx_seeds())
        data, names = mutate.mutate_onnx(rng, model)
        suffix, small = ".onnx", onnx_is_small(data)
    else:
        name, text = rng.choice(corpus.mlir_seeds())
        text, names = mutate.mutate_text(rng, text)
        data, suffix, small = text.encode("utf-8", "surrogateescape"), ".mlir", text_is_small(text)
    tool = rng.choice(["opt", "opt", "opt", "run", "api"])
    if tool == "run" and not small:
        tool = "opt"
    argv: list[str] = ["INPUT"]
    if tool == "opt":
        argv += ["-p", rng.choice(PIPELINES)]
        if suffix == ".onnx" and "symbolic" in name:
            argv += ["--shape", rng.choice(["x=2x4", "x=99999999999999999999x4", "x=2", "y=3x4"])]
    elif tool == "run":
        argv += ["--check", "--threads", "1"]
        entry = entry_of(data) if suffix == ".mlir" else None
        if entry:
            argv += ["--entry", entry]
        if suffix == ".onnx" and "symbolic" in name:
            argv += ["--shape", "x=2x4"]
    else:
        entry = entry_of(data) if suffix == ".mlir" else None
        argv += ["--entry", entry or "main"]
    return Case(index, tool, argv, data, suffix, f"{name} + {', '.join(names)}")


def entry_of(data: bytes) -> str | None:
    m = re.search(rb"func\.func\s+(?:public\s+|private\s+)?@([\w$.]+)", data)
    return m.group(1).decode() if m else None


def text_is_small(text: str) -> bool:
    """Whether every tensor in the text is small enough for mlfuse-run's random inputs."""
    for dims in TENSOR.findall(text):
        sizes = [int(d) for d in dims.split("x") if d.isdigit()]
        if len(sizes) > 8 or math.prod(sizes) > RUN_MAX_ELEMENTS:
            return False
    return "x?x" not in text and "tensor<99999" not in text


def onnx_is_small(data: bytes) -> bool:
    try:
        import onnx

        g = onnx.load_model_from_string(data).graph
    except Exception:
        return True  # it fails before any input is drawn
    for vi in [*g.input, *g.output, *g.value_info]:
        sizes = [d.dim_value for d in vi.type.tensor_type.shape.dim if d.HasField("dim_value")]
        if math.prod(sizes) > RUN_MAX_ELEMENTS:
            return False
    return True


# --- running cases --------------------------------------------------------------------------


def prepare() -> None:
    """Import everything a case needs once, in the parent, so that children start warm."""
    os.environ["MLFUSE_CACHE_DIR"] = "off"  # mutated graphs would only fill the cache
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import onnx.reference  # noqa: F401
    from xdsl.transforms import get_all_passes

    import mlfuse  # noqa: F401
    import mlfuse.api  # noqa: F401
    import mlfuse.backend.cpu  # noqa: F401
    import mlfuse.backend.llvm_translate  # noqa: F401
    import mlfuse.frontend.onnx  # noqa: F401
    import mlfuse.reference  # noqa: F401
    import mlfuse.tools.mlfuse_opt  # noqa: F401
    import mlfuse.tools.mlfuse_run  # noqa: F401

    for factory in get_all_passes().values():  # the pass registry imports lazily
        try:
            factory()
        except Exception:
            pass
    corpus.mlir_seeds()
    corpus.onnx_seeds()


def child_main(case: Case, path: str) -> int:
    """What runs in the child: the tool's main(), or mlfuse.compile; the exit status."""
    argv = [path if a == "INPUT" else a for a in case.argv]
    if case.tool == "opt":
        from mlfuse.tools.mlfuse_opt import main

        main(argv)
    elif case.tool == "run":
        from mlfuse.tools.mlfuse_run import main

        main(argv)
    else:
        import mlfuse

        try:
            mlfuse.compile(path, entry=argv[2])
        except mlfuse.Diagnostic as d:
            print(d, file=sys.stderr)
            return 1
    return 0


def spawn(case: Case, workdir: Path, memory_limit: int) -> int:
    """Fork a child for `case` (its input, stdout and stderr in `workdir`); the child's pid."""
    path = workdir / f"case-{case.index}{case.suffix}"
    path.write_bytes(case.data)
    out, err = workdir / f"case-{case.index}.out", workdir / f"case-{case.index}.err"
    pid = os.fork()
    if pid:
        return pid
    status = 70
    try:
        os.setpgid(0, 0)  # its own process group: a hang is killed with anything it started
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        import tempfile

        tempfile.tempdir = str(workdir)  # reproducers stay in the campaign's folder
        fd_out = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        fd_err = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd_out, 1)
        os.dup2(fd_err, 2)
        # the parent's sys.stdout may not write to fd 1 (pytest's capture replaces it)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        try:
            status = child_main(case, str(path))
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            status = 70
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)


def classify(case: Case, status: int | None, stdout: str, stderr: str) -> str:
    if status is None:
        return "hang"
    if status < 0:
        return "signal"
    if "Traceback (most recent call last)" in stderr or status not in (0, 1):
        return "traceback"
    if status == 0:
        return "ok"
    if "error: internal error:" in stderr:  # mlfuse's own (diagnostics.internal_error), not a quoted source line
        return "internal-error"
    if case.tool == "run" and "MISMATCH" in stdout and "error:" not in stderr:
        return "mismatch"
    if "error:" not in stderr:
        return "traceback"  # exit status 1 and nothing said
    # the tools name a location for every error; the API's Diagnostic may leave it out
    # (an entry point not in the module, say), since the caller knows what it passed
    return "diagnostic" if LOCATED.search(stderr) or case.tool == "api" else "unlocated"


def run_campaign(seed: int, cases: int, jobs: int = 2, timeout: float = 60.0, workdir: Path | None = None,
                 save: Path | None = None, only: int | None = None, memory_limit: int = 6 << 30,
                 verbose: bool = False) -> Campaign:
    """Run cases 0..cases-1 of `seed` (or just case `only`), `jobs` at a time."""
    import shutil
    import tempfile

    prepare()
    own = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="mlfuse-fuzz-")) if own else workdir
    workdir.mkdir(parents=True, exist_ok=True)
    campaign = Campaign(seed, 1 if only is not None else cases)
    todo = [only] if only is not None else list(range(cases))
    running: dict[int, tuple[Case, float]] = {}
    start = time.monotonic()
    try:
        while todo or running:
            while todo and len(running) < jobs:
                case = make_case(seed, todo.pop(0))
                running[spawn(case, workdir, memory_limit)] = (case, time.monotonic())
            finished = reap(running, timeout)
            for case, status, seconds in finished:
                outcome = collect(case, status, seconds, workdir)
                campaign.counts[outcome.category] += 1
                if outcome.category in FAILURES or outcome.category in ("internal-error", "mismatch"):
                    campaign.failures.append(outcome)
                    if save is not None:
                        save_failure(outcome, save, seed)
                if verbose:
                    print(f"case {case.index} [{outcome.category}] {case.command()}  ({case.origin}, {seconds:.1f} s)")
                    if only is not None:
                        print(outcome.stderr)
    finally:
        for pid in running:
            kill(pid)
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
    campaign.seconds = time.monotonic() - start
    return campaign


def reap(running: dict[int, tuple[Case, float]], timeout: float) -> list[tuple[Case, int | None, float]]:
    """Wait a little for children; the ones that ended (status) or ran past `timeout` (None)."""
    done = []
    deadline = time.monotonic() + 0.05
    while not done and time.monotonic() < deadline:
        for pid in list(running):
            case, started = running[pid]
            got, status = os.waitpid(pid, os.WNOHANG)
            if got:
                code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                done.append((case, code, time.monotonic() - started))
                del running[pid]
            elif time.monotonic() - started > timeout:
                kill(pid)
                done.append((case, None, time.monotonic() - started))
                del running[pid]
        if not done:
            time.sleep(0.01)
    return done


def kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def collect(case: Case, status: int | None, seconds: float, workdir: Path) -> Outcome:
    files = [workdir / f"case-{case.index}{s}" for s in (case.suffix, ".out", ".err")]
    stdout = files[1].read_text(errors="replace") if files[1].exists() else ""
    stderr = files[2].read_text(errors="replace") if files[2].exists() else ""
    for f in files:
        f.unlink(missing_ok=True)
    return Outcome(case, classify(case, status, stdout, stderr), status, stderr[-4000:], seconds)


def save_failure(outcome: Outcome, folder: Path, seed: int) -> None:
    """The input and what happened, to replay with `python -m tests.fuzz --seed S --case N -v`."""
    folder.mkdir(parents=True, exist_ok=True)
    case = outcome.case
    stem = folder / f"{outcome.category}-seed{seed}-case{case.index}"
    stem.with_suffix(case.suffix).write_bytes(case.data)
    stem.with_suffix(".txt").write_text(
        f"command: {case.command()}\norigin: {case.origin}\nstatus: {outcome.status}\n"
        f"replay: python -m tests.fuzz --seed {seed} --case {case.index} -v\n\n{outcome.stderr}"
    )
