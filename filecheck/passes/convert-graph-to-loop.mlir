// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p convert-graph-to-loop | filecheck %s

// An elementwise op writes straight into the caller's output buffer.
// CHECK-LABEL: func.func @exp(%0: memref<4x8xf32>, %1: memref<4x8xf32>)
// CHECK-NOT: memref.alloc
// CHECK: loop.nest "exp" lower [0, 0] upper [4, 8] iterators ["parallel", "parallel"] ins(%0 : memref<4x8xf32>) outs(%1 : memref<4x8xf32>)
// CHECK: math.exp
// CHECK: loop.yield
// CHECK: func.return
func.func @exp(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = graph.exp %x : tensor<4x8xf32>
  func.return %e : tensor<4x8xf32>
}

// -----

// Shifts are numpy's: an amount of the width or more (unsigned compare, so a negative
// one too) selects 0 for a left shift and the sign bits for a signed right shift;
// LLVM's shift would be poison there.
// CHECK-LABEL: func.func @shifts
// CHECK: loop.nest "shl"
// CHECK: %[[W:.*]] = arith.constant 32 : i32
// CHECK: %[[OK:.*]] = arith.cmpi ult, %{{.*}}, %[[W]] : i32
// CHECK: arith.shli
// CHECK: arith.select %[[OK]]
// CHECK: loop.nest "shr"
// CHECK: arith.shrsi %{{.*}}, %{{.*}} : i32
// CHECK: arith.shrsi
// CHECK: arith.select
func.func @shifts(%x: tensor<8xi32>, %n: tensor<8xi32>) -> (tensor<8xi32>, tensor<8xi32>) {
  %l = graph.shl %x, %n : tensor<8xi32>
  %r = graph.shr %x, %n : tensor<8xi32>
  func.return %l, %r : tensor<8xi32>, tensor<8xi32>
}

// -----

// Intermediates are 64-byte-aligned allocations freed after their last use;
// a splat constant becomes a scalar in the nest that reads it.
// CHECK-LABEL: func.func @chain
// CHECK: %[[T:.*]] = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
// CHECK: loop.nest "mul" {{.*}} ins(%0 : memref<16xf32>) outs(%[[T]] : memref<16xf32>)
// CHECK: arith.constant 2.000000e+00 : f32
// CHECK: loop.nest "add" {{.*}} ins(%[[T]], %0 : memref<16xf32>, memref<16xf32>)
// CHECK-NEXT: ^{{.*}}
// CHECK: memref.dealloc %[[T]]
func.func @chain(%x: tensor<16xf32>) -> tensor<16xf32> {
  %c = graph.constant dense<2.0> : tensor<16xf32>
  %m = graph.mul %x, %c : tensor<16xf32>
  %a = graph.add %m, %x : tensor<16xf32>
  func.return %a : tensor<16xf32>
}

// -----

// Row reduction: init nest, then a nest whose output map drops the reduced dim.
// CHECK-LABEL: func.func @row_sum
// CHECK: loop.nest "init_sum" lower [0] upper [4]
// CHECK: arith.constant 0.000000e+00 : f32
// CHECK: loop.nest "reduce_sum" lower [0, 0] upper [4, 8] iterators ["parallel", "reduction"]
// CHECK-SAME: maps [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>]
// CHECK: arith.addf {{.*}} fastmath<reassoc>
func.func @row_sum(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %s = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<4x8xf32> -> tensor<4xf32>
  func.return %s : tensor<4xf32>
}

// -----

