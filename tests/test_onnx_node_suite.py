"""The ONNX backend node suite, generated from the installed onnx package (bench/onnx_conformance.py).

`make test` runs every SAMPLE-th case (by name, so the same ones each time: about a minute);
`make test-full` (MLFUSE_TEST_FULL=1) runs them all and checks PASS_FLOOR; `make conformance`
writes the per-operator table to bench/results/onnx_conformance.md.

Every case whose operators are all in mlfuse's ONNX table runs in a forked child: imported,
compiled for the CPU, run on the case's data, compared with rtol/atol of the case. Asserted:
no wrong result and no crash (an exception other than a Diagnostic, a signal, a hang), every
rejection names its node (or the model) and says why, and the number of passing in-scope
cases never drops below PASS_FLOOR (raise it when more pass; never lower it).
"""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")

import os  # noqa: E402

from bench.onnx_conformance import EXPECTED_OUTPUTS_OFF, in_table_cases, run_case, supported_types  # noqa: E402

# in-scope cases that pass today (bench/results/onnx_conformance.md); only ever raised
PASS_FLOOR = 1781
SAMPLE = 6
FULL = os.environ.get("MLFUSE_TEST_FULL", "0") not in ("", "0")

CASES = sorted(in_table_cases(), key=lambda c: c.name)
if not FULL:
    CASES = CASES[::SAMPLE]
# cases whose expected outputs are off (bench.onnx_conformance.EXPECTED_OUTPUTS_OFF says why; mlfuse's
# own check of DFT: test_onnx_ops.test_dft_is_numpys_in_float64)
PARAMS = [pytest.param(c, id=c.name, marks=[pytest.mark.xfail(reason="expected outputs off", strict=True)]
                       if c.name in EXPECTED_OUTPUTS_OFF else []) for c in CASES]
SUPPORTED = supported_types()
OUTCOMES: dict[str, object] = {}


@pytest.mark.parametrize("case", PARAMS)
def test_node_case_passes_or_is_rejected_with_a_located_reason(case):
    outcome = run_case(case, SUPPORTED)
    OUTCOMES[case.name] = outcome
    assert outcome.status in ("pass", "rejected"), f"{outcome.status}: {outcome.detail}"
    if outcome.status == "rejected":
        location, _, reason = outcome.detail.partition(": error: ")
        assert location and reason, f"rejection without a location or a reason: {outcome.detail!r}"


@pytest.mark.skipif(not FULL, reason="the floor counts every case: make test-full")
def test_pass_count_never_drops():
    """Run in one process so that it sees every case (a full run of the cases above, repeated
    here only for those another worker ran)."""
    passed = 0
    for case in CASES:
        outcome = OUTCOMES.get(case.name) or run_case(case, SUPPORTED)
        passed += outcome.in_scope and outcome.status == "pass"
    assert passed >= PASS_FLOOR, f"{passed} in-scope node tests pass, below the floor of {PASS_FLOOR}"
