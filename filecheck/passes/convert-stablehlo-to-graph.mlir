// RUN: mlfuse-opt %s --split-input-file --verify-diagnostics -p convert-stablehlo-to-graph | filecheck %s

// StableHLO as jax prints it, op by op, to the graph dialect; then what must not
// transform, then what the graph dialect cannot express (located errors).

// Elementwise ops map one to one; chlo.erfc is 1 - erf; remainder is C's fmod;
// jax's result attributes are dropped.
// CHECK-LABEL: func.func public @elementwise(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: %0 = graph.abs %x : tensor<4x8xf32>
// CHECK-NEXT: %1 = graph.neg %0 : tensor<4x8xf32>
// CHECK-NEXT: %2 = graph.exp %1 : tensor<4x8xf32>
// CHECK-NEXT: %3 = graph.log %2 : tensor<4x8xf32>
// CHECK-NEXT: %4 = graph.sqrt %3 : tensor<4x8xf32>
// CHECK-NEXT: %5 = graph.rsqrt %4 : tensor<4x8xf32>
// CHECK-NEXT: %6 = graph.tanh %5 : tensor<4x8xf32>
// CHECK-NEXT: %7 = graph.sigmoid %6 : tensor<4x8xf32>
// CHECK-NEXT: %8 = graph.erf %7 : tensor<4x8xf32>
// CHECK-NEXT: %9 = graph.erf %8 : tensor<4x8xf32>
// CHECK-NEXT: %10 = graph.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %11 = graph.broadcast %10 {dims = array<i64>} : tensor<f32> -> tensor<4x8xf32>
// CHECK-NEXT: %12 = graph.sub %11, %9 : tensor<4x8xf32>
// CHECK-NEXT: %13 = graph.add %12, %y : tensor<4x8xf32>
// CHECK-NEXT: %14 = graph.sub %13, %y : tensor<4x8xf32>
// CHECK-NEXT: %15 = graph.mul %14, %y : tensor<4x8xf32>
// CHECK-NEXT: %16 = graph.div %15, %y : tensor<4x8xf32>
// CHECK-NEXT: %17 = graph.max %16, %y : tensor<4x8xf32>
// CHECK-NEXT: %18 = graph.min %17, %y : tensor<4x8xf32>
// CHECK-NEXT: %19 = graph.pow %18, %y : tensor<4x8xf32>
// CHECK-NEXT: %20 = graph.rem %19, %y {fmod} : tensor<4x8xf32>
// CHECK-NEXT: func.return %20 : tensor<4x8xf32>
func.func public @elementwise(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x8xf32> {jax.result_info = "result"}) {
  %0 = stablehlo.abs %x : tensor<4x8xf32>
  %1 = stablehlo.negate %0 : tensor<4x8xf32>
  %2 = stablehlo.exponential %1 : tensor<4x8xf32>
  %3 = stablehlo.log %2 : tensor<4x8xf32>
  %4 = stablehlo.sqrt %3 : tensor<4x8xf32>
  %5 = stablehlo.rsqrt %4 : tensor<4x8xf32>
  %6 = stablehlo.tanh %5 : tensor<4x8xf32>
  %7 = stablehlo.logistic %6 : tensor<4x8xf32>
  %8 = chlo.erf %7 : tensor<4x8xf32> -> tensor<4x8xf32>
  %9 = chlo.erfc %8 : tensor<4x8xf32> -> tensor<4x8xf32>
  %10 = stablehlo.add %9, %y : tensor<4x8xf32>
  %11 = stablehlo.subtract %10, %y : tensor<4x8xf32>
  %12 = stablehlo.multiply %11, %y : tensor<4x8xf32>
  %13 = stablehlo.divide %12, %y : tensor<4x8xf32>
  %14 = stablehlo.maximum %13, %y : tensor<4x8xf32>
  %15 = stablehlo.minimum %14, %y : tensor<4x8xf32>
  %16 = stablehlo.power %15, %y : tensor<4x8xf32>
  %17 = stablehlo.remainder %16, %y : tensor<4x8xf32>
  return %17 : tensor<4x8xf32>
}

// -----

// sine and cosine: graph.sin and graph.cos (libm on the CPU).
// CHECK-LABEL: func.func @trig(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: %0 = graph.sin %x : tensor<4xf32>
// CHECK-NEXT: %1 = graph.cos %0 : tensor<4xf32>
// CHECK-NEXT: func.return %1 : tensor<4xf32>
func.func @trig(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.sine %x : tensor<4xf32>
  %1 = stablehlo.cosine %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// is_finite is |x| < inf; round_nearest_even is graph.round; round_nearest_afz steps
// from trunc(x) where |x - trunc(x)| >= 0.5; log_plus_one is log(1 + x), corrected
// near 0 (Goldberg): log(u) * x / (u - 1), x where u == 1.
// CHECK-LABEL: func.func @float_math(%x: tensor<4xf32>) -> (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
// CHECK-NEXT: %0 = graph.abs %x : tensor<4xf32>
// CHECK-NEXT: %1 = graph.constant dense<0x7f800000> : tensor<f32>
// CHECK: %[[FINITE:.*]] = graph.compare lt, %0, %{{.*}} : tensor<4xf32>
// CHECK: %[[EVEN:.*]] = graph.round %x : tensor<4xf32>
// CHECK: graph.ceil %x
// CHECK: graph.floor %x
// CHECK: %[[U:.*]] = graph.add %{{.*}}, %x : tensor<4xf32>
// CHECK-NEXT: %[[LOG:.*]] = graph.log %[[U]] : tensor<4xf32>
// CHECK-NEXT: %[[MUL:.*]] = graph.mul %[[LOG]], %x : tensor<4xf32>
// CHECK-NEXT: %[[SUB:.*]] = graph.sub %[[U]], %{{.*}} : tensor<4xf32>
// CHECK-NEXT: %[[COR:.*]] = graph.div %[[MUL]], %[[SUB]] : tensor<4xf32>
// CHECK-NEXT: %[[TINY:.*]] = graph.compare eq, %[[U]], %{{.*}} : tensor<4xf32>
// CHECK-NEXT: %[[NEAR:.*]] = graph.select %[[TINY]], %x, %[[COR]] : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT: %[[LOG1P:.*]] = graph.select %{{.*}}, %[[NEAR]], %[[LOG]] : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT: func.return %[[FINITE]], %[[EVEN]], %{{.*}}, %[[LOG1P]]
func.func @float_math(%x: tensor<4xf32>) -> (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = stablehlo.is_finite %x : (tensor<4xf32>) -> tensor<4xi1>
  %1 = stablehlo.round_nearest_even %x : tensor<4xf32>
  %2 = stablehlo.round_nearest_afz %x : tensor<4xf32>
  %3 = stablehlo.log_plus_one %x : tensor<4xf32>
  return %0, %1, %2, %3 : tensor<4xi1>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// and/or/xor/not on i1 become selects and comparisons.
// CHECK-LABEL: func.func @logical(%a: tensor<4xi1>, %b: tensor<4xi1>) -> tensor<4xi1> {
// CHECK-NEXT: %0 = graph.select %a, %b, %a : tensor<4xi1>, tensor<4xi1>
// CHECK-NEXT: %1 = graph.select %0, %0, %b : tensor<4xi1>, tensor<4xi1>
// CHECK-NEXT: %2 = graph.compare ne, %1, %b : tensor<4xi1>
// CHECK-NEXT: %3 = graph.constant dense<false> : tensor<i1>
// CHECK-NEXT: %4 = graph.broadcast %3 {dims = array<i64>} : tensor<i1> -> tensor<4xi1>
// CHECK-NEXT: %5 = graph.compare eq, %2, %4 : tensor<4xi1>
// CHECK-NEXT: func.return %5 : tensor<4xi1>
func.func @logical(%a: tensor<4xi1>, %b: tensor<4xi1>) -> tensor<4xi1> {
  %0 = stablehlo.and %a, %b : tensor<4xi1>
  %1 = stablehlo.or %0, %b : tensor<4xi1>
  %2 = stablehlo.xor %1, %b : tensor<4xi1>
  %3 = stablehlo.not %2 : tensor<4xi1>
  return %3 : tensor<4xi1>
}

// -----

// On integers and/or/xor/not are graph's bit ops, and shifts graph's shl and shr
// (arithmetic on signed types, logical on unsigned ones): a right shift of the other
// kind runs on the bits read as the other signedness. bitcast_convert within one
// width is graph.bitcast.
// CHECK-LABEL: func.func @bitwise(%x: tensor<4xi32>, %u: tensor<4xui8>, %f: tensor<4xf32>) -> (tensor<4xi32>, tensor<4xui8>) {
// CHECK-NEXT: %0 = graph.bitand %x, %x : tensor<4xi32>
// CHECK-NEXT: %1 = graph.bitor %0, %x : tensor<4xi32>
// CHECK-NEXT: %2 = graph.bitxor %1, %x : tensor<4xi32>
// CHECK-NEXT: %3 = graph.bitnot %2 : tensor<4xi32>
// CHECK-NEXT: %4 = graph.shl %3, %x : tensor<4xi32>
// CHECK-NEXT: %5 = graph.shr %4, %x : tensor<4xi32>
// CHECK-NEXT: %6 = graph.bitcast %5 : tensor<4xi32> -> tensor<4xui32>
// CHECK-NEXT: %7 = graph.bitcast %x : tensor<4xi32> -> tensor<4xui32>
// CHECK-NEXT: %8 = graph.shr %6, %7 : tensor<4xui32>
// CHECK-NEXT: %9 = graph.bitcast %8 : tensor<4xui32> -> tensor<4xi32>
// CHECK-NEXT: %10 = graph.bitcast %f : tensor<4xf32> -> tensor<4xi32>
// CHECK-NEXT: %11 = graph.add %9, %10 : tensor<4xi32>
// CHECK-NEXT: %12 = graph.shr %u, %u : tensor<4xui8>
// CHECK-NEXT: %13 = graph.bitcast %12 : tensor<4xui8> -> tensor<4xi8>
// CHECK-NEXT: %14 = graph.bitcast %u : tensor<4xui8> -> tensor<4xi8>
// CHECK-NEXT: %15 = graph.shr %13, %14 : tensor<4xi8>
// CHECK-NEXT: %16 = graph.bitcast %15 : tensor<4xi8> -> tensor<4xui8>
// CHECK-NEXT: func.return %11, %16 : tensor<4xi32>, tensor<4xui8>
func.func @bitwise(%x: tensor<4xi32>, %u: tensor<4xui8>, %f: tensor<4xf32>) -> (tensor<4xi32>, tensor<4xui8>) {
  %0 = stablehlo.and %x, %x : tensor<4xi32>
  %1 = stablehlo.or %0, %x : tensor<4xi32>
  %2 = stablehlo.xor %1, %x : tensor<4xi32>
  %3 = stablehlo.not %2 : tensor<4xi32>
  %4 = stablehlo.shift_left %3, %x : tensor<4xi32>
  %5 = stablehlo.shift_right_arithmetic %4, %x : tensor<4xi32>
  %6 = stablehlo.shift_right_logical %5, %x : tensor<4xi32>
  %7 = stablehlo.bitcast_convert %f : (tensor<4xf32>) -> tensor<4xi32>
  %8 = stablehlo.add %6, %7 : tensor<4xi32>
  %9 = stablehlo.shift_right_logical %u, %u : tensor<4xui8>
  %10 = stablehlo.shift_right_arithmetic %9, %u : tensor<4xui8>
  return %8, %10 : tensor<4xi32>, tensor<4xui8>
}

// -----

// A scatter of single elements (jnp.bincount) with indices known at run time: each
// update's flat position (-1 where out of bounds) compared with every operand position,
// the hits' updates summed per position and added to the operand.
// CHECK-LABEL: func.func @bincount(%x: tensor<8xi32>, %i: tensor<4x1xi32>, %v: tensor<4xi32>) -> tensor<8xi32> {
// CHECK: %[[LO:.*]] = graph.compare ge
// CHECK: %[[HI:.*]] = graph.compare lt
// CHECK: %[[IN:.*]] = graph.select %[[LO]], %[[HI]], %[[LO]]
// CHECK: %[[POS:.*]] = graph.select %[[IN]], %{{.*}}, %{{.*}} : tensor<4xi1>, tensor<4xi64>
// CHECK: %[[ROWS:.*]] = graph.broadcast %[[POS]] {dims = array<i64: 0>} : tensor<4xi64> -> tensor<4x8xi64>
// CHECK: %[[RAMP:.*]] = graph.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
// CHECK: %[[COLS:.*]] = graph.broadcast %[[RAMP]] {dims = array<i64: 1>} : tensor<8xi64> -> tensor<4x8xi64>
// CHECK: %[[HIT:.*]] = graph.compare eq, %[[ROWS]], %[[COLS]] : tensor<4x8xi64>
// CHECK: %[[V:.*]] = graph.broadcast %v {dims = array<i64: 0>} : tensor<4xi32> -> tensor<4x8xi32>
// CHECK: %[[SEL:.*]] = graph.select %[[HIT]], %[[V]], %{{.*}} : tensor<4x8xi1>, tensor<4x8xi32>
// CHECK: %[[SUM:.*]] = graph.reduce_sum %[[SEL]] {axes = array<i64: 0>} : tensor<4x8xi32> -> tensor<8xi32>
// CHECK: %[[OUT:.*]] = graph.add %x, %[[SUM]] : tensor<8xi32>
// CHECK: func.return %[[OUT]] : tensor<8xi32>
func.func @bincount(%x: tensor<8xi32>, %i: tensor<4x1xi32>, %v: tensor<4xi32>) -> tensor<8xi32> {
  %0 = "stablehlo.scatter"(%x, %i, %v) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %s = stablehlo.add %a, %b : tensor<i32>
    stablehlo.return %s : tensor<i32>
  }) : (tensor<8xi32>, tensor<4x1xi32>, tensor<4xi32>) -> tensor<8xi32>
  return %0 : tensor<8xi32>
}

