"""What the conversions written as xDSL patterns share.

`apply_once` is the walk every conversion here uses: each op is visited once, in
order, the op before its regions (so a function's signature is converted before its
body), and what a rewrite creates is not walked again. A `Diagnostic` raised by a
pattern stops the conversion and is raised as it is: through xDSL's walker the
exception would carry the whole printed module in its notes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, Region
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from mlfuse.diagnostics import Diagnostic


@dataclass
class Reporting(RewritePattern):
    """Applies `pattern` until it raises a Diagnostic, kept in `error` for the caller."""

    pattern: RewritePattern
    error: Diagnostic | None = None

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if self.error is not None:
            return
        try:
            self.pattern.match_and_rewrite(op, rewriter)
        except Diagnostic as e:
            self.error = e


def apply_once(root: ModuleOp | Region, patterns: Sequence[RewritePattern]) -> None:
    """One walk over `root`: the first of `patterns` that rewrites an op wins; nothing
    dead is erased; the first Diagnostic a pattern raises is raised after the walk."""
    applier = Reporting(GreedyRewritePatternApplier(list(patterns), dce_enabled=False))
    walker = PatternRewriteWalker(applier, apply_recursively=False)
    if isinstance(root, ModuleOp):
        walker.rewrite_module(root)
    else:
        walker.rewrite_region(root)
    if applier.error is not None:
        raise applier.error


def is_tensor_function(op: Operation) -> bool:
    """A func.func with a tensor in its signature: what the graph-level conversions take."""
    if not isinstance(op, func.FuncOp):
        return False
    return any(isinstance(t, TensorType) for t in (*op.function_type.inputs.data, *op.function_type.outputs.data))
