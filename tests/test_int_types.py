"""Every integer type (i8-i64, ui8-ui64) through the CPU pipeline, against numpy.

Each op is compiled end to end and run on seeded random data (extremes of the
type mixed in), outputs poisoned first; integers must match numpy's answers
exactly: arithmetic wraps, unsigned ops compare, divide, extend and convert as
unsigned, integer division by zero gives 0. Also the f64 -> f16 cast (correctly
rounded, no libcall) and zero-size tensors.
"""

from __future__ import annotations

import numpy as np
import pytest

import mlfuse

RNG = np.random.default_rng(20261130)

NEW_INTS = ["i8", "ui8", "i16", "ui16", "ui32", "ui64"]
ALL_INTS = [*NEW_INTS, "i32", "i64"]
DTYPES = {
    "i8": np.int8, "ui8": np.uint8, "i16": np.int16, "ui16": np.uint16, "i32": np.int32, "ui32": np.uint32,
    "i64": np.int64, "ui64": np.uint64, "f16": np.float16, "f32": np.float32, "f64": np.float64, "i1": np.bool_,
}


def ttype(shape, el: str) -> str:
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}{el}>"


def values(el: str, shape, small: bool = False) -> np.ndarray:
    """Random values of the type with its extremes (and 0, 1, -1 when signed) mixed in."""
    dtype = np.dtype(DTYPES[el])
    if dtype.kind == "b":
        return RNG.random(shape) < 0.5
    if dtype.kind == "f":
        return RNG.uniform(-100, 100, shape).astype(dtype)
    info = np.iinfo(dtype)
    lo, hi = (max(info.min, -20), min(info.max, 20)) if small else (info.min, info.max)
    x = RNG.integers(lo, hi, shape, dtype=dtype, endpoint=True).reshape(-1)
    specials = [0, 1, info.max, info.min] + ([-1] if info.min < 0 else [])
    n = min(len(specials), x.size // 4)
    x[:n] = [dtype.type(v) for v in specials[:n]]
    return x.reshape(shape)


def poisoned(fn) -> list[np.ndarray]:
    outs = []
    for spec in fn.outputs:
        o = np.empty(spec.shape, spec.dtype)
        o.fill(np.nan if spec.dtype.kind == "f" else (1 if spec.dtype == np.bool_ else 123))
        outs.append(o)
    return outs


def run(src: str, *inputs) -> tuple[list[np.ndarray], tuple[np.ndarray, ...]]:
    """Compiled results (outputs poisoned first) and the numpy reference's."""
    fn = mlfuse.compile(src)
    outs = poisoned(fn)
    fn(*inputs, out=outs)
    return outs, mlfuse.reference(src)(*inputs)


def assert_exact(got, want):
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def unary(op: str, el: str, shape=(3, 37), out_el: str | None = None, attrs: str = "") -> str:
    t, r = ttype(shape, el), ttype(shape, out_el or el)
    sig = f"{t} -> {r}" if out_el else t
    return f"func.func @main(%x: {t}) -> {r} {{\n  %y = graph.{op} %x {attrs}: {sig}\n  func.return %y : {r}\n}}"


def binary(op: str, el: str, shape=(3, 37)) -> str:
    t = ttype(shape, el)
    return f"func.func @main(%x: {t}, %y: {t}) -> {t} {{\n  %z = graph.{op} %x, %y : {t}\n  func.return %z : {t}\n}}"


WRAP = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


@pytest.mark.parametrize("el", NEW_INTS)
@pytest.mark.parametrize("op", [*WRAP, "div"])
def test_binary(op, el):
    x, y = values(el, (3, 37)), values(el, (3, 37))
    y.reshape(-1)[5:9] = 0  # division by zero gives 0, without a trap
    (got,), want = run(binary(op, el), x, y)
    with np.errstate(all="ignore"):
        if op == "div":
            signed_min = np.iinfo(x.dtype).min
            q = np.where(y == 0, 0, np.fmod(x, np.where(y == 0, 1, y)))  # x - x % y is divisible by y
            expected = np.where(y == 0, 0, (x - q) // np.where(y == 0, 1, y)).astype(x.dtype)
            if signed_min < 0:  # INT_MIN / -1 wraps to INT_MIN
                expected = np.where((x == signed_min) & (y == -1), x, expected)
        else:
            expected = WRAP[op](x, y)
    np.testing.assert_array_equal(got, expected)
    assert_exact([got], want)


@pytest.mark.parametrize("el", NEW_INTS)
@pytest.mark.parametrize("op", ["neg", "abs", "relu"])
def test_unary(op, el):
    x = values(el, (5, 19))
    (got,), want = run(unary(op, el, (5, 19)), x)
    with np.errstate(all="ignore"):
        expected = {"neg": np.negative, "abs": np.abs, "relu": lambda v: np.maximum(v, v.dtype.type(0))}[op](x)
    np.testing.assert_array_equal(got, expected)
    assert_exact([got], want)


@pytest.mark.parametrize("el", [*NEW_INTS, "i1"])
def test_compare_and_select(el):
    x, y = values(el, (4, 33)), values(el, (4, 33))
    y[:, ::3] = x[:, ::3]  # some ties
    t, b = ttype((4, 33), el), ttype((4, 33), "i1")
    preds = ["eq", "ne", "lt", "le", "gt", "ge"]
    lines = [f"  %c{i} = graph.compare {p}, %x, %y : {t}" for i, p in enumerate(preds)]
    src = (f"func.func @main(%x: {t}, %y: {t}) -> ({', '.join([b] * 6)}, {t}) {{\n" + "\n".join(lines)
           + f"\n  %s = graph.select %c2, %x, %y : {b}, {t}\n"
           + f"  func.return {', '.join(f'%c{i}' for i in range(6))}, %s : {', '.join([b] * 6)}, {t}\n}}")
    got, want = run(src, x, y)
    expected = [np.equal(x, y), np.not_equal(x, y), np.less(x, y), np.less_equal(x, y), np.greater(x, y),
                np.greater_equal(x, y), np.where(x < y, x, y)]
    assert_exact(got, expected)
    assert_exact(got, want)


REDUCTIONS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


def test_bool_max_and_min_order_false_below_true():
    """i1 is numpy's bool, False < True: max is or, min is and (compared as signed bits,
    True had been -1, below False). Reductions of i1 are the frontends' (all, any)."""
    x, y = values("i1", (4, 33)), values("i1", (4, 33))
    t = ttype((4, 33), "i1")
    src = (f"func.func @main(%x: {t}, %y: {t}) -> ({t}, {t}) {{\n"
           f"  %a = graph.max %x, %y : {t}\n  %b = graph.min %x, %y : {t}\n"
           f"  func.return %a, %b : {t}, {t}\n}}")
    got, want = run(src, x, y)
    assert_exact(got, [x | y, x & y])
    assert_exact(got, want)


@pytest.mark.parametrize("el", NEW_INTS)
@pytest.mark.parametrize("kind", REDUCTIONS)
@pytest.mark.parametrize("axes", [(1,), (0,), (0, 1)])
def test_reductions(kind, axes, el):
    shape = (6, 45)
    x = values(el, shape, small=kind == "prod")
    out = [d for i, d in enumerate(shape) if i not in axes]
    src = (f"func.func @main(%x: {ttype(shape, el)}) -> {ttype(out, el)} {{\n"
           f"  %y = graph.reduce_{kind} %x {{axes = array<i64: {', '.join(map(str, axes))}>}} : "
           f"{ttype(shape, el)} -> {ttype(out, el)}\n  func.return %y : {ttype(out, el)}\n}}")
    (got,), want = run(src, x)
    expected = np.asarray(REDUCTIONS[kind](x, axis=axes)).astype(x.dtype)  # sums wrap around
    np.testing.assert_array_equal(got, expected)
    assert_exact([got], want)


def test_row_reduction_stitched_with_its_consumer():
    """x - max(x) per row over ui8: a stitched row kernel with an unsigned max."""
    t, r = ttype((8, 40), "ui8"), ttype((8, 1), "ui8")
    src = f"""func.func @main(%x: {t}) -> {t} {{
  %m = graph.reduce_max %x {{axes = array<i64: 1>, keepdims}} : {t} -> {r}
  %b = graph.broadcast %m {{dims = array<i64: 0, 1>}} : {r} -> {t}
  %y = graph.sub %b, %x : {t}
  func.return %y : {t}
}}"""
    x = values("ui8", (8, 40))
    (got,), want = run(src, x)
    np.testing.assert_array_equal(got, x.max(axis=1, keepdims=True) - x)
    assert_exact([got], want)


CAST_TYPES = [*ALL_INTS, "f16", "f32", "f64", "i1"]


@pytest.mark.parametrize("src_el", CAST_TYPES)
@pytest.mark.parametrize("dst_el", CAST_TYPES)
def test_cast(src_el, dst_el):
    if src_el == dst_el or not ({src_el, dst_el} & set(NEW_INTS)):
        pytest.skip("covered by test_cpu_ops")
    x = values(src_el, (2, 50))
    dst = np.dtype(DTYPES[dst_el])
    if x.dtype.kind == "f" and dst.kind in "iu":  # float -> int is defined for in-range values only
        info = np.iinfo(dst)
        x = RNG.uniform(max(float(info.min), -3e4), min(float(info.max), 3e4), x.shape).astype(x.dtype)
        x = np.clip(x, info.min, info.max).astype(x.dtype)
    (got,), want = run(unary("cast", src_el, (2, 50), out_el=dst_el), x)
    with np.errstate(all="ignore"):
        expected = x != 0 if dst.kind == "b" else (np.trunc(x) if x.dtype.kind == "f" else x).astype(dst)
    np.testing.assert_array_equal(got, expected)
    assert_exact([got], want)


@pytest.mark.parametrize("dst_el", ["f16", "f32", "f64"])
def test_u64_and_i64_to_float_round_correctly(dst_el):
    """u64 at and above 2^63 (the halving path) and values that need rounding."""
    x = np.array([0, 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1, 2**64 - 2**11, 2**64 - 2**11 - 1, 2**53 + 1,
                  2**63 + 2**11, 2**63 + 2**10 + 1, 12345678901234567890, 65519, 65520, 2**24 + 1], np.uint64)
    (got,), _ = run(unary("cast", "ui64", x.shape, out_el=dst_el), x)
    np.testing.assert_array_equal(got, x.astype(DTYPES[dst_el]))


@pytest.mark.parametrize("el", ["ui32", "ui64"])
def test_float_to_large_unsigned(el):
    info = np.iinfo(DTYPES[el])
    x = np.array([0.0, 1.5, 2.0**31, 2.0**32 - 1, 2.0**63, 2.0**63 + 2**11, 2.0**64 - 2**11, 3.9], np.float64)
    x = x[x <= info.max]
    (got,), want = run(unary("cast", "f64", x.shape, out_el=el), x)
    np.testing.assert_array_equal(got, x.astype(DTYPES[el]))
    assert_exact([got], want)


@pytest.mark.parametrize("el", NEW_INTS)
def test_data_movement(el):
    """broadcast, transpose, reshape, slice, pad (with a value beyond the signed range) and concat."""
    t, bt = ttype((4, 6), el), ttype((3, 4, 6), el)
    pad_value = int(np.iinfo(DTYPES[el]).max)
    src = f"""func.func @main(%x: {t}, %v: {ttype((6,), el)}) -> ({bt}, {ttype((6, 4), el)}, {ttype((2, 12), el)}, {ttype((2, 3), el)}, {ttype((6, 9), el)}, {ttype((4, 12), el)}) {{
  %b = graph.broadcast %v {{dims = array<i64: 2>}} : {ttype((6,), el)} -> {bt}
  %t = graph.transpose %x {{perm = array<i64: 1, 0>}} : {t} -> {ttype((6, 4), el)}
  %r = graph.reshape %x : {t} -> {ttype((2, 12), el)}
  %s = graph.slice %x {{start = array<i64: 1, 0>, stop = array<i64: 3, 6>, step = array<i64: 1, 2>}} : {t} -> {ttype((2, 3), el)}
  %p = graph.pad %x {{low = array<i64: 1, 2>, high = array<i64: 1, 1>, value = {pad_value} : {el}}} : {t} -> {ttype((6, 9), el)}
  %c = graph.concat %x, %x {{axis = 1}} : ({t}, {t}) -> {ttype((4, 12), el)}
  func.return %b, %t, %r, %s, %p, %c : {bt}, {ttype((6, 4), el)}, {ttype((2, 12), el)}, {ttype((2, 3), el)}, {ttype((6, 9), el)}, {ttype((4, 12), el)}
}}"""
    x, v = values(el, (4, 6)), values(el, (6,))
    got, want = run(src, x, v)
    expected = [np.broadcast_to(v, (3, 4, 6)), x.T, x.reshape(2, 12), x[1:3, ::2],
                np.pad(x, [(1, 1), (2, 1)], constant_values=pad_value), np.concatenate([x, x], axis=1)]
    assert_exact(got, expected)
    assert_exact(got, want)


@pytest.mark.parametrize("el", NEW_INTS)
def test_matmul_wraps(el):
    a, b = values(el, (5, 7)), values(el, (7, 3))
    src = (f"func.func @main(%a: {ttype((5, 7), el)}, %b: {ttype((7, 3), el)}) -> {ttype((5, 3), el)} {{\n"
           f"  %c = graph.matmul %a, %b : ({ttype((5, 7), el)}, {ttype((7, 3), el)}) -> {ttype((5, 3), el)}\n"
           f"  func.return %c : {ttype((5, 3), el)}\n}}")
    (got,), want = run(src, a, b)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, np.matmul(a, b))
    assert_exact([got], want)


def test_unsigned_constants_and_splats():
    """Dense and splat constants above the signed range of their width."""
    t = ttype((2, 3), "ui8")
    src = f"""func.func @main(%x: {t}) -> ({t}, {t}) {{
  %c = graph.constant dense<[[255, 128, 0], [1, 200, 254]]> : {t}
  %s = graph.constant dense<250> : {t}
  %a = graph.add %x, %c : {t}
  %m = graph.max %x, %s : {t}
  func.return %a, %m : {t}, {t}
}}"""
    x = values("ui8", (2, 3))
    got, want = run(src, x)
    c = np.array([[255, 128, 0], [1, 200, 254]], np.uint8)
    assert_exact(got, [x + c, np.maximum(x, np.uint8(250))])
    assert_exact(got, want)


# --- f64 -> f16 --------------------------------------------------------------------------------


def test_f64_to_f16_is_correctly_rounded():
    """Ties and values one ulp off them (where f64 -> f32 -> f16 rounds twice and wrongly),
    subnormals, overflow to inf, NaN, signed zeros."""
    h = RNG.integers(0, 0x7C00, 3000).astype(np.uint16).view(np.float16)
    lo = h.astype(np.float64)
    hi = np.nextafter(h, np.float16(np.inf)).astype(np.float64)
    mid = (lo + hi) / 2
    x = np.concatenate([
        mid, np.nextafter(mid, 0), np.nextafter(mid, np.inf), -mid, RNG.standard_normal(500) * 1e4,
        RNG.standard_normal(500) * 1e-6,
        [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65519.99, 65520.0, 1e300, -1e300, 1e-300, 2.0**-25,
         np.nextafter(2.0**-25, 1), 2.0**-24, 3 * 2.0**-26, 6.1e-5, 1e-8, 2.0**-149, 3.5e38, -3.5e38],
    ])
    (got,), _ = run(unary("cast", "f64", x.shape, out_el="f16"), x)
    with np.errstate(all="ignore"):
        want = x.astype(np.float16)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16)) or np.array_equal(got, want, equal_nan=True)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# --- zero-size tensors ----------------------------------------------------------------------------

