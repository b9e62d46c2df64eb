"""Diagnostics with source locations, and the parser that records them.

Every error a user can cause (malformed IR, a verifier failure, an unsupported op,
a bad pass option, a shape mismatch) becomes a `Diagnostic`: `file:line:col: error:
message`, printed without a Python traceback by the command-line tools.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, NameLoc, StringAttr
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Span


class Diagnostic(Exception):
    """A user-facing error: a message and, where known, where it happened."""

    def __init__(self, message: str, location: str | None = None, context: str | None = None):
        super().__init__(message)
        self.message = message
        self.location = location
        self.context = context

    def __str__(self) -> str:
        head = f"{self.location}: error: {self.message}" if self.location else f"error: {self.message}"
        return head + (f"\n{self.context}" if self.context else "")


def location_of(op: Operation | None) -> str | None:
    """`file:line:col` (or an ONNX node name) of an op or of its closest located parent."""
    while op is not None:
        loc = format_location(op.location)
        if loc:
            return loc
        op = op.parent_op()
    return None


def format_location(loc: Attribute) -> str | None:
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
    if isinstance(loc, NameLoc):
        inner = format_location(loc.location)
        return f"{inner} ({loc.desc.data})" if inner else loc.desc.data
    return None


class LocatingParser(Parser):
    """xDSL's parser, plus a `loc("file":line:col)` on every op it parses.

    xDSL does not keep source positions; MLIR does, and diagnostics need them.
    It also points "used but not defined" errors at the first use, not at the end.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.first_uses: dict[str, Span] = {}  # name of a not-yet-defined value -> its first use

    def resolve_operand(self, operand: UnresolvedOperand, type: Attribute) -> SSAValue:
        if operand.operand_name not in self.ssa_values:
            self.first_uses.setdefault(operand.operand_name, operand.span)
        return super().resolve_operand(operand, type)

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        try:
            return super().parse_module(allow_implicit_module)
        except ParseError as e:
            undefined = [n for n in self.forward_ssa_references if n in self.first_uses]
            if not e.msg.startswith("values used but not defined") or not undefined:
                raise
            self.raise_error(f"use of undefined value %{undefined[0]}", self.first_uses[undefined[0]])

    def parse_operation(self) -> Operation:
        start = self._current_token.span
        try:
            op = super().parse_operation()
        except VerifyException as e:
            # a property that breaks its constraint is rejected while parsing, without a position
            self.raise_error(str(e).split("\n")[0], start)
        if format_location(op.location) is None:
            where = start.get_location()
            op.location = FileLineColLoc(
                StringAttr(str(where.file)), IntAttr(where.line), IntAttr(where.col)
            )
        return op


def parse_error_diagnostic(e: ParseError) -> Diagnostic:
    where = e.span.get_location()
    context = e.span.print_with_context().split("\n", 1)[1].rstrip()
    message = e.msg
    if message[:1].isspace():  # xDSL sometimes gives only the tail, e.g. " in block definition"
        found = f"'{e.span.text}'" if e.span.text else "end of input"
        message = f"unexpected {found}{message}"
    return Diagnostic(message, f"{where.file}:{where.line}:{where.col}", context)


def parse_located(ctx: Context, source: str | bytes, name: str, line_offset: int = 0) -> ModuleOp:
    """Parse a module, recording op locations; a syntax error becomes a Diagnostic."""
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    if line_offset:
        source = "\n" * line_offset + source  # keep line numbers of split chunks true
    try:
        return LocatingParser(ctx, source, name).parse_module()
    except ParseError as e:
        raise parse_error_diagnostic(e) from None


def verify_located(module: Operation) -> None:
    """Verify op by op (innermost first) so the first failure names its own location."""
    for op in module.walk(reverse=True, region_first=True):
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as e:
            cause = e.__cause__ if isinstance(e.__cause__, VerifyException) else e
            message = str(cause).split("\n")[0].removeprefix("Operation does not verify: ")
            raise Diagnostic(f"'{op.name}' op {message}" if not message.startswith("'") else message,
                             location_of(op)) from None
