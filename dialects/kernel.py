"""The `kernel` dialect: GPU kernels and their launches.

A `kernel.func` is one GPU kernel. Its arguments are statically shaped buffers in
global memory (`memref<..., 1>`); its body is ordinary arith/math/scf/memref code
plus the ops below for what only a GPU has: thread, block and lane ids, shared
memory (`memref<..., 3>`), block barriers, warp shuffles, atomic adds (split
reductions) and a grid-wide barrier (cooperative kernels only). A host function
runs kernels with `kernel.launch`, clears accumulators with `kernel.memset`, and
gets scratch buffers with `memref.alloc` in memory space 1.

    kernel.func @row_max(%x: memref<64x256xf32, 1>, %m: memref<64xf32, 1>)
        attributes {block = array<i64: 256, 1, 1>} {
      %row = kernel.block_id x
      %t = kernel.thread_id x
      ...
      %p = kernel.shuffle xor %v, 16 : f32
      kernel.barrier
      kernel.return
    }
    func.func @main(%x: memref<64x256xf32, 1>, %m: memref<64xf32, 1>) {
      kernel.launch @row_max(%x, %m) {grid = array<i64: 64, 1, 1>,
          block = array<i64: 256, 1, 1>, dynamic_shared = 0 : i64}
          : memref<64x256xf32, 1>, memref<64xf32, 1>
      func.return
    }
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    DenseArrayBase,
    Float32Type,
    FunctionType,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    SymbolRefAttr,
    UnitAttr,
    i32,
    i64,
)
from xdsl.dialects.utils import parse_func_op_like, print_func_op_like
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    SymbolOpInterface,
    SymbolTable,
)
from xdsl.utils.exceptions import VerifyException

GLOBAL_SPACE = 1
SHARED_SPACE = 3
WARP_SIZE = 32
MAX_THREADS_PER_BLOCK = 1024
# Shared memory a block may declare statically; more needs dynamic shared memory
# and an opt-in at launch (cuFuncSetAttribute).
STATIC_SHARED_LIMIT = 48 * 1024
DIMS = ("x", "y", "z")


def memory_space(t: Attribute) -> int | None:
    """The integer memory space of a memref type (0 when it has none)."""
    if not isinstance(t, MemRefType):
        return None
    space = t.memory_space
    if isinstance(space, IntegerAttr):
        return space.value.data
    if isinstance(space, IntAttr):
        return space.data
    return 0


def memref_bytes(t: MemRefType) -> int:
    el = t.get_element_type()
    width = el.bitwidth if hasattr(el, "bitwidth") else 32
    return math.prod(t.get_shape()) * max(1, width // 8)


def i64_triple(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def triple_of(attr: DenseArrayBase) -> tuple[int, int, int]:
    """(x, y, z) of a grid or block; a VerifyException, not an assertion, for a bad one:
    a kernel.launch verifies its kernel's block before that kernel.func is verified."""
    values = tuple(attr.get_values())
    if len(values) != 3 or any(not isinstance(v, int) or v < 1 for v in values):
        raise VerifyException(f"grid and block sizes must be three positive sizes (x, y, z), got {list(values)}")
    return values  # type: ignore[return-value]


def check_triple(op: Operation, what: str, attr: DenseArrayBase, limit: int | None) -> None:
    values = tuple(attr.get_values())
    if len(values) != 3 or any(v < 1 for v in values):
        raise VerifyException(f"'{op.name}' {what} must be three positive sizes (x, y, z), got {list(values)}")
    if limit is not None and math.prod(values) > limit:
        raise VerifyException(
            f"'{op.name}' {what} {list(values)} has {math.prod(values)} threads, more than {limit}"
        )


def enclosing_kernel(op: Operation) -> KernelFuncOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, KernelFuncOp):
        parent = parent.parent_op()
    return parent


def check_in_kernel(op: Operation) -> KernelFuncOp:
    kernel = enclosing_kernel(op)
    if kernel is None:
        raise VerifyException(f"'{op.name}' must be inside a 'kernel.func'")
    return kernel


# ---------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------