// Broadcast, transpose, slice and pad become nests with shifted, permuted or
// constant index maps.
// CHECK-LABEL: func.func @movement
// CHECK: loop.nest "broadcast" {{.*}} maps [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK: loop.nest "transpose" {{.*}} maps [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>]
// CHECK: loop.nest "slice" lower [0, 0] upper [2, 4] {{.*}} maps [affine_map<(d0, d1) -> (((d0 * 2) + 1), d1)>
// CHECK: loop.nest "pad_fill" lower [0, 0] upper [4, 6]
// CHECK: loop.nest "pad_copy" lower [0, 0] upper [2, 4] {{.*}} affine_map<(d0, d1) -> ((d0 + 1), (d1 + 2))>
func.func @movement(%b: tensor<4xf32>) -> tensor<4x6xf32> {
  %x = graph.broadcast %b {dims = array<i64: 1>} : tensor<4xf32> -> tensor<4x4xf32>
  %t = graph.transpose %x {perm = array<i64: 1, 0>} : tensor<4x4xf32> -> tensor<4x4xf32>
  %s = graph.slice %t {start = array<i64: 1, 0>, stop = array<i64: 4, 4>, step = array<i64: 2, 1>} : tensor<4x4xf32> -> tensor<2x4xf32>
  %p = graph.pad %s {low = array<i64: 1, 2>, high = array<i64: 1, 0>, value = 0.0 : f32} : tensor<2x4xf32> -> tensor<4x6xf32>
  func.return %p : tensor<4x6xf32>
}

// -----

// Matmul iterates (i, k, j): the innermost loop walks rows of B and C.
// Reshape is a view, and a returned view is copied into the output.
// CHECK-LABEL: func.func @matmul
// CHECK: loop.nest "matmul_init"
// CHECK: loop.nest "matmul" lower [0, 0, 0] upper [4, 8, 3] iterators ["parallel", "reduction", "parallel"]
// CHECK-SAME: maps [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d2)>]
// Its multiply-add keeps two roundings (no `contract`, unlike a window nest's).
// CHECK: arith.mulf %{{[0-9]+}}, %{{[0-9]+}} : f32
// CHECK-NEXT: arith.addf %{{[0-9]+}}, %{{[0-9]+}} : f32
// CHECK: loop.view %{{.*}} : memref<4x3xf32> to memref<12xf32>
// CHECK: loop.nest "copy_result"
func.func @matmul(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) -> tensor<12xf32> {
  %c = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %r = graph.reshape %c : tensor<4x3xf32> -> tensor<12xf32>
  func.return %r : tensor<12xf32>
}

// -----

// A large GEMM (>= 2^18 multiply-adds per matrix) is a BLAS call, not a loop nest.
// CHECK-LABEL: func.func @large_gemm
// CHECK-NEXT: loop.gemm %0, %1 into %2 : memref<2x64x128xf32>, memref<2x128x96xf32>, memref<2x64x96xf32>
// CHECK-NEXT: func.return
func.func @large_gemm(%a: tensor<2x64x128xf32>, %b: tensor<2x128x96xf32>) -> tensor<2x64x96xf32> {
  %c = graph.batch_matmul %a, %b : (tensor<2x64x128xf32>, tensor<2x128x96xf32>) -> tensor<2x64x96xf32>
  func.return %c : tensor<2x64x96xf32>
}

// -----

// A dense constant becomes a memref.global.
// CHECK: "memref.global"() <{sym_name = "__constant_0", type = memref<3xf32>, initial_value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>, sym_visibility = "private", constant, alignment = 64 : i64}>
// CHECK-LABEL: func.func @dense
// CHECK: memref.get_global @__constant_0 : memref<3xf32>
func.func @dense(%x: tensor<3xf32>) -> tensor<3xf32> {
  %c = graph.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %a = graph.add %x, %c : tensor<3xf32>
  func.return %a : tensor<3xf32>
}

// -----

// Functions that are not on tensors are left alone.
// CHECK-LABEL: func.func @scalar(%arg0: f32) -> f32
// CHECK-NEXT: func.return %arg0 : f32
func.func @scalar(%arg0: f32) -> f32 {
  func.return %arg0 : f32
}

// -----

