// RUN: mlfuse-opt %s | mlfuse-opt | filecheck %s
// RUN: mlfuse-opt %s --print-op-generic | mlfuse-opt | filecheck %s
// RUN: mlfuse-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// Every stablehlo and chlo op in the pretty form jax prints, printed, re-parsed and
// printed again, and the same through the generic form (whose property names are
// StableHLO's own).

// CHECK-LABEL: func.func public @elementwise
// CHECK-NEXT: %abs = stablehlo.abs %x : tensor<4x8xf32>
// CHECK-NEXT: %neg = stablehlo.negate %abs : tensor<4x8xf32>
// CHECK-NEXT: %exp = stablehlo.exponential %neg : tensor<4x8xf32>
// CHECK-NEXT: %log = stablehlo.log %exp : tensor<4x8xf32>
// CHECK-NEXT: %sqrt = stablehlo.sqrt %log : tensor<4x8xf32>
// CHECK-NEXT: %rsqrt = stablehlo.rsqrt %sqrt : tensor<4x8xf32>
// CHECK-NEXT: %tanh = stablehlo.tanh %rsqrt : tensor<4x8xf32>
// CHECK-NEXT: %sig = stablehlo.logistic %tanh : tensor<4x8xf32>
// CHECK-NEXT: %erf = chlo.erf %sig : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %erfc = chlo.erfc %erf : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %sin = stablehlo.sine %erfc : tensor<4x8xf32>
// CHECK-NEXT: %add = stablehlo.add %sin, %y : tensor<4x8xf32>
// CHECK-NEXT: %sub = stablehlo.subtract %add, %y : tensor<4x8xf32>
// CHECK-NEXT: %mul = stablehlo.multiply %sub, %y : tensor<4x8xf32>
// CHECK-NEXT: %div = stablehlo.divide %mul, %y : tensor<4x8xf32>
// CHECK-NEXT: %max = stablehlo.maximum %div, %y : tensor<4x8xf32>
// CHECK-NEXT: %min = stablehlo.minimum %max, %y : tensor<4x8xf32>
// CHECK-NEXT: %pow = stablehlo.power %min, %y : tensor<4x8xf32>
// CHECK-NEXT: %rem = stablehlo.remainder %pow, %y : tensor<4x8xf32>
// CHECK-NEXT: %and = stablehlo.and %b, %b : tensor<4x8xi1>
// CHECK-NEXT: %or = stablehlo.or %and, %b : tensor<4x8xi1>
// CHECK-NEXT: %xor = stablehlo.xor %or, %b : tensor<4x8xi1>
// CHECK-NEXT: %not = stablehlo.not %xor : tensor<4x8xi1>
// CHECK-NEXT: %cmp = stablehlo.compare LT, %rem, %y, FLOAT : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
// CHECK-NEXT: %icmp = stablehlo.compare EQ, %i, %i : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi1>
// CHECK-NEXT: %sel = stablehlo.select %cmp, %rem, %y : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK-NEXT: %lo = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %clamp = stablehlo.clamp %lo, %sel, %lo : (tensor<f32>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT: %f = stablehlo.convert %i : (tensor<4x8xi32>) -> tensor<4x8xf32>
// CHECK-NEXT: %same = stablehlo.convert %f : tensor<4x8xf32>
// CHECK-NEXT: %r = stablehlo.add %clamp, %same : tensor<4x8xf32>
// CHECK-NEXT: func.return %r : tensor<4x8xf32>
func.func public @elementwise(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %b: tensor<4x8xi1>, %i: tensor<4x8xi32>) -> (tensor<4x8xf32> {jax.result_info = "result"}) {
  %abs = stablehlo.abs %x : tensor<4x8xf32>
  %neg = stablehlo.negate %abs : tensor<4x8xf32>
  %exp = stablehlo.exponential %neg : tensor<4x8xf32>
  %log = stablehlo.log %exp : tensor<4x8xf32>
  %sqrt = stablehlo.sqrt %log : tensor<4x8xf32>
  %rsqrt = stablehlo.rsqrt %sqrt : tensor<4x8xf32>
  %tanh = stablehlo.tanh %rsqrt : tensor<4x8xf32>
  %sig = stablehlo.logistic %tanh : tensor<4x8xf32>
  %erf = chlo.erf %sig : tensor<4x8xf32> -> tensor<4x8xf32>
  %erfc = chlo.erfc %erf : tensor<4x8xf32> -> tensor<4x8xf32>
  %sin = stablehlo.sine %erfc : tensor<4x8xf32>
  %add = stablehlo.add %sin, %y : tensor<4x8xf32>
  %sub = stablehlo.subtract %add, %y : tensor<4x8xf32>
  %mul = stablehlo.multiply %sub, %y : tensor<4x8xf32>
  %div = stablehlo.divide %mul, %y : tensor<4x8xf32>
  %max = stablehlo.maximum %div, %y : tensor<4x8xf32>
  %min = stablehlo.minimum %max, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %pow = stablehlo.power %min, %y : tensor<4x8xf32>
  %rem = stablehlo.remainder %pow, %y : tensor<4x8xf32>
  %and = stablehlo.and %b, %b : tensor<4x8xi1>
  %or = stablehlo.or %and, %b : tensor<4x8xi1>
  %xor = stablehlo.xor %or, %b : tensor<4x8xi1>
  %not = stablehlo.not %xor : tensor<4x8xi1>
  %cmp = stablehlo.compare LT, %rem, %y, FLOAT : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  %icmp = stablehlo.compare EQ, %i, %i : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi1>
  %sel = stablehlo.select %cmp, %rem, %y : tensor<4x8xi1>, tensor<4x8xf32>
  %lo = stablehlo.constant dense<0.0> : tensor<f32>
  %clamp = stablehlo.clamp %lo, %sel, %lo : (tensor<f32>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %f = stablehlo.convert %i : (tensor<4x8xi32>) -> tensor<4x8xf32>
  %same = stablehlo.convert %f : tensor<4x8xf32>
  %r = stablehlo.add %clamp, %same : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @bits
// CHECK-NEXT: %shl = stablehlo.shift_left %i, %i : tensor<4x8xi32>
// CHECK-NEXT: %sra = stablehlo.shift_right_arithmetic %shl, %i : tensor<4x8xi32>
// CHECK-NEXT: %srl = stablehlo.shift_right_logical %sra, %i : tensor<4x8xi32>
// CHECK-NEXT: %and = stablehlo.and %srl, %i : tensor<4x8xi32>
// CHECK-NEXT: %bits = stablehlo.bitcast_convert %x : (tensor<4x8xf32>) -> tensor<4x8xi32>
// CHECK-NEXT: %r = stablehlo.xor %and, %bits : tensor<4x8xi32>
func.func @bits(%x: tensor<4x8xf32>, %i: tensor<4x8xi32>) -> tensor<4x8xi32> {
  %shl = stablehlo.shift_left %i, %i : tensor<4x8xi32>
  %sra = stablehlo.shift_right_arithmetic %shl, %i : tensor<4x8xi32>
  %srl = stablehlo.shift_right_logical %sra, %i : tensor<4x8xi32>
  %and = stablehlo.and %srl, %i : tensor<4x8xi32>
  %bits = stablehlo.bitcast_convert %x : (tensor<4x8xf32>) -> tensor<4x8xi32>
  %r = stablehlo.xor %and, %bits : tensor<4x8xi32>
  return %r : tensor<4x8xi32>
}

// CHECK-LABEL: func.func @constants
// CHECK-NEXT: %ninf = stablehlo.constant dense<0xff800000> : tensor<f32>
// CHECK-NEXT: %c = stablehlo.constant dense<[1.500000e+00, -2.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: %iota = stablehlo.iota dim = 1 : tensor<4x8xi32>
// CHECK-NEXT: func.return %ninf, %c, %iota : tensor<f32>, tensor<2xf32>, tensor<4x8xi32>
func.func @constants() -> (tensor<f32>, tensor<2xf32>, tensor<4x8xi32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %c = stablehlo.constant dense<[1.5, -2.0]> : tensor<2xf32>
  %iota = stablehlo.iota dim = 1 : tensor<4x8xi32>
  return %ninf, %c, %iota : tensor<f32>, tensor<2xf32>, tensor<4x8xi32>
}

// CHECK-LABEL: func.func @shapes
// CHECK-NEXT: %b = stablehlo.broadcast_in_dim %v, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %t = stablehlo.transpose %b, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %r = stablehlo.reshape %t : (tensor<8x4xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %sl = stablehlo.slice %r [1:3, 0:8:2] : (tensor<4x8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %cat = stablehlo.concatenate %sl, %sl, dim = 0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %p = stablehlo.pad %sl, %s, low = [1, 0], high = [0, 2], interior = [0, 0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<3x6xf32>
// CHECK-NEXT: func.return %p : tensor<3x6xf32>
func.func @shapes(%x: tensor<4x8xf32>, %v: tensor<8xf32>, %s: tensor<f32>) -> tensor<3x6xf32> {
  %b = stablehlo.broadcast_in_dim %v, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
  %t = stablehlo.transpose %b, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %r = stablehlo.reshape %t : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %sl = stablehlo.slice %r [1:3, 0:8:2] : (tensor<4x8xf32>) -> tensor<2x4xf32>
  %cat = stablehlo.concatenate %sl, %sl, dim = 0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %p = stablehlo.pad %sl, %s, low = [1, 0], high = [0, 2], interior = [0, 0] : (tensor<2x4xf32>, tensor<f32>) -> tensor<3x6xf32>
  return %p : tensor<3x6xf32>
}

// CHECK-LABEL: func.func @reductions
// CHECK-NEXT: %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %c = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT: %sum = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT: %m, %m_1 = stablehlo.reduce(%x init: %zero), (%i init: %c) across dimensions = [1] : (tensor<4x8xf32>, tensor<4x8xi32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xi32>) reducer(%a: tensor<f32>, %b: tensor<f32>) (%ia: tensor<i32>, %ib: tensor<i32>) {
// CHECK-NEXT: %gt = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT: %v = stablehlo.select %gt, %a, %b : tensor<i1>, tensor<f32>
// CHECK-NEXT: %j = stablehlo.select %gt, %ia, %ib : tensor<i1>, tensor<i32>
// CHECK-NEXT: stablehlo.return %v, %j : tensor<f32>, tensor<i32>
// CHECK-NEXT: }
// CHECK-NEXT: func.return %sum, %m_1 : tensor<4xf32>, tensor<4xi32>
func.func @reductions(%x: tensor<4x8xf32>, %i: tensor<4x8xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %c = stablehlo.constant dense<0> : tensor<i32>
  %sum = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %m:2 = stablehlo.reduce(%x init: %zero), (%i init: %c) across dimensions = [1] : (tensor<4x8xf32>, tensor<4x8xi32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xi32>)
   reducer(%a: tensor<f32>, %b: tensor<f32>) (%ia: tensor<i32>, %ib: tensor<i32>)  {
    %gt = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %v = stablehlo.select %gt, %a, %b : tensor<i1>, tensor<f32>
    %j = stablehlo.select %gt, %ia, %ib : tensor<i1>, tensor<i32>
    stablehlo.return %v, %j : tensor<f32>, tensor<i32>
  }
  return %sum, %m#1 : tensor<4xf32>, tensor<4xi32>
}

// CHECK-LABEL: func.func @contractions
// CHECK-NEXT: %d = stablehlo.dot_general %q, %k, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4x8xf32>, tensor<2x8x3xf32>) -> tensor<2x4x3xf32>
// CHECK-NEXT: %y = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
// CHECK-NEXT: func.return %d, %y : tensor<2x4x3xf32>, tensor<1x4x8x8xf32>
func.func @contractions(%q: tensor<2x4x8xf32>, %k: tensor<2x8x3xf32>, %x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> (tensor<2x4x3xf32>, tensor<1x4x8x8xf32>) {
  %d = stablehlo.dot_general %q, %k, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x4x8xf32>, tensor<2x8x3xf32>) -> tensor<2x4x3xf32>
  %y = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  return %d, %y : tensor<2x4x3xf32>, tensor<1x4x8x8xf32>
}

// CHECK-LABEL: func.func @dynamic_and_sort
// CHECK-NEXT: %s = stablehlo.dynamic_slice %x, %i, %i, sizes = [2, 2] : (tensor<4x5xf32>, tensor<i32>, tensor<i32>) -> tensor<2x2xf32>
// CHECK-NEXT: %w = stablehlo.dynamic_update_slice %x, %u, %i, %i : (tensor<4x5xf32>, tensor<2x2xf32>, tensor<i32>, tensor<i32>) -> tensor<4x5xf32>
// CHECK-NEXT: %o, %o_1 = "stablehlo.sort"(%x, %k) <{dimension = 1 : i64, is_stable = true}> ({
// CHECK-NEXT: ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
// CHECK-NEXT: %lt = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
// CHECK-NEXT: stablehlo.return %lt : tensor<i1>
// CHECK-NEXT: }) : (tensor<4x5xf32>, tensor<4x5xi32>) -> (tensor<4x5xf32>, tensor<4x5xi32>)
// CHECK-NEXT: func.return %s, %w, %o, %o_1 : tensor<2x2xf32>, tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xi32>
func.func @dynamic_and_sort(%x: tensor<4x5xf32>, %u: tensor<2x2xf32>, %i: tensor<i32>, %k: tensor<4x5xi32>) -> (tensor<2x2xf32>, tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xi32>) {
  %s = stablehlo.dynamic_slice %x, %i, %i, sizes = [2, 2] : (tensor<4x5xf32>, tensor<i32>, tensor<i32>) -> tensor<2x2xf32>
  %w = stablehlo.dynamic_update_slice %x, %u, %i, %i : (tensor<4x5xf32>, tensor<2x2xf32>, tensor<i32>, tensor<i32>) -> tensor<4x5xf32>
  %o:2 = "stablehlo.sort"(%x, %k) <{dimension = 1 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
    %lt = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) : (tensor<4x5xf32>, tensor<4x5xi32>) -> (tensor<4x5xf32>, tensor<4x5xi32>)
  return %s, %w, %o#0, %o#1 : tensor<2x2xf32>, tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xi32>
}

// GENERIC: "stablehlo.compare"(%{{.*}}, %{{.*}}) <{comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type FLOAT>}>
// GENERIC: "stablehlo.constant"() <{value = dense<0xff800000> : tensor<f32>}> : () -> tensor<f32>
// GENERIC: "stablehlo.iota"() <{iota_dimension = 1 : i64}> : () -> tensor<4x8xi32>
// GENERIC: "stablehlo.broadcast_in_dim"(%{{.*}}) <{broadcast_dimensions = array<i64: 1>}>
// GENERIC: "stablehlo.transpose"(%{{.*}}) <{permutation = array<i64: 1, 0>}>
// GENERIC: "stablehlo.slice"(%{{.*}}) <{start_indices = array<i64: 1, 0>, limit_indices = array<i64: 3, 8>, strides = array<i64: 1, 2>}>
// GENERIC: "stablehlo.concatenate"(%{{.*}}, %{{.*}}) <{dimension = 0 : i64}>
// GENERIC: "stablehlo.pad"(%{{.*}}, %{{.*}}) <{edge_padding_low = array<i64: 1, 0>, edge_padding_high = array<i64: 0, 2>, interior_padding = array<i64: 0, 0>}>
// GENERIC: "stablehlo.reduce"(%{{.*}}, %{{.*}}) <{dimensions = array<i64: 1>}> ({
// GENERIC: "stablehlo.add"
// GENERIC: "stablehlo.return"
// GENERIC: "stablehlo.dot_general"(%{{.*}}, %{{.*}}) <{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}>
// GENERIC: "stablehlo.convolution"(%x, %w) <{dimension_numbers = #stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>, window_strides = array<i64: 1, 1>, padding = dense<1> : tensor<2x2xi64>, lhs_dilation = array<i64: 1, 1>, rhs_dilation = array<i64: 1, 1>, window_reversal = array<i1: false, false>, batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}>
// GENERIC: "stablehlo.dynamic_slice"(%x, %i, %i) <{slice_sizes = array<i64: 2, 2>}>
// GENERIC: "stablehlo.dynamic_update_slice"(%x, %u, %i, %i) : (tensor<4x5xf32>, tensor<2x2xf32>, tensor<i32>, tensor<i32>) -> tensor<4x5xf32>
// GENERIC: "stablehlo.sort"(%x, %k) <{dimension = 1 : i64, is_stable = true}> ({

// CHECK-LABEL: func.func @scatter
// CHECK-NEXT: %r = "stablehlo.scatter"(%x, %i, %v) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
// CHECK-NEXT: ^bb0(%a: tensor<i32>, %b: tensor<i32>):
// CHECK-NEXT: %s = stablehlo.add %a, %b : tensor<i32>
// CHECK-NEXT: stablehlo.return %s : tensor<i32>
// CHECK-NEXT: }) : (tensor<8xi32>, tensor<4x1xi32>, tensor<4xi32>) -> tensor<8xi32>
// GENERIC: "stablehlo.scatter"(%x, %i, %v) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
func.func @scatter(%x: tensor<8xi32>, %i: tensor<4x1xi32>, %v: tensor<4xi32>) -> tensor<8xi32> {
  %r = "stablehlo.scatter"(%x, %i, %v) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %s = stablehlo.add %a, %b : tensor<i32>
    stablehlo.return %s : tensor<i32>
  }) : (tensor<8xi32>, tensor<4x1xi32>, tensor<4xi32>) -> tensor<8xi32>
  return %r : tensor<8xi32>
}