@irdl_op_definition
class KernelFuncOp(IRDLOperation):
    """A GPU kernel: buffers in global memory in, nothing out.

    `block` is the block shape the kernel is written for (it becomes PTX's
    .maxntid); `min_blocks_per_sm` asks ptxas to fit that many blocks per SM
    (.minnctapersm); `dynamic_shared` is the dynamic shared memory it needs, in
    bytes; `cooperative` kernels may use `kernel.grid_sync` and must be launched
    with all blocks resident at once.
    """

    name = "kernel.func"
    body = region_def("single_block")
    sym_name = prop_def(StringAttr)
    function_type = prop_def(FunctionType)
    block = prop_def(DenseArrayBase)
    dynamic_shared = opt_prop_def(IntegerAttr)
    min_blocks_per_sm = opt_prop_def(IntegerAttr)
    cooperative = opt_prop_def(UnitAttr)
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())

    PROPERTY_NAMES: ClassVar[tuple[str, ...]] = ("block", "dynamic_shared", "min_blocks_per_sm", "cooperative")

    def __init__(
        self,
        name: str,
        arg_types: Sequence[Attribute],
        block: Sequence[int],
        *,
        dynamic_shared: int = 0,
        min_blocks_per_sm: int | None = None,
        cooperative: bool = False,
        body: Region | None = None,
    ):
        props: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            "function_type": FunctionType.from_lists(list(arg_types), []),
            "block": i64_triple(block),
        }
        if dynamic_shared:
            props["dynamic_shared"] = IntegerAttr(dynamic_shared, i64)
        if min_blocks_per_sm is not None:
            props["min_blocks_per_sm"] = IntegerAttr(min_blocks_per_sm, i64)
        if cooperative:
            props["cooperative"] = UnitAttr()
        super().__init__(
            properties=props,
            regions=[body if body is not None else Region(Block(arg_types=arg_types))],
        )

    @property
    def block_size(self) -> tuple[int, int, int]:
        return triple_of(self.block)

    @property
    def threads_per_block(self) -> int:
        return math.prod(self.block_size)

    @property
    def dynamic_shared_bytes(self) -> int:
        return self.dynamic_shared.value.data if self.dynamic_shared is not None else 0

    @property
    def entry(self) -> Block:
        return self.body.block

    def verify_(self) -> None:
        check_triple(self, "block", self.block, MAX_THREADS_PER_BLOCK)
        if self.function_type.outputs.data:
            raise VerifyException("'kernel.func' returns nothing: results go to buffer arguments")
        for i, t in enumerate(self.function_type.inputs.data):
            if memory_space(t) != GLOBAL_SPACE or any(d < 0 for d in t.get_shape()):  # type: ignore[union-attr]
                raise VerifyException(
                    f"'kernel.func' argument {i} must be a statically shaped memref in global "
                    f"memory (memory space {GLOBAL_SPACE}), got {t}"
                )
        if tuple(self.entry.arg_types) != self.function_type.inputs.data:
            raise VerifyException("'kernel.func' block arguments do not match its function type")
        if not isinstance(self.entry.last_op, ReturnOp):
            raise VerifyException("'kernel.func' body must end with 'kernel.return'")
        if self.min_blocks_per_sm is not None and self.min_blocks_per_sm.value.data < 1:
            raise VerifyException("'kernel.func' min_blocks_per_sm must be positive")
        if self.dynamic_shared_bytes < 0:
            raise VerifyException("'kernel.func' dynamic_shared must be non-negative")

    def _extra_attributes(self) -> dict[str, Attribute]:
        extra = dict(self.attributes)
        for name in self.PROPERTY_NAMES:
            value = self.properties.get(name)
            if value is not None:
                extra[name] = value
        return extra

    @classmethod
    def parse(cls, parser: Parser) -> KernelFuncOp:
        pos = parser.pos
        name, inputs, outputs, region, extra, arg_attrs, _ = parse_func_op_like(
            parser, reserved_attr_names=("sym_name", "function_type")
        )
        attrs = dict(extra.data) if extra is not None else {}
        block = attrs.pop("block", None)
        if not isinstance(block, DenseArrayBase):
            parser.raise_error(
                "'kernel.func' needs attributes {block = array<i64: x, y, z>}", pos, parser.pos
            )
        if outputs:
            parser.raise_error("'kernel.func' returns nothing", pos, parser.pos)
        if not region.blocks:
            region = Region(Block(arg_types=inputs))
        op = cls(name, inputs, (1, 1, 1), body=region)
        op.properties["block"] = block
        for prop in ("dynamic_shared", "min_blocks_per_sm", "cooperative"):
            if prop in attrs:
                op.properties[prop] = attrs.pop(prop)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        print_func_op_like(
            printer,
            self.sym_name,
            self.function_type,
            self.body,
            self._extra_attributes(),
            reserved_attr_names=("sym_name", "function_type"),
            print_empty_outputs=False,
        )