ZERO_SIZE = {
    "input-and-output": ("""func.func @main(%x: tensor<0x4xf32>) -> tensor<0x4xf32> {
  %y = graph.exp %x : tensor<0x4xf32>
  func.return %y : tensor<0x4xf32>
}""", [(0, 4)]),
    "reduce-over-empty": ("""func.func @main(%x: tensor<0x4xf32>, %z: tensor<3x0xi32>) -> (tensor<4xf32>, tensor<1x4xf32>, tensor<3xi32>) {
  %s = graph.reduce_sum %x {axes = array<i64: 0>} : tensor<0x4xf32> -> tensor<4xf32>
  %m = graph.reduce_max %x {axes = array<i64: 0>, keepdims} : tensor<0x4xf32> -> tensor<1x4xf32>
  %n = graph.reduce_min %z {axes = array<i64: 1>} : tensor<3x0xi32> -> tensor<3xi32>
  func.return %s, %m, %n : tensor<4xf32>, tensor<1x4xf32>, tensor<3xi32>
}""", [(0, 4), (3, 0)]),
    "intermediate": ("""func.func @main(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %s = graph.slice %x {start = array<i64: 0, 0>, stop = array<i64: 4, 0>, step = array<i64: 1, 1>} : tensor<4x3xf32> -> tensor<4x0xf32>
  %e = graph.exp %s : tensor<4x0xf32>
  %c = graph.concat %x, %e {axis = 1} : (tensor<4x3xf32>, tensor<4x0xf32>) -> tensor<4x3xf32>
  func.return %c : tensor<4x3xf32>
}""", [(4, 3)]),
    "empty-contraction": ("""func.func @main(%x: tensor<4x0xf32>, %w: tensor<0x5xf32>) -> tensor<4x5xf32> {
  %y = graph.matmul %x, %w : (tensor<4x0xf32>, tensor<0x5xf32>) -> tensor<4x5xf32>
  func.return %y : tensor<4x5xf32>
}""", [(4, 0), (0, 5)]),
    "softmax-rows": ("""func.func @main(%x: tensor<0x8xf32>) -> tensor<0x8xf32> {
  %m = graph.reduce_max %x {axes = array<i64: 1>, keepdims} : tensor<0x8xf32> -> tensor<0x1xf32>
  %b = graph.broadcast %m {dims = array<i64: 0, 1>} : tensor<0x1xf32> -> tensor<0x8xf32>
  %s = graph.sub %x, %b : tensor<0x8xf32>
  %e = graph.exp %s : tensor<0x8xf32>
  func.return %e : tensor<0x8xf32>
}""", [(0, 8)]),
}