// An op without a loop lowering is an error that names it and its location.
// CHECK: convert-graph-to-loop.mlir:[[# @LINE + 2]]:3: error: 'arith.addf' cannot be lowered to loops yet
func.func @unsupported(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = arith.addf %x, %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

// A call that was not inlined (here it cannot be: the callee is only declared) is an
// error at the call, not an internal error where its result is read.
// CHECK: convert-graph-to-loop.mlir:[[# @LINE + 3]]:3: error: 'func.call' of @external cannot be lowered to loops: inline calls first
func.func private @external(tensor<4xf32>) -> tensor<4xf32>
func.func @calls_external(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = func.call @external(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

// A scalar in the signature of a function of tensors is an error at the function, not
// an internal error (the compiled function takes and fills buffers).
// CHECK: convert-graph-to-loop.mlir:[[# @LINE + 1]]:1: error: @scalar_argument: loops are generated for functions of tensors, got i64
func.func @scalar_argument(%x: tensor<4xf32>, %n: i64) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}

// -----

// A large transpose that moves the innermost dimension runs as a band over 64x64
// blocks and their 8x8 tiles; a tile's nest takes a min at the edges (300 = 4*64+44, 257 = 4*64+1).
// CHECK-LABEL: func.func @big_transpose
// CHECK: loop.band "transpose.tiles" upper [5, 5, 8, 8]
// CHECK: loop.nest "transpose" syms(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}})
// CHECK-SAME: lower [affine_map<()[s0, s1, s2, s3] -> (((s0 * 64) + (s2 * 8)))>, affine_map<()[s0, s1, s2, s3] -> (((s1 * 64) + (s3 * 8)))>]
// CHECK-SAME: upper [affine_map<()[s0, s1, s2, s3] -> ((((s0 * 64) + (s2 * 8)) + 8), 300)>, affine_map<()[s0, s1, s2, s3] -> ((((s1 * 64) + (s3 * 8)) + 8), 257)>]
// CHECK-SAME: maps [affine_map<(d0, d1)[s0, s1, s2, s3] -> (d1, d0)>, affine_map<(d0, d1)[s0, s1, s2, s3] -> (d0, d1)>]
func.func @big_transpose(%x: tensor<257x300xf32>) -> tensor<300x257xf32> {
  %t = graph.transpose %x {perm = array<i64: 1, 0>} : tensor<257x300xf32> -> tensor<300x257xf32>
  func.return %t : tensor<300x257xf32>
}

// -----

// Not tiled: the permutation keeps the innermost dimension (rows move whole).
// CHECK-LABEL: func.func @keeps_rows
// CHECK-NOT: loop.band
// CHECK: loop.nest "transpose" lower [0, 0, 0] upper [64, 32, 128]
func.func @keeps_rows(%x: tensor<32x64x128xf32>) -> tensor<64x32x128xf32> {
  %t = graph.transpose %x {perm = array<i64: 1, 0, 2>} : tensor<32x64x128xf32> -> tensor<64x32x128xf32>
  func.return %t : tensor<64x32x128xf32>
}

// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p 'convert-graph-to-loop{stitch=false}' | filecheck %s --check-prefix=NOSTITCH
// NOSTITCH-LABEL: func.func @big_transpose
// NOSTITCH-NOT: loop.band
// NOSTITCH: loop.nest "transpose" lower [0, 0] upper [300, 257]

// -----

// A gather reads its index at the index's position, then the table at the
// clamped index (loop.read); the table's own map is its first element.
// CHECK-LABEL: func.func @embedding
// CHECK: loop.nest "gather" lower [0, 0, 0] upper [1, 8, 64] iterators ["parallel", "parallel", "parallel"] ins(%1, %0 : memref<1x8xi64>, memref<100x64xf32>)
// CHECK-SAME: maps [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (0, 0)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>]
// CHECK-NEXT: ^{{.*}}(%[[IDX:.*]]: i64, %[[TABLE:.*]]: f32, %{{.*}}: f32):
// CHECK: arith.select
// CHECK: arith.maxsi
// CHECK: arith.minsi
// CHECK: %[[I:.*]] = arith.index_cast
// CHECK: %[[D2:.*]] = loop.index dim 2
// CHECK: %[[V:.*]] = loop.read %[[TABLE]][%[[I]], %[[D2]]] : f32
// CHECK: loop.yield %[[V]] : f32
func.func @embedding(%t: tensor<100x64xf32>, %ids: tensor<1x8xi64>) -> tensor<1x8x64xf32> {
  %e = graph.gather %t, %ids {axis = 0} : (tensor<100x64xf32>, tensor<1x8xi64>) -> tensor<1x8x64xf32>
  func.return %e : tensor<1x8x64xf32>
}

// -----

// Unsigned tensors become signless buffers; the ops are the unsigned ones.
// CHECK-LABEL: func.func @unsigned(%0: memref<8xi8>, %1: memref<8xi8>, %2: memref<8xi8>, %3: memref<8xi1>)
// CHECK: arith.divui
// CHECK: arith.cmpi ult
func.func @unsigned(%x: tensor<8xui8>, %y: tensor<8xui8>) -> (tensor<8xui8>, tensor<8xi1>) {
  %d = graph.div %x, %y : tensor<8xui8>
  %c = graph.compare lt, %x, %y : tensor<8xui8>
  func.return %d, %c : tensor<8xui8>, tensor<8xi1>
}

// -----

// Returns: a value is computed into the first output that returns it; the second
// place it is returned, a view of it, an argument and a splat are copied there.
// CHECK-LABEL: func.func @returns(%0: memref<4x8xf32>, %1: memref<4x8xf32>, %2: memref<4x8xf32>, %3: memref<32xf32>, %4: memref<4x8xf32>, %5: memref<2x4x8xf32>)
// CHECK-NEXT:    loop.nest "exp" {{.*}} ins(%0 : memref<4x8xf32>) outs(%1 : memref<4x8xf32>)
// CHECK:         %[[V:.*]] = loop.view %1 : memref<4x8xf32> to memref<32xf32>
// CHECK:         loop.nest "copy_result" {{.*}} ins(%1 : memref<4x8xf32>) outs(%2 : memref<4x8xf32>)
// CHECK:         loop.nest "copy_result" {{.*}} ins(%[[V]] : memref<32xf32>) outs(%3 : memref<32xf32>)
// CHECK:         loop.nest "copy_result" {{.*}} ins(%0 : memref<4x8xf32>) outs(%4 : memref<4x8xf32>)
// CHECK:         %[[S:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x4x8xf32>
// CHECK-NEXT:    loop.nest "fill" {{.*}} outs(%[[S]] : memref<2x4x8xf32>)
// CHECK:         arith.constant 2.000000e+00 : f32
// CHECK:         loop.nest "copy_result" {{.*}} ins(%[[S]] : memref<2x4x8xf32>) outs(%5 : memref<2x4x8xf32>)
// CHECK:         memref.dealloc %[[S]] : memref<2x4x8xf32>
// CHECK-NEXT:    func.return
// CHECK-NOT:     unrealized_conversion_cast
func.func @returns(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<32xf32>, tensor<4x8xf32>, tensor<2x4x8xf32>) {
  %c = graph.constant dense<2.0> : tensor<8xf32>
  %b = graph.broadcast %c {dims = array<i64: 2>} : tensor<8xf32> -> tensor<2x4x8xf32>
  %e = graph.exp %x : tensor<4x8xf32>
  %r = graph.reshape %e : tensor<4x8xf32> -> tensor<32xf32>
  func.return %e, %e, %r, %x, %b : tensor<4x8xf32>, tensor<4x8xf32>, tensor<32xf32>, tensor<4x8xf32>, tensor<2x4x8xf32>
}

// -----

// An op of another dialect inside a group that is lowered op by op is an error at its location.
// CHECK: convert-graph-to-loop.mlir:[[# @LINE + 4]]:5: error: 'arith.addf' cannot be lowered to loops yet
func.func @unsupported_in_group(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = fusion.group "g0" kind = "loop" (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %s = arith.addf %a, %a : tensor<4xf32>
    fusion.yield %s : tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}

// -----

// A stride-1 conv is a GEMM over its padded input's patches, which the kernel's
// packing reads in place (loop.gemm {window}): no im2col buffer. The copy writes the
// interior; then only the border of the padded input is filled (the lines the copy
// brought into cache), rows above and below in one nest, then the columns beside, row
// by row (fill_border).
// CHECK-LABEL: func.func @conv_window
// CHECK-NOT: loop.nest "pad_fill"
// CHECK:     loop.nest "pad_copy"
// CHECK:     loop.nest "pad_fill" lower [0, 0, 0, 0, 0] upper [1, 8, 2, 1, 18] {{.*}} maps [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, ((d2 * 17) + d3), d4)>]
// CHECK:     loop.nest "pad_fill" lower [0, 0, 0, 0, 0] upper [1, 8, 16, 2, 1] {{.*}} maps [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, (d2 + 1), ((d3 * 17) + d4))>]
// CHECK-NOT: loop.nest "pad_fill"
// CHECK-NOT: loop.nest "conv_patches"
// CHECK:     loop.gemm %{{.*}}, %{{.*}} into %{{.*}} {window = array<i64: 3, 3>} : memref<1x32x72xf32>, memref<1x8x18x18xf32>, memref<1x32x256xf32>
func.func @conv_window(%x: tensor<1x8x16x16xf32>, %w: tensor<32x8x3x3xf32>) -> tensor<1x32x16x16xf32> {
  %y = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x8x16x16xf32>, tensor<32x8x3x3xf32>) -> tensor<1x32x16x16xf32>
  func.return %y : tensor<1x32x16x16xf32>
}

// -----

// Unequal sides are a nest each; a side without padding none.
// CHECK-LABEL: func.func @conv_window_uneven_pads
// CHECK:     loop.nest "pad_copy" lower [0, 0, 0, 0] upper [1, 8, 16, 16] {{.*}} affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 + 2), (d3 + 1))>
// CHECK:     loop.nest "pad_fill" lower [0, 0, 0, 0] upper [1, 8, 2, 19] {{.*}} maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>]
// CHECK:     loop.nest "pad_fill" lower [0, 0, 0, 0] upper [1, 8, 16, 1] {{.*}} maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 + 2), d3)>]
// CHECK:     loop.nest "pad_fill" lower [0, 0, 0, 0] upper [1, 8, 16, 2] {{.*}} maps [affine_map<(d0, d1, d2, d3) -> (d0, d1, (d2 + 2), (d3 + 17))>]
// CHECK-NOT: loop.nest "pad_fill"
// CHECK:     loop.gemm {{.*}} {window = array<i64: 3, 3>} : memref<1x32x72xf32>, memref<1x8x18x19xf32>, memref<1x32x272xf32>
func.func @conv_window_uneven_pads(%x: tensor<1x8x16x16xf32>, %w: tensor<32x8x3x3xf32>) -> tensor<1x32x16x17xf32> {
  %y = graph.conv2d %x, %w {pads = array<i64: 2, 1, 0, 2>} : (tensor<1x8x16x16xf32>, tensor<32x8x3x3xf32>) -> tensor<1x32x16x17xf32>
  func.return %y : tensor<1x32x16x17xf32>
}

// -----

// At stride 2 over output rows of at least STRIDED_WINDOW_MIN_ROW (here 32), the
// kernel's packing reads the patches in place too, at the window's strides.
// CHECK-LABEL: func.func @conv_strided_window
// CHECK-NOT: loop.nest "conv_patches"
// CHECK:     loop.gemm %{{.*}}, %{{.*}} into %{{.*}} {window = array<i64: 3, 3, 2, 2>} : memref<1x16x27xf32>, memref<1x3x66x66xf32>, memref<1x16x1024xf32>
func.func @conv_strided_window(%x: tensor<1x3x64x64xf32>, %w: tensor<16x3x3x3xf32>) -> tensor<1x16x32x32xf32> {
  %y = graph.conv2d %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x64x64xf32>, tensor<16x3x3x3xf32>) -> tensor<1x16x32x32xf32>
  func.return %y : tensor<1x16x32x32xf32>
}

// -----

// A column stride above STRIDED_WINDOW_MAX_COLUMN_STRIDE (a patch embedding's 4x4 at
// stride 4) copies its patches out, however long its rows.
// CHECK-LABEL: func.func @conv_patch_embedding
// CHECK:     loop.nest "conv_patches"
// CHECK-NOT: window
func.func @conv_patch_embedding(%x: tensor<1x3x128x128xf32>, %w: tensor<32x3x4x4xf32>) -> tensor<1x32x32x32xf32> {
  %y = graph.conv2d %x, %w {strides = array<i64: 4, 4>} : (tensor<1x3x128x128xf32>, tensor<32x3x4x4xf32>) -> tensor<1x32x32x32xf32>
  func.return %y : tensor<1x32x32x32xf32>
}

// -----

// At stride 2 over short output rows (16), where a strided packing would gather each
// vector from several rows, the patches are copied out (im2col).
// CHECK-LABEL: func.func @conv_strided
// CHECK:     loop.nest "conv_patches"
// CHECK:     loop.gemm %{{.*}}, %{{.*}} into %{{.*}} : memref<1x32x72xf32>, memref<1x72x256xf32>, memref<1x32x256xf32>
// CHECK-NOT: window
func.func @conv_strided(%x: tensor<1x8x32x32xf32>, %w: tensor<32x8x3x3xf32>) -> tensor<1x32x16x16xf32> {
  %y = graph.conv2d %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x8x32x32xf32>, tensor<32x8x3x3xf32>) -> tensor<1x32x16x16xf32>
  func.return %y : tensor<1x32x16x16xf32>
}