@irdl_op_definition
class ReturnOp(IRDLOperation):
    name = "kernel.return"
    traits = traits_def(IsTerminator(), HasParent(KernelFuncOp))
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


# ---------------------------------------------------------------------------
# ids
# ---------------------------------------------------------------------------


class IdOp(IRDLOperation):
    """Base: one hardware index, as an `index`, along dimension x, y or z."""

    dim = prop_def(StringAttr)
    result = result_def(IndexType)

    def __init__(self, dim: str):
        super().__init__(properties={"dim": StringAttr(dim)}, result_types=[IndexType()])

    def verify_(self) -> None:
        if self.dim.data not in DIMS:
            raise VerifyException(f"'{self.name}' dimension must be x, y or z, got '{self.dim.data}'")
        check_in_kernel(self)

    @classmethod
    def parse(cls, parser: Parser) -> IdOp:
        pos = parser.pos
        dim = parser.parse_identifier(" (dimension x, y or z)")
        if dim not in DIMS:
            parser.raise_error(f"dimension must be x, y or z, got '{dim}'", pos, parser.pos)
        op = cls(dim)
        op.attributes.update(parser.parse_optional_attr_dict())
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.dim.data}")
        printer.print_op_attributes(self.attributes)


@irdl_op_definition
class ThreadIdOp(IdOp):
    name = "kernel.thread_id"


@irdl_op_definition
class BlockIdOp(IdOp):
    name = "kernel.block_id"


@irdl_op_definition
class BlockDimOp(IdOp):
    name = "kernel.block_dim"


@irdl_op_definition
class GridDimOp(IdOp):
    name = "kernel.grid_dim"


@irdl_op_definition
class LaneIdOp(IRDLOperation):
    """The thread's lane in its warp (0..31)."""

    name = "kernel.lane_id"
    result = result_def(IndexType)
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__(result_types=[IndexType()])

    def verify_(self) -> None:
        check_in_kernel(self)


# ---------------------------------------------------------------------------
# shared memory, synchronisation, warp and atomic operations
# ---------------------------------------------------------------------------


@irdl_op_definition
class SharedAllocOp(IRDLOperation):
    """A buffer in shared memory, one per block, alive for the whole kernel.

    Static buffers (the default) are PTX `.shared` variables; `dynamic` ones are
    carved, at `offset` bytes, out of the kernel's dynamic shared memory.
    """

    name = "kernel.shared_alloc"
    dynamic = opt_prop_def(UnitAttr)
    offset = opt_prop_def(IntegerAttr)
    result = result_def(MemRefType)
    assembly_format = "attr-dict `:` type($result)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, buffer_type: MemRefType, dynamic_offset: int | None = None):
        props: dict[str, Attribute] = {}
        if dynamic_offset is not None:
            props = {"dynamic": UnitAttr(), "offset": IntegerAttr(dynamic_offset, i64)}
        super().__init__(properties=props, result_types=[buffer_type])

    @property
    def buffer_type(self) -> MemRefType:
        t = self.result.type
        assert isinstance(t, MemRefType)
        return t

    def verify_(self) -> None:
        kernel = check_in_kernel(self)
        t = self.buffer_type
        if memory_space(t) != SHARED_SPACE or any(d < 0 for d in t.get_shape()):
            raise VerifyException(
                f"'kernel.shared_alloc' must produce a statically shaped memref in shared memory "
                f"(memory space {SHARED_SPACE}), got {t}"
            )
        if (self.dynamic is None) != (self.offset is None):
            raise VerifyException("'kernel.shared_alloc' dynamic buffers need an offset, static ones none")
        if self.offset is not None:
            end = self.offset.value.data + memref_bytes(t)
            if self.offset.value.data % 16:
                raise VerifyException("'kernel.shared_alloc' dynamic offset must be a multiple of 16")
            if end > kernel.dynamic_shared_bytes:
                raise VerifyException(
                    f"'kernel.shared_alloc' ends at byte {end}, beyond the kernel's "
                    f"{kernel.dynamic_shared_bytes} bytes of dynamic shared memory"
                )