@pytest.mark.parametrize("name", list(ZERO_SIZE))
def test_zero_size_tensors(name):
    src, shapes = ZERO_SIZE[name]
    fn = mlfuse.compile(src)
    inputs = [values("f32" if s.dtype == np.float32 else "i32", s.shape) for s in fn.inputs]
    got = fn(*inputs)  # outputs allocated by the runtime, zero-size ones included
    want = mlfuse.reference(src)(*inputs)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)


# --- ONNX models of the new types, compiled --------------------------------------------------------


def _onnx_int_cases():
    pytest.importorskip("onnxruntime")
    from test_onnx_ops import CASES

    names = ("int8", "uint8", "int16", "uint16", "uint32", "uint64")
    return [p for p in CASES if any(p.id.endswith(n) or f"-{n}-" in p.id for n in names)]


@pytest.mark.parametrize("op_type, inputs, consts, opset, outputs, attrs", _onnx_int_cases())
def test_onnx_integer_nodes_compile_and_match_onnxruntime(op_type, inputs, consts, opset, outputs, attrs, tmp_path):
    """The single-node cases of test_onnx_ops.py for the new integer types, through the CPU pipeline."""
    from test_onnx_helpers import assert_matches, run_onnxruntime, single_node

    model, feeds = single_node(op_type, inputs, consts, opset=opset, outputs=outputs, **attrs)
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    fn = mlfuse.compile(str(path))
    outs = poisoned(fn)
    fn(**feeds, out=outs)
    assert_matches(outs, run_onnxruntime(model, feeds), rtol=1e-6, atol=0)


