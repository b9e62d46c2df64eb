// RUN: mlfuse-opt %s -p canonicalize | filecheck %s
// RUN: mlfuse-opt %s --pass-pipeline="builtin.module(canonicalize)" | filecheck %s
// RUN: not mlfuse-opt %s -p "canonicalize{max_iterations=2}" 2>&1 | filecheck %s --check-prefix=BADOPT

// Canonicalization patterns of the graph dialect (dialects/graph_canonicalize.py).

// BADOPT: <pass-pipeline>:1:1: error: invalid pass pipeline 'canonicalize{max_iterations=2}': Provided arguments ["max_iterations"] not found in expected arguments []

// --- identities disappear ---------------------------------------------------

// CHECK-LABEL: func.func @identity_broadcast
// CHECK-NEXT:    func.return %x : tensor<4x8xf32>
func.func @identity_broadcast(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %b = graph.broadcast %x {dims = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %b : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @identity_cast
// CHECK-NEXT:    func.return %x : tensor<4xf32>
func.func @identity_cast(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = graph.cast %x : tensor<4xf32> -> tensor<4xf32>
  func.return %c : tensor<4xf32>
}

// --- chains collapse -----------------------------------------------------------

// CHECK-LABEL: func.func @broadcast_of_broadcast
// CHECK-NEXT:    %b2 = graph.broadcast %v {dims = array<i64: 2>} : tensor<8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT:    func.return %b2
func.func @broadcast_of_broadcast(%v: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %b1 = graph.broadcast %v {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
  %b2 = graph.broadcast %b1 {dims = array<i64: 1, 2>} : tensor<4x8xf32> -> tensor<2x4x8xf32>
  func.return %b2 : tensor<2x4x8xf32>
}

// A size-1 dimension stretched by the middle broadcast stays stretchable.
// CHECK-LABEL: func.func @broadcast_chain_with_stretch
// CHECK-NEXT:    %b3 = graph.broadcast %v {dims = array<i64: 1, 2>} : tensor<4x1xf32> -> tensor<3x4x8xf32>
// CHECK-NEXT:    func.return %b3
func.func @broadcast_chain_with_stretch(%v: tensor<4x1xf32>) -> tensor<3x4x8xf32> {
  %b1 = graph.broadcast %v {dims = array<i64: 0, 1>} : tensor<4x1xf32> -> tensor<4x1xf32>
  %b2 = graph.broadcast %b1 {dims = array<i64: 0, 1>} : tensor<4x1xf32> -> tensor<4x8xf32>
  %b3 = graph.broadcast %b2 {dims = array<i64: 1, 2>} : tensor<4x8xf32> -> tensor<3x4x8xf32>
  func.return %b3 : tensor<3x4x8xf32>
}

// The inner broadcast has another user: it stays, the outer one reads %v directly.
// CHECK-LABEL: func.func @broadcast_shared_inner
// CHECK-NEXT:    %b1 = graph.broadcast %v {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %b2 = graph.broadcast %v {dims = array<i64: 2>} : tensor<8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT:    func.return %b1, %b2
func.func @broadcast_shared_inner(%v: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<2x4x8xf32>) {
  %b1 = graph.broadcast %v {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
  %b2 = graph.broadcast %b1 {dims = array<i64: 1, 2>} : tensor<4x8xf32> -> tensor<2x4x8xf32>
  func.return %b1, %b2 : tensor<4x8xf32>, tensor<2x4x8xf32>
}

// CHECK-LABEL: func.func @transposes
// CHECK-NEXT:    %rot = graph.transpose %x {perm = array<i64: 1, 2, 0>} : tensor<2x3x4xf32> -> tensor<3x4x2xf32>
// CHECK-NEXT:    func.return %x, %x, %rot
func.func @transposes(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<3x4x2xf32>) {
  %id = graph.transpose %x {perm = array<i64: 0, 1, 2>} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %t1 = graph.transpose %x {perm = array<i64: 1, 0, 2>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %back = graph.transpose %t1 {perm = array<i64: 1, 0, 2>} : tensor<3x2x4xf32> -> tensor<2x3x4xf32>
  %rot = graph.transpose %t1 {perm = array<i64: 0, 2, 1>} : tensor<3x2x4xf32> -> tensor<3x4x2xf32>
  func.return %id, %back, %rot : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<3x4x2xf32>
}

// CHECK-LABEL: func.func @reshapes
// CHECK-NEXT:    %r2 = graph.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
// CHECK-NEXT:    func.return %x, %r2, %x
func.func @reshapes(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<32xf32>, tensor<4x8xf32>) {
  %same = graph.reshape %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %r1 = graph.reshape %x : tensor<4x8xf32> -> tensor<2x2x8xf32>
  %r2 = graph.reshape %r1 : tensor<2x2x8xf32> -> tensor<32xf32>
  %round = graph.reshape %r2 : tensor<32xf32> -> tensor<4x8xf32>
  func.return %same, %r2, %round : tensor<4x8xf32>, tensor<32xf32>, tensor<4x8xf32>
}

// Patterns also apply inside fusion groups.
// CHECK-LABEL: func.func @inside_fusion_group
// CHECK:         ^bb0(%a: tensor<2x3xf32>):
// CHECK-NEXT:      fusion.yield %a : tensor<2x3xf32>
func.func @inside_fusion_group(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %r = fusion.group "g" kind = "loop" (%x) : (tensor<2x3xf32>) -> tensor<2x3xf32> {
  ^bb0(%a: tensor<2x3xf32>):
    %t = graph.transpose %a {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
    %u = graph.transpose %t {perm = array<i64: 1, 0>} : tensor<3x2xf32> -> tensor<2x3xf32>
    fusion.yield %u : tensor<2x3xf32>
  }
  func.return %r : tensor<2x3xf32>
}

// --- small constants fold (values computed by mlfuse.reference) -----------------

// CHECK-LABEL: func.func @fold_elementwise
// CHECK-NEXT:    %s = graph.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:    %m = graph.constant dense<[1.200000e+01, -3.750000e+00]> : tensor<2xf32>
// CHECK-NEXT:    %lt = graph.constant dense<[true, false]> : tensor<2xi1>
// CHECK-NEXT:    %sel = graph.constant dense<[1.000000e+00, -1.500000e+00]> : tensor<2xf32>
// CHECK-NEXT:    %i = graph.constant dense<[-1, 2, 9]> : tensor<3xi32>
// CHECK-NEXT:    %q = graph.constant dense<[3, -3, -2]> : tensor<3xi32>
// CHECK-NEXT:    func.return %s, %m, %lt, %sel, %i, %q
func.func @fold_elementwise() -> (tensor<2xf32>, tensor<2xf32>, tensor<2xi1>, tensor<2xf32>, tensor<3xi32>, tensor<3xi32>) {
  %c = graph.constant dense<[1.0, 4.0]> : tensor<2xf32>
  %d = graph.constant dense<[3.0, -1.5]> : tensor<2xf32>
  %s = graph.sqrt %c : tensor<2xf32>
  %a = graph.add %c, %d : tensor<2xf32>
  %m = graph.mul %a, %d : tensor<2xf32>
  %lt = graph.compare lt, %c, %d : tensor<2xf32>
  %sel = graph.select %lt, %c, %d : tensor<2xi1>, tensor<2xf32>
  // float -> int truncates towards zero; integer division too
  %f = graph.constant dense<[-1.7, 2.5, 9.9]> : tensor<3xf32>
  %i = graph.cast %f : tensor<3xf32> -> tensor<3xi32>
  %n = graph.constant dense<[7, -7, 8]> : tensor<3xi32>
  %k = graph.constant dense<[2, 2, -3]> : tensor<3xi32>
  %q = graph.div %n, %k : tensor<3xi32>
  func.return %s, %m, %lt, %sel, %i, %q : tensor<2xf32>, tensor<2xf32>, tensor<2xi1>, tensor<2xf32>, tensor<3xi32>, tensor<3xi32>
}

// CHECK-LABEL: func.func @fold_data_movement
// CHECK-NEXT:    %b = graph.constant dense<{{\[}}[1.000000e+00, 2.000000e+00, 3.000000e+00], [1.000000e+00, 2.000000e+00, 3.000000e+00]]> : tensor<2x3xf32>
// CHECK-NEXT:    %t = graph.constant dense<{{\[}}[1.000000e+00, 1.000000e+00], [2.000000e+00, 2.000000e+00], [3.000000e+00, 3.000000e+00]]> : tensor<3x2xf32>
// CHECK-NEXT:    %r = graph.constant dense<[1.000000e+00, 1.000000e+00, 2.000000e+00, 2.000000e+00, 3.000000e+00, 3.000000e+00]> : tensor<6xf32>
// CHECK-NEXT:    func.return %b, %t, %r
func.func @fold_data_movement() -> (tensor<2x3xf32>, tensor<3x2xf32>, tensor<6xf32>) {
  %c = graph.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %b = graph.broadcast %c {dims = array<i64: 1>} : tensor<3xf32> -> tensor<2x3xf32>
  %t = graph.transpose %b {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  %r = graph.reshape %t : tensor<3x2xf32> -> tensor<6xf32>
  func.return %b, %t, %r : tensor<2x3xf32>, tensor<3x2xf32>, tensor<6xf32>
}

// Splats fold at any size; a large one stays the broadcast of a rank-0 constant
// (xDSL would store each of its elements).
// CHECK-LABEL: func.func @fold_large_splat
// CHECK-NEXT:    %{{.*}} = graph.constant dense<7.38905573> : tensor<f32>
// CHECK-NEXT:    %e = graph.broadcast %{{.*}} {dims = array<i64>} : tensor<f32> -> tensor<256x256xf32>
// CHECK-NEXT:    func.return %e
func.func @fold_large_splat() -> tensor<256x256xf32> {
  %c = graph.constant dense<2.0> : tensor<f32>
  %b = graph.broadcast %c {dims = array<i64>} : tensor<f32> -> tensor<256x256xf32>
  %e = graph.exp %b : tensor<256x256xf32>
  func.return %e : tensor<256x256xf32>
}

// --- must not change ------------------------------------------------------------

// CHECK-LABEL: func.func @keep_stretching_broadcast
// CHECK-NEXT:    %b = graph.broadcast %v {dims = array<i64: 0, 1>} : tensor<1x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %b
func.func @keep_stretching_broadcast(%v: tensor<1x8xf32>) -> tensor<4x8xf32> {
  %b = graph.broadcast %v {dims = array<i64: 0, 1>} : tensor<1x8xf32> -> tensor<4x8xf32>
  func.return %b : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @keep_single_transpose_reshape_cast
// CHECK-NEXT:    %t = graph.transpose %x {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
// CHECK-NEXT:    %r = graph.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
// CHECK-NEXT:    %c = graph.cast %x : tensor<2x3xf32> -> tensor<2x3xf16>
// CHECK-NEXT:    func.return %t, %r, %c
func.func @keep_single_transpose_reshape_cast(%x: tensor<2x3xf32>) -> (tensor<3x2xf32>, tensor<6xf32>, tensor<2x3xf16>) {
  %t = graph.transpose %x {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  %r = graph.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
  %c = graph.cast %x : tensor<2x3xf32> -> tensor<2x3xf16>
  func.return %t, %r, %c : tensor<3x2xf32>, tensor<6xf32>, tensor<2x3xf16>
}

// A transpose of a reshape is not a chain of one kind: both stay.
// CHECK-LABEL: func.func @keep_mixed_chain
// CHECK-NEXT:    %r = graph.reshape %x
// CHECK-NEXT:    %t = graph.transpose %r
func.func @keep_mixed_chain(%x: tensor<6xf32>) -> tensor<3x2xf32> {
  %r = graph.reshape %x : tensor<6xf32> -> tensor<2x3xf32>
  %t = graph.transpose %r {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  func.return %t : tensor<3x2xf32>
}

// CHECK-LABEL: func.func @keep_non_constant_operand
// CHECK-NEXT:    %c = graph.constant
// CHECK-NEXT:    %a = graph.add %x, %c : tensor<2xf32>
func.func @keep_non_constant_operand(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c = graph.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %a = graph.add %x, %c : tensor<2xf32>
  func.return %a : tensor<2xf32>
}

// 128 elements that are not a splat: folding would bloat the IR.
// CHECK-LABEL: func.func @keep_large_non_splat
// CHECK-NEXT:    %c = graph.constant
// CHECK-NEXT:    %b = graph.broadcast %c {dims = array<i64: 1>} : tensor<8xf32> -> tensor<16x8xf32>
func.func @keep_large_non_splat() -> tensor<16x8xf32> {
  %c = graph.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>
  %b = graph.broadcast %c {dims = array<i64: 1>} : tensor<8xf32> -> tensor<16x8xf32>
  func.return %b : tensor<16x8xf32>
}

// NaN and inf results stay computed at run time.
// CHECK-LABEL: func.func @keep_non_finite
// CHECK:         %l = graph.log %c : tensor<2xf32>
// CHECK-NEXT:    %d = graph.div %c, %z : tensor<2xf32>
func.func @keep_non_finite() -> (tensor<2xf32>, tensor<2xf32>) {
  %c = graph.constant dense<[-1.0, 4.0]> : tensor<2xf32>
  %z = graph.constant dense<[0.0, 1.0]> : tensor<2xf32>
  %l = graph.log %c : tensor<2xf32>
  %d = graph.div %c, %z : tensor<2xf32>
  func.return %l, %d : tensor<2xf32>, tensor<2xf32>
}

// CHECK-LABEL: func.func @keep_integer_division_by_zero
// CHECK:         %q = graph.div %n, %k : tensor<2xi32>
func.func @keep_integer_division_by_zero() -> tensor<2xi32> {
  %n = graph.constant dense<[6, 7]> : tensor<2xi32>
  %k = graph.constant dense<[3, 0]> : tensor<2xi32>
  %q = graph.div %n, %k : tensor<2xi32>
  func.return %q : tensor<2xi32>
}

// Reductions and contractions are not in the folding set.
// CHECK-LABEL: func.func @keep_reductions_and_contractions
// CHECK:         %s = graph.reduce_sum %c
// CHECK:         %p = graph.matmul %m, %n
func.func @keep_reductions_and_contractions() -> (tensor<f32>, tensor<1x1xf32>) {
  %c = graph.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %s = graph.reduce_sum %c {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
  %m = graph.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
  %n = graph.constant dense<[[3.0], [4.0]]> : tensor<2x1xf32>
  %p = graph.matmul %m, %n : (tensor<1x2xf32>, tensor<2x1xf32>) -> tensor<1x1xf32>
  func.return %s, %p : tensor<f32>, tensor<1x1xf32>
}

// float -> int casts of out-of-range values are undefined at run time: not folded.
// CHECK-LABEL: func.func @keep_out_of_range_cast
// CHECK:         %i = graph.cast %c : tensor<2xf32> -> tensor<2xi32>
func.func @keep_out_of_range_cast() -> tensor<2xi32> {
  %c = graph.constant dense<[1.0, 3.0e+10]> : tensor<2xf32>
  %i = graph.cast %c : tensor<2xf32> -> tensor<2xi32>
  func.return %i : tensor<2xi32>
}

// Powers by 1, 2 and 3 (a splat exponent: a broadcast rank-0 constant or a dense splat)
// become multiplies.
// CHECK-LABEL: func.func @small_integer_powers
// CHECK-NEXT:    %0 = graph.mul %x, %x : tensor<4x8xf32>
// CHECK-NEXT:    %cube = graph.mul %0, %x : tensor<4x8xf32>
// CHECK-NEXT:    %square = graph.mul %cube, %cube : tensor<4x8xf32>
// CHECK-NEXT:    func.return %square, %x : tensor<4x8xf32>, tensor<4x8xf32>
func.func @small_integer_powers(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %three = graph.constant dense<3.0> : tensor<f32>
  %b = graph.broadcast %three {dims = array<i64>} : tensor<f32> -> tensor<4x8xf32>
  %cube = graph.pow %x, %b : tensor<4x8xf32>
  %two = graph.constant dense<2.0> : tensor<4x8xf32>
  %square = graph.pow %cube, %two : tensor<4x8xf32>
  %one = graph.constant dense<1.0> : tensor<4x8xf32>
  %same = graph.pow %x, %one : tensor<4x8xf32>
  func.return %square, %same : tensor<4x8xf32>, tensor<4x8xf32>
}

// Must not become multiplies: other exponents, a non-splat exponent, a run-time one.
// CHECK-LABEL: func.func @other_powers
// CHECK:         %a = graph.pow %x, %half
// CHECK:         %b = graph.pow %x, %four
// CHECK:         %c = graph.pow %x, %mixed
// CHECK:         %d = graph.pow %x, %y
func.func @other_powers(%x: tensor<2xf32>, %y: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %half = graph.constant dense<0.5> : tensor<2xf32>
  %a = graph.pow %x, %half : tensor<2xf32>
  %four = graph.constant dense<4.0> : tensor<2xf32>
  %b = graph.pow %x, %four : tensor<2xf32>
  %mixed = graph.constant dense<[2.0, 3.0]> : tensor<2xf32>
  %c = graph.pow %x, %mixed : tensor<2xf32>
  %d = graph.pow %x, %y : tensor<2xf32>
  func.return %a, %b, %c, %d : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// A gather of a splat is the splat, whatever the indices (run-time ones here): every
// result element is some element of the data. Large results are the broadcast of a
// rank-0 constant, as every large splat is written.
// CHECK-LABEL: func.func @gather_from_splat
// CHECK-NEXT:    %[[Z:.*]] = graph.constant dense<0> : tensor<i64>
// CHECK-NEXT:    %a = graph.broadcast %[[Z]] {dims = array<i64>} : tensor<i64> -> tensor<1x128xi64>
// CHECK-NEXT:    %[[C:.*]] = graph.constant dense<2.500000e+00> : tensor<f32>
// CHECK-NEXT:    %g = graph.broadcast %[[C]] {dims = array<i64>} : tensor<f32> -> tensor<3x4xf32>
// CHECK-NEXT:    %[[T:.*]] = graph.constant dense<true> : tensor<i1>
// CHECK-NEXT:    %m = graph.broadcast %[[T]] {dims = array<i64>} : tensor<i1> -> tensor<2x2xi1>
// CHECK-NEXT:    func.return %a, %g, %m
func.func @gather_from_splat(%i: tensor<1x128xi64>, %j: tensor<3xi32>, %k: tensor<2x2xi64>) -> (tensor<1x128xi64>, tensor<3x4xf32>, tensor<2x2xi1>) {
  %z = graph.constant dense<0> : tensor<1x512xi64>
  %a = graph.gather_elements %z, %i {axis = 1 : i64} : (tensor<1x512xi64>, tensor<1x128xi64>) -> tensor<1x128xi64>
  %c = graph.constant dense<2.5> : tensor<f32>
  %cb = graph.broadcast %c {dims = array<i64>} : tensor<f32> -> tensor<10x4xf32>
  %g = graph.gather %cb, %j {axis = 0 : i64} : (tensor<10x4xf32>, tensor<3xi32>) -> tensor<3x4xf32>
  %t = graph.constant dense<true> : tensor<5xi1>
  %m = graph.gather %t, %k {axis = 0 : i64} : (tensor<5xi1>, tensor<2x2xi64>) -> tensor<2x2xi1>
  func.return %a, %g, %m : tensor<1x128xi64>, tensor<3x4xf32>, tensor<2x2xi1>
}

// Must stay gathers: constant data that is not a splat, run-time data, and the broadcast
// of a scalar left to run time (0 / 0 is not folded).
// CHECK-LABEL: func.func @keep_gathers
// CHECK:         %a = graph.gather %d, %i
// CHECK:         %b = graph.gather %x, %i
// CHECK:         %c = graph.gather %nanb, %i
func.func @keep_gathers(%x: tensor<4x3xf32>, %i: tensor<2xi64>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %d = graph.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0], [1.0, 1.0, 1.0]]> : tensor<4x3xf32>
  %a = graph.gather %d, %i {axis = 0 : i64} : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %b = graph.gather %x, %i {axis = 0 : i64} : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %nan = graph.div %zero, %zero : tensor<f32>
  %nanb = graph.broadcast %nan {dims = array<i64>} : tensor<f32> -> tensor<4x3xf32>
  %c = graph.gather %nanb, %i {axis = 0 : i64} : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  func.return %a, %b, %c : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// A gather at constant indices in arithmetic progression (after the wrap and clamp) is
// a strided slice, reshaped to the gather's result: the torch exporter's QKV split.
// CHECK-LABEL: func.func @gather_as_slice
// CHECK-NEXT:    %[[S:.*]] = graph.slice %x {start = array<i64: 2, 0, 0, 0>, stop = array<i64: 3, 128, 1, 256>, step = array<i64: 1, 1, 1, 1>} : tensor<3x128x1x256xf32> -> tensor<1x128x1x256xf32>
// CHECK-NEXT:    %a = graph.reshape %[[S]] : tensor<1x128x1x256xf32> -> tensor<128x1x256xf32>
// CHECK-NEXT:    %[[T:.*]] = graph.slice %y {start = array<i64: 0, 1>, stop = array<i64: 4, 8>, step = array<i64: 1, 2>} : tensor<4x10xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    %b = graph.reshape %[[T]] : tensor<4x4xf32> -> tensor<4x2x2xf32>
// CHECK-NEXT:    %d = graph.slice %y {start = array<i64: 0, 7>, stop = array<i64: 4, 10>, step = array<i64: 1, 1>} : tensor<4x10xf32> -> tensor<4x3xf32>
// CHECK-NEXT:    func.return %a, %b, %d
func.func @gather_as_slice(%x: tensor<3x128x1x256xf32>, %y: tensor<4x10xf32>) -> (tensor<128x1x256xf32>, tensor<4x2x2xf32>, tensor<4x3xf32>) {
  %c = graph.constant dense<2> : tensor<i64>
  %a = graph.gather %x, %c {axis = 0 : i64} : (tensor<3x128x1x256xf32>, tensor<i64>) -> tensor<128x1x256xf32>
  %i = graph.constant dense<[[1, 3], [5, 7]]> : tensor<2x2xi64>
  %b = graph.gather %y, %i {axis = 1 : i64} : (tensor<4x10xf32>, tensor<2x2xi64>) -> tensor<4x2x2xf32>
  %j = graph.constant dense<[-3, -2, -1]> : tensor<3xi32>
  %d = graph.gather %y, %j {axis = 1 : i64} : (tensor<4x10xf32>, tensor<3xi32>) -> tensor<4x3xf32>
  func.return %a, %b, %d : tensor<128x1x256xf32>, tensor<4x2x2xf32>, tensor<4x3xf32>
}

// Must stay gathers: decreasing or repeated positions (9, 12 clamps to 9, 9), and
// gather_elements (its indices are per element).
// CHECK-LABEL: func.func @keep_gathers_at_constant_indices
// CHECK:         %a = graph.gather %y, %k
// CHECK:         %b = graph.gather %y, %l
// CHECK:         %e = graph.gather_elements %y, %m
func.func @keep_gathers_at_constant_indices(%y: tensor<4x10xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>) {
  %k = graph.constant dense<[2, 1]> : tensor<2xi64>
  %a = graph.gather %y, %k {axis = 1 : i64} : (tensor<4x10xf32>, tensor<2xi64>) -> tensor<4x2xf32>
  %l = graph.constant dense<[9, 12]> : tensor<2xi64>
  %b = graph.gather %y, %l {axis = 1 : i64} : (tensor<4x10xf32>, tensor<2xi64>) -> tensor<4x2xf32>
  %m = graph.constant dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>
  %e = graph.gather_elements %y, %m {axis = 1 : i64} : (tensor<4x10xf32>, tensor<4x2xi64>) -> tensor<4x2xf32>
  func.return %a, %b, %e : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>
}
