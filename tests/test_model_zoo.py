"""The model zoo (bench/models) exported by both torch exporters, compiled by mlfuse.compile(path),
against onnxruntime on the same file: max|mlfuse - ort| / max|ort| < 1e-4.

Small sizes (32x32 images, sequences of 16). `make test` compiles four pairs (QUICK),
`make test-full` (MLFUSE_TEST_FULL=1) every model with both exporters.
Exporter failures are torch's, not mlfuse's: such a pair is skipped with the reason, and
EXPORT_FAILS records the ones known today so that a new failure is noticed.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
ort = pytest.importorskip("onnxruntime")

import mlfuse  # noqa: E402
from bench.models import EXPORTERS, ZOO, export  # noqa: E402

# (model, exporter) pairs that torch cannot export today, with torch's reason
EXPORT_FAILS = {
    ("gpt2", "legacy"): "aten::diff has no ONNX symbolic (transformers' causal mask)",
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("zoo")


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got.astype(np.float64) - want).max() / max(np.abs(want).max(), 1e-30))


FULL = os.environ.get("MLFUSE_TEST_FULL", "0") not in ("", "0")
# `make test` compiles these (a few seconds to half a minute each); `make test-full` every pair
QUICK = {("textcnn", "legacy"), ("unet", "dynamo"), ("bert", "legacy"), ("resnet18", "legacy")}
PAIRS = [(n, e) for n in sorted(ZOO) for e in EXPORTERS if FULL or (n, e) in QUICK]


@pytest.mark.parametrize("name, exporter", PAIRS)
def test_zoo_model_matches_onnxruntime(name, exporter, folder):
    if (name, exporter) in EXPORT_FAILS:
        pytest.skip(f"torch's {exporter} exporter fails: {EXPORT_FAILS[(name, exporter)]}")
    model = ZOO[name]
    path = export(model, "small", exporter, folder)
    _, inputs = model.build("small")
    feeds = [t.numpy() for t in inputs]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = session.run(None, {i.name: a for i, a in zip(session.get_inputs(), feeds)})
    f = mlfuse.compile(str(path))
    outs = [np.full(s.shape, np.nan, s.dtype) for s in f.outputs]  # poisoned
    f(*feeds, out=outs)
    assert len(outs) == len(want)
    for got, ref in zip(outs, want):
        assert got.shape == ref.shape and got.dtype == ref.dtype
        assert relative_error(got, ref) < 1e-4, f"{name} ({exporter}): relative error {relative_error(got, ref):.2e}"