# --- gathers ----------------------------------------------------------------------------------------


def test_embedding_lookup_fuses_with_its_consumers():
    """[vocab, dim] table, [1, seq] int64 ids with negative and out-of-range ones (clamped):
    the gather, the scale and the positional add are one kernel."""
    src = """func.func @main(%t: tensor<100x64xf32>, %ids: tensor<1x8xi64>, %pos: tensor<1x8x64xf32>) -> tensor<1x8x64xf32> {
  %e = graph.gather %t, %ids {axis = 0} : (tensor<100x64xf32>, tensor<1x8xi64>) -> tensor<1x8x64xf32>
  %s = graph.constant dense<8.0> : tensor<1x8x64xf32>
  %m = graph.mul %e, %s : tensor<1x8x64xf32>
  %y = graph.add %m, %pos : tensor<1x8x64xf32>
  func.return %y : tensor<1x8x64xf32>
}"""
    t = RNG.standard_normal((100, 64)).astype(np.float32)
    ids = np.array([[3, -1, 99, 0, 5, 200, -300, 7]], np.int64)
    pos = RNG.standard_normal((1, 8, 64)).astype(np.float32)
    (got,), want = run(src, t, ids, pos)
    clamped = np.clip(np.where(ids < 0, ids + 100, ids), 0, 99)
    np.testing.assert_array_equal(got, t[clamped] * np.float32(8) + pos)
    assert_exact([got], want)
    lowered = mlfuse.api.run_pipeline(mlfuse.api.parse(src), ["canonicalize", "fusion-plan{target=cpu}", "convert-graph-to-loop"])
    nests = [op for op in lowered.walk() if op.name == "loop.nest"]
    assert len(nests) == 1 and "mlfuse.unstitched" not in mlfuse.api.module_text(lowered)


