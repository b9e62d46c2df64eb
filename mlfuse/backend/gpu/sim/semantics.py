"""Scalar semantics of the arith and math ops in GPU kernels, defined once.

Every op class the simulator computes with has one entry in `SCALAR_SEMANTICS`:
a function that writes the op as a Python expression over the names of its
operands, calling numpy and the helpers of this module (`RUNTIME` is the
namespace the expressions run in). The translator (sim/translate.py) inlines
these expressions into the Python it generates for a kernel, so a thread pays no
dispatch per op; `evaluate` computes one op on Python values, for tests and for
any other code that needs the value of a scalar op with the device's semantics.

Values: index and integers are Python ints wrapped to their width (signed two's
complement; unsigned ops reinterpret), i1 is bool, and floats are numpy scalars
of their type (np.float32 ...), so float arithmetic rounds as the device's does.
Integer division by zero is a `Fault` (the device would give garbage).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import IndexType, IntegerType
from xdsl.ir import Attribute, Operation

from mlfuse.backend.gpu.sim.errors import Fault
from mlfuse.dialects import graph

# --- helpers the expressions call ----------------------------------------------------------------


def wrap(value: int, bits: int) -> int:
    """Two's-complement wrap of a Python int to a signed `bits`-bit value."""
    half = 1 << (bits - 1)
    return ((value + half) & ((1 << bits) - 1)) - half


def unsigned(value: int, bits: int) -> int:
    return value & ((1 << bits) - 1)


def div_signed(a: int, b: int, k: int) -> int:
    if b == 0:
        raise Fault(k, "integer division by zero")
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def rem_signed(a: int, b: int, k: int) -> int:
    return a - div_signed(a, b, k) * b