@irdl_op_definition
class BarrierOp(IRDLOperation):
    """Waits for every thread of the block; shared memory writes become visible."""

    name = "kernel.barrier"
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()

    def verify_(self) -> None:
        check_in_kernel(self)


SHUFFLE_MODES = ("xor", "down")
SHUFFLE_TYPES = (Float32Type, IntegerType)


@irdl_op_definition
class ShuffleOp(IRDLOperation):
    """Reads `value` from another lane of the full warp.

    `xor`: from lane ^ offset (butterfly: every lane ends with the reduction);
    `down`: from lane + offset (lanes past the end read their own value).
    """

    name = "kernel.shuffle"
    mode = prop_def(StringAttr)
    offset = prop_def(IntegerAttr)
    value = operand_def()
    result = result_def()

    def __init__(self, mode: str, value: SSAValue, offset: int):
        super().__init__(
            operands=[value],
            properties={"mode": StringAttr(mode), "offset": IntegerAttr(offset, i32)},
            result_types=[value.type],
        )

    def verify_(self) -> None:
        check_in_kernel(self)
        if self.mode.data not in SHUFFLE_MODES:
            raise VerifyException(f"'kernel.shuffle' mode must be xor or down, got '{self.mode.data}'")
        t = self.value.type
        if not (isinstance(t, Float32Type) or (isinstance(t, IntegerType) and t.width.data == 32)):
            raise VerifyException(f"'kernel.shuffle' moves f32 or i32 values, got {t}")
        if self.result.type != t:
            raise VerifyException("'kernel.shuffle' result type must equal the value type")
        if not 0 < self.offset.value.data < WARP_SIZE:
            raise VerifyException(
                f"'kernel.shuffle' offset must be in 1..{WARP_SIZE - 1}, got {self.offset.value.data}"
            )

    @classmethod
    def parse(cls, parser: Parser) -> ShuffleOp:
        pos = parser.pos
        mode = parser.parse_identifier(" (shuffle mode xor or down)")
        if mode not in SHUFFLE_MODES:
            parser.raise_error(f"shuffle mode must be xor or down, got '{mode}'", pos, parser.pos)
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        offset = parser.parse_integer()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        op = cls(mode, parser.resolve_operand(value, t), offset)
        op.attributes.update(attrs)
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.mode.data} ")
        printer.print_operand(self.value)
        printer.print_string(f", {self.offset.value.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.value.type)


@irdl_op_definition
class AtomicAddOp(IRDLOperation):
    """`buffer[indices] += value`, atomically (f32 or i32, global or shared memory)."""

    name = "kernel.atomic_add"
    value = operand_def()
    buffer = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    assembly_format = "$value `,` $buffer `[` $indices `]` attr-dict `:` type($value) `,` type($buffer)"

    def __init__(self, value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue]):
        super().__init__(operands=[value, buffer, list(indices)])

    def verify_(self) -> None:
        check_in_kernel(self)
        t = self.buffer.type
        assert isinstance(t, MemRefType)
        if memory_space(t) not in (GLOBAL_SPACE, SHARED_SPACE):
            raise VerifyException(
                f"'kernel.atomic_add' buffer must be in global (1) or shared (3) memory, got {t}"
            )
        el = t.get_element_type()
        if not (isinstance(el, Float32Type) or (isinstance(el, IntegerType) and el.width.data == 32)):
            raise VerifyException(f"'kernel.atomic_add' adds f32 or i32 elements, got {el}")
        if self.value.type != el:
            raise VerifyException(
                f"'kernel.atomic_add' value type {self.value.type} differs from element type {el}"
            )
        if len(self.indices) != t.get_num_dims():
            raise VerifyException(
                f"'kernel.atomic_add' needs {t.get_num_dims()} indices, got {len(self.indices)}"
            )


