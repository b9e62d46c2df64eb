"""--check's oracle: the float64 reference, with tolerances that grow with the reduction
length (mlfuse_run.tolerances), so correct programs pass and wrong ones still fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

import mlfuse
from mlfuse.tools.mlfuse_run import compare

ROW_SUM = """func.func @main(%x: tensor<256x1024xf32>) -> tensor<256xf32> {
  %s = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<256x1024xf32> -> tensor<256xf32>
  func.return %s : tensor<256xf32>
}
"""


def row_sum_case(seed: int = 0):
    x = np.random.default_rng(seed).standard_normal((256, 1024)).astype(np.float32)
    (exact,) = mlfuse.reference(ROW_SUM).widened(x)
    return x, exact


def test_widened_reference_is_float64_and_knows_the_reduction_length():
    x, exact = row_sum_case()
    assert exact.dtype == np.float64
    np.testing.assert_allclose(exact, x.astype(np.float64).sum(axis=1), rtol=1e-12)
    assert mlfuse.reference(ROW_SUM).longest_reduction() == 1024


def test_a_correct_but_sequential_sum_passes():
    """A plain left-to-right f32 sum is a correct program; the old check (rtol 1e-4,
    atol 1e-5 against the f32 reference) called it a MISMATCH on near-zero sums."""
    x, exact = row_sum_case()
    sequential = np.cumsum(x, axis=1, dtype=np.float32)[:, -1]
    (ref32,) = mlfuse.reference(ROW_SUM)(x)
    assert not np.allclose(sequential, ref32, rtol=1e-4, atol=1e-5)  # the old verdict
    ok, abs_err, _ = compare(sequential, exact, 1024)
    assert ok and abs_err > 1e-5


def test_wrong_results_are_still_caught():
    x, exact = row_sum_case()
    good = x.sum(axis=1)
    assert compare(good, exact, 1024)[0]
    for k, delta in [(0, 0.01), (17, -0.01), (255, 0.05)]:  # one element left out is ~1 off; 0.01 is caught
        bad = good.copy()
        bad[k] += np.float32(delta)
        assert not compare(bad, exact, 1024)[0], (k, delta)
    dropped = good - x[:, -1]  # forgot the last column
    assert not compare(dropped, exact, 1024)[0]
    nan = good.copy()
    nan[3] = np.nan
    assert not compare(nan, exact, 1024)[0]


def test_special_values_compare_in_the_output_dtype():
    """exp(89) overflows f32: the f64 reference's 4.5e38 rounds to inf, so inf is right."""
    want = np.array([np.exp(89.0), np.nan, -np.inf, 1.0])
    assert compare(np.array([np.inf, np.nan, -np.inf, 1.0], np.float32), want)[0]
    assert not compare(np.array([3.4e38, np.nan, -np.inf, 1.0], np.float32), want)[0]
    assert not compare(np.array([np.inf, 0.0, -np.inf, 1.0], np.float32), want)[0]
    assert not compare(np.array([np.inf, np.nan, np.inf, 1.0], np.float32), want)[0]
    assert not compare(np.array([1, 2], np.int32), np.array([1, 3], np.int32))[0]


def test_cli_check_passes_on_a_long_row_sum(tmp_path: Path):
    src = tmp_path / "row_sum.mlir"
    src.write_text(ROW_SUM)
    r = subprocess.run([sys.executable, "-m", "mlfuse.tools.mlfuse_run", str(src), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check result0: ok" in r.stdout and "float64 reference, reductions of 1024" in r.stdout


def test_conftest_helper_uses_the_float64_oracle():
    from conftest import assert_matches_float64_reference

    x, _ = row_sum_case(1)
    (got,) = mlfuse.compile(ROW_SUM)(x)
    assert_matches_float64_reference(ROW_SUM, [x], [got])
    bad = got.copy()
    bad[0] += 1.0
    try:
        assert_matches_float64_reference(ROW_SUM, [x], [bad])
    except AssertionError:
        return
    raise AssertionError("a wrong row sum passed")