@pytest.mark.parametrize("index", [0, 2, -1, -3])
def test_gather_with_a_scalar_index_is_x_colon_i(index):
    src = """func.func @main(%x: tensor<4x3x8xf32>, %i: tensor<i64>) -> tensor<4x8xf32> {
  %y = graph.gather %x, %i {axis = 1} : (tensor<4x3x8xf32>, tensor<i64>) -> tensor<4x8xf32>
  %e = graph.exp %y : tensor<4x8xf32>
  func.return %e : tensor<4x8xf32>
}"""
    x = RNG.standard_normal((4, 3, 8)).astype(np.float32)
    (got,), want = run(src, x, np.array(index, np.int64))
    np.testing.assert_allclose(got, np.exp(x[:, index]), rtol=1e-6)  # expand-math's exp: within 1e-6
    np.testing.assert_allclose(got, want[0], rtol=1e-6)


@pytest.mark.parametrize("indices, index_type, expect_slice", [
    (2, "i64", True),
    ([[1, 3], [5, 7]], "i64", True),
    ([-3, -2, -1], "i32", True),
    ([[8, 9, 12]], "i64", False),  # clamped to 8, 9, 9: no progression
    ([2, 1], "i64", False),
    ([-12, 0], "i64", False),  # -12 wraps to -2, then is clamped to 0: 0, 0
])
def test_gathers_at_constant_indices(indices, index_type, expect_slice):
    """Gathers at constant indices in arithmetic progression become strided slices
    (canonicalize: GatherByConstantIndices); the others stay gathers. Either way the
    values are those of the reference's gather (wrap once, then clamp), exactly."""
    from mlfuse.api import parse, run_pipeline

    dims = np.shape(indices)
    index_t = f"tensor<{''.join(f'{d}x' for d in dims)}{index_type}>"
    out = f"tensor<4x{''.join(f'{d}x' for d in dims)}6xf32>"
    src = f"""func.func @main(%x: tensor<4x10x6xf32>) -> {out} {{
  %i = graph.constant dense<{indices}> : {index_t}
  %y = graph.gather %x, %i {{axis = 1}} : (tensor<4x10x6xf32>, {index_t}) -> {out}
  func.return %y : {out}
}}"""
    lowered = run_pipeline(parse(src), ["canonicalize"])
    assert any(op.name == "graph.slice" for op in lowered.walk()) == expect_slice
    x = RNG.standard_normal((4, 10, 6)).astype(np.float32)
    (got,), want = run(src, x)
    positions = np.clip(np.where(np.array(indices) < 0, np.array(indices) + 10, indices), 0, 9)
    np.testing.assert_array_equal(got, x[:, positions])
    assert_exact([got], want)