@irdl_op_definition
class GridSyncOp(IRDLOperation):
    """Waits for every thread of the grid (cooperative kernels only).

    `counter` is a zero-initialised `memref<1xi32, 1>` that this kernel alone
    uses for its barriers; blocks count arrivals on it and flip its top bit.
    """

    name = "kernel.grid_sync"
    counter = operand_def(base(MemRefType))
    assembly_format = "$counter attr-dict `:` type($counter)"

    def __init__(self, counter: SSAValue):
        super().__init__(operands=[counter])

    def verify_(self) -> None:
        kernel = check_in_kernel(self)
        if kernel.cooperative is None:
            raise VerifyException(
                "'kernel.grid_sync' needs a cooperative kernel: add 'cooperative' to the "
                "kernel.func, whose launch must fit all blocks on the device at once"
            )
        t = self.counter.type
        assert isinstance(t, MemRefType)
        if t.get_shape() != (1,) or t.get_element_type() != i32 or memory_space(t) != GLOBAL_SPACE:
            raise VerifyException(f"'kernel.grid_sync' counter must be memref<1xi32, 1>, got {t}")


# ---------------------------------------------------------------------------
# host side
# ---------------------------------------------------------------------------


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """Runs `kernel` on `args` with a grid of `grid` blocks of `block` threads.

    `dynamic_shared` bytes of dynamic shared memory are given to every block.
    """

    name = "kernel.launch"
    kernel = prop_def(SymbolRefAttr)
    grid = prop_def(DenseArrayBase)
    block = prop_def(DenseArrayBase)
    dynamic_shared = prop_def(IntegerAttr)
    args = var_operand_def(MemRefType)
    assembly_format = "$kernel `(` $args `)` attr-dict `:` type($args)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(
        self,
        kernel: str,
        args: Sequence[SSAValue],
        grid: Sequence[int],
        block: Sequence[int],
        dynamic_shared: int = 0,
    ):
        super().__init__(
            operands=[list(args)],
            properties={
                "kernel": SymbolRefAttr(kernel),
                "grid": i64_triple(grid),
                "block": i64_triple(block),
                "dynamic_shared": IntegerAttr(dynamic_shared, i64),
            },
        )

    @property
    def grid_size(self) -> tuple[int, int, int]:
        return triple_of(self.grid)

    @property
    def block_size(self) -> tuple[int, int, int]:
        return triple_of(self.block)

    def verify_(self) -> None:
        check_triple(self, "grid", self.grid, None)
        check_triple(self, "block", self.block, MAX_THREADS_PER_BLOCK)
        if enclosing_kernel(self) is not None:
            raise VerifyException("'kernel.launch' runs on the host: it cannot be inside a 'kernel.func'")
        kernel = SymbolTable.lookup_symbol(self, self.kernel)
        if kernel is None:
            return  # checked once the whole module is known (see verify_launches)
        if "nvvm.kernel" in kernel.attributes:
            return  # already lowered to an llvm.func
        if not isinstance(kernel, KernelFuncOp):
            raise VerifyException(f"'kernel.launch' target @{self.kernel.string_value()} is not a kernel.func")
        if tuple(a.type for a in self.args) != kernel.function_type.inputs.data:
            raise VerifyException(
                f"'kernel.launch' argument types do not match @{self.kernel.string_value()}'s"
            )
        if self.block_size != kernel.block_size:
            raise VerifyException(
                f"'kernel.launch' block {list(self.block_size)} differs from the block "
                f"{list(kernel.block_size)} @{self.kernel.string_value()} was written for"
            )
        if self.dynamic_shared.value.data < kernel.dynamic_shared_bytes:
            raise VerifyException(
                f"'kernel.launch' gives {self.dynamic_shared.value.data} bytes of dynamic shared "
                f"memory, @{self.kernel.string_value()} needs {kernel.dynamic_shared_bytes}"
            )


@irdl_op_definition
class MemsetOp(IRDLOperation):
    """Host side: sets every byte of a buffer to zero (accumulators, barrier counters)."""

    name = "kernel.memset"
    buffer = operand_def(MemRefType)
    assembly_format = "$buffer attr-dict `:` type($buffer)"

    def __init__(self, buffer: SSAValue):
        super().__init__(operands=[buffer])

    def verify_(self) -> None:
        if enclosing_kernel(self) is not None:
            raise VerifyException("'kernel.memset' runs on the host: it cannot be inside a 'kernel.func'")


Kernel = Dialect(
    "kernel",
    [
        KernelFuncOp,
        ReturnOp,
        ThreadIdOp,
        BlockIdOp,
        BlockDimOp,
        GridDimOp,
        LaneIdOp,
        SharedAllocOp,
        BarrierOp,
        ShuffleOp,
        AtomicAddOp,
        GridSyncOp,
        LaunchOp,
        MemsetOp,
    ],
    [],
)
