"""Diagnostics with source locations, and the parser that records them.

Every error a user can cause (malformed IR, a verifier failure, an unsupported op,
a bad pass option, a shape mismatch) becomes a `Diagnostic`: `file:line:col: error:
message`, printed without a Python traceback by the command-line tools.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import tempfile
import traceback
from collections.abc import Iterator

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import AnyFloat, BFloat16Type, FileLineColLoc, IntAttr, ModuleOp, NameLoc, StringAttr
from xdsl.ir import Attribute, ErasedSSAValue, Operation, Region, SSAValue
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.parser.generic_parser import ParserState
from xdsl.traits import IsTerminator, NoTerminator
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Input, Position, Span
from xdsl.utils.mlir_lexer import MLIRLexer

# Limits on what text IR may ask for, checked by the parser before anything is allocated.
# Deeper nesting than this exhausts Python's stack in xDSL's recursive parser and printer
# (about 10 frames per region level, 7 per type level, against a limit of 1000).
MAX_NESTING = 32
# Dimensions must fit the i32 values some runtimes and generated loops hold them in, and
# element counts (2^40 = 4 TiB of f32) an i64 byte offset with room to spare.
MAX_DIM = 2**31 - 1
MAX_ELEMENTS = 2**40
# xDSL 0.74 holds a dense literal's elements in Python lists and bytes, about 100 bytes
# per element while parsing (16M elements: 1.4 GB, 5 s); a large splat is written as a
# graph.broadcast of a rank-0 graph.constant instead (see docs/architecture.md).
MAX_DENSE_ELEMENTS = 2**22


class Diagnostic(Exception):
    """A user-facing error: a message and, where known, where it happened."""

    def __init__(self, message: str, location: str | None = None, context: str | None = None):
        super().__init__(message)
        self.message = message
        self.location = location
        self.context = context

    def __str__(self) -> str:
        # names from input files (ONNX node names, file names) may hold newlines or terminal escapes
        location, message = escape(self.location or ""), escape(self.message)
        head = f"{location}: error: {message}" if location else f"error: {message}"
        context = "\n".join(escape(line) for line in (self.context or "").split("\n"))
        return head + (f"\n{context}" if context else "")


class DynamicShapes(Diagnostic):
    """An ONNX model's input shapes are not all static: `inputs` holds each input's name,
    declared dimensions (sizes, symbols or None) and ONNX element type, in argument
    order. mlfuse.compile answers it by compiling for each call's shapes; tools that
    compile once report it."""

    def __init__(self, message: str, location: str | None, inputs: list[tuple[str, list | None, int]]):
        super().__init__(message, location)
        self.inputs = inputs


def escape(text: str) -> str:
    """`text` with every unprintable character (newline, ESC, NUL...) escaped as repr() does."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


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


