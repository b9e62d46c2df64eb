"""mlfuse-run: runs, checks against the reference, and reports bad input without a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

EXP = """func.func @main(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  %y = graph.exp %x : tensor<4x5xf32>
  func.return %y : tensor<4x5xf32>
}
"""


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlfuse.tools.mlfuse_run", *args], capture_output=True, text=True)


def test_check_passes_and_writes_outputs(tmp_path: Path):
    src = tmp_path / "exp.mlir"
    src.write_text(EXP)
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    r = run(str(src), "--check", "--repeat", "2", "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"))
    assert r.returncode == 0, r.stderr
    assert "check result0: ok" in r.stdout
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["result0"], np.exp(x), rtol=1e-6)


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--entry", "nope"], "no function '@nope'"),
        (["--inputs", "missing.npz"], "cannot read inputs"),
        (["--shape", "x=2xq"], "--shape expects NAME=2x128x768"),
        (["--inputs", "bad.npz"], "must have shape (4, 5), got (3,)"),
        (["--threads", "-3"], "argument --threads: must be 0 or more, got -3"),
        (["--repeat", "-1"], "argument --repeat: must be 0 or more, got -1"),
        (["--repeat", "many"], "argument --repeat: expected a whole number, got 'many'"),
    ],
)
def test_bad_input_is_an_error_not_a_traceback(extra, message, tmp_path: Path):
    src = tmp_path / "exp.mlir"
    src.write_text(EXP)
    np.savez(tmp_path / "bad.npz", x=np.ones(3, np.float32))
    extra = [str(tmp_path / e) if e.endswith(".npz") else e for e in extra]
    r = run(str(src), *extra)
    assert r.returncode == 1
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_missing_file(tmp_path: Path):
    r = run(str(tmp_path / "nothing.mlir"))
    assert r.returncode == 1 and "no such file" in r.stderr and "Traceback" not in r.stderr
