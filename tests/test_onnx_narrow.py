"""ONNX's narrow element types (mlfuse/frontend/onnx_narrow.py) against onnx's reference.

Casts are checked bit for bit against onnx's reference Cast (ml_dtypes underneath) on
every float16 value, the midpoints between neighbouring values of the narrow type and
one float32 ulp either side of them, random float32 and float64 values over the whole
exponent range, and the special values; decoding on every code. Outputs are poisoned
before each call. Random data is seeded (SEED); a failure names the case and values.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import mlfuse
from mlfuse.frontend.onnx import import_onnx
from mlfuse.frontend.onnx_narrow import NARROW, Narrow

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402
from onnx.reference.ops.op_cast import cast_to  # noqa: E402

SEED = 20261206
# float6 has no Cast in onnx yet (shape inference rejects it); float8e8m0 has its own test
FLOATS = [t for t in NARROW.values() if t.is_float and t.onnx_type != TensorProto.FLOAT8E8M0 and "6" not in t.name]
INTEGERS = [t for t in NARROW.values() if not t.is_float]
POISON = 0xA5


def model(nodes, inputs, outputs, opset=25, initializers=()):
    graph = helper.make_graph(nodes, "narrow", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def tensor(name, onnx_type, shape):
    return helper.make_tensor_value_info(name, onnx_type, list(shape))


def compiled(m):
    return mlfuse.compile(import_onnx(m))


def poisoned_outputs(f):
    outs = [np.empty(s.shape, s.dtype) for s in f.outputs]
    for o in outs:
        o.view(np.uint8)[...] = POISON
    return outs


def run(f, *inputs):
    outs = poisoned_outputs(f)
    f(*inputs, out=outs)
    return outs


def same_bits(got, expected, inputs, what):
    storage = np.uint16 if expected.dtype.itemsize == 2 else np.uint8
    g, e = np.asarray(got).view(storage), np.asarray(expected).view(storage)
    bad = np.flatnonzero(g != e)
    shown = [(inputs.ravel()[i], hex(g.ravel()[i]), hex(e.ravel()[i])) for i in bad[:8]]
    assert bad.size == 0, f"{what} (seed {SEED}): {bad.size} of {g.size} differ, (input, got, expected): {shown}"


def encode_inputs(t: Narrow) -> tuple[np.ndarray, np.ndarray]:
    """float32 and float64 values that exercise rounding into t."""
    rng = np.random.default_rng(SEED)
    values = np.arange(256 if t.storage_dtype.itemsize == 1 else 65536).astype(t.storage_dtype).view(t.dtype)
    finite = np.unique(values.astype(np.float64)[np.isfinite(values.astype(np.float64))])
    middles = (finite[1:] + finite[:-1]) / 2
    middles = np.concatenate([middles, [finite[-1] * 1.5, finite[-1] * 2, finite[-1] + (finite[-1] - finite[-2]) / 2]])
    m32 = middles.astype(np.float32)
    near = np.concatenate([m32, np.nextafter(m32, np.float32(np.inf)), np.nextafter(m32, np.float32(-np.inf))])
    halves = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32)
    wide = (rng.standard_normal(4096) * 2.0 ** rng.integers(-140, 130, 4096)).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 3.4e38, -3.4e38], np.float32)
    x32 = np.concatenate([halves, near, -near, wide, special])
    x64 = np.concatenate([middles, -middles, np.nextafter(middles, np.inf), np.nextafter(middles, -np.inf),
                          rng.standard_normal(4096) * 2.0 ** rng.integers(-1000, 1000, 4096),
                          special.astype(np.float64)])
    return x32, x64


@pytest.mark.parametrize("t", FLOATS, ids=lambda t: t.name)
def test_float_casts_round_as_the_reference_does(t: Narrow):
    """Cast to t from float32 (saturating and not), float64 and float16, and back."""
    with np.errstate(all="ignore"):
        x32, x64 = encode_inputs(t)
    x16 = np.arange(65536, dtype=np.uint16).view(np.float16)
    codes = np.arange(256 if t.storage_dtype.itemsize == 1 else 65536).astype(t.storage_dtype).view(t.dtype)
    to = t.onnx_type
    nodes = [
        helper.make_node("Cast", ["x32"], ["sat"], to=to),
        helper.make_node("Cast", ["x32"], ["nosat"], to=to, saturate=0),
        helper.make_node("Cast", ["x64"], ["from64"], to=to),
        helper.make_node("Cast", ["x16"], ["from16"], to=to),
        helper.make_node("Cast", ["codes"], ["back32"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["codes"], ["back16"], to=TensorProto.FLOAT16),
    ]
    m = model(nodes, [tensor("x32", TensorProto.FLOAT, x32.shape), tensor("x64", TensorProto.DOUBLE, x64.shape),
                      tensor("x16", TensorProto.FLOAT16, x16.shape), tensor("codes", to, codes.shape)],
              [tensor("sat", to, x32.shape), tensor("nosat", to, x32.shape), tensor("from64", to, x64.shape),
               tensor("from16", to, x16.shape), tensor("back32", TensorProto.FLOAT, codes.shape),
               tensor("back16", TensorProto.FLOAT16, codes.shape)])
    f = compiled(m)
    sat, nosat, from64, from16, back32, back16 = run(f, x32, x64, x16, codes)
    with np.errstate(all="ignore"):
        same_bits(sat, cast_to(x32, to, saturate=True), x32, "float32, saturate=1")
        same_bits(nosat, cast_to(x32, to, saturate=False), x32, "float32, saturate=0")
        same_bits(from64, cast_to(x64, to, saturate=True), x64, "float64")
        same_bits(from16, cast_to(x16, to, saturate=True), x16, "float16")
        np.testing.assert_array_equal(back32, codes.astype(np.float32))
        np.testing.assert_array_equal(back16, codes.astype(np.float32).astype(np.float16))


@pytest.mark.parametrize("t", INTEGERS, ids=lambda t: t.name)
def test_integer_casts_truncate_and_wrap_as_the_reference_does(t: Narrow):
    """float32 -> t truncates toward zero, 0 outside the range (ml_dtypes); int8 -> t
    keeps the low bits; t -> int8, float32 by value."""
    rng = np.random.default_rng(SEED)
    x32 = np.concatenate([np.arange(-20, 20, 0.25, dtype=np.float32), rng.uniform(-40, 40, 256).astype(np.float32),
                          np.array([np.nan, np.inf, -np.inf, -0.0], np.float32)])
    x8 = np.arange(-128, 128, dtype=np.int8)
    codes = np.arange(1 << ml_dtypes.iinfo(t.dtype).bits, dtype=np.uint8).view(t.dtype)
    to = t.onnx_type
    nodes = [helper.make_node("Cast", ["x32"], ["a"], to=to), helper.make_node("Cast", ["x8"], ["b"], to=to),
             helper.make_node("Cast", ["codes"], ["c"], to=TensorProto.INT8),
             helper.make_node("Cast", ["codes"], ["d"], to=TensorProto.FLOAT)]
    m = model(nodes, [tensor("x32", TensorProto.FLOAT, x32.shape), tensor("x8", TensorProto.INT8, x8.shape),
                      tensor("codes", to, codes.shape)],
              [tensor("a", to, x32.shape), tensor("b", to, x8.shape), tensor("c", TensorProto.INT8, codes.shape),
               tensor("d", TensorProto.FLOAT, codes.shape)])
    a, b, c, d = run(compiled(m), x32, x8, codes)
    with np.errstate(all="ignore"):
        same_bits(a, x32.astype(t.dtype), x32, "from float32")
    same_bits(b, x8.astype(t.dtype), x8, "from int8")
    np.testing.assert_array_equal(c, codes.astype(np.int8))
    np.testing.assert_array_equal(d, codes.astype(np.float32))


@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [1, 0])
def test_float8e8m0_follows_onnx_rounding_modes(round_mode, saturate):
    rng = np.random.default_rng(SEED)
    x = np.concatenate([rng.standard_normal(2048) * 2.0 ** rng.integers(-130, 128, 2048),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, 3.0, 2.0**127 * 1.5, 2.0**-127, 0.75]]).astype(np.float32)
    to = TensorProto.FLOAT8E8M0
    m = model([helper.make_node("Cast", ["x"], ["y"], to=to, saturate=saturate, round_mode=round_mode),
               helper.make_node("Cast", ["y"], ["z"], to=TensorProto.FLOAT)],
              [tensor("x", TensorProto.FLOAT, x.shape)], [tensor("y", to, x.shape), tensor("z", TensorProto.FLOAT, x.shape)])
    y, z = run(compiled(m), x)
    expected = numpy_helper.to_float8e8m0(x, bool(saturate), round_mode)
    same_bits(y, expected, x, f"round_mode={round_mode}, saturate={saturate}")
    np.testing.assert_array_equal(z, expected.astype(np.float32))


def reference_outputs(m, feeds):
    return ReferenceEvaluator(m).run(None, feeds)


def test_int4_block_dequantized_weights_in_a_matmul():
    """An int4 weight-only quantized linear layer (per-block scales and zero points, as
    LLM exports have): weights decoded at compile time, outputs as the reference's."""
    rng = np.random.default_rng(SEED)
    w = rng.integers(-8, 8, (64, 24)).astype(ml_dtypes.int4)
    scale = rng.uniform(0.01, 0.1, (4, 24)).astype(np.float32)
    zero = rng.integers(-3, 3, (4, 24)).astype(ml_dtypes.int4)
    x = rng.standard_normal((5, 64)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zero, "z")]
    m = model([helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], axis=0, block_size=16),
               helper.make_node("MatMul", ["x", "wf"], ["y"])],
              [tensor("x", TensorProto.FLOAT, x.shape)], [tensor("y", TensorProto.FLOAT, (5, 24))], initializers=inits)
    (y,) = run(compiled(m), x)
    np.testing.assert_allclose(y, reference_outputs(m, {"x": x})[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("to", [TensorProto.INT4, TensorProto.UINT2, TensorProto.FLOAT8E4M3FN,
                                TensorProto.FLOAT8E5M2, TensorProto.FLOAT4E2M1],
                         ids=lambda t: TensorProto.DataType.Name(t))
def test_quantize_and_dequantize_at_run_time(to):
    """QuantizeLinear onto a narrow type and back, both at run time, per axis."""
    rng = np.random.default_rng(SEED)
    x = (rng.standard_normal((3, 8)) * 4).astype(np.float32)
    x[0, :3] = [np.nan, np.inf, -np.inf] if NARROW[to].is_float else [100.0, -100.0, 0.5]
    scale = rng.uniform(0.2, 0.6, 8).astype(np.float32)
    zero = np.zeros(8, NARROW[to].dtype)
    inits = [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zero, "z")]
    m = model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
               helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)],
              [tensor("x", TensorProto.FLOAT, x.shape)], [tensor("q", to, x.shape), tensor("y", TensorProto.FLOAT, x.shape)],
              initializers=inits)
    q, y = run(compiled(m), x)
    eq, ey = reference_outputs(m, {"x": x})
    same_bits(q, eq, x, "quantized")
    np.testing.assert_array_equal(y, ey)


