// REQUIRES: ptxas
// RUN: mlfuse-opt %s -p gpu-map-kernels -t 'ptx{verify=true}' | filecheck %s
// RUN: mlfuse-opt %s -p gpu-map-kernels -t 'ptx{arch=sm_80 verify=true}' | filecheck %s --check-prefix=SM80
// RUN: not mlfuse-opt %s -t 'ptx{arch=sm_75}' 2>&1 | filecheck %s --check-prefix=BAD

// The softmax kernel: ptx_kernel entry with .maxntid, 16-byte-aligned global pointers,
// full-warp butterfly shuffles, no spills when ptxas assembles it.
// CHECK:      .target sm_90
// CHECK:      .visible .entry softmax(
// CHECK:      .param .u64 .ptr .global .align 16 softmax_param_0
// CHECK:      .maxntid 256, 1, 1
// CHECK:      ld.global.nc
// CHECK:      shfl.sync.bfly.b32 {{.*}}, 16, 31, -1;
// CHECK:      // ptxas sm_90 softmax: {{[0-9]+}} registers, 0 bytes smem, 0 bytes spill stores, 0 bytes spill loads
// SM80:       .target sm_80
// SM80:       // ptxas sm_80 softmax: {{[0-9]+}} registers, 0 bytes smem, 0 bytes spill stores, 0 bytes spill loads
// BAD: error: unknown GPU architecture 'sm_75'
func.func @main(%x: tensor<1024x256xf32>) -> tensor<1024x256xf32> {
  %r = fusion.group "softmax" kind = "stitch" (%x) : (tensor<1024x256xf32>) -> tensor<1024x256xf32> {
  ^bb0(%a: tensor<1024x256xf32>):
    %m = graph.reduce_max %a {axes = array<i64: 1>, keepdims} : tensor<1024x256xf32> -> tensor<1024x1xf32>
    %mb = graph.broadcast %m {dims = array<i64: 0, 1>} : tensor<1024x1xf32> -> tensor<1024x256xf32>
    %d = graph.sub %a, %mb : tensor<1024x256xf32>
    %e = graph.exp %d : tensor<1024x256xf32>
    %s = graph.reduce_sum %e {axes = array<i64: 1>, keepdims} : tensor<1024x256xf32> -> tensor<1024x1xf32>
    %sb = graph.broadcast %s {dims = array<i64: 0, 1>} : tensor<1024x1xf32> -> tensor<1024x256xf32>
    %y = graph.div %e, %sb : tensor<1024x256xf32>
    fusion.yield %y : tensor<1024x256xf32>
  }
  func.return %r : tensor<1024x256xf32>
}
