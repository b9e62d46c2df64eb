"""convert-graph-to-loop: bufferize graph functions and lower each op to `loop.nest`s.

Functions on tensors become destination-passing functions on memrefs (inputs,
then outputs; no results). Each graph op becomes one or more affine loop nests;
intermediates are 64-byte-aligned `memref.alloc`s freed after their last use;
dense constants become `memref.global`s; splat constants fold into the nests
that read them. Reshapes are views (`loop.view`), not copies. A `fusion.group`
becomes one stitched kernel (mlfuse/conversion/group_to_loop.py: one nest with
everything in registers, or a `loop.band` over rows with per-row scratch); groups
it cannot stitch, and every group with `stitch=false`, are lowered op by op.
A dense conv (conv=gemm, the default) becomes patches @ weights: an im2col nest,
the weights transposed once at compile time (kernel taps that read only padding
left out), a product (`loop.gemm` when large) and an unpack nest into NCHW that
the epilogue fuses into; one image with few output pixels, or a pointwise conv, is
w @ patches instead, written straight into NCHW (a pointwise conv reads its input
as its patches, and a stride-1 conv's patches are read from its padded input by the
GEMM kernel: `loop.gemm {window}`). With `depthwise`, a depthwise conv of one image at
stride 1 or 2 over a small plane is a product batched over its channels, its input read
with zero pads not in memory (`loop.gemm {window, window_pads}`, the depthwise kernels).
conv=direct keeps one window nest for post-tiling fusion.
The conversion is a set of rewrite patterns, one per kind of op (signature,
constant, view, group, other graph ops, return), applied in one in-order walk.

Before:
    func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %e = graph.exp %x : tensor<4x8xf32>
      func.return %e : tensor<4x8xf32>
    }
After:
    func.func @main(%x: memref<4x8xf32>, %out: memref<4x8xf32>) {
      loop.nest "exp" lower [...] upper [...] iterators ["parallel", "parallel"]
          ins(%x : memref<4x8xf32>) outs(%out : memref<4x8xf32>) maps [...] {
      ^bb0(%a: f32, %o: f32):
        %e = math.exp %a : f32
        loop.yield %e : f32
      }
      func.return
    }
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.conversion.graph_to_loop import convert_graph_to_loop


@dataclass(frozen=True)
class ConvertGraphToLoopPass(ModulePass):
    name = "convert-graph-to-loop"

    stitch: bool = True
    """Lower each fusion.group as one stitched kernel (see group_to_loop); false: op by op."""
    conv: str = "gemm"
    """Dense convs as a product of patches and (pre-transposed) weights, a `loop.gemm`
    when large ("gemm"), or as one window nest that post-tiling fusion tiles ("direct")."""

    channel_tiles: bool = False
    """The target's GEMM kernels take channel tiles (lanes along a conv's output channels,
    gemm_kernels.has_channel_tiles): a conv over fewer output pixels than a vector row
    wants is w @ patches too when its product takes them (`takes_channel_tiles`)."""

    depthwise: bool = False
    """The target has depthwise kernels (mlfuse/backend/depthwise_kernels.py): a depthwise
    conv of one image at stride 1 or 2 over a small output plane is a `loop.gemm {window,
    window_pads}` batched over its channels, which such a kernel runs (`depthwise_as_product`)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        convert_graph_to_loop(op, self.stitch, self.conv, self.channel_tiles, self.depthwise)
