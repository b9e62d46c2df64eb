"""A fuzzing harness for mlfuse's three entry points: mlfuse-opt, mlfuse-run and mlfuse.compile.

It mutates the lit files (filecheck/**/*.mlir), the examples (examples/*.mlir) and a
few small ONNX models built here (truncation, line deletion and duplication, type and
shape swaps, huge values, deep nesting, garbage bytes), runs each case in a forked
child of a parent that imported mlfuse once, and sorts the outcomes:

    ok              exit status 0
    diagnostic      exit status 1 with a located `error:` line
    internal-error  exit status 1, "error: internal error:" (a crash caught, with a reproducer)
    mismatch        mlfuse-run --check found a wrong result (numerics, not robustness)
    unlocated       exit status 1, an `error:` line without a location
    traceback       a Python traceback, or an exit status other than 0 and 1, or no message
    signal          the child died of a signal (SIGSEGV, SIGFPE, SIGILL, SIGABRT...)
    hang            the child ran past the time limit and was killed

    python -m tests.fuzz --cases 2000 --seed 1     # counts by category; failures saved
    python -m tests.fuzz --seed 1 --case 17 -v     # one case again, with its output
"""

from .harness import FAILURES, Campaign, run_campaign

__all__ = ["FAILURES", "Campaign", "run_campaign"]
