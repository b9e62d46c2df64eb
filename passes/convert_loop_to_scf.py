"""convert-loop-to-scf{parallel=true}: lower `loop.nest` to scf.for loops on memrefs.

Each nest becomes one scf.for per dimension in domain order, with memref.load
of every input and output element and memref.store of the yielded values. With
`parallel=true` (the default), a nest with a parallel dimension and at least
2^14 points is outlined into a private function over a sub-range of that
dimension and called through `loop.parallel_call`, which splits the range across
threads; smaller nests stay inline (with `outline-serial=true`, they and serial
bands become private functions called directly: one function per kernel, which the
CPU backend compiles and caches on its own). With `streaming=true` (the default), pure
unit-stride writes to buffers of 32 MiB or more become `memref.store
{nontemporal = true}` (streaming stores, made non-temporal after LLVM vectorizes;
each row is peeled with `loop.aligned_window`, so its whole lines are stored
aligned, and its partial lines combine with the next row's in a per-thread line),
and unit-stride loads of such buffers inside a `loop.band` get `mlfuse.prefetch`
(software prefetches a few rows ahead, added after LLVM vectorizes). The
rewrite is xDSL patterns (mlfuse.conversion.loop_to_scf.loop_to_scf_patterns).

Before:
    loop.nest "exp" lower [0] upper [8] iterators ["parallel"]
        ins(%x : memref<8xf32>) outs(%y : memref<8xf32>) maps [...] {
    ^bb0(%a: f32, %o: f32):
      %e = math.exp %a : f32
      loop.yield %e : f32
    }
After:
    scf.for %i = %c0 to %c8 step %c1 {
      %a = memref.load %x[%i] : memref<8xf32>
      %o = memref.load %y[%i] : memref<8xf32>
      %e = math.exp %a : f32
      memref.store %e, %y[%i] : memref<8xf32>
    }
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.conversion.loop_to_scf import NONTEMPORAL_MIN_BYTES, convert_loop_to_scf


@dataclass(frozen=True)
class ConvertLoopToScfPass(ModulePass):
    name = "convert-loop-to-scf"

    parallel: bool = True
    streaming: bool = True
    """Mark streaming stores and prefetched loads of large buffers (see above)."""
    streaming_min_bytes: int = NONTEMPORAL_MIN_BYTES
    """How large a buffer must be to stream (tests lower it to exercise the peeled rows
    on small shapes)."""
    outline_serial: bool = False
    """Outline the kernels that stay serial too, each into a function of its own called
    directly (see mlfuse.conversion.loop_to_scf.outline_serial)."""

    def __post_init__(self) -> None:
        if self.streaming_min_bytes < 1:
            raise ValueError(f"convert-loop-to-scf: streaming-min-bytes must be at least 1, got {self.streaming_min_bytes}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        convert_loop_to_scf(op, self.parallel, self.streaming, self.outline_serial, self.streaming_min_bytes)