def test_gathered_rows_in_a_row_kernel():
    """exp(x - max(x)) over gathered rows: the gather feeds a stitched row reduction."""
    src = """func.func @main(%t: tensor<50x32xf32>, %ids: tensor<12xi32>) -> tensor<12x32xf32> {
  %e = graph.gather %t, %ids {axis = 0} : (tensor<50x32xf32>, tensor<12xi32>) -> tensor<12x32xf32>
  %m = graph.reduce_max %e {axes = array<i64: 1>, keepdims} : tensor<12x32xf32> -> tensor<12x1xf32>
  %b = graph.broadcast %m {dims = array<i64: 0, 1>} : tensor<12x1xf32> -> tensor<12x32xf32>
  %s = graph.sub %e, %b : tensor<12x32xf32>
  %x = graph.exp %s : tensor<12x32xf32>
  func.return %x : tensor<12x32xf32>
}"""
    t = RNG.standard_normal((50, 32)).astype(np.float32)
    ids = RNG.integers(-50, 50, 12).astype(np.int32)
    (got,), want = run(src, t, ids)
    rows = t[np.where(ids < 0, ids + 50, ids)]
    np.testing.assert_allclose(got, np.exp(rows - rows.max(axis=1, keepdims=True)), rtol=2e-6)
    np.testing.assert_allclose(got, want[0], rtol=2e-6)


