"""expand-math: replace f32 exp, log, tanh, erf and powf by branch-free arith.

The expansions (range reduction with integer bit tricks plus a polynomial or a
rational function; errors stated in mlfuse/conversion/expand_math.py) vectorize,
where calls to libm do not. Other element types are left alone.

Before:
    %y = math.exp %x : f32
After:
    %lo = arith.cmpf olt, %x, %c-104 : f32
    ... (about 30 arith ops, no calls: a low clamp by compare and select, n
    capped by an integer min on the rounded value's bits, a polynomial of
    `contract` multiply-adds, 2^n cut from integer bits)
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.conversion.expand_math import expand_math


@dataclass(frozen=True)
class ExpandMathPass(ModulePass):
    name = "expand-math"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        expand_math(op)