// -----

// A padded image of 2^31 elements or more is beyond the window's i32 row offsets: its
// patches are copied out instead (here 2048 x 1026 x 1026 elements).
// CHECK-LABEL: func.func @conv_window_too_large
// CHECK-NOT: window
func.func @conv_window_too_large(%x: tensor<1x2048x1024x1024xf32>, %w: tensor<32x2048x3x3xf32>) -> tensor<1x32x1024x1024xf32> {
  %y = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x2048x1024x1024xf32>, tensor<32x2048x3x3xf32>) -> tensor<1x32x1024x1024xf32>
  func.return %y : tensor<1x32x1024x1024xf32>
}

// -----

// A depthwise conv stays a window nest; each tap's multiply and add carry `contract`,
// which LLVM fuses into an fma (scalar.CONTRACT).
// CHECK-LABEL: func.func @depthwise_taps_contract
// CHECK:      loop.nest "conv2d"
// CHECK:      arith.mulf %{{[0-9]+}}, %{{[0-9]+}} fastmath<contract> : f32
// CHECK-NEXT: arith.addf %{{[0-9]+}}, %{{[0-9]+}} fastmath<contract> : f32
// CHECK-NOT:  loop.gemm
func.func @depthwise_taps_contract(%x: tensor<1x8x6x6xf32>, %w: tensor<8x1x3x3xf32>) -> tensor<1x8x6x6xf32> {
  %y = graph.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>, groups = 8 : i64} : (tensor<1x8x6x6xf32>, tensor<8x1x3x3xf32>) -> tensor<1x8x6x6xf32>
  func.return %y : tensor<1x8x6x6xf32>
}