@pytest.mark.parametrize("axis", [0, 1])
def test_gather_elements(axis):
    src = f"""func.func @main(%x: tensor<5x6xi16>, %i: tensor<4x3xi64>) -> tensor<4x3xi16> {{
  %y = graph.gather_elements %x, %i {{axis = {axis}}} : (tensor<5x6xi16>, tensor<4x3xi64>) -> tensor<4x3xi16>
  func.return %y : tensor<4x3xi16>
}}"""
    x = values("i16", (5, 6))
    n = x.shape[axis]
    idx = RNG.integers(-n, n, (4, 3)).astype(np.int64)
    (got,), want = run(src, x, idx)
    window = x[:, :3] if axis == 0 else x[:4, :]  # data off the axis, cut to the indices' extent
    np.testing.assert_array_equal(got, np.take_along_axis(window, np.where(idx < 0, idx + n, idx), axis=axis))
    assert_exact([got], want)


# --- remainders -------------------------------------------------------------------------------------


@pytest.mark.parametrize("el", [*ALL_INTS, "f16", "f32", "f64"])
@pytest.mark.parametrize("fmod", [False, True])
def test_rem_matches_numpy(el, fmod):
    """numpy's mod (divisor's sign) or fmod (dividend's sign); integer x % 0 == 0, INT_MIN % -1 == 0."""
    dtype = np.dtype(DTYPES[el])
    if dtype.kind == "f":
        a = (RNG.standard_normal(64) * 10).astype(dtype)
        b = (RNG.standard_normal(64) * 3).astype(dtype)
        a[:6], b[:6] = [1.0, 2.0, np.inf, -0.0, 6.0, -6.0], [0.0, np.inf, 2.0, 3.0, 3.0, 3.0]
    else:
        a, b = values(el, (64,)), values(el, (64,), small=True)
        b[:3] = 0
        if dtype.kind == "i":
            a[3], b[3] = np.iinfo(dtype).min, -1
    t = ttype((64,), el)
    src = f"func.func @main(%a: {t}, %b: {t}) -> {t} {{\n  %r = graph.rem %a, %b {'{fmod}' if fmod else ''}: {t}\n  func.return %r : {t}\n}}"
    (got,), want = run(src, a, b)
    with np.errstate(all="ignore"):
        if dtype.kind == "f":
            expected = (np.fmod if fmod else np.mod)(a, b)
        else:
            safe = np.where((b == 0) | ((b == -1) if dtype.kind == "i" else False), dtype.type(1), b)
            expected = np.where(b == 0, dtype.type(0), (np.fmod if fmod else np.mod)(a, safe)).astype(dtype)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    np.testing.assert_array_equal(got, want[0])