// The pretty form jax prints parses; it prints in the generic form.
// CHECK-LABEL: func.func @fori
// CHECK-NEXT: %c = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT: %r, %r_1 = "stablehlo.while"(%x, %c) ({
// CHECK-NEXT: ^bb0(%iterArg: tensor<4xf32>, %{{.*}}: tensor<i32>):
// CHECK: stablehlo.return %lt : tensor<i1>
// CHECK-NEXT: }, {
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<4xf32>, %{{.*}}: tensor<i32>):
// CHECK: }) : (tensor<4xf32>, tensor<i32>) -> (tensor<4xf32>, tensor<i32>)
// GENERIC: "stablehlo.while"(%x, %c) ({
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

// CHECK-LABEL: func.func public @float_math
// CHECK-NEXT: %fin = stablehlo.is_finite %x : (tensor<4xf32>) -> tensor<4xi1>
// CHECK-NEXT: %even = stablehlo.round_nearest_even %x : tensor<4xf32>
// CHECK-NEXT: %afz = stablehlo.round_nearest_afz %even : tensor<4xf32>
// GENERIC: "stablehlo.is_finite"(%x) : (tensor<4xf32>) -> tensor<4xi1>
// GENERIC: "stablehlo.round_nearest_afz"(%even) : (tensor<4xf32>) -> tensor<4xf32>
func.func public @float_math(%x: tensor<4xf32>) -> (tensor<4xi1>, tensor<4xf32>) {
  %fin = stablehlo.is_finite %x : (tensor<4xf32>) -> tensor<4xi1>
  %even = stablehlo.round_nearest_even %x : tensor<4xf32>
  %afz = stablehlo.round_nearest_afz %even : tensor<4xf32>
  return %fin, %afz : tensor<4xi1>, tensor<4xf32>
}