def test_bfloat16_arithmetic_rounds_each_operator():
    """Add and Relu on bfloat16 (decoded to float32, encoded after each), and a Transpose
    and Reshape that move float8 storage: bit for bit as the reference."""
    rng = np.random.default_rng(SEED)
    a = rng.standard_normal((4, 6)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((6,)).astype(ml_dtypes.bfloat16)
    c = np.concatenate([rng.standard_normal(22), [np.nan, -np.nan]]).astype(ml_dtypes.float8_e4m3fn).reshape(4, 6)
    bf, f8 = TensorProto.BFLOAT16, TensorProto.FLOAT8E4M3FN
    m = model([helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
               helper.make_node("Mul", ["s", "a"], ["p"]),  # s and a decoded once for two consumers each
               helper.make_node("Transpose", ["c"], ["t"]), helper.make_node("Reshape", ["t", "shape"], ["cc"])],
              [tensor("a", bf, a.shape), tensor("b", bf, b.shape), tensor("c", f8, c.shape)],
              [tensor("r", bf, a.shape), tensor("cc", f8, (2, 12)), tensor("p", bf, a.shape)],
              initializers=[numpy_helper.from_array(np.array([2, 12], np.int64), "shape")])
    r, cc, p = run(compiled(m), a, b, c)
    er, ecc, ep = reference_outputs(m, {"a": a, "b": b, "c": c})
    same_bits(r, er, a, "Add + Relu")
    same_bits(p, ep, a, "Add + Mul")
    same_bits(cc, ecc, c, "Transpose + Reshape")


def test_narrow_arrays_are_checked_and_returned_by_dtype(tmp_path, monkeypatch):
    """The signature names ml_dtypes dtypes; a float32 array where bfloat16 is expected
    is refused by name; a cached function has the same signature."""
    monkeypatch.setenv("MLFUSE_CACHE_DIR", str(tmp_path))
    m = model([helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Cast", ["n"], ["y"], to=TensorProto.FLOAT8E5M2)],
              [tensor("x", TensorProto.BFLOAT16, (3,))],
              [tensor("y", TensorProto.FLOAT8E5M2, (3,))])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    for _ in range(2):  # compiled, then loaded from the cache
        f = mlfuse.compile(str(path))
        assert [s.dtype for s in f.inputs] == [np.dtype(ml_dtypes.bfloat16)]
        assert [s.dtype for s in f.outputs] == [np.dtype(ml_dtypes.float8_e5m2)]
        (y,) = f(np.array([1.5, -2.0, 0.0], ml_dtypes.bfloat16))
        assert y.dtype == np.dtype(ml_dtypes.float8_e5m2)
        assert y.astype(np.float32).tolist() == [-1.5, 2.0, -0.0]
    with pytest.raises(ValueError, match="must have dtype bfloat16, got float32"):
        f(np.zeros(3, np.float32))


def test_narrow_values_inside_an_unrolled_loop_body():
    """A Loop carrying a bfloat16 value (times a bfloat16 constant per step, each step's
    value stacked): the body's narrow values are known as such where it is unrolled
    (shape inference's types of the body), bit for bit as the reference."""
    bf = TensorProto.BFLOAT16
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"]), helper.make_node("Mul", ["s", "k"], ["s_next"]),
         helper.make_node("Identity", ["s_next"], ["y"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s", bf, [4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("s_next", bf, [4]),
         helper.make_tensor_value_info("y", bf, [4])])
    inits = [numpy_helper.from_array(np.array(3, np.int64), "trips"), numpy_helper.from_array(np.array(True), "go"),
             numpy_helper.from_array(np.array([1.5, -0.7, 3.1, 0.3], ml_dtypes.bfloat16), "k")]
    m = model([helper.make_node("Loop", ["trips", "go", "x"], ["last", "steps"], body=body)],
              [tensor("x", bf, (4,))], [tensor("last", bf, (4,)), tensor("steps", bf, (3, 4))], opset=21, initializers=inits)
    x = np.array([1.1, 2.3, -0.9, 7.7], ml_dtypes.bfloat16)
    last, steps = run(compiled(m), x)
    e_last, e_steps = reference_outputs(m, {"x": x})
    same_bits(last, e_last, x, "carried value")
    same_bits(steps, e_steps, x, "stacked steps")
