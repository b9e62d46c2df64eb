"""A fixed-seed slice of the fuzzing harness (tests/fuzz): no traceback, signal, hang or
unlocated error in mlfuse-opt, mlfuse-run and mlfuse.compile on mutated inputs.

`make fuzz` runs the long campaign (FUZZ_CASES=2000). The slice runs in a subprocess so
that the harness forks from a plain process, not from a pytest worker with threads.
"""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 15
CASES = 100


def test_fuzz_slice(tmp_path):
    out = tmp_path / "failures"
    r = subprocess.run(
        [sys.executable, "-m", "tests.fuzz", "--cases", str(CASES), "--seed", str(SEED), "--jobs", "2",
         "--timeout", "60", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    details = ""
    if out.exists():
        details = "\n\n".join(p.read_text(errors="replace")[:2000] for p in sorted(out.glob("*.txt")))
    assert r.returncode == 0, (
        f"fuzz slice failed (seed {SEED}, {CASES} cases; replay one with "
        f"`python -m tests.fuzz --seed {SEED} --case N -v`)\n{r.stdout}\n{r.stderr}\n{details}"
    )
    assert "traceback: 0" in r.stdout and "signal: 0" in r.stdout and "hang: 0" in r.stdout, r.stdout


def test_an_internal_error_is_mlfuse_s_own_not_a_quoted_line():
    """A diagnostic that quotes a source line saying "internal error" (a truncated comment
    of a lit file) is a diagnostic; mlfuse's internal error names its stage."""
    from tests.fuzz.harness import Case, classify

    case = Case(0, "run", ["x.mlir"], b"", ".mlir", "test")
    quoted = "x.mlir:4:30: error: Could not parse entire input!\n// an internal error (the com\n   ^\n"
    assert classify(case, 1, "", quoted) == "diagnostic"
    own = "<pass pipeline>: error: internal error: pass pipeline failed: KeyError: 'x'\nreproducer: /tmp/r.mlir\n"
    assert classify(case, 1, "", own) == "internal-error"
