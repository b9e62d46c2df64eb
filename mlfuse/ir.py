"""Contexts and parsing: one place that knows every dialect mlfuse understands."""

from __future__ import annotations

import os

from xdsl.context import Context
from xdsl.dialects import func, get_all_dialects
from xdsl.dialects.builtin import ModuleOp

from mlfuse.diagnostics import Diagnostic, location_of, parse_located
from mlfuse.universe import MLFUSE_DIALECTS


def make_context() -> Context:
    """A context with every xDSL dialect and mlfuse's own, loaded lazily."""
    ctx = Context()
    for name, factory in {**get_all_dialects(), **MLFUSE_DIALECTS}.items():
        ctx.register_dialect(name, factory)
    return ctx


def parse_module(source: str, ctx: Context | None = None, name: str = "<input>") -> ModuleOp:
    """Parse and verify a module given as text or as a path to a `.mlir` or `.onnx` file."""
    if "\n" not in source and source.endswith(".onnx"):
        from mlfuse.frontend.onnx import import_onnx

        return import_onnx(source)
    if "\n" not in source and source.endswith(".mlir") and os.path.exists(source):
        name = source
        with open(source) as f:
            source = f.read()
    module = parse_located(ctx or make_context(), source, name)  # as mlfuse-opt parses: HexBits, limits
    module.verify()
    return module


def find_function(module: ModuleOp, entry: str) -> func.FuncOp:
    """The module's function `@entry`; a missing one, or one without a body (a
    declaration: nothing to compile), is the input's fault."""
    for op in module.ops:
        if isinstance(op, func.FuncOp) and op.sym_name.data == entry:
            if not op.body.blocks:
                raise Diagnostic(f"function '@{entry}' is a declaration (no body): nothing to compile", location_of(op))
            return op
    names = [op.sym_name.data for op in module.ops if isinstance(op, func.FuncOp)]
    raise Diagnostic(f"no function '@{entry}' in module (functions: {', '.join(names) or 'none'})")