// -----

// A while loop of a counter from a constant (0) to a constant (2) in steps of 1
// (lax.fori_loop) is unrolled: its body twice, the loop values threaded through.
// CHECK-LABEL: func.func @fori(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK: %[[Y:.*]] = graph.mul %x, %x : tensor<4xf32>
// CHECK: %[[Y1:.*]] = graph.mul %[[Y]], %[[Y]] : tensor<4xf32>
// CHECK-NOT: graph.mul
// CHECK: func.return %[[Y1]] : tensor<4xf32>
func.func @fori(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%iterArg = %x, %iterArg_0 = %c) : tensor<4xf32>, tensor<i32>
   cond {
    %n = stablehlo.constant dense<2> : tensor<i32>
    %lt = stablehlo.compare LT, %iterArg_0, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %y = stablehlo.multiply %iterArg, %iterArg : tensor<4xf32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %iterArg_0, %one : tensor<i32>
    stablehlo.return %y, %next : tensor<4xf32>, tensor<i32>
  }
  return %r#0 : tensor<4xf32>
}

// -----

// A gather of single elements with a batching dimension (jnp.take_along_axis(x, i,
// axis=1)): the flat position of x[b, clamp(i[b, j], 0, 5)], row b from a ramp along
// the batching dimension, then graph.gather of the flattened operand.
// CHECK-LABEL: func.func @take_along(%x: tensor<5x6xf32>, %i: tensor<5x3x1xi32>) -> tensor<5x3xf32> {
// CHECK: %[[LOW:.*]] = graph.max
// CHECK: %[[COL:.*]] = graph.min %[[LOW]], %{{.*}} : tensor<15xi64>
// CHECK: %[[RAMP:.*]] = graph.constant dense<[0, 1, 2, 3, 4]> : tensor<5xi64>
// CHECK: %[[ROWS:.*]] = graph.broadcast %[[RAMP]] {dims = array<i64: 0>} : tensor<5xi64> -> tensor<5x3xi64>
// CHECK: %[[ROW:.*]] = graph.reshape %[[ROWS]] : tensor<5x3xi64> -> tensor<15xi64>
// CHECK: %[[FLAT:.*]] = graph.reshape %x : tensor<5x6xf32> -> tensor<30xf32>
// CHECK: %[[Y:.*]] = graph.gather %[[FLAT]], %{{.*}} {axis = 0 : i64} : (tensor<30xf32>, tensor<15xi64>) -> tensor<15xf32>
// CHECK: graph.reshape %[[Y]] : tensor<15xf32> -> tensor<5x3xf32>
func.func @take_along(%x: tensor<5x6xf32>, %i: tensor<5x3x1xi32>) -> tensor<5x3xf32> {
  %0 = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<5x6xf32>, tensor<5x3x1xi32>) -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

