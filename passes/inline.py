"""inline: replace every func.call of a function the module defines by the callee's
body, then erase the private functions no call is left to (mlfuse.inline).

The graph pipelines lower one entry function and have no calls between graph
functions: this runs first in each of them (mlfuse.pipelines.GRAPH_CLEANUP). A
recursive call is an error at the call, as is a call of a function of several blocks
or of one that is only declared.

Before (-p inline):
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = func.call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
      func.return %0 : tensor<4xf32>
    }
    func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = graph.exp %x : tensor<4xf32>
      func.return %0 : tensor<4xf32>
    }
After:
    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = graph.exp %x : tensor<4xf32>
      func.return %0 : tensor<4xf32>
    }
"""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from mlfuse.inline import inline_calls


@dataclass(frozen=True)
class InlinePass(ModulePass):
    name = "inline"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        inline_calls(op)