class SafeLexer(MLIRLexer):
    """xDSL's lexer, with a string-literal pattern that takes linear time.

    xDSL 0.74's pattern repeats a `+` group inside a `*` one, so a string that is not
    closed on its line backtracks exponentially (40 characters: minutes). Matching one
    character per repetition accepts the same strings without the ambiguity.
    """

    _unescaped_characters_regex = re.compile(r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"')


class HexBits(Parser._TensorLiteralElement):
    """A hexadecimal element of a float dense literal: the bits of the value, as MLIR reads
    `dense<0xFF800000> : tensor<f32>` (-inf). xDSL prints infinities and NaNs that way but
    reads the hex back as the integer 4286578688.0: an attention mask's -inf came back
    finite through `mlfuse-opt | mlfuse-opt`."""

    def to_type(self, parser, type):
        bits = self.value
        width = getattr(type, "bitwidth", None)
        if not isinstance(bits, int) or not isinstance(type, AnyFloat) or width not in (16, 32, 64):
            return super().to_type(parser, type)
        if not 0 <= bits < 1 << width:
            parser.raise_error(f"0x{bits:x} does not fit the {width} bits of {type}", at_position=self.span)
        if isinstance(type, BFloat16Type):  # float32's upper half
            return float(np.array(bits << 16, "u4").view("f4"))
        return float(np.array(bits, f"u{width // 8}").view(f"f{width // 8}"))


class LocatingParser(Parser):
    """xDSL's parser, plus a `loc("file":line:col)` on every op it parses.

    xDSL does not keep source positions; MLIR does, and diagnostics need them.
    It also points "used but not defined" errors at the first use, not at the end.
    It also refuses input that would exhaust the stack or the memory before anything is
    built (MAX_NESTING, MAX_DIM, MAX_ELEMENTS, MAX_DENSE_ELEMENTS).
    """

    def __init__(self, ctx: Context, input: str | bytes, name: str = "<unknown>"):
        super().__init__(ctx, "", name)  # xDSL's setup, on an empty input...
        text = input.decode("utf-8", "replace") if isinstance(input, bytes) else input
        self._parser_state = ParserState(SafeLexer(Input(text, name)))  # ...then the real one
        self.first_uses: dict[str, Span] = {}  # name of a not-yet-defined value -> its first use
        self.depth = 0  # how many ops, types, attributes and literals enclose the current token

    @contextlib.contextmanager
    def nested(self, start: Span) -> Iterator[None]:
        """Count one level of nesting; refuse to go deeper than MAX_NESTING."""
        if self.depth >= MAX_NESTING:
            self.raise_error(f"nesting deeper than {MAX_NESTING} levels (regions, types or attributes) is not supported", start)
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def span_from(self, start: Position) -> Span:
        """From `start` to the end of the last token parsed (not the whitespace after it)."""
        end = self._current_token.span.start
        text = self.lexer.input.content[start:end]
        return Span(start, start + max(1, len(text.rstrip())), self.lexer.input)

    # The hooks below are the places where xDSL's parser recurses (operations in regions,
    # types in types, attributes in attributes, nested `[...]` literals): counting there
    # bounds every recursion of the parser.

    def parse_optional_type(self):
        with self.nested(self._current_token.span):
            return super().parse_optional_type()

    def parse_optional_attribute(self):
        with self.nested(self._current_token.span):
            return super().parse_optional_attribute()

    def _parse_tensor_literal(self):
        with self.nested(self._current_token.span):
            return super()._parse_tensor_literal()

    def _parse_tensor_literal_element(self):
        """A dense literal's element; a hexadecimal one is kept as bits (HexBits)."""
        hexadecimal = self._current_token.text[:2] in ("0x", "0X")
        element = super()._parse_tensor_literal_element()
        if hexadecimal and isinstance(element.value, int) and not isinstance(element.value, bool):
            return HexBits(element.is_negative, element.value, element.span)
        return element

    def parse_shape_dimension(self, allow_dynamic: bool = True) -> int:
        """A dimension, refused past MAX_DIM (a 30-digit literal would otherwise overflow later)."""
        start = self._current_token.span
        dim = super().parse_shape_dimension(allow_dynamic)
        if dim > MAX_DIM:
            self.raise_error(f"dimension {dim} is too large (the limit is 2^31 - 1)", start)
        return dim

    def parse_shape(self):
        """A shaped type's dimensions, refused past MAX_ELEMENTS elements in all."""
        start = self._current_token.span.start
        shape, element_type = super().parse_shape()
        if shape is not None and math.prod(d for d in shape if d >= 0) > MAX_ELEMENTS:
            self.raise_error(f"shape {'x'.join(map(str, shape))} has more than 2^40 elements", self.span_from(start))
        return shape, element_type

    def _parse_dense_literal_type(self):
        """The type of `dense<...> : type`, checked before xDSL fills in the elements.

        xDSL parses the literal first, then this type, then repeats a splat to the type's
        element count: this is the one point where the count is known and nothing is
        allocated yet.
        """
        start = self._current_token.span.start
        t = super()._parse_dense_literal_type()
        check_dense_size(self, t.get_shape(), self.span_from(start))
        return t

    def parse_dense_int_or_fp_elements_attr(self, type):
        """A dense attribute; a type given by a custom syntax is checked up front too, and
        a value that does not fit the element type is a located error, not a ValueError."""
        start = self._current_token.span
        if type is not None:
            check_dense_size(self, type.get_shape(), start)
        try:
            return super().parse_dense_int_or_fp_elements_attr(type)
        except (ValueError, OverflowError) as e:
            self.raise_error(str(e).split("\n")[0], self.span_from(start.start))

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
            with self.nested(start):
                op = super().parse_operation()
        except VerifyException as e:
            # a property that breaks its constraint is rejected while parsing, without a position
            self.raise_error(str(e).split("\n")[0], start)
        except (ValueError, OverflowError) as e:
            # e.g. an integer attribute out of its type's range, from a custom op parser
            self.raise_error(str(e).split("\n")[0], start)
        if format_location(op.location) is None:
            where = start.get_location()
            op.location = FileLineColLoc(
                StringAttr(str(where.file)), IntAttr(where.line), IntAttr(where.col)
            )
        return op


def check_dense_size(parser: Parser, shape, where: Span) -> None:
    count = math.prod(shape)
    if count > MAX_DENSE_ELEMENTS:
        parser.raise_error(
            f"dense literal of {count} elements is too large (the limit is 2^22 = {MAX_DENSE_ELEMENTS}); "
            "write a large splat as graph.broadcast of a rank-0 graph.constant",
            where,
        )


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
    parser = None
    try:
        parser = LocatingParser(ctx, source, name)  # lexes the first token: may fail already
        return parser.parse_module()
    except ParseError as e:
        raise parse_error_diagnostic(e) from None
    except RecursionError:  # MAX_NESTING should come first; this is the backstop
        where = parser._current_token.span.get_location() if parser else None
        raise Diagnostic("input nested too deeply to parse", f"{where.file}:{where.line}:{where.col}" if where else name) from None


def verify_located(module: Operation) -> None:
    """Verify op by op (innermost first) so the first failure names its own location."""
    order = {op: i for block in blocks_of(module) for i, op in enumerate(block.ops)}
    block_counts: dict[Region, int] = {}
    empty = None  # the last op walked (the first in the module) with an empty body: reported after the rest
    for op in module.walk(reverse=True, region_first=True):
        try:
            check_operand_scope(op, order)
            verify_op(op, block_counts)
        except VerifyException as e:
            cause = e.__cause__ if isinstance(e.__cause__, VerifyException) else e
            message = str(cause).split("\n")[0].removeprefix("Operation does not verify: ")
            raise Diagnostic(f"'{op.name}' op {message}" if not message.startswith("'") else message,
                             location_of(op)) from None
        empty = op if has_empty_body(op) else empty  # xDSL checks it in Block.verify, which op by op never reaches
    if empty is not None:
        raise Diagnostic(f"'{empty.name}' op Operation {empty.name} contains empty block in single-block region that"
                         " expects at least a terminator", location_of(empty))


def has_empty_body(op: Operation) -> bool:
    """Is one of `op`'s regions a single block without ops, where it needs a terminator?"""
    if op.has_trait(NoTerminator):
        return False
    return any(r.first_block is not None and r.first_block.next_block is None and r.first_block.first_op is None
               for r in op.regions)


def verify_op(op: Operation, block_counts: dict[Region, int]) -> None:
    """`op.verify(verify_nested_ops=False)` as xDSL 0.74 writes it, but with the blocks of a
    region counted once (in `block_counts`) rather than for the last op of each of its blocks:
    xDSL's count walks the region, which made verifying LLVM-dialect functions quadratic in
    their blocks (MobileNetV2: 5.9 s of a 60 s compile). Nothing may change the IR meanwhile."""
    if any(isinstance(operand, ErasedSSAValue) for operand in op.operands):
        raise ValueError("Erased SSA value is used by the operation")
    block = op.parent
    region = None if block is None else block.parent
    if op.successors:
        if block is None or region is None:
            raise VerifyException(f"Operation {op.name} with block successors does not belong to a block or a region")
        if block.last_op is not op:
            raise VerifyException(f"Operation {op.name} with block successors must terminate its parent block")
        if any(succ.parent != region for succ in op.successors):
            raise VerifyException(f"Operation {op.name} is branching to a block of a different region")
    if block is not None and region is not None and block.last_op == op:
        if region not in block_counts:
            block_counts[region] = len(region.blocks)
        if block_counts[region] == 1:
            parent_op = region.parent
            if parent_op is not None and not parent_op.has_trait(NoTerminator) and not op.has_trait(IsTerminator):
                raise VerifyException(f"Operation {op.name} terminates block in single-block region but is not a terminator")
        elif block_counts[region] > 1 and not op.has_trait(IsTerminator):
            raise VerifyException(f"Operation {op.name} terminates block in multi-block region but is not a terminator")
    try:
        op.verify_()
    except VerifyException as err:
        op.emit_error(f"Operation does not verify: {err}", err)


def blocks_of(op: Operation):
    for inner in op.walk():
        for region in inner.regions:
            yield from region.blocks


def check_operand_scope(op: Operation, order: dict[Operation, int]) -> None:
    """Every operand is defined in a region that encloses `op`, and before it in a block.

    xDSL 0.74 checks no dominance: a value of one function used in another, or used
    before its definition, parses and verifies, and passes then fail on it (KeyError,
    "delete SSA value that still has uses"). `order` numbers the ops of every block.
    Not checked: order across the blocks of a CFG region, the module's body (a graph
    region, where order does not matter), and values that cross an isolated op (a
    function's body using a top-level value: xDSL's IsolatedFromAbove check).
    """
    from xdsl.ir import BlockArgument
    from xdsl.parser.core import ForwardDeclaredValue

    for i, value in enumerate(op.operands):
        if isinstance(value, ForwardDeclaredValue):  # a use the parser never saw defined (in a nested region)
            raise VerifyException(f"'{op.name}' operand #{i} uses a value that is never defined")
        home = value.block.parent if isinstance(value, BlockArgument) else value.owner.parent_region()
        region, inner = op.parent_region(), op
        while region is not None and region is not home:
            inner = region.parent_op()
            region = inner.parent_region() if inner is not None else None
        if region is None:
            raise VerifyException(f"'{op.name}' operand #{i} is not defined in a region that encloses it")
        definer = value.owner
        if (
            isinstance(definer, Operation)
            and definer.parent is inner.parent
            and not isinstance(region.parent_op(), ModuleOp)
            and order[definer] >= order[inner]
        ):
            raise VerifyException(f"'{op.name}' operand #{i} is used before it is defined")


def reject_bf16(module: Operation, backend: str = "CPU", fallback: str | None = None) -> None:
    """bf16 anywhere (a value, a block argument, a signature) is located before lowering.

    The CPU backend computes in f32 but has no bf16 storage type (xDSL's LLVM
    translation and numpy have none), so such a graph fails late without this.
    """
    from xdsl.dialects.builtin import BFloat16Type, ContainerType, FunctionType

    def has_bf16(t: Attribute) -> bool:
        if isinstance(t, BFloat16Type):
            return True
        if isinstance(t, FunctionType):
            return any(has_bf16(x) for x in (*t.inputs.data, *t.outputs.data))
        return isinstance(t, ContainerType) and isinstance(t.get_element_type(), BFloat16Type)

    for op in module.walk():
        values = [*op.results, *(a for r in op.regions for b in r.blocks for a in b.args)]
        types = [v.type for v in values] + [a for a in op.properties.values() if isinstance(a, FunctionType)]
        if any(has_bf16(t) for t in types):
            raise Diagnostic(f"bf16 is not supported by the {backend} backend (use f32 or f16)", location_of(op) or fallback)


# --- internal errors and their reproducers -------------------------------------------------

REPRODUCERS_KEPT = 20  # the default folder keeps only the newest ones


def default_reproducer_dir() -> str:
    """One folder per user in the temp dir: reproducers do not pile up among other files."""
    folder = os.path.join(tempfile.gettempdir(), f"mlfuse-reproducers-{os.getuid()}")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return tempfile.mkdtemp(prefix="mlfuse-reproducers-")
    if info.st_uid != os.getuid() or not os.path.isdir(folder) or os.path.islink(folder):
        # someone else's folder (or a planted link) in a shared temp dir: use a private one
        return tempfile.mkdtemp(prefix="mlfuse-reproducers-")
    return folder


def write_reproducer(text: str, header: list[str], directory: str | None = None) -> str:
    """Write IR `text` after `// ` comment lines `header` to a new reproducer; its path.

    Without `directory`, the file goes to default_reproducer_dir(), which keeps the
    newest REPRODUCERS_KEPT; a folder the user names is left as it is.
    """
    folder = directory or default_reproducer_dir()
    try:
        os.makedirs(folder, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix="mlfuse-repro-", suffix=".mlir", dir=folder)
        with os.fdopen(fd, "w") as f:
            f.writelines(f"// {line}\n" for line in header)
            f.write(text)
    except OSError as e:
        raise Diagnostic(f"cannot write a reproducer into '{folder}': {e.strerror or e}", "--reproducer-dir") from None
    if directory is None:
        prune_reproducers(folder)
    return path


def prune_reproducers(folder: str, keep: int = REPRODUCERS_KEPT) -> None:
    try:
        files = [e for e in os.scandir(folder) if e.name.startswith("mlfuse-repro-") and e.is_file()]
        files.sort(key=lambda e: e.stat().st_mtime, reverse=True)
        for old in files[keep:]:
            os.unlink(old.path)
    except OSError:
        pass  # removed meanwhile by another process: keeping one too many is harmless


def internal_error(error: BaseException, stage: str, ir: str | None = None,
                   header: list[str] | None = None, directory: str | None = None) -> Diagnostic:
    """An unexpected exception as a Diagnostic that says "internal error" and names a reproducer.

    MLFUSE_TRACEBACK=1 prints the Python traceback too (for mlfuse's developers).
    """
    if os.environ.get("MLFUSE_TRACEBACK"):
        traceback.print_exception(error)
    detail = escape(str(error).strip().split("\n")[0]) or "(no message)"
    context = None
    if ir is not None:
        try:
            path = write_reproducer(ir, [f"mlfuse reproducer: internal error in {stage}", *(header or [])], directory)
            context = f"reproducer written to {path}"
        except Diagnostic as d:
            context = d.message
    return Diagnostic(f"internal error: {stage} failed: {type(error).__name__}: {detail}", f"<{stage}>", context)


def module_ir(module: Operation) -> str:
    from io import StringIO

    from xdsl.printer import Printer

    out = StringIO()
    Printer(stream=out).print_op(module)
    return out.getvalue() + "\n"


@contextlib.contextmanager
def internal_errors(stage: str, module: Operation | None = None, header: list[str] | None = None,
                    changes_module: bool = True) -> Iterator[None]:
    """Any exception in the block but a Diagnostic becomes internal_error(); its reproducer
    is `module` as it was on entry: a clone is kept when the block `changes_module`, and
    the module itself serves when it only reads it (a translation: cloning MobileNetV2's
    lowered module took 0.3 s of its cold compile)."""
    before = module.clone() if module is not None and changes_module else module
    try:
        yield
    except Diagnostic:
        raise
    except Exception as e:
        ir = None
        if before is not None:
            try:
                ir = module_ir(before)
            except Exception:  # the reproducer is a help; the error must still be reported
                ir = None
        raise internal_error(e, stage, ir, header) from e


def check_output_path(path: str, what: str) -> None:
    """A file the tools will write: its folder must exist and be writable, and it is no folder.

    Checked before any work, so that a typo is a plain error, not a failed pass at the end.
    """
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise Diagnostic(f"cannot write {what} to '{path}': it is a directory", path)
    if not os.path.isdir(folder):
        raise Diagnostic(f"cannot write {what} to '{path}': no such directory '{os.path.dirname(path) or '.'}'", path)
    if not os.access(folder, os.W_OK):
        raise Diagnostic(f"cannot write {what} to '{path}': directory not writable", path)


def check_report_paths(passes) -> None:
    """The report and dot files of every fusion-plan pass (see check_output_path)."""
    for p in passes:
        if p.name == "fusion-plan":
            for attr, what in (("report", "the fusion report"), ("dot", "the fusion graph")):
                if getattr(p, attr, ""):
                    check_output_path(getattr(p, attr), what)