def div_unsigned(a: int, b: int, bits: int, k: int) -> int:
    if b == 0:
        raise Fault(k, "integer division by zero")
    return wrap(unsigned(a, bits) // unsigned(b, bits), bits)


def rem_unsigned(a: int, b: int, bits: int, k: int) -> int:
    if b == 0:
        raise Fault(k, "integer division by zero")
    return wrap(unsigned(a, bits) % unsigned(b, bits), bits)


def maximumf(a, b):
    """llvm.maximum: NaN if either is NaN, +0 above -0."""
    if a != a or b != b:
        return type(a)(math.nan)
    if a == b:
        return b if math.copysign(1.0, a) < 0 else a
    return a if a > b else b


def minimumf(a, b):
    if a != a or b != b:
        return type(a)(math.nan)
    if a == b:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


def fp_to_int(x, bits: int, signed: bool) -> int:
    """PTX cvt.rzi: round toward zero, saturate, NaN -> 0."""
    if x != x:
        return 0
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if math.isinf(x):
        v = hi if x > 0 else lo
    else:
        v = max(lo, min(hi, int(x)))
    return wrap(v, bits) if bits > 1 else bool(v)


def bitcast(value, to: np.dtype):
    """Reinterpret the bits of a scalar (f32 <-> i32 and friends)."""
    if isinstance(value, (bool, int)):
        width = to.itemsize * 8
        raw = np.array([unsigned(int(value), width)], dtype=f"u{to.itemsize}")
    else:
        raw = np.array([value])
    out = raw.view(to)[0]
    return wrap(int(out), to.itemsize * 8) if to.kind in "iu" else out


RUNTIME: dict[str, Any] = {
    "np": np,
    "math": math,
    "wrap": wrap,
    "unsigned": unsigned,
    "div_signed": div_signed,
    "rem_signed": rem_signed,
    "div_unsigned": div_unsigned,
    "rem_unsigned": rem_unsigned,
    "maximumf": maximumf,
    "minimumf": minimumf,
    "fp_to_int": fp_to_int,
    "bitcast": bitcast,
}


# --- types ----------------------------------------------------------------------------------------


def scalar_kind(t: Attribute) -> tuple[str, int]:
    """('index' | 'int' | 'bool' | 'float', bits)."""
    if isinstance(t, IndexType):
        return "index", 64
    if isinstance(t, IntegerType):
        width = t.width.data
        return ("bool", 1) if width == 1 else ("int", width)
    return "float", 0


def result_bits(op: Operation) -> int:
    return scalar_kind(op.results[0].type)[1]


def operand_bits(op: Operation) -> int:
    return scalar_kind(op.operands[0].type)[1]


def float_type(t: Attribute) -> str:
    """The numpy scalar type of a float type, as the expressions name it."""
    return f"np.{graph.numpy_dtype(t).name}"


# --- the registry ---------------------------------------------------------------------------------

# (op, operand names, the op's number for Fault messages) -> expression, or None: not simulated
Expression = Callable[[Operation, Sequence[str], int], str | None]


@dataclass(frozen=True)
class ScalarSemantics:
    expression: Expression
    faults: bool  # the expression may raise Fault(k): the translator numbers the op for messages


SCALAR_SEMANTICS: dict[type[Operation], ScalarSemantics] = {}


def scalar_semantics(*op_types: type[Operation], faults: bool = False) -> Callable[[Expression], Expression]:
    """Register an expression writer as the semantics of each of `op_types`."""

    def register(expression: Expression) -> Expression:
        for t in op_types:
            assert t not in SCALAR_SEMANTICS, f"{t.name} has semantics already"
            SCALAR_SEMANTICS[t] = ScalarSemantics(expression, faults)
        return expression

    return register


def evaluate(op: Operation, values: Sequence[Any]) -> Any:
    """The value of the scalar op `op` on Python `values` (a Fault numbered -1 where it faults)."""
    semantics = SCALAR_SEMANTICS.get(type(op))
    names = [f"x{i}" for i in range(len(values))]
    expression = semantics.expression(op, names, -1) if semantics is not None else None
    if expression is None:
        raise ValueError(f"no scalar semantics for '{op.name}' on {[str(v.type) for v in op.operands]}")
    return eval(expression, RUNTIME, dict(zip(names, values)))


# --- arith ----------------------------------------------------------------------------------------

FLOAT_ARITHMETIC = {arith.AddfOp: "+", arith.SubfOp: "-", arith.MulfOp: "*", arith.DivfOp: "/"}
INTEGER_ARITHMETIC = {arith.AddiOp: "+", arith.SubiOp: "-", arith.MuliOp: "*"}
BITWISE = {arith.AndIOp: "&", arith.OrIOp: "|", arith.XOrIOp: "^"}


@scalar_semantics(*FLOAT_ARITHMETIC)
def _float_arithmetic(op: Operation, a: Sequence[str], k: int) -> str:
    return f"{a[0]} {FLOAT_ARITHMETIC[type(op)]} {a[1]}"


@scalar_semantics(*INTEGER_ARITHMETIC)
def _integer_arithmetic(op: Operation, a: Sequence[str], k: int) -> str | None:
    kind, bits = scalar_kind(op.results[0].type)
    return f"wrap({a[0]} {INTEGER_ARITHMETIC[type(op)]} {a[1]}, {bits})" if kind != "bool" else None


@scalar_semantics(*BITWISE)
def _bitwise(op: Operation, a: Sequence[str], k: int) -> str:
    return f"({a[0]} {BITWISE[type(op)]} {a[1]})"


@scalar_semantics(arith.ShLIOp)
def _shli(op: Operation, a: Sequence[str], k: int) -> str:
    bits = result_bits(op)
    return f"wrap({a[0]} << unsigned({a[1]}, {bits}), {bits})"


@scalar_semantics(arith.ShRSIOp)
def _shrsi(op: Operation, a: Sequence[str], k: int) -> str:
    return f"({a[0]} >> unsigned({a[1]}, {result_bits(op)}))"


@scalar_semantics(arith.ShRUIOp)
def _shrui(op: Operation, a: Sequence[str], k: int) -> str:
    bits = result_bits(op)
    return f"wrap(unsigned({a[0]}, {bits}) >> unsigned({a[1]}, {bits}), {bits})"


@scalar_semantics(arith.DivSIOp, faults=True)
def _divsi(op: Operation, a: Sequence[str], k: int) -> str:
    return f"wrap(div_signed({a[0]}, {a[1]}, {k}), {result_bits(op)})"


@scalar_semantics(arith.RemSIOp, faults=True)
def _remsi(op: Operation, a: Sequence[str], k: int) -> str:
    return f"rem_signed({a[0]}, {a[1]}, {k})"


@scalar_semantics(arith.DivUIOp, faults=True)
def _divui(op: Operation, a: Sequence[str], k: int) -> str:
    return f"div_unsigned({a[0]}, {a[1]}, {result_bits(op)}, {k})"


@scalar_semantics(arith.RemUIOp, faults=True)
def _remui(op: Operation, a: Sequence[str], k: int) -> str:
    return f"rem_unsigned({a[0]}, {a[1]}, {result_bits(op)}, {k})"


PICK = {
    arith.MaxSIOp: "max",
    arith.MinSIOp: "min",
    arith.MaxUIOp: "max",
    arith.MinUIOp: "min",
    arith.MaximumfOp: "maximumf",  # llvm.maximum/minimum: NaN wins, -0 < +0
    arith.MinimumfOp: "minimumf",
    arith.MaxnumfOp: "np.fmax",  # llvm.maxnum/minnum: a number wins over NaN
    arith.MinnumfOp: "np.fmin",
}


@scalar_semantics(arith.MaxSIOp, arith.MinSIOp, arith.MaximumfOp, arith.MinimumfOp, arith.MaxnumfOp, arith.MinnumfOp)
def _pick(op: Operation, a: Sequence[str], k: int) -> str:
    return f"{PICK[type(op)]}({a[0]}, {a[1]})"


@scalar_semantics(arith.MaxUIOp, arith.MinUIOp)
def _pick_unsigned(op: Operation, a: Sequence[str], k: int) -> str:
    return f"{PICK[type(op)]}({a[0]}, {a[1]}, key=lambda x: unsigned(x, {result_bits(op)}))"


@scalar_semantics(arith.NegfOp)
def _negf(op: Operation, a: Sequence[str], k: int) -> str:
    return f"-{a[0]}"


@scalar_semantics(arith.SelectOp)
def _select(op: Operation, a: Sequence[str], k: int) -> str:
    return f"({a[1]} if {a[0]} else {a[2]})"


CMPF = {
    "false": "False",
    "oeq": "({a} == {b})",
    "ogt": "({a} > {b})",
    "oge": "({a} >= {b})",
    "olt": "({a} < {b})",
    "ole": "({a} <= {b})",
    "one": "({a} < {b} or {a} > {b})",
    "ord": "({a} == {a} and {b} == {b})",
    "ueq": "(not ({a} < {b} or {a} > {b}))",
    "ugt": "(not ({a} <= {b}))",
    "uge": "(not ({a} < {b}))",
    "ult": "(not ({a} >= {b}))",
    "ule": "(not ({a} > {b}))",
    "une": "(not ({a} == {b}))",
    "uno": "({a} != {a} or {b} != {b})",
    "true": "True",
}
CMPI_SIGNED = {"eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">="}
CMPI_UNSIGNED = {"ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}


@scalar_semantics(arith.CmpfOp)
def _cmpf(op: Operation, a: Sequence[str], k: int) -> str:
    assert isinstance(op, arith.CmpfOp)
    predicate = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
    return CMPF[predicate].format(a=a[0], b=a[1])


@scalar_semantics(arith.CmpiOp)
def _cmpi(op: Operation, a: Sequence[str], k: int) -> str:
    assert isinstance(op, arith.CmpiOp)
    predicate = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
    if predicate in CMPI_SIGNED:
        return f"({a[0]} {CMPI_SIGNED[predicate]} {a[1]})"
    width = operand_bits(op)
    return f"(unsigned({a[0]}, {width}) {CMPI_UNSIGNED[predicate]} unsigned({a[1]}, {width}))"


# --- conversions ----------------------------------------------------------------------------------


@scalar_semantics(arith.ExtFOp, arith.TruncFOp, arith.SIToFPOp)
def _to_float(op: Operation, a: Sequence[str], k: int) -> str:
    return f"{float_type(op.results[0].type)}({a[0]})"


@scalar_semantics(arith.UIToFPOp)
def _uitofp(op: Operation, a: Sequence[str], k: int) -> str:
    return f"{float_type(op.results[0].type)}(unsigned({a[0]}, {operand_bits(op)}))"


@scalar_semantics(arith.FPToSIOp, arith.FPToUIOp)
def _to_int(op: Operation, a: Sequence[str], k: int) -> str:
    return f"fp_to_int({a[0]}, {result_bits(op)}, {isinstance(op, arith.FPToSIOp)})"


@scalar_semantics(arith.IndexCastOp, arith.TruncIOp, arith.ExtSIOp)
def _signed_cast(op: Operation, a: Sequence[str], k: int) -> str:
    kind, bits = scalar_kind(op.results[0].type)
    return f"bool({a[0]} & 1)" if kind == "bool" else f"wrap(int({a[0]}), {bits})"


@scalar_semantics(arith.ExtUIOp)
def _extui(op: Operation, a: Sequence[str], k: int) -> str:
    return f"wrap(unsigned(int({a[0]}), {operand_bits(op)}), {result_bits(op)})"


@scalar_semantics(arith.BitcastOp)
def _bitcast(op: Operation, a: Sequence[str], k: int) -> str:
    return f"bitcast({a[0]}, np.dtype({str(graph.numpy_dtype(op.results[0].type))!r}))"


# --- math (f32 transcendentals are expanded by expand-math first, as on the device) -------------

MATH_UNARY = {
    mathd.AbsFOp: "abs({x})",
    mathd.SqrtOp: "np.sqrt({x})",
    mathd.RsqrtOp: "{f}(1) / np.sqrt({x})",
    mathd.ExpOp: "np.exp({x})",
    mathd.LogOp: "np.log({x})",
    mathd.TanhOp: "np.tanh({x})",
    mathd.FloorOp: "np.floor({x})",
    mathd.CeilOp: "np.ceil({x})",
    mathd.RoundEvenOp: "np.round({x})",
    mathd.ErfOp: "{f}(math.erf({x}))",
}


@scalar_semantics(*MATH_UNARY)
def _math_unary(op: Operation, a: Sequence[str], k: int) -> str:
    return MATH_UNARY[type(op)].format(x=a[0], f=float_type(op.results[0].type))


@scalar_semantics(mathd.AbsIOp)
def _absi(op: Operation, a: Sequence[str], k: int) -> str:
    return f"wrap(abs({a[0]}), {result_bits(op)})"


@scalar_semantics(mathd.CopySignOp)
def _copysign(op: Operation, a: Sequence[str], k: int) -> str:
    return f"np.copysign({a[0]}, {a[1]})"


@scalar_semantics(mathd.PowFOp)
def _powf(op: Operation, a: Sequence[str], k: int) -> str:
    return f"np.power({a[0]}, {a[1]})"


@scalar_semantics(mathd.FmaOp)
def _fma(op: Operation, a: Sequence[str], k: int) -> str:
    return f"{float_type(op.results[0].type)}(float({a[0]}) * float({a[1]}) + float({a[2]}))"