// tan, cbrt, atan2, chlo.erf_inv, popcnt and count_leading_zeros.
// CHECK-LABEL: func.func @more_math
// CHECK-NEXT: %tan = stablehlo.tan %x : tensor<4xf32>
// CHECK-NEXT: %cbrt = stablehlo.cbrt %tan : tensor<4xf32>
// CHECK-NEXT: %atan2 = stablehlo.atan2 %cbrt, %x : tensor<4xf32>
// CHECK-NEXT: %inv = chlo.erf_inv %atan2 : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: %pop = stablehlo.popcnt %u : tensor<4xui32>
// CHECK-NEXT: %clz = stablehlo.count_leading_zeros %pop : tensor<4xui32>
// GENERIC: "stablehlo.atan2"(%{{.*}}, %{{.*}}) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// GENERIC: "stablehlo.count_leading_zeros"(%{{.*}}) : (tensor<4xui32>) -> tensor<4xui32>
func.func @more_math(%x: tensor<4xf32>, %u: tensor<4xui32>) -> (tensor<4xf32>, tensor<4xui32>) {
  %tan = stablehlo.tan %x : tensor<4xf32>
  %cbrt = stablehlo.cbrt %tan : tensor<4xf32>
  %atan2 = stablehlo.atan2 %cbrt, %x : tensor<4xf32>
  %inv = chlo.erf_inv %atan2 : tensor<4xf32> -> tensor<4xf32>
  %pop = stablehlo.popcnt %u : tensor<4xui32>
  %clz = stablehlo.count_leading_zeros %pop : tensor<4xui32>
  return %inv, %clz : tensor<4xf32>, tensor<4xui32>
}

// lax.cond as jax prints it: the generic form, regions of branches.
// CHECK-LABEL: func.func @cond
// CHECK-NEXT: %r = "stablehlo.case"(%i) ({
// CHECK-NEXT: %n = stablehlo.negate %x : tensor<4xf32>
// CHECK-NEXT: stablehlo.return %n : tensor<4xf32>
// CHECK-NEXT: }, {
// CHECK-NEXT: stablehlo.return %x : tensor<4xf32>
// CHECK-NEXT: }) : (tensor<i32>) -> tensor<4xf32>
func.func @cond(%x: tensor<4xf32>, %i: tensor<i32>) -> tensor<4xf32> {
  %r = "stablehlo.case"(%i) ({
    %n = stablehlo.negate %x : tensor<4xf32>
    stablehlo.return %n : tensor<4xf32>
  }, {
    stablehlo.return %x : tensor<4xf32>
  }) : (tensor<i32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