// sign: comparisons and selects (NaN, 0 and -0.0 are their own sign).
// CHECK-LABEL: func.func @sign(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: %0 = graph.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %1 = graph.broadcast %0 {dims = array<i64>} : tensor<f32> -> tensor<4xf32>
// CHECK-NEXT: %2 = graph.compare lt, %x, %1 : tensor<4xf32>
// CHECK-NEXT: %3 = graph.constant dense<-1.000000e+00> : tensor<f32>
// CHECK-NEXT: %4 = graph.broadcast %3 {dims = array<i64>} : tensor<f32> -> tensor<4xf32>
// CHECK-NEXT: %5 = graph.select %2, %4, %x : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT: %6 = graph.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %7 = graph.broadcast %6 {dims = array<i64>} : tensor<f32> -> tensor<4xf32>
// CHECK-NEXT: %8 = graph.compare gt, %x, %7 : tensor<4xf32>
// CHECK-NEXT: %9 = graph.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %10 = graph.broadcast %9 {dims = array<i64>} : tensor<f32> -> tensor<4xf32>
// CHECK-NEXT: %11 = graph.select %8, %10, %5 : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT: func.return %11 : tensor<4xf32>
func.func @sign(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.sign %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A convert to the same type disappears; to i1 it is x != 0. A rank-0 select
// predicate and clamp bounds are broadcast.
// CHECK-LABEL: func.func @compare_select(%x: tensor<4xf32>, %i: tensor<4xi32>, %p: tensor<i1>, %lo: tensor<f32>) -> (tensor<4xf32>, tensor<4xi1>, tensor<4xf32>) {
// CHECK-NEXT: %f = graph.cast %i : tensor<4xi32> -> tensor<4xf32>
// CHECK-NEXT: %lt = graph.compare lt, %x, %f : tensor<4xf32>
// CHECK-NEXT: %ge = graph.compare ge, %i, %i : tensor<4xi32>
// CHECK-NEXT: %s = graph.select %lt, %x, %f : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT: %0 = graph.broadcast %p {dims = array<i64>} : tensor<i1> -> tensor<4xi1>
// CHECK-NEXT: %t = graph.select %0, %s, %x : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT: %1 = graph.broadcast %lo {dims = array<i64>} : tensor<f32> -> tensor<4xf32>
// CHECK-NEXT: %2 = graph.broadcast %lo {dims = array<i64>} : tensor<f32> -> tensor<4xf32>
// CHECK-NEXT: %3 = graph.max %t, %1 : tensor<4xf32>
// CHECK-NEXT: %c = graph.min %3, %2 : tensor<4xf32>
// CHECK-NEXT: func.return %c, %ge, %s : tensor<4xf32>, tensor<4xi1>, tensor<4xf32>
func.func @compare_select(%x: tensor<4xf32>, %i: tensor<4xi32>, %p: tensor<i1>, %lo: tensor<f32>) -> (tensor<4xf32>, tensor<4xi1>, tensor<4xf32>) {
  %same = stablehlo.convert %x : tensor<4xf32>
  %f = stablehlo.convert %i : (tensor<4xi32>) -> tensor<4xf32>
  %b = stablehlo.convert %i : (tensor<4xi32>) -> tensor<4xi1>
  %lt = stablehlo.compare LT, %same, %f, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %ge = stablehlo.compare GE, %i, %i, SIGNED : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  %s = stablehlo.select %lt, %x, %f : tensor<4xi1>, tensor<4xf32>
  %t = stablehlo.select %p, %s, %x : (tensor<i1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = stablehlo.clamp %lo, %t, %lo : (tensor<f32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %c, %ge, %s : tensor<4xf32>, tensor<4xi1>, tensor<4xf32>
}

// -----

// A rank-0 constant stays; a splat of many elements is a broadcast rank-0 constant
// (hex floats are bit patterns: -inf); iota is a 1-D constant broadcast.
// CHECK-LABEL: func.func @constants() -> (tensor<f32>, tensor<1024x1024xf32>, tensor<2xf32>, tensor<4x8xi32>) {
// CHECK-NEXT: %s = graph.constant dense<0xff800000> : tensor<f32>
// CHECK-NEXT: %0 = graph.constant dense<2.500000e+00> : tensor<f32>
// CHECK-NEXT: %splat = graph.broadcast %0 {dims = array<i64>} : tensor<f32> -> tensor<1024x1024xf32>
// CHECK-NEXT: %d = graph.constant dense<[1.500000e+00, -2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: %1 = graph.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi32>
// CHECK-NEXT: %iota = graph.broadcast %1 {dims = array<i64: 1>} : tensor<8xi32> -> tensor<4x8xi32>
// CHECK-NEXT: func.return %s, %splat, %d, %iota : tensor<f32>, tensor<1024x1024xf32>, tensor<2xf32>, tensor<4x8xi32>
func.func @constants() -> (tensor<f32>, tensor<1024x1024xf32>, tensor<2xf32>, tensor<4x8xi32>) {
  %s = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %splat = stablehlo.constant dense<2.5> : tensor<1024x1024xf32>
  %d = stablehlo.constant dense<[1.5, -2.0]> : tensor<2xf32>
  %iota = stablehlo.iota dim = 1 : tensor<4x8xi32>
  return %s, %splat, %d, %iota : tensor<f32>, tensor<1024x1024xf32>, tensor<2xf32>, tensor<4x8xi32>
}

// -----

// broadcast_in_dim is graph.broadcast; non-increasing dims transpose first.
// CHECK-LABEL: func.func @broadcasts(%x: tensor<8xf32>, %m: tensor<3x8xf32>) -> (tensor<4x8xf32>, tensor<8x2x3xf32>) {
// CHECK-NEXT: %b = graph.broadcast %x {dims = array<i64: 1>} : tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %0 = graph.transpose %m {perm = array<i64: 1, 0>} : tensor<3x8xf32> -> tensor<8x3xf32>
// CHECK-NEXT: %t = graph.broadcast %0 {dims = array<i64: 0, 2>} : tensor<8x3xf32> -> tensor<8x2x3xf32>
// CHECK-NEXT: func.return %b, %t : tensor<4x8xf32>, tensor<8x2x3xf32>
func.func @broadcasts(%x: tensor<8xf32>, %m: tensor<3x8xf32>) -> (tensor<4x8xf32>, tensor<8x2x3xf32>) {
  %b = stablehlo.broadcast_in_dim %x, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
  %t = stablehlo.broadcast_in_dim %m, dims = [2, 0] : (tensor<3x8xf32>) -> tensor<8x2x3xf32>
  return %b, %t : tensor<4x8xf32>, tensor<8x2x3xf32>
}

// -----

// transpose, reshape, slice, concatenate one to one; pad takes its constant value
// through the convert; negative edge padding crops by a slice first.
// CHECK-LABEL: func.func @data_movement(%x: tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<32xf32>, tensor<2x4xf32>, tensor<3x6xf32>, tensor<3x8xf32>, tensor<4x16xf32>) {
// CHECK-NEXT: %t = graph.transpose %x {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %r = graph.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
// CHECK-NEXT: %s = graph.slice %x {start = array<i64: 1, 0>, stop = array<i64: 3, 8>, step = array<i64: 1, 2>} : tensor<4x8xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %c = graph.constant dense<0> : tensor<i32>
// CHECK-NEXT: %v = graph.cast %c : tensor<i32> -> tensor<f32>
// CHECK-NEXT: %p = graph.pad %s {low = array<i64: 1, 0>, high = array<i64: 0, 2>, value = 0.000000e+00 : f32} : tensor<2x4xf32> -> tensor<3x6xf32>
// CHECK-NEXT: %0 = graph.slice %x {start = array<i64: 1, 0>, stop = array<i64: 4, 7>, step = array<i64: 1, 1>} : tensor<4x8xf32> -> tensor<3x7xf32>
// CHECK-NEXT: %crop = graph.pad %0 {low = array<i64: 0, 1>, high = array<i64: 0, 0>, value = 0.000000e+00 : f32} : tensor<3x7xf32> -> tensor<3x8xf32>
// CHECK-NEXT: %cat = graph.concat %x, %x {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: func.return %t, %r, %s, %p, %crop, %cat : tensor<8x4xf32>, tensor<32xf32>, tensor<2x4xf32>, tensor<3x6xf32>, tensor<3x8xf32>, tensor<4x16xf32>
func.func @data_movement(%x: tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<32xf32>, tensor<2x4xf32>, tensor<3x6xf32>, tensor<3x8xf32>, tensor<4x16xf32>) {
  %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %r = stablehlo.reshape %x : (tensor<4x8xf32>) -> tensor<32xf32>
  %s = stablehlo.slice %x [1:3, 0:8:2] : (tensor<4x8xf32>) -> tensor<2x4xf32>
  %c = stablehlo.constant dense<0> : tensor<i32>
  %v = stablehlo.convert %c : (tensor<i32>) -> tensor<f32>
  %p = stablehlo.pad %s, %v, low = [1, 0], high = [0, 2], interior = [0, 0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<3x6xf32>
  %crop = stablehlo.pad %x, %v, low = [-1, 1], high = [0, -1], interior = [0, 0] : (tensor<4x8xf32>, tensor<f32>) -> tensor<3x8xf32>
  %cat = stablehlo.concatenate %x, %x, dim = 1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  return %t, %r, %s, %p, %crop, %cat : tensor<8x4xf32>, tensor<32xf32>, tensor<2x4xf32>, tensor<3x6xf32>, tensor<3x8xf32>, tensor<4x16xf32>
}

// -----

// popcnt on the bits as unsigned: sums of fields of 2, 4 and 8 bits (one byte: no product).
// CHECK-LABEL: func.func @popcnt(%x: tensor<4xi8>) -> tensor<4xi8> {
// CHECK-NEXT: %0 = graph.bitcast %x : tensor<4xi8> -> tensor<4xui8>
// CHECK: graph.shr %0, %{{.*}} : tensor<4xui8>
// CHECK: graph.bitand %{{.*}}, %{{.*}} : tensor<4xui8>
// CHECK: graph.sub %0, %{{.*}} : tensor<4xui8>
// CHECK-NOT: graph.mul
// CHECK: %[[R:.*]] = graph.bitcast %{{.*}} : tensor<4xui8> -> tensor<4xi8>
// CHECK-NEXT: func.return %[[R]] : tensor<4xi8>
func.func @popcnt(%x: tensor<4xi8>) -> tensor<4xi8> {
  %0 = stablehlo.popcnt %x : tensor<4xi8>
  return %0 : tensor<4xi8>
}

// -----

// lax.cond (stablehlo.case): both branches copied before it, the last one's results
// where the index is no other branch's.
// CHECK-LABEL: func.func @cond(%x: tensor<4xf32>, %i: tensor<i32>) -> tensor<4xf32> {
// CHECK-NEXT: %n = graph.neg %x : tensor<4xf32>
// CHECK-NEXT: %0 = graph.constant dense<0> : tensor<i32>
// CHECK-NEXT: %1 = graph.compare eq, %i, %0 : tensor<i32>
// CHECK-NEXT: %2 = graph.broadcast %1 {dims = array<i64>} : tensor<i1> -> tensor<4xi1>
// CHECK-NEXT: %r = graph.select %2, %n, %x : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT: func.return %r : tensor<4xf32>
func.func @cond(%x: tensor<4xf32>, %i: tensor<i32>) -> tensor<4xf32> {
  %r = "stablehlo.case"(%i) ({
    %n = stablehlo.negate %x : tensor<4xf32>
    stablehlo.return %n : tensor<4xf32>
  }, {
    stablehlo.return %x : tensor<4xf32>
  }) : (tensor<i32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// numpy.take with the indices' dimensions before the operand's (jnp.quantile's gathers):
// graph.gather, then a transpose into the gather's result order.
// CHECK-LABEL: func.func @take_indices_first(%x: tensor<4x5xf32>, %i: tensor<3x1xi32>) -> tensor<3x4xf32> {
// CHECK: %[[G:.*]] = graph.gather %x, %{{.*}} {axis = 1 : i64} : (tensor<4x5xf32>, tensor<3xi32>) -> tensor<4x3xf32>
// CHECK-NEXT: %[[T:.*]] = graph.transpose %[[G]] {perm = array<i64: 1, 0>} : tensor<4x3xf32> -> tensor<3x4xf32>
// CHECK-NEXT: func.return %[[T]] : tensor<3x4xf32>
func.func @take_indices_first(%x: tensor<4x5xf32>, %i: tensor<3x1xi32>) -> tensor<3x4xf32> {
  %0 = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [1], start_index_map = [1], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 4, 1>}> : (tensor<4x5xf32>, tensor<3x1xi32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// Interior padding (lax.pad's upsampling by zeros), one axis at a time: [n] as [n, 1]
// padded to [n, 1 + k], flattened, its last k dropped; then the edges.
// CHECK-LABEL: func.func @interior(%x: tensor<2x3xf32>) -> tensor<4x5xf32> {
// CHECK-NEXT: %c = graph.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %0 = graph.reshape %x : tensor<2x3xf32> -> tensor<2x1x3xf32>
// CHECK-NEXT: %1 = graph.pad %0 {low = array<i64: 0, 0, 0>, high = array<i64: 0, 1, 0>, value = 0.000000e+00 : f32} : tensor<2x1x3xf32> -> tensor<2x2x3xf32>
// CHECK-NEXT: %2 = graph.reshape %1 : tensor<2x2x3xf32> -> tensor<4x3xf32>
// CHECK-NEXT: %3 = graph.slice %2 {start = array<i64: 0, 0>, stop = array<i64: 3, 3>, step = array<i64: 1, 1>} : tensor<4x3xf32> -> tensor<3x3xf32>
// CHECK-NEXT: %4 = graph.reshape %3 : tensor<3x3xf32> -> tensor<3x3x1xf32>
// CHECK-NEXT: %5 = graph.pad %4 {low = array<i64: 0, 0, 0>, high = array<i64: 0, 0, 1>, value = 0.000000e+00 : f32} : tensor<3x3x1xf32> -> tensor<3x3x2xf32>
// CHECK-NEXT: %6 = graph.reshape %5 : tensor<3x3x2xf32> -> tensor<3x6xf32>
// CHECK-NEXT: %7 = graph.slice %6 {start = array<i64: 0, 0>, stop = array<i64: 3, 5>, step = array<i64: 1, 1>} : tensor<3x6xf32> -> tensor<3x5xf32>
// CHECK-NEXT: %8 = graph.pad %7 {low = array<i64: 1, 0>, high = array<i64: 0, 0>, value = 0.000000e+00 : f32} : tensor<3x5xf32> -> tensor<4x5xf32>
// CHECK-NEXT: func.return %8 : tensor<4x5xf32>
func.func @interior(%x: tensor<2x3xf32>) -> tensor<4x5xf32> {
  %c = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %0 = stablehlo.pad %x, %c, low = [1, 0], high = [0, 0], interior = [1, 1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

// reduce with an add/maximum/multiply body; an identity init disappears, another
// init is combined after the reduction.
// CHECK-LABEL: func.func @reductions(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<f32>) {
// CHECK-NEXT: %zero = graph.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %ninf = graph.constant dense<0xff800000> : tensor<f32>
// CHECK-NEXT: %one = graph.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %sum = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<4x8xf32> -> tensor<4xf32>
// CHECK-NEXT: %max = graph.reduce_max %x {axes = array<i64: 0>} : tensor<4x8xf32> -> tensor<8xf32>
// CHECK-NEXT: %0 = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<4x8xf32> -> tensor<4xf32>
// CHECK-NEXT: %1 = graph.broadcast %one {dims = array<i64>} : tensor<f32> -> tensor<4xf32>
// CHECK-NEXT: %plus1 = graph.add %0, %1 : tensor<4xf32>
// CHECK-NEXT: %prod = graph.reduce_prod %x {axes = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<f32>
// CHECK-NEXT: func.return %sum, %max, %plus1, %prod : tensor<4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<f32>
func.func @reductions(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<f32>) {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %one = stablehlo.constant dense<1.000000e+00> : tensor<f32>
  %sum = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %max = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [0] : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>
  %plus1 = stablehlo.reduce(%x init: %one) across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %s = stablehlo.add %b, %a : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }
  %prod = stablehlo.reduce(%x init: %one) applies stablehlo.multiply across dimensions = [0, 1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<f32>
  return %sum, %max, %plus1, %prod : tensor<4xf32>, tensor<8xf32>, tensor<4xf32>, tensor<f32>
}

// -----

// reduce of two inputs (argmax): a tree of body evaluations along the axis, the
// elements at even positions (lhs) against the next ones (rhs), the last of an odd
// length carried over by a concat; then the init values as lhs, once.
// CHECK-LABEL: func.func @argmax(%x: tensor<2x3xf32>, %i: tensor<2x3xi32>) -> (tensor<2xf32>, tensor<2xi32>) {
// CHECK-NEXT: %ninf = graph.constant dense<0xff800000> : tensor<f32>
// CHECK-NEXT: %c0 = graph.constant dense<0> : tensor<i32>
// CHECK-NEXT: %0 = graph.slice %x {start = array<i64: 0, 0>, stop = array<i64: 2, 2>, step = array<i64: 1, 2>} : tensor<2x3xf32> -> tensor<2x1xf32>
// CHECK-NEXT: %1 = graph.slice %i {start = array<i64: 0, 0>, stop = array<i64: 2, 2>, step = array<i64: 1, 2>} : tensor<2x3xi32> -> tensor<2x1xi32>
// CHECK-NEXT: %2 = graph.slice %x {start = array<i64: 0, 1>, stop = array<i64: 2, 3>, step = array<i64: 1, 2>} : tensor<2x3xf32> -> tensor<2x1xf32>
// CHECK-NEXT: %3 = graph.slice %i {start = array<i64: 0, 1>, stop = array<i64: 2, 3>, step = array<i64: 1, 2>} : tensor<2x3xi32> -> tensor<2x1xi32>
// CHECK-NEXT: %4 = graph.compare ge, %0, %2 : tensor<2x1xf32>
// CHECK-NEXT: %5 = graph.select %4, %0, %2 : tensor<2x1xi1>, tensor<2x1xf32>
// CHECK-NEXT: %6 = graph.select %4, %1, %3 : tensor<2x1xi1>, tensor<2x1xi32>
// CHECK-NEXT: %7 = graph.slice %x {start = array<i64: 0, 2>, stop = array<i64: 2, 3>, step = array<i64: 1, 1>} : tensor<2x3xf32> -> tensor<2x1xf32>
// CHECK-NEXT: %8 = graph.concat %5, %7 {axis = 1 : i64} : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x2xf32>
// CHECK-NEXT: %9 = graph.slice %i {start = array<i64: 0, 2>, stop = array<i64: 2, 3>, step = array<i64: 1, 1>} : tensor<2x3xi32> -> tensor<2x1xi32>
// CHECK-NEXT: %10 = graph.concat %6, %9 {axis = 1 : i64} : (tensor<2x1xi32>, tensor<2x1xi32>) -> tensor<2x2xi32>
// CHECK-NEXT: %11 = graph.slice %8 {start = array<i64: 0, 0>, stop = array<i64: 2, 1>, step = array<i64: 1, 2>} : tensor<2x2xf32> -> tensor<2x1xf32>
// CHECK-NEXT: %12 = graph.slice %10 {start = array<i64: 0, 0>, stop = array<i64: 2, 1>, step = array<i64: 1, 2>} : tensor<2x2xi32> -> tensor<2x1xi32>
// CHECK-NEXT: %13 = graph.slice %8 {start = array<i64: 0, 1>, stop = array<i64: 2, 2>, step = array<i64: 1, 2>} : tensor<2x2xf32> -> tensor<2x1xf32>
// CHECK-NEXT: %14 = graph.slice %10 {start = array<i64: 0, 1>, stop = array<i64: 2, 2>, step = array<i64: 1, 2>} : tensor<2x2xi32> -> tensor<2x1xi32>
// CHECK-NEXT: %15 = graph.compare ge, %11, %13 : tensor<2x1xf32>
// CHECK-NEXT: %16 = graph.select %15, %11, %13 : tensor<2x1xi1>, tensor<2x1xf32>
// CHECK-NEXT: %17 = graph.select %15, %12, %14 : tensor<2x1xi1>, tensor<2x1xi32>
// CHECK-NEXT: %18 = graph.reshape %16 : tensor<2x1xf32> -> tensor<2xf32>
// CHECK-NEXT: %19 = graph.reshape %17 : tensor<2x1xi32> -> tensor<2xi32>
// CHECK-NEXT: %20 = graph.broadcast %ninf {dims = array<i64>} : tensor<f32> -> tensor<2xf32>
// CHECK-NEXT: %21 = graph.broadcast %c0 {dims = array<i64>} : tensor<i32> -> tensor<2xi32>
// CHECK-NEXT: %22 = graph.compare ge, %20, %18 : tensor<2xf32>
// CHECK-NEXT: %23 = graph.select %22, %20, %18 : tensor<2xi1>, tensor<2xf32>
// CHECK-NEXT: %24 = graph.select %22, %21, %19 : tensor<2xi1>, tensor<2xi32>
// CHECK-NEXT: func.return %23, %24 : tensor<2xf32>, tensor<2xi32>
func.func @argmax(%x: tensor<2x3xf32>, %i: tensor<2x3xi32>) -> (tensor<2xf32>, tensor<2xi32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %1:2 = stablehlo.reduce(%x init: %ninf), (%i init: %c0) across dimensions = [1] : (tensor<2x3xf32>, tensor<2x3xi32>, tensor<f32>, tensor<i32>) -> (tensor<2xf32>, tensor<2xi32>)
   reducer(%a: tensor<f32>, %b: tensor<f32>) (%ia: tensor<i32>, %ib: tensor<i32>) {
    %ge = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %v = stablehlo.select %ge, %a, %b : tensor<i1>, tensor<f32>
    %j = stablehlo.select %ge, %ia, %ib : tensor<i1>, tensor<i32>
    stablehlo.return %v, %j : tensor<f32>, tensor<i32>
  }
  return %1#0, %1#1 : tensor<2xf32>, tensor<2xi32>
}

// -----

// dot_general: matmul; batched q @ k^T transposes k; a matrix-vector product
// reshapes the vector to a column.
// CHECK-LABEL: func.func @dot_general(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %q: tensor<2x4x16xf32>, %k: tensor<2x5x16xf32>) -> (tensor<4x3xf32>, tensor<2x4x5xf32>, tensor<4xf32>) {
// CHECK-NEXT: %mm = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %0 = graph.transpose %k {perm = array<i64: 0, 2, 1>} : tensor<2x5x16xf32> -> tensor<2x16x5xf32>
// CHECK-NEXT: %qk = graph.batch_matmul %q, %0 : (tensor<2x4x16xf32>, tensor<2x16x5xf32>) -> tensor<2x4x5xf32>
// CHECK-NEXT: %v = graph.slice %b {start = array<i64: 0, 0>, stop = array<i64: 8, 1>, step = array<i64: 1, 1>} : tensor<8x3xf32> -> tensor<8x1xf32>
// CHECK-NEXT: %vec = graph.reshape %v : tensor<8x1xf32> -> tensor<8xf32>
// CHECK-NEXT: %1 = graph.reshape %vec : tensor<8xf32> -> tensor<8x1xf32>
// CHECK-NEXT: %2 = graph.matmul %a, %1 : (tensor<4x8xf32>, tensor<8x1xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %mv = graph.reshape %2 : tensor<4x1xf32> -> tensor<4xf32>
// CHECK-NEXT: func.return %mm, %qk, %mv : tensor<4x3xf32>, tensor<2x4x5xf32>, tensor<4xf32>
func.func @dot_general(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>, %q: tensor<2x4x16xf32>, %k: tensor<2x5x16xf32>) -> (tensor<4x3xf32>, tensor<2x4x5xf32>, tensor<4xf32>) {
  %mm = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %qk = stablehlo.dot_general %q, %k, batching_dims = [0] x [0], contracting_dims = [2] x [2] : (tensor<2x4x16xf32>, tensor<2x5x16xf32>) -> tensor<2x4x5xf32>
  %v = stablehlo.slice %b [0:8, 0:1] : (tensor<8x3xf32>) -> tensor<8x1xf32>
  %vec = stablehlo.reshape %v : (tensor<8x1xf32>) -> tensor<8xf32>
  %mv = stablehlo.dot_general %a, %vec, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4xf32>
  return %mm, %qk, %mv : tensor<4x3xf32>, tensor<2x4x5xf32>, tensor<4xf32>
}

// -----

// convolution: NCHW/OIHW directly; NHWC/HWIO (here depthwise) through transposes.
// CHECK-LABEL: func.func @convolution(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %xh: tensor<1x8x8x4xf32>, %wh: tensor<3x3x1x4xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x8x8x4xf32>) {
// CHECK-NEXT: %y = graph.conv2d %x, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT: %0 = graph.transpose %xh {perm = array<i64: 0, 3, 1, 2>} : tensor<1x8x8x4xf32> -> tensor<1x4x8x8xf32>
// CHECK-NEXT: %1 = graph.transpose %wh {perm = array<i64: 3, 2, 0, 1>} : tensor<3x3x1x4xf32> -> tensor<4x1x3x3xf32>
// CHECK-NEXT: %2 = graph.conv2d %0, %1 {pads = array<i64: 1, 1, 1, 1>, groups = 4 : i64} : (tensor<1x4x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x8x8xf32>
// CHECK-NEXT: %z = graph.transpose %2 {perm = array<i64: 0, 2, 3, 1>} : tensor<1x4x8x8xf32> -> tensor<1x8x8x4xf32>
// CHECK-NEXT: func.return %y, %z : tensor<1x4x4x4xf32>, tensor<1x8x8x4xf32>
func.func @convolution(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %xh: tensor<1x8x8x4xf32>, %wh: tensor<3x3x1x4xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x8x8x4xf32>) {
  %y = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [2, 2], pad = [[1, 1], [1, 1]], rhs_dilate = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
  %z = stablehlo.convolution(%xh, %wh) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 4 : i64} : (tensor<1x8x8x4xf32>, tensor<3x3x1x4xf32>) -> tensor<1x8x8x4xf32>
  return %y, %z : tensor<1x4x4x4xf32>, tensor<1x8x8x4xf32>
}

// -----

// A 1-D convolution (jnp.convolve) is a 2-D one of height 1.
// CHECK-LABEL: func.func @conv1d
// CHECK-NEXT: %[[X:.*]] = graph.reshape %x : tensor<1x3x8xf32> -> tensor<1x3x1x8xf32>
// CHECK-NEXT: %[[W:.*]] = graph.reshape %w : tensor<4x3x3xf32> -> tensor<4x3x1x3xf32>
// CHECK-NEXT: %[[Y:.*]] = graph.conv2d %[[X]], %[[W]] {pads = array<i64: 0, 1, 0, 1>} : (tensor<1x3x1x8xf32>, tensor<4x3x1x3xf32>) -> tensor<1x4x1x8xf32>
// CHECK-NEXT: graph.reshape %[[Y]] : tensor<1x4x1x8xf32> -> tensor<1x4x8xf32>
func.func @conv1d(%x: tensor<1x3x8xf32>, %w: tensor<4x3x3xf32>) -> tensor<1x4x8xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {pad = [[1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x3x8xf32>, tensor<4x3x3xf32>) -> tensor<1x4x8xf32>
  return %0 : tensor<1x4x8xf32>
}

// -----

// A 3-D convolution: the 3 depth taps (slices) move into the channels, the 2 output
// depths into the batch; one 2-D convolution.
// CHECK-LABEL: func.func @conv3d
// CHECK-COUNT-3: graph.slice %x
// CHECK: graph.concat
// CHECK: %[[X:.*]] = graph.reshape %{{.*}} : tensor<1x2x1x3x2x5x6xf32> -> tensor<2x6x5x6xf32>
// CHECK: %[[W:.*]] = graph.reshape %{{.*}} : tensor<3x3x2x3x3xf32> -> tensor<3x6x3x3xf32>
// CHECK: %[[Y:.*]] = graph.conv2d %[[X]], %[[W]] : (tensor<2x6x5x6xf32>, tensor<3x6x3x3xf32>) -> tensor<2x3x3x4xf32>
// CHECK: graph.transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3, 4>} : tensor<1x2x3x3x4xf32> -> tensor<1x3x2x3x4xf32>
func.func @conv3d(%x: tensor<1x2x4x5x6xf32>, %w: tensor<3x2x3x3x3xf32>) -> tensor<1x3x2x3x4xf32> {
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1, 2]x[o, i, 0, 1, 2]->[b, f, 0, 1, 2] {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x2x4x5x6xf32>, tensor<3x2x3x3x3xf32>) -> tensor<1x3x2x3x4xf32>
  return %0 : tensor<1x3x2x3x4xf32>
}

// -----

// reverse: a graph.gather per reversed dimension at constant positions n-1..0 (a
// dimension of size 1 is left alone); chlo.square is x * x.
// CHECK-LABEL: func.func @reverse_square(%x: tensor<6x7xf32>, %v: tensor<1x5xi32>) -> (tensor<6x7xf32>, tensor<1x5xi32>, tensor<6x7xf32>) {
// CHECK-NEXT: %0 = graph.constant dense<[5, 4, 3, 2, 1, 0]> : tensor<6xi64>
// CHECK-NEXT: %1 = graph.gather %x, %0 {axis = 0 : i64} : (tensor<6x7xf32>, tensor<6xi64>) -> tensor<6x7xf32>
// CHECK-NEXT: %2 = graph.constant dense<[6, 5, 4, 3, 2, 1, 0]> : tensor<7xi64>
// CHECK-NEXT: %r = graph.gather %1, %2 {axis = 1 : i64} : (tensor<6x7xf32>, tensor<7xi64>) -> tensor<6x7xf32>
// CHECK-NEXT: %3 = graph.constant dense<[4, 3, 2, 1, 0]> : tensor<5xi64>
// CHECK-NEXT: %rv = graph.gather %v, %3 {axis = 1 : i64} : (tensor<1x5xi32>, tensor<5xi64>) -> tensor<1x5xi32>
// CHECK-NEXT: %sq = graph.mul %x, %x : tensor<6x7xf32>
// CHECK-NEXT: func.return %r, %rv, %sq : tensor<6x7xf32>, tensor<1x5xi32>, tensor<6x7xf32>
func.func @reverse_square(%x: tensor<6x7xf32>, %v: tensor<1x5xi32>) -> (tensor<6x7xf32>, tensor<1x5xi32>, tensor<6x7xf32>) {
  %r = stablehlo.reverse %x, dims = [0, 1] : tensor<6x7xf32>
  %rv = stablehlo.reverse %v, dims = [0, 1] : tensor<1x5xi32>
  %sq = chlo.square %x : tensor<6x7xf32> -> tensor<6x7xf32>
  return %r, %rv, %sq : tensor<6x7xf32>, tensor<1x5xi32>, tensor<6x7xf32>
}

// -----

// reduce_window as jax prints it (generic form): the input padded with the init value,
// then one axis at a time, the strided slice at each window offset combined by the
// body's op: 3 + 3 slices for a 3x3 max pool (SAME, strides 1x2). Absent properties
// are strides and dilations 1, padding 0 (a 2x2 sum pool, stride 2).
// CHECK-LABEL: func.func @pools(%x: tensor<6x7xf32>) -> (tensor<6x4xf32>, tensor<3x3xf32>) {
// CHECK-NEXT: %ninf = graph.constant dense<0xff800000> : tensor<f32>
// CHECK-NEXT: %0 = graph.pad %x {low = array<i64: 1, 1>, high = array<i64: 1, 1>, value = 0xff800000 : f32} : tensor<6x7xf32> -> tensor<8x9xf32>
// CHECK-NEXT: %1 = graph.slice %0 {start = array<i64: 0, 0>, stop = array<i64: 6, 9>, step = array<i64: 1, 1>} : tensor<8x9xf32> -> tensor<6x9xf32>
// CHECK-NEXT: %2 = graph.slice %0 {start = array<i64: 1, 0>, stop = array<i64: 7, 9>, step = array<i64: 1, 1>} : tensor<8x9xf32> -> tensor<6x9xf32>
// CHECK-NEXT: %3 = graph.max %1, %2 : tensor<6x9xf32>
// CHECK-NEXT: %4 = graph.slice %0 {start = array<i64: 2, 0>, stop = array<i64: 8, 9>, step = array<i64: 1, 1>} : tensor<8x9xf32> -> tensor<6x9xf32>
// CHECK-NEXT: %5 = graph.max %3, %4 : tensor<6x9xf32>
// CHECK-NEXT: %6 = graph.slice %5 {start = array<i64: 0, 0>, stop = array<i64: 6, 7>, step = array<i64: 1, 2>} : tensor<6x9xf32> -> tensor<6x4xf32>
// CHECK-NEXT: %7 = graph.slice %5 {start = array<i64: 0, 1>, stop = array<i64: 6, 8>, step = array<i64: 1, 2>} : tensor<6x9xf32> -> tensor<6x4xf32>
// CHECK-NEXT: %8 = graph.max %6, %7 : tensor<6x4xf32>
// CHECK-NEXT: %9 = graph.slice %5 {start = array<i64: 0, 2>, stop = array<i64: 6, 9>, step = array<i64: 1, 2>} : tensor<6x9xf32> -> tensor<6x4xf32>
// CHECK-NEXT: %max = graph.max %8, %9 : tensor<6x4xf32>
// CHECK-NEXT: %zero = graph.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %10 = graph.slice %x {start = array<i64: 0, 0>, stop = array<i64: 5, 7>, step = array<i64: 2, 1>} : tensor<6x7xf32> -> tensor<3x7xf32>
// CHECK-NEXT: %11 = graph.slice %x {start = array<i64: 1, 0>, stop = array<i64: 6, 7>, step = array<i64: 2, 1>} : tensor<6x7xf32> -> tensor<3x7xf32>
// CHECK-NEXT: %12 = graph.add %10, %11 : tensor<3x7xf32>
// CHECK-NEXT: %13 = graph.slice %12 {start = array<i64: 0, 0>, stop = array<i64: 3, 5>, step = array<i64: 1, 2>} : tensor<3x7xf32> -> tensor<3x3xf32>
// CHECK-NEXT: %14 = graph.slice %12 {start = array<i64: 0, 1>, stop = array<i64: 3, 6>, step = array<i64: 1, 2>} : tensor<3x7xf32> -> tensor<3x3xf32>
// CHECK-NEXT: %sum = graph.add %13, %14 : tensor<3x3xf32>
// CHECK-NEXT: func.return %max, %sum : tensor<6x4xf32>, tensor<3x3xf32>
func.func @pools(%x: tensor<6x7xf32>) -> (tensor<6x4xf32>, tensor<3x3xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %max = "stablehlo.reduce_window"(%x, %ninf) <{base_dilations = array<i64: 1, 1>, padding = dense<1> : tensor<2x2xi64>, window_dilations = array<i64: 1, 1>, window_dimensions = array<i64: 3, 3>, window_strides = array<i64: 1, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<6x7xf32>, tensor<f32>) -> tensor<6x4xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %sum = "stablehlo.reduce_window"(%x, %zero) <{window_dimensions = array<i64: 2, 2>, window_strides = array<i64: 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<6x7xf32>, tensor<f32>) -> tensor<3x3xf32>
  return %max, %sum : tensor<6x4xf32>, tensor<3x3xf32>
}

// -----

// An init that is not the body's identity is combined once at the end (a max with 0
// pads with 0 as well); a window dilation spaces the offsets.
// CHECK-LABEL: func.func @window_init_dilation(%x: tensor<4x5xi32>, %y: tensor<6x7xf32>) -> (tensor<4x5xi32>, tensor<4x6xf32>) {
// CHECK-NEXT: %c0 = graph.constant dense<0> : tensor<i32>
// CHECK-NEXT: %0 = graph.pad %x {low = array<i64: 1, 0>, high = array<i64: 0, 0>, value = 0 : i32} : tensor<4x5xi32> -> tensor<5x5xi32>
// CHECK-NEXT: %1 = graph.slice %0 {start = array<i64: 0, 0>, stop = array<i64: 4, 5>, step = array<i64: 1, 1>} : tensor<5x5xi32> -> tensor<4x5xi32>
// CHECK-NEXT: %2 = graph.slice %0 {start = array<i64: 1, 0>, stop = array<i64: 5, 5>, step = array<i64: 1, 1>} : tensor<5x5xi32> -> tensor<4x5xi32>
// CHECK-NEXT: %3 = graph.max %1, %2 : tensor<4x5xi32>
// CHECK-NEXT: %4 = graph.broadcast %c0 {dims = array<i64>} : tensor<i32> -> tensor<4x5xi32>
// CHECK-NEXT: %relu = graph.max %3, %4 : tensor<4x5xi32>
// CHECK-NEXT: %zero = graph.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %5 = graph.slice %y {start = array<i64: 0, 0>, stop = array<i64: 4, 7>, step = array<i64: 1, 1>} : tensor<6x7xf32> -> tensor<4x7xf32>
// CHECK-NEXT: %6 = graph.slice %y {start = array<i64: 2, 0>, stop = array<i64: 6, 7>, step = array<i64: 1, 1>} : tensor<6x7xf32> -> tensor<4x7xf32>
// CHECK-NEXT: %7 = graph.add %5, %6 : tensor<4x7xf32>
// CHECK-NEXT: %8 = graph.slice %7 {start = array<i64: 0, 0>, stop = array<i64: 4, 6>, step = array<i64: 1, 1>} : tensor<4x7xf32> -> tensor<4x6xf32>
// CHECK-NEXT: %9 = graph.slice %7 {start = array<i64: 0, 1>, stop = array<i64: 4, 7>, step = array<i64: 1, 1>} : tensor<4x7xf32> -> tensor<4x6xf32>
// CHECK-NEXT: %dil = graph.add %8, %9 : tensor<4x6xf32>
// CHECK-NEXT: func.return %relu, %dil : tensor<4x5xi32>, tensor<4x6xf32>
func.func @window_init_dilation(%x: tensor<4x5xi32>, %y: tensor<6x7xf32>) -> (tensor<4x5xi32>, tensor<4x6xf32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %relu = "stablehlo.reduce_window"(%x, %c0) <{padding = dense<[[1, 0], [0, 0]]> : tensor<2x2xi64>, window_dimensions = array<i64: 2, 1>}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %m = stablehlo.maximum %a, %b : tensor<i32>
    stablehlo.return %m : tensor<i32>
  }) : (tensor<4x5xi32>, tensor<i32>) -> tensor<4x5xi32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %dil = "stablehlo.reduce_window"(%y, %zero) <{window_dilations = array<i64: 2, 1>, window_dimensions = array<i64: 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<6x7xf32>, tensor<f32>) -> tensor<4x6xf32>
  return %relu, %dil : tensor<4x5xi32>, tensor<4x6xf32>
}

// -----

// jax's cumsum: a window of the whole axis padded by (n - 1, 0). Up to 64 offsets it
// is slices; beyond, a product with a constant triangular 0/1 matrix (the padding is
// left out of the matrix's rows), the axis moved last around it.
// CHECK-LABEL: func.func @cumsum(%x: tensor<2x4xf32>, %y: tensor<70x2xi32>) -> (tensor<2x4xf32>, tensor<70x2xi32>) {
// CHECK-NEXT: %zero = graph.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %0 = graph.pad %x {low = array<i64: 0, 3>, high = array<i64: 0, 0>, value = 0.000000e+00 : f32} : tensor<2x4xf32> -> tensor<2x7xf32>
// CHECK-NEXT: %1 = graph.slice %0 {start = array<i64: 0, 0>, stop = array<i64: 2, 4>, step = array<i64: 1, 1>} : tensor<2x7xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %2 = graph.slice %0 {start = array<i64: 0, 1>, stop = array<i64: 2, 5>, step = array<i64: 1, 1>} : tensor<2x7xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %3 = graph.add %1, %2 : tensor<2x4xf32>
// CHECK-NEXT: %4 = graph.slice %0 {start = array<i64: 0, 2>, stop = array<i64: 2, 6>, step = array<i64: 1, 1>} : tensor<2x7xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %5 = graph.add %3, %4 : tensor<2x4xf32>
// CHECK-NEXT: %6 = graph.slice %0 {start = array<i64: 0, 3>, stop = array<i64: 2, 7>, step = array<i64: 1, 1>} : tensor<2x7xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %short = graph.add %5, %6 : tensor<2x4xf32>
// CHECK-NEXT: %c0 = graph.constant dense<0> : tensor<i32>
// CHECK-NEXT: %7 = graph.transpose %y {perm = array<i64: 1, 0>} : tensor<70x2xi32> -> tensor<2x70xi32>
// CHECK-NEXT: %8 = graph.constant dense<"0x{{[0-9A-F]+}}"> : tensor<70x70xi32>
// CHECK-NEXT: %9 = graph.matmul %7, %8 : (tensor<2x70xi32>, tensor<70x70xi32>) -> tensor<2x70xi32>
// CHECK-NEXT: %long = graph.transpose %9 {perm = array<i64: 1, 0>} : tensor<2x70xi32> -> tensor<70x2xi32>
// CHECK-NEXT: func.return %short, %long : tensor<2x4xf32>, tensor<70x2xi32>
func.func @cumsum(%x: tensor<2x4xf32>, %y: tensor<70x2xi32>) -> (tensor<2x4xf32>, tensor<70x2xi32>) {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %short = "stablehlo.reduce_window"(%x, %zero) <{padding = dense<[[0, 0], [3, 0]]> : tensor<2x2xi64>, window_dimensions = array<i64: 1, 4>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %long = "stablehlo.reduce_window"(%y, %c0) <{base_dilations = array<i64: 1, 1>, padding = dense<[[69, 0], [0, 0]]> : tensor<2x2xi64>, window_dilations = array<i64: 1, 1>, window_dimensions = array<i64: 70, 1>, window_strides = array<i64: 1, 1>}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %s = stablehlo.add %a, %b : tensor<i32>
    stablehlo.return %s : tensor<i32>
  }) : (tensor<70x2xi32>, tensor<i32>) -> tensor<70x2xi32>
  return %short, %long : tensor<2x4xf32>, tensor<70x2xi32>
}

// -----

// Binary dilation: a window of bools with an or body is a max window of the bools as i8,
// then != 0 (no final combine: false is or's identity).
// CHECK-LABEL: func.func @dilate(%x: tensor<4x5xi1>) -> tensor<4x3xi1> {
// CHECK-NEXT: %false = graph.constant dense<false> : tensor<i1>
// CHECK-NEXT: %0 = graph.cast %x : tensor<4x5xi1> -> tensor<4x5xi8>
// CHECK-NEXT: %1 = graph.pad %0 {low = array<i64: 1, 0>, high = array<i64: 1, 0>, value = 0 : i8} : tensor<4x5xi8> -> tensor<6x5xi8>
// CHECK-COUNT-2: graph.max {{.*}} : tensor<4x5xi8>
// CHECK-COUNT-2: graph.max {{.*}} : tensor<4x3xi8>
// CHECK-NOT: graph.max
// CHECK: %[[R:.*]] = graph.compare ne, %{{.*}}, %{{.*}} : tensor<4x3xi8>
// CHECK-NEXT: func.return %[[R]] : tensor<4x3xi1>
func.func @dilate(%x: tensor<4x5xi1>) -> tensor<4x3xi1> {
  %false = stablehlo.constant dense<false> : tensor<i1>
  %0 = "stablehlo.reduce_window"(%x, %false) <{padding = dense<[[1, 1], [0, 0]]> : tensor<2x2xi64>, window_dimensions = array<i64: 3, 3>}> ({
  ^bb0(%a: tensor<i1>, %b: tensor<i1>):
    %s = stablehlo.or %a, %b : tensor<i1>
    stablehlo.return %s : tensor<i1>
  }) : (tensor<4x5xi1>, tensor<i1>) -> tensor<4x3xi1>
  return %0 : tensor<4x3xi1>
}

// -----

// gather in the form of numpy.take(x, indices, axis=d): the index vector dimension
// dropped, the indices clamped to [0, n-1] (cast to i64 when narrower than i32), then
// graph.gather along d.
// CHECK-LABEL: func.func @gather(%x: tensor<6x7xf32>, %i: tensor<3x1xi32>, %j: tensor<2x2x1xi64>, %k: tensor<3xi8>) -> (tensor<3x7xf32>, tensor<6x2x2xf32>, tensor<3x7xf32>) {
// CHECK-NEXT: %0 = graph.reshape %i : tensor<3x1xi32> -> tensor<3xi32>
// CHECK-NEXT: %1 = graph.constant dense<0> : tensor<i32>
// CHECK-NEXT: %2 = graph.broadcast %1 {dims = array<i64>} : tensor<i32> -> tensor<3xi32>
// CHECK-NEXT: %3 = graph.max %0, %2 : tensor<3xi32>
// CHECK-NEXT: %4 = graph.constant dense<5> : tensor<i32>
// CHECK-NEXT: %5 = graph.broadcast %4 {dims = array<i64>} : tensor<i32> -> tensor<3xi32>
// CHECK-NEXT: %6 = graph.min %3, %5 : tensor<3xi32>
// CHECK-NEXT: %rows = graph.gather %x, %6 {axis = 0 : i64} : (tensor<6x7xf32>, tensor<3xi32>) -> tensor<3x7xf32>
// CHECK-NEXT: %7 = graph.reshape %j : tensor<2x2x1xi64> -> tensor<2x2xi64>
// CHECK-NEXT: %8 = graph.constant dense<0> : tensor<i64>
// CHECK-NEXT: %9 = graph.broadcast %8 {dims = array<i64>} : tensor<i64> -> tensor<2x2xi64>
// CHECK-NEXT: %10 = graph.max %7, %9 : tensor<2x2xi64>
// CHECK-NEXT: %11 = graph.constant dense<6> : tensor<i64>
// CHECK-NEXT: %12 = graph.broadcast %11 {dims = array<i64>} : tensor<i64> -> tensor<2x2xi64>
// CHECK-NEXT: %13 = graph.min %10, %12 : tensor<2x2xi64>
// CHECK-NEXT: %cols = graph.gather %x, %13 {axis = 1 : i64} : (tensor<6x7xf32>, tensor<2x2xi64>) -> tensor<6x2x2xf32>
// CHECK-NEXT: %14 = graph.constant dense<0> : tensor<i8>
// CHECK-NEXT: %15 = graph.broadcast %14 {dims = array<i64>} : tensor<i8> -> tensor<3xi8>
// CHECK-NEXT: %16 = graph.max %k, %15 : tensor<3xi8>
// CHECK-NEXT: %17 = graph.constant dense<5> : tensor<i8>
// CHECK-NEXT: %18 = graph.broadcast %17 {dims = array<i64>} : tensor<i8> -> tensor<3xi8>
// CHECK-NEXT: %19 = graph.min %16, %18 : tensor<3xi8>
// CHECK-NEXT: %20 = graph.cast %19 : tensor<3xi8> -> tensor<3xi64>
// CHECK-NEXT: %narrow = graph.gather %x, %20 {axis = 0 : i64} : (tensor<6x7xf32>, tensor<3xi64>) -> tensor<3x7xf32>
// CHECK-NEXT: func.return %rows, %cols, %narrow : tensor<3x7xf32>, tensor<6x2x2xf32>, tensor<3x7xf32>
func.func @gather(%x: tensor<6x7xf32>, %i: tensor<3x1xi32>, %j: tensor<2x2x1xi64>, %k: tensor<3xi8>) -> (tensor<3x7xf32>, tensor<6x2x2xf32>, tensor<3x7xf32>) {
  %rows = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 7>}> : (tensor<6x7xf32>, tensor<3x1xi32>) -> tensor<3x7xf32>
  %cols = "stablehlo.gather"(%x, %j) <{dimension_numbers = #stablehlo.gather<offset_dims = [0], collapsed_slice_dims = [1], start_index_map = [1], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 6, 1>}> : (tensor<6x7xf32>, tensor<2x2x1xi64>) -> tensor<6x2x2xf32>
  %narrow = "stablehlo.gather"(%x, %k) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 7>}> : (tensor<6x7xf32>, tensor<3xi8>) -> tensor<3x7xf32>
  return %rows, %cols, %narrow : tensor<3x7xf32>, tensor<6x2x2xf32>, tensor<3x7xf32>
}

// -----

// TOTALORDER compares on floats: the bits as signed integers, all but the sign bit
// flipped where it is set (-NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN).
// CHECK-LABEL: func.func @total_order(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xi1> {
// CHECK-NEXT: %0 = graph.bitcast %x : tensor<4xf32> -> tensor<4xi32>
// CHECK-NEXT: %1 = graph.constant dense<0> : tensor<i32>
// CHECK-NEXT: %2 = graph.broadcast %1 {dims = array<i64>} : tensor<i32> -> tensor<4xi32>
// CHECK-NEXT: %3 = graph.compare lt, %0, %2 : tensor<4xi32>
// CHECK-NEXT: %4 = graph.constant dense<2147483647> : tensor<i32>
// CHECK-NEXT: %5 = graph.broadcast %4 {dims = array<i64>} : tensor<i32> -> tensor<4xi32>
// CHECK-NEXT: %6 = graph.bitxor %0, %5 : tensor<4xi32>
// CHECK-NEXT: %7 = graph.select %3, %6, %0 : tensor<4xi1>, tensor<4xi32>
// CHECK-NEXT: %8 = graph.bitcast %y : tensor<4xf32> -> tensor<4xi32>
// CHECK-NEXT: %9 = graph.constant dense<0> : tensor<i32>
// CHECK-NEXT: %10 = graph.broadcast %9 {dims = array<i64>} : tensor<i32> -> tensor<4xi32>
// CHECK-NEXT: %11 = graph.compare lt, %8, %10 : tensor<4xi32>
// CHECK-NEXT: %12 = graph.constant dense<2147483647> : tensor<i32>
// CHECK-NEXT: %13 = graph.broadcast %12 {dims = array<i64>} : tensor<i32> -> tensor<4xi32>
// CHECK-NEXT: %14 = graph.bitxor %8, %13 : tensor<4xi32>
// CHECK-NEXT: %15 = graph.select %11, %14, %8 : tensor<4xi1>, tensor<4xi32>
// CHECK-NEXT: %16 = graph.compare lt, %7, %15 : tensor<4xi32>
// CHECK-NEXT: func.return %16 : tensor<4xi1>
// CHECK-NEXT: }
func.func @total_order(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xi1> {
  %0 = stablehlo.compare LT, %x, %y, TOTALORDER : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// dynamic_slice: a graph.gather per dimension of a runtime start at start + 0..k-1,
// start clamped to [0, n - k] (no max for unsigned starts); constant starts (clamped
// at compile time) are one graph.slice; a dimension kept whole (k = n) is left as it is.
// CHECK-LABEL: func.func @dynamic_slice(%x: tensor<6x7xf32>, %i: tensor<i32>, %j: tensor<ui8>) -> (tensor<2x7xf32>, tensor<3x4xf32>, tensor<1x3xf32>) {
// CHECK-NEXT: %c = graph.constant dense<9> : tensor<i32>
// CHECK-NEXT: %0 = graph.constant dense<0> : tensor<i32>
// CHECK-NEXT: %1 = graph.max %i, %0 : tensor<i32>
// CHECK-NEXT: %2 = graph.constant dense<4> : tensor<i32>
// CHECK-NEXT: %3 = graph.min %1, %2 : tensor<i32>
// CHECK-NEXT: %4 = graph.cast %3 : tensor<i32> -> tensor<i64>
// CHECK-NEXT: %5 = graph.broadcast %4 {dims = array<i64>} : tensor<i64> -> tensor<2xi64>
// CHECK-NEXT: %6 = graph.constant dense<[0, 1]> : tensor<2xi64>
// CHECK-NEXT: %7 = graph.add %5, %6 : tensor<2xi64>
// CHECK-NEXT: %8 = graph.gather %x, %7 {axis = 0 : i64} : (tensor<6x7xf32>, tensor<2xi64>) -> tensor<2x7xf32>
// CHECK-NEXT: %9 = graph.slice %x {start = array<i64: 3, 3>, stop = array<i64: 6, 7>, step = array<i64: 1, 1>} : tensor<6x7xf32> -> tensor<3x4xf32>
// CHECK-NEXT: %10 = graph.constant dense<5> : tensor<ui8>
// CHECK-NEXT: %11 = graph.min %j, %10 : tensor<ui8>
// CHECK-NEXT: %12 = graph.cast %11 : tensor<ui8> -> tensor<i64>
// CHECK-NEXT: %13 = graph.broadcast %12 {dims = array<i64>} : tensor<i64> -> tensor<1xi64>
// CHECK-NEXT: %14 = graph.constant dense<0> : tensor<1xi64>
// CHECK-NEXT: %15 = graph.add %13, %14 : tensor<1xi64>
// CHECK-NEXT: %16 = graph.gather %x, %15 {axis = 0 : i64} : (tensor<6x7xf32>, tensor<1xi64>) -> tensor<1x7xf32>
// CHECK-NEXT: %17 = graph.constant dense<4> : tensor<ui8>
// CHECK-NEXT: %18 = graph.min %j, %17 : tensor<ui8>
// CHECK-NEXT: %19 = graph.cast %18 : tensor<ui8> -> tensor<i64>
// CHECK-NEXT: %20 = graph.broadcast %19 {dims = array<i64>} : tensor<i64> -> tensor<3xi64>
// CHECK-NEXT: %21 = graph.constant dense<[0, 1, 2]> : tensor<3xi64>
// CHECK-NEXT: %22 = graph.add %20, %21 : tensor<3xi64>
// CHECK-NEXT: %23 = graph.gather %16, %22 {axis = 1 : i64} : (tensor<1x7xf32>, tensor<3xi64>) -> tensor<1x3xf32>
// CHECK-NEXT: func.return %8, %9, %23 : tensor<2x7xf32>, tensor<3x4xf32>, tensor<1x3xf32>
// CHECK-NEXT: }
func.func @dynamic_slice(%x: tensor<6x7xf32>, %i: tensor<i32>, %j: tensor<ui8>) -> (tensor<2x7xf32>, tensor<3x4xf32>, tensor<1x3xf32>) {
  %c = stablehlo.constant dense<9> : tensor<i32>
  %0 = stablehlo.dynamic_slice %x, %i, %c, sizes = [2, 7] : (tensor<6x7xf32>, tensor<i32>, tensor<i32>) -> tensor<2x7xf32>
  %1 = stablehlo.dynamic_slice %x, %c, %c, sizes = [3, 4] : (tensor<6x7xf32>, tensor<i32>, tensor<i32>) -> tensor<3x4xf32>
  %2 = stablehlo.dynamic_slice %x, %j, %j, sizes = [1, 3] : (tensor<6x7xf32>, tensor<ui8>, tensor<ui8>) -> tensor<1x3xf32>
  return %0, %1, %2 : tensor<2x7xf32>, tensor<3x4xf32>, tensor<1x3xf32>
}

// -----

// dynamic_update_slice: the update gathered at p - start (start clamped to
// [0, n - k]) along each dimension it does not cover, selected where 0 <= p - start < k.
// CHECK-LABEL: func.func @dynamic_update_slice(%x: tensor<6x7xf32>, %u: tensor<2x7xf32>, %i: tensor<i32>) -> tensor<6x7xf32> {
// CHECK-NEXT: %0 = graph.constant dense<[0, 1, 2, 3, 4, 5]> : tensor<6xi64>
// CHECK-NEXT: %1 = graph.constant dense<0> : tensor<i32>
// CHECK-NEXT: %2 = graph.max %i, %1 : tensor<i32>
// CHECK-NEXT: %3 = graph.constant dense<4> : tensor<i32>
// CHECK-NEXT: %4 = graph.min %2, %3 : tensor<i32>
// CHECK-NEXT: %5 = graph.cast %4 : tensor<i32> -> tensor<i64>
// CHECK-NEXT: %6 = graph.broadcast %5 {dims = array<i64>} : tensor<i64> -> tensor<6xi64>
// CHECK-NEXT: %7 = graph.sub %0, %6 : tensor<6xi64>
// CHECK-NEXT: %8 = graph.gather %u, %7 {axis = 0 : i64} : (tensor<2x7xf32>, tensor<6xi64>) -> tensor<6x7xf32>
// CHECK-NEXT: %9 = graph.constant dense<0> : tensor<i64>
// CHECK-NEXT: %10 = graph.broadcast %9 {dims = array<i64>} : tensor<i64> -> tensor<6xi64>
// CHECK-NEXT: %11 = graph.compare ge, %7, %10 : tensor<6xi64>
// CHECK-NEXT: %12 = graph.constant dense<2> : tensor<i64>
// CHECK-NEXT: %13 = graph.broadcast %12 {dims = array<i64>} : tensor<i64> -> tensor<6xi64>
// CHECK-NEXT: %14 = graph.compare lt, %7, %13 : tensor<6xi64>
// CHECK-NEXT: %15 = graph.select %11, %14, %11 : tensor<6xi1>, tensor<6xi1>
// CHECK-NEXT: %16 = graph.broadcast %15 {dims = array<i64: 0>} : tensor<6xi1> -> tensor<6x7xi1>
// CHECK-NEXT: %17 = graph.select %16, %8, %x : tensor<6x7xi1>, tensor<6x7xf32>
// CHECK-NEXT: func.return %17 : tensor<6x7xf32>
// CHECK-NEXT: }
func.func @dynamic_update_slice(%x: tensor<6x7xf32>, %u: tensor<2x7xf32>, %i: tensor<i32>) -> tensor<6x7xf32> {
  %0 = stablehlo.dynamic_update_slice %x, %u, %i, %i : (tensor<6x7xf32>, tensor<2x7xf32>, tensor<i32>, tensor<i32>) -> tensor<6x7xf32>
  return %0 : tensor<6x7xf32>
}

// -----

// sort: ranks on pair tensors (j at the sorted axis d, i at d + 1): the comparator
// both ways, rank_i = #{j : less(j, i)} + #{j < i : not less(i, j)}, the permutation
// the first i of each rank (reduce_min), every operand gathered by it.
// CHECK-LABEL: func.func @sort(%x: tensor<2x3xi32>, %v: tensor<2x3xf32>) -> (tensor<2x3xi32>, tensor<2x3xf32>) {
// CHECK-NEXT: %0 = graph.broadcast %x {dims = array<i64: 0, 1>} : tensor<2x3xi32> -> tensor<2x3x3xi32>
// CHECK-NEXT: %1 = graph.broadcast %x {dims = array<i64: 0, 2>} : tensor<2x3xi32> -> tensor<2x3x3xi32>
// CHECK-NEXT: %2 = graph.compare lt, %0, %1 : tensor<2x3x3xi32>
// CHECK-NEXT: %3 = graph.compare lt, %1, %0 : tensor<2x3x3xi32>
// CHECK-NEXT: %4 = graph.constant dense<[0, 1, 2]> : tensor<3xi32>
// CHECK-NEXT: %5 = graph.broadcast %4 {dims = array<i64: 1>} : tensor<3xi32> -> tensor<2x3x3xi32>
// CHECK-NEXT: %6 = graph.broadcast %4 {dims = array<i64: 2>} : tensor<3xi32> -> tensor<2x3x3xi32>
// CHECK-NEXT: %7 = graph.compare lt, %5, %6 : tensor<2x3x3xi32>
// CHECK-NEXT: %8 = graph.constant dense<false> : tensor<i1>
// CHECK-NEXT: %9 = graph.broadcast %8 {dims = array<i64>} : tensor<i1> -> tensor<2x3x3xi1>
// CHECK-NEXT: %10 = graph.compare eq, %3, %9 : tensor<2x3x3xi1>
// CHECK-NEXT: %11 = graph.select %7, %10, %2 : tensor<2x3x3xi1>, tensor<2x3x3xi1>
// CHECK-NEXT: %12 = graph.cast %11 : tensor<2x3x3xi1> -> tensor<2x3x3xi32>
// CHECK-NEXT: %13 = graph.reduce_sum %12 {axes = array<i64: 1>} : tensor<2x3x3xi32> -> tensor<2x3xi32>
// CHECK-NEXT: %14 = graph.broadcast %13 {dims = array<i64: 0, 2>} : tensor<2x3xi32> -> tensor<2x3x3xi32>
// CHECK-NEXT: %15 = graph.compare eq, %14, %5 : tensor<2x3x3xi32>
// CHECK-NEXT: %16 = graph.constant dense<3> : tensor<i32>
// CHECK-NEXT: %17 = graph.broadcast %16 {dims = array<i64>} : tensor<i32> -> tensor<2x3x3xi32>
// CHECK-NEXT: %18 = graph.select %15, %6, %17 : tensor<2x3x3xi1>, tensor<2x3x3xi32>
// CHECK-NEXT: %19 = graph.reduce_min %18 {axes = array<i64: 2>} : tensor<2x3x3xi32> -> tensor<2x3xi32>
// CHECK-NEXT: %20 = graph.gather_elements %x, %19 {axis = 1 : i64} : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
// CHECK-NEXT: %21 = graph.gather_elements %v, %19 {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xi32>) -> tensor<2x3xf32>
// CHECK-NEXT: func.return %20, %21 : tensor<2x3xi32>, tensor<2x3xf32>
// CHECK-NEXT: }
func.func @sort(%x: tensor<2x3xi32>, %v: tensor<2x3xf32>) -> (tensor<2x3xi32>, tensor<2x3xf32>) {
  %0:2 = "stablehlo.sort"(%x, %v) <{dimension = 1 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>, %c: tensor<f32>, %d: tensor<f32>):
    %lt = stablehlo.compare LT, %a, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) : (tensor<2x3xi32>, tensor<2x3xf32>) -> (tensor<2x3xi32>, tensor<2x3xf32>)
  return %0#0, %0#1 : tensor<2x3xi32>, tensor<2x3xf32>
}

// -----

// and/or reductions of i1 (jnp.all, jnp.any, jnp.take's mask): min/max as i8.
// CHECK-LABEL: func.func @all_any(%p: tensor<4x8xi1>) -> (tensor<4xi1>, tensor<8xi1>) {
// CHECK-NEXT: %t = graph.constant dense<true> : tensor<i1>
// CHECK-NEXT: %f = graph.constant dense<false> : tensor<i1>
// CHECK-NEXT: %0 = graph.cast %p : tensor<4x8xi1> -> tensor<4x8xi8>
// CHECK-NEXT: %1 = graph.reduce_min %0 {axes = array<i64: 1>} : tensor<4x8xi8> -> tensor<4xi8>
// CHECK-NEXT: %2 = graph.constant dense<0> : tensor<i8>
// CHECK-NEXT: %3 = graph.broadcast %2 {dims = array<i64>} : tensor<i8> -> tensor<4xi8>
// CHECK-NEXT: %all = graph.compare ne, %1, %3 : tensor<4xi8>
// CHECK-NEXT: %4 = graph.cast %p : tensor<4x8xi1> -> tensor<4x8xi8>
// CHECK-NEXT: %5 = graph.reduce_max %4 {axes = array<i64: 0>} : tensor<4x8xi8> -> tensor<8xi8>
// CHECK-NEXT: %6 = graph.constant dense<0> : tensor<i8>
// CHECK-NEXT: %7 = graph.broadcast %6 {dims = array<i64>} : tensor<i8> -> tensor<8xi8>
// CHECK-NEXT: %any = graph.compare ne, %5, %7 : tensor<8xi8>
// CHECK-NEXT: func.return %all, %any : tensor<4xi1>, tensor<8xi1>
func.func @all_any(%p: tensor<4x8xi1>) -> (tensor<4xi1>, tensor<8xi1>) {
  %t = stablehlo.constant dense<true> : tensor<i1>
  %f = stablehlo.constant dense<false> : tensor<i1>
  %all = stablehlo.reduce(%p init: %t) applies stablehlo.and across dimensions = [1] : (tensor<4x8xi1>, tensor<i1>) -> tensor<4xi1>
  %any = stablehlo.reduce(%p init: %f) applies stablehlo.or across dimensions = [0] : (tensor<4x8xi1>, tensor<i1>) -> tensor<8xi1>
  return %all, %any : tensor<4xi1>, tensor<8xi1>
}

// -----

// jax's private helpers are inlined at every call and erased.
// CHECK-LABEL: func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: %cst = graph.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %0 = graph.broadcast %cst {dims = array<i64>} : tensor<f32> -> tensor<4xf32>
// CHECK-NEXT: %1 = graph.max %arg0, %0 : tensor<4xf32>
// CHECK-NEXT: %cst_1 = graph.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %2 = graph.broadcast %cst_1 {dims = array<i64>} : tensor<f32> -> tensor<4xf32>
// CHECK-NEXT: %3 = graph.max %1, %2 : tensor<4xf32>
// CHECK-NEXT: func.return %3 : tensor<4xf32>
// CHECK-NOT: func.func private @relu
module @jit_relu attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xf32> {jax.result_info = "result"}) {
    %0 = call @relu(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
    %1 = call @relu(%0) : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @relu(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}

// -----

// Must not transform: a module without stablehlo ops, its calls included.
// CHECK-LABEL: func.func @graph_only(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: %0 = func.call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: func.return %0 : tensor<4xf32>
// CHECK-NEXT: }
// CHECK-NEXT: func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: %0 = graph.exp %x : tensor<4xf32>
// CHECK-NEXT: func.return %0 : tensor<4xf32>
// CHECK-NEXT: }
func.func @graph_only(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = graph.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// Located errors: what the graph dialect cannot express.
func.func @expm1_of_integers(%x: tensor<4xi32>) -> tensor<4xi32> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.exponential_minus_one' on tensor<4xi32> is not supported: mlfuse computes it on floating-point tensors only
  %0 = stablehlo.exponential_minus_one %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @reduce_too_deep(%x: tensor<1048576x1048576xf32>, %z: tensor<f32>) -> tensor<f32> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.reduce' of 1048576x1048576 over dimensions [0, 1] is not supported: its body of 13 ops would be evaluated 41 times (at most 512 ops in all)
  %0 = stablehlo.reduce(%x init: %z) across dimensions = [0, 1] : (tensor<1048576x1048576xf32>, tensor<f32>) -> tensor<f32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %s = stablehlo.add %a, %b : tensor<f32>
    %n1 = stablehlo.negate %s : tensor<f32>
    %n2 = stablehlo.negate %n1 : tensor<f32>
    %n3 = stablehlo.negate %n2 : tensor<f32>
    %n4 = stablehlo.negate %n3 : tensor<f32>
    %n5 = stablehlo.negate %n4 : tensor<f32>
    %n6 = stablehlo.negate %n5 : tensor<f32>
    %n7 = stablehlo.negate %n6 : tensor<f32>
    %n8 = stablehlo.negate %n7 : tensor<f32>
    %n9 = stablehlo.negate %n8 : tensor<f32>
    %n10 = stablehlo.negate %n9 : tensor<f32>
    %n11 = stablehlo.negate %n10 : tensor<f32>
    %n12 = stablehlo.negate %n11 : tensor<f32>
    stablehlo.return %n12 : tensor<f32>
  }
  return %0 : tensor<f32>
}

// -----

// A body op the conversion cannot express: located at the op inside the body.
func.func @reduce_body(%x: tensor<4x8xi32>, %z: tensor<i32>) -> tensor<4xi32> {
  %0 = stablehlo.reduce(%x init: %z) across dimensions = [1] : (tensor<4x8xi32>, tensor<i32>) -> tensor<4xi32>
   reducer(%a: tensor<i32>, %b: tensor<i32>) {
    %s = stablehlo.add %a, %b : tensor<i32>
    // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:5: error: 'stablehlo.exponential' on {{.*}} is not supported: mlfuse computes it on floating-point tensors only
    %t = stablehlo.exponential %s : tensor<i32>
    stablehlo.return %t : tensor<i32>
  }
  return %0 : tensor<4xi32>
}

// -----

func.func @pad_value(%x: tensor<2xf32>, %v: tensor<f32>) -> tensor<3xf32> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.pad' with a padding value that is not a constant is not supported
  %0 = stablehlo.pad %x, %v, low = [1], high = [0], interior = [0] : (tensor<2xf32>, tensor<f32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @transposed_conv(%x: tensor<1x3x4x4xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x9x9xf32> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.convolution' with lhs_dilate [2, 2] (a transposed convolution) is not supported
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {pad = [[2, 2], [2, 2]], lhs_dilate = [2, 2]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x3x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x9x9xf32>
  return %0 : tensor<1x4x9x9xf32>
}

// -----

func.func @conv4d(%x: tensor<1x1x3x3x3x3xf32>, %w: tensor<1x1x1x1x1x1xf32>) -> tensor<1x1x3x3x3x3xf32> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.convolution' with 4 spatial dimensions is not supported (1-, 2- and 3-D convolutions are)
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1, 2, 3]x[o, i, 0, 1, 2, 3]->[b, f, 0, 1, 2, 3] {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x1x3x3x3x3xf32>, tensor<1x1x1x1x1x1xf32>) -> tensor<1x1x3x3x3x3xf32>
  return %0 : tensor<1x1x3x3x3x3xf32>
}

// -----

// A sort along more than 256 elements (it compares every pair).
func.func @sort_too_long(%x: tensor<2x257xf32>) -> tensor<2x257xf32> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.sort' along an axis of 257 elements is not supported (at most 256: it compares every pair)
  %0 = "stablehlo.sort"(%x) <{dimension = 1 : i64}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %lt = stablehlo.compare LT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) : (tensor<2x257xf32>) -> tensor<2x257xf32>
  return %0 : tensor<2x257xf32>
}

// -----

// A comparator op the conversion cannot express: located at the op inside the comparator.
func.func @sort_comparator(%x: tensor<2x5xi32>) -> tensor<2x5xi32> {
  %0 = "stablehlo.sort"(%x) <{dimension = 1 : i64}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:5: error: 'stablehlo.exponential' on {{.*}} is not supported: mlfuse computes it on floating-point tensors only
    %l = stablehlo.exponential %a : tensor<i32>
    %lt = stablehlo.compare LT, %l, %b, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) : (tensor<2x5xi32>) -> tensor<2x5xi32>
  return %0 : tensor<2x5xi32>
}

// -----

func.func @until(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.while' is not supported unless its trip count is known: a counter from a constant, compared less-than with a constant and stepped by 1 (lax.fori_loop)
  %r = stablehlo.while(%iterArg = %x) : tensor<4xf32>
   cond {
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.slice %iterArg [0:1] : (tensor<4xf32>) -> tensor<1xf32>
    %t = stablehlo.reshape %s : (tensor<1xf32>) -> tensor<f32>
    %gt = stablehlo.compare GT, %t, %z, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %gt : tensor<i1>
  } do {
    %h = stablehlo.multiply %iterArg, %iterArg : tensor<4xf32>
    stablehlo.return %h : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @scatter_rows(%x: tensor<6x5xf32>, %i: tensor<2x1xi32>, %v: tensor<2x5xf32>) -> tensor<6x5xf32> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.scatter' with update windows or batching dimensions is not supported (only scatters of single elements: x.at[i].add(v), bincount)
  %0 = "stablehlo.scatter"(%x, %i, %v) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<6x5xf32>, tensor<2x1xi32>, tensor<2x5xf32>) -> tensor<6x5xf32>
  return %0 : tensor<6x5xf32>
}

// -----

func.func @scatter_body(%x: tensor<8xf32>, %i: tensor<4x1xi32>, %v: tensor<4xf32>) -> tensor<8xf32> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.scatter' with an update_computation other than add, multiply, max, min or the new value is not supported
  %0 = "stablehlo.scatter"(%x, %i, %v) <{scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.subtract %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<8xf32>, tensor<4x1xi32>, tensor<4xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @bitcast_width(%x: tensor<4xf32>) -> tensor<4x4xui8> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.bitcast_convert' from tensor<4xf32> to tensor<4x4xui8> is not supported: only between element types of one width, not i1
  %0 = stablehlo.bitcast_convert %x : (tensor<4xf32>) -> tensor<4x4xui8>
  return %0 : tensor<4x4xui8>
}

// -----

func.func @int_exp(%x: tensor<4xi32>) -> tensor<4xi32> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.exponential' on tensor<4xi32> is not supported: mlfuse computes it on floating-point tensors only
  %0 = stablehlo.exponential %x : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @dynamic(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.exponential' on tensor<?x4xf32>: dynamic shapes are not supported (lower with concrete shapes)
  %0 = stablehlo.exponential %x : tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @i4(%x: tensor<4xi4>) -> tensor<4xi4> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.add' on tensor<4xi4>: element type i4 is not supported (expected f16, f32, f64, i1, i8, i16, i32, i64, ui8, ui16, ui32, ui64 or bf16)
  %0 = stablehlo.add %x, %x : tensor<4xi4>
  return %0 : tensor<4xi4>
}

// -----

func.func @recursive(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.negate %x : tensor<4xf32>
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: @recursive calls itself: recursive functions cannot be inlined
  %1 = call @recursive(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

func.func @window_base_dilation(%x: tensor<4x4xf32>) -> tensor<7x7xf32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.reduce_window' with base_dilations [2, 2] is not supported
  %0 = "stablehlo.reduce_window"(%x, %zero) <{base_dilations = array<i64: 2, 2>, window_dimensions = array<i64: 1, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<4x4xf32>, tensor<f32>) -> tensor<7x7xf32>
  return %0 : tensor<7x7xf32>
}

// -----

func.func @window_two_inputs(%x: tensor<4x4xf32>, %i: tensor<4x4xi32>) -> tensor<3x3xf32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.reduce_window' of 2 inputs at once is not supported
  %0:2 = "stablehlo.reduce_window"(%x, %i, %zero, %c0) <{window_dimensions = array<i64: 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %ia: tensor<i32>, %b: tensor<f32>, %ib: tensor<i32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    %t = stablehlo.add %ia, %ib : tensor<i32>
    stablehlo.return %s, %t : tensor<f32>, tensor<i32>
  }) : (tensor<4x4xf32>, tensor<4x4xi32>, tensor<f32>, tensor<i32>) -> (tensor<3x3xf32>, tensor<3x3xi32>)
  return %0#0 : tensor<3x3xf32>
}

// -----

func.func @window_init(%x: tensor<4x4xf32>, %init: tensor<f32>) -> tensor<3x3xf32> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.reduce_window' with an init value that is not a constant is not supported
  %0 = "stablehlo.reduce_window"(%x, %init) <{window_dimensions = array<i64: 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<4x4xf32>, tensor<f32>) -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

// StableHLO pads with the init value, XLA leaves the padding out: they differ for an
// add whose init is not 0.
func.func @window_padded_init(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %one = stablehlo.constant dense<1.500000e+00> : tensor<f32>
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.reduce_window' with padding and an init value (1.5) that is not the identity of its add/multiply body is not supported
  %0 = "stablehlo.reduce_window"(%x, %one) <{padding = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>, window_dimensions = array<i64: 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// A running max over 5000 elements would be 5000 slices.
func.func @window_too_many_taps(%x: tensor<1x5000xf32>) -> tensor<1x5000xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.reduce_window' with windows of 5000 slices in all is not supported (at most 4096)
  %0 = "stablehlo.reduce_window"(%x, %ninf) <{padding = dense<[[0, 0], [4999, 0]]> : tensor<2x2xi64>, window_dimensions = array<i64: 1, 5000>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<1x5000xf32>, tensor<f32>) -> tensor<1x5000xf32>
  return %0 : tensor<1x5000xf32>
}

// -----

func.func @window_body(%x: tensor<4x4xf32>) -> tensor<3x3xf32> {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.reduce_window' is supported only with a body that is one stablehlo.add, multiply, maximum or minimum of its arguments
  %0 = "stablehlo.reduce_window"(%x, %zero) <{window_dimensions = array<i64: 2, 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.subtract %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<4x4xf32>, tensor<f32>) -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

func.func @popcnt_of_floats(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.popcnt' on tensor<4xf32> is not supported (integers only)
  %0 = stablehlo.popcnt %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A gather of 2x3 patches at 2-D start indices is not numpy.take.
func.func @gather_patches(%x: tensor<6x7xf32>, %i: tensor<4x2xi32>) -> tensor<4x2x3xf32> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.gather' is supported only in the form of numpy.take(x, indices, axis=d) (jax's x[idx], x[:, idx], jnp.take): start_index_map = [d], collapsed_slice_dims = [d], slice_sizes the operand's shape with 1 at d, index vectors of size 1, no batching dimensions, offset_dims around the indices' dimensions
  %0 = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1, 2], start_index_map = [0, 1], index_vector_dim = 1>, slice_sizes = array<i64: 2, 3>}> : (tensor<6x7xf32>, tensor<4x2xi32>) -> tensor<4x2x3xf32>
  return %0 : tensor<4x2x3xf32>
}

// -----

// One index along axis 0, but a slice of 3 of the 7 columns.
func.func @gather_partial_slice(%x: tensor<6x7xf32>, %i: tensor<3x1xi32>) -> tensor<3x3xf32> {
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.gather' is supported only in the form of numpy.take(x, indices, axis=d)
  %0 = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 3>}> : (tensor<6x7xf32>, tensor<3x1xi32>) -> tensor<3x3xf32>
  return %0 : tensor<3x3xf32>
}

// -----

func.func @bitwise_reduce(%x: tensor<4x8xi32>) -> tensor<4xi32> {
  %c = stablehlo.constant dense<-1> : tensor<i32>
  // CHECK: {{.*}}convert-stablehlo-to-graph.mlir:[[# @LINE + 1]]:3: error: 'stablehlo.reduce' with a bitwise and body on i32 is not supported (only i1: all, any)
  %0 = stablehlo.reduce(%x init: %c) applies stablehlo.and across dimensions = [1] : (tensor<4x8xi32>, tensor<i32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}
