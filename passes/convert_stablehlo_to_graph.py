"""convert-stablehlo-to-graph: StableHLO (and chlo), as jax emits it, to the graph dialect.

Calls to functions of the module are inlined (jax outlines helpers such as
`@_where` and `@relu` as private functions, which are erased once inlined), then
every stablehlo/chlo op becomes graph ops with the original op's location:
elementwise ops one to one (`chlo.erfc` as 1 - erf), `broadcast_in_dim` as
`graph.broadcast`, `reduce` with an add/multiply/maximum/minimum body as
`graph.reduce_*`, `dot_general` as (batch_)matmul between transposes and
reshapes, 2-D `convolution` as `graph.conv2d` on NCHW/OIHW, `iota` and splat
constants as broadcasts of small constants. An op or a case the graph dialect
cannot express (a variadic reduce such as argmax, interior padding, a transposed
convolution, `stablehlo.sine`...) is an error at that op's location. A module
without stablehlo or chlo ops is left as it is. The logic is in
mlfuse/frontend/stablehlo.py; `mlfuse.compile` applies it to such modules by itself.

Before (-p convert-stablehlo-to-graph):
    func.func public @main(%x: tensor<4x8xf32>) -> (tensor<4xf32> {jax.result_info = "result"}) {
      %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %e = stablehlo.exponential %x : tensor<4x8xf32>
      %s = stablehlo.reduce(%e init: %cst) applies stablehlo.add across dimensions = [1]
           : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
      return %s : tensor<4xf32>
    }
After:
    func.func public @main(%x: tensor<4x8xf32>) -> tensor<4xf32> {
      %cst = graph.constant dense<0.000000e+00> : tensor<f32>
      %e = graph.exp %x : tensor<4x8xf32>
      %s = graph.reduce_sum %e {axes = array<i64: 1>} : tensor<4x8xf32> -> tensor<4xf32>
      func.return %s : tensor<4xf32>
    }
(the unused constant goes with the next `canonicalize` or `dce`).
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.frontend.stablehlo import convert_if_stablehlo


@dataclass(frozen=True)
class ConvertStablehloToGraphPass(ModulePass):
    name = "convert-stablehlo-to-graph"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        convert_if_stablehlo(op)
