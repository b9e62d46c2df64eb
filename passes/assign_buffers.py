"""assign-buffers: put every intermediate of a function into one reused arena.

Each top-level `memref.alloc` becomes a `memref.view` of a trailing
`memref<Nxi8>` arena argument at an offset chosen by first-fit over the
buffers' live ranges (alloc to dealloc); buffers that are never live at the same
time share bytes. Deallocs disappear, and the function records
`mlfuse.arena_bytes = N`; the runtime allocates the arena once and reuses it
across calls.

Before:
    func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
      %t = memref.alloc() {alignment = 64 : i64} : memref<64xf32>
      ...
      memref.dealloc %t : memref<64xf32>
    }
After:
    func.func @main(%x: memref<64xf32>, %y: memref<64xf32>, %arena: memref<256xi8>)
        attributes {mlfuse.arena_bytes = 256 : i64} {
      %c0 = arith.constant 0 : index
      %t = memref.view %arena[%c0][] : memref<256xi8> to memref<64xf32>
      ...
    }
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.conversion.buffer_assignment import assign_module_buffers


@dataclass(frozen=True)
class AssignBuffersPass(ModulePass):
    name = "assign-buffers"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        assign_module_buffers(op)