def _onnx_gather_and_mod_cases():
    pytest.importorskip("onnxruntime")
    from test_onnx_ops import CASES

    return [p for p in CASES if p.id.startswith(("Gather", "Mod")) or (p.id.startswith("MatMul") and "1d" in p.id)]


@pytest.mark.parametrize("op_type, inputs, consts, opset, outputs, attrs", _onnx_gather_and_mod_cases())
def test_onnx_gathers_mod_and_1d_matmul_compile_and_match_onnxruntime(op_type, inputs, consts, opset, outputs, attrs, tmp_path):
    """Also MatMul with a 1-D operand (a GEMM with N = 1 or M = 1), which once failed in the loop verifier."""
    test_onnx_integer_nodes_compile_and_match_onnxruntime(op_type, inputs, consts, opset, outputs, attrs, tmp_path)


@pytest.mark.parametrize("dst_el", ["i32", "i16", "i64"])
def test_constant_masks_count_one_per_true(dst_el):
    """xDSL packs an i1 true as the byte 0xff. A constant mask read by vectorized code
    (cast to integers and summed) counted 255 per true until convert-to-llvm wrote its
    global as 0/1 bytes (found as wrong ranks of tied values in stablehlo.sort)."""
    mask = RNG.random((5, 9)) < 0.6
    x = values(dst_el, (9, 12), small=True)
    t, r = ttype((5, 9, 12), dst_el), ttype((9, 12), dst_el)
    literal = "[" + ", ".join("[" + ", ".join("true" if v else "false" for v in row) + "]" for row in mask) + "]"
    src = f"""func.func @main(%x: {r}) -> ({r}, {r}) {{
  %m = graph.constant dense<{literal}> : tensor<5x9xi1>
  %b = graph.broadcast %m {{dims = array<i64: 0, 1>}} : tensor<5x9xi1> -> tensor<5x9x12xi1>
  %c = graph.cast %b : tensor<5x9x12xi1> -> {t}
  %s = graph.reduce_sum %c {{axes = array<i64: 0>}} : {t} -> {r}
  %y = graph.mul %s, %x : {r}
  func.return %s, %y : {r}, {r}
}}"""
    (count, scaled), want = run(src, x)
    dtype = np.dtype(DTYPES[dst_el])
    expected = np.broadcast_to(mask.sum(0)[:, None], (9, 12)).astype(dtype)
    np.testing.assert_array_equal(count, expected)
    np.testing.assert_array_equal(scaled, expected * x)
    assert_exact([count, scaled], want)
