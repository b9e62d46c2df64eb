// RUN: mlfuse-opt %s | mlfuse-opt | filecheck %s
// RUN: mlfuse-opt %s --print-op-generic | mlfuse-opt | filecheck %s
// RUN: mlfuse-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// Every graph op in its custom form, printed, re-parsed and printed again, and
// the same through the generic form.

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<4x8xf32>, %i: tensor<3xi32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %neg = graph.neg %x : tensor<4x8xf32>
  // CHECK-NEXT: %abs = graph.abs %neg : tensor<4x8xf32>
  // CHECK-NEXT: %exp = graph.exp %abs : tensor<4x8xf32>
  // CHECK-NEXT: %log = graph.log %exp : tensor<4x8xf32>
  // CHECK-NEXT: %sqrt = graph.sqrt %log : tensor<4x8xf32>
  // CHECK-NEXT: %rsqrt = graph.rsqrt %sqrt : tensor<4x8xf32>
  // CHECK-NEXT: %rec = graph.reciprocal %rsqrt : tensor<4x8xf32>
  // CHECK-NEXT: %tanh = graph.tanh %rec : tensor<4x8xf32>
  // CHECK-NEXT: %erf = graph.erf %tanh : tensor<4x8xf32>
  // CHECK-NEXT: %sin = graph.sin %erf : tensor<4x8xf32>
  // CHECK-NEXT: %cos = graph.cos %sin : tensor<4x8xf32>
  // CHECK-NEXT: %sig = graph.sigmoid %cos : tensor<4x8xf32>
  // CHECK-NEXT: %relu = graph.relu %sig : tensor<4x8xf32>
  // CHECK-NEXT: %gelu = graph.gelu %relu : tensor<4x8xf32>
  // CHECK-NEXT: %gelu_tanh = graph.gelu %gelu {approximate = "tanh"} : tensor<4x8xf32>
  // CHECK-NEXT: %ineg = graph.neg %i : tensor<3xi32>
  // CHECK-NEXT: %iabs = graph.abs %ineg : tensor<3xi32>
  // CHECK-NEXT: %irelu = graph.relu %iabs : tensor<3xi32>
  // CHECK-NEXT: func.return %gelu_tanh : tensor<4x8xf32>
  %neg = graph.neg %x : tensor<4x8xf32>
  %abs = graph.abs %neg : tensor<4x8xf32>
  %exp = graph.exp %abs : tensor<4x8xf32>
  %log = graph.log %exp : tensor<4x8xf32>
  %sqrt = graph.sqrt %log : tensor<4x8xf32>
  %rsqrt = graph.rsqrt %sqrt : tensor<4x8xf32>
  %rec = graph.reciprocal %rsqrt : tensor<4x8xf32>
  %tanh = graph.tanh %rec : tensor<4x8xf32>
  %erf = graph.erf %tanh : tensor<4x8xf32>
  %sin = graph.sin %erf : tensor<4x8xf32>
  %cos = graph.cos %sin : tensor<4x8xf32>
  %sig = graph.sigmoid %cos : tensor<4x8xf32>
  %relu = graph.relu %sig : tensor<4x8xf32>
  %gelu = graph.gelu %relu : tensor<4x8xf32>
  %gelu_tanh = graph.gelu %gelu {approximate = "tanh"} : tensor<4x8xf32>
  %ineg = graph.neg %i : tensor<3xi32>
  %iabs = graph.abs %ineg : tensor<3xi32>
  %irelu = graph.relu %iabs : tensor<3xi32>
  func.return %gelu_tanh : tensor<4x8xf32>
}

// GENERIC-LABEL: "func.func"() <{sym_name = "unary"
// GENERIC: %neg = "graph.neg"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// GENERIC: %gelu_tanh = "graph.gelu"(%gelu) <{approximate = "tanh"}> : (tensor<4x8xf32>) -> tensor<4x8xf32>

// CHECK-LABEL: func.func @binary
func.func @binary(%a: tensor<2x3xf16>, %b: tensor<2x3xf16>, %i: tensor<5xi64>, %j: tensor<5xi64>) -> tensor<2x3xf16> {
  // CHECK-NEXT: %add = graph.add %a, %b : tensor<2x3xf16>
  // CHECK-NEXT: %sub = graph.sub %add, %b : tensor<2x3xf16>
  // CHECK-NEXT: %mul = graph.mul %sub, %a : tensor<2x3xf16>
  // CHECK-NEXT: %div = graph.div %mul, %b : tensor<2x3xf16>
  // CHECK-NEXT: %max = graph.max %div, %a : tensor<2x3xf16>
  // CHECK-NEXT: %min = graph.min %max, %b : tensor<2x3xf16>
  // CHECK-NEXT: %pow = graph.pow %min, %a : tensor<2x3xf16>
  // CHECK-NEXT: %idiv = graph.div %i, %j : tensor<5xi64>
  // CHECK-NEXT: %imax = graph.max %idiv, %j : tensor<5xi64>
  // CHECK-NEXT: func.return %pow : tensor<2x3xf16>
  %add = graph.add %a, %b : tensor<2x3xf16>
  %sub = graph.sub %add, %b : tensor<2x3xf16>
  %mul = graph.mul %sub, %a : tensor<2x3xf16>
  %div = graph.div %mul, %b : tensor<2x3xf16>
  %max = graph.max %div, %a : tensor<2x3xf16>
  %min = graph.min %max, %b : tensor<2x3xf16>
  %pow = graph.pow %min, %a : tensor<2x3xf16>
  %idiv = graph.div %i, %j : tensor<5xi64>
  %imax = graph.max %idiv, %j : tensor<5xi64>
  func.return %pow : tensor<2x3xf16>
}

// GENERIC-LABEL: "func.func"() <{sym_name = "binary"
// GENERIC: %add = "graph.add"(%a, %b) : (tensor<2x3xf16>, tensor<2x3xf16>) -> tensor<2x3xf16>

// CHECK-LABEL: func.func @compare_select_cast
func.func @compare_select_cast(%a: tensor<8xbf16>, %b: tensor<8xbf16>) -> tensor<8xi32> {
  // CHECK-NEXT: %eq = graph.compare eq, %a, %b : tensor<8xbf16>
  // CHECK-NEXT: %ne = graph.compare ne, %a, %b : tensor<8xbf16>
  // CHECK-NEXT: %lt = graph.compare lt, %a, %b : tensor<8xbf16>
  // CHECK-NEXT: %le = graph.compare le, %a, %b : tensor<8xbf16>
  // CHECK-NEXT: %gt = graph.compare gt, %a, %b : tensor<8xbf16>
  // CHECK-NEXT: %ge = graph.compare ge, %a, %b : tensor<8xbf16>
  // CHECK-NEXT: %sel = graph.select %lt, %a, %b : tensor<8xi1>, tensor<8xbf16>
  // CHECK-NEXT: %f = graph.cast %sel : tensor<8xbf16> -> tensor<8xf32>
  // CHECK-NEXT: %n = graph.cast %f : tensor<8xf32> -> tensor<8xi32>
  // CHECK-NEXT: %bits = graph.cast %ge : tensor<8xi1> -> tensor<8xi64>
  // CHECK-NEXT: func.return %n : tensor<8xi32>
  %eq = graph.compare eq, %a, %b : tensor<8xbf16>
  %ne = graph.compare ne, %a, %b : tensor<8xbf16>
  %lt = graph.compare lt, %a, %b : tensor<8xbf16>
  %le = graph.compare le, %a, %b : tensor<8xbf16>
  %gt = graph.compare gt, %a, %b : tensor<8xbf16>
  %ge = graph.compare ge, %a, %b : tensor<8xbf16>
  %sel = graph.select %lt, %a, %b : tensor<8xi1>, tensor<8xbf16>
  %f = graph.cast %sel : tensor<8xbf16> -> tensor<8xf32>
  %n = graph.cast %f : tensor<8xf32> -> tensor<8xi32>
  %bits = graph.cast %ge : tensor<8xi1> -> tensor<8xi64>
  func.return %n : tensor<8xi32>
}

// GENERIC-LABEL: "func.func"() <{sym_name = "compare_select_cast"
// GENERIC: %eq = "graph.compare"(%a, %b) <{predicate = "eq"}> : (tensor<8xbf16>, tensor<8xbf16>) -> tensor<8xi1>
// GENERIC: %sel = "graph.select"(%lt, %a, %b) : (tensor<8xi1>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<8xbf16>

// CHECK-LABEL: func.func @broadcast_reduce
func.func @broadcast_reduce(%x: tensor<4x8xf64>, %v: tensor<8xf64>, %s: tensor<f64>) -> tensor<f64> {
  // CHECK-NEXT: %row = graph.broadcast %v {dims = array<i64: 1>} : tensor<8xf64> -> tensor<4x8xf64>
  // CHECK-NEXT: %splat = graph.broadcast %s {dims = array<i64>} : tensor<f64> -> tensor<2x4x8xf64>
  // CHECK-NEXT: %sum = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<4x8xf64> -> tensor<4xf64>
  // CHECK-NEXT: %max = graph.reduce_max %x {axes = array<i64: 1>, keepdims} : tensor<4x8xf64> -> tensor<4x1xf64>
  // CHECK-NEXT: %min = graph.reduce_min %x {axes = array<i64: 0>, keepdims} : tensor<4x8xf64> -> tensor<1x8xf64>
  // CHECK-NEXT: %mean = graph.reduce_mean %splat {axes = array<i64: 0, 2>} : tensor<2x4x8xf64> -> tensor<4xf64>
  // CHECK-NEXT: %prod = graph.reduce_prod %x {axes = array<i64: 0, 1>} : tensor<4x8xf64> -> tensor<f64>
  // CHECK-NEXT: func.return %prod : tensor<f64>
  %row = graph.broadcast %v {dims = array<i64: 1>} : tensor<8xf64> -> tensor<4x8xf64>
  %splat = graph.broadcast %s {dims = array<i64>} : tensor<f64> -> tensor<2x4x8xf64>
  %sum = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<4x8xf64> -> tensor<4xf64>
  %max = graph.reduce_max %x {axes = array<i64: 1>, keepdims} : tensor<4x8xf64> -> tensor<4x1xf64>
  %min = graph.reduce_min %x {axes = array<i64: 0>, keepdims} : tensor<4x8xf64> -> tensor<1x8xf64>
  %mean = graph.reduce_mean %splat {axes = array<i64: 0, 2>} : tensor<2x4x8xf64> -> tensor<4xf64>
  %prod = graph.reduce_prod %x {axes = array<i64: 0, 1>} : tensor<4x8xf64> -> tensor<f64>
  func.return %prod : tensor<f64>
}

// GENERIC-LABEL: "func.func"() <{sym_name = "broadcast_reduce"
// GENERIC: %row = "graph.broadcast"(%v) <{dims = array<i64: 1>}> : (tensor<8xf64>) -> tensor<4x8xf64>
// GENERIC: %max = "graph.reduce_max"(%x) <{axes = array<i64: 1>, keepdims}> : (tensor<4x8xf64>) -> tensor<4x1xf64>

// CHECK-LABEL: func.func @data_movement
func.func @data_movement(%x: tensor<2x3x4xf32>, %y: tensor<2x5x4xf32>) -> tensor<2x8x4xf32> {
  // CHECK-NEXT: %t = graph.transpose %x {perm = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  // CHECK-NEXT: %r = graph.reshape %t : tensor<4x2x3xf32> -> tensor<24xf32>
  // CHECK-NEXT: %s = graph.slice %x {start = array<i64: 0, 1, 0>, stop = array<i64: 2, 3, 4>, step = array<i64: 1, 1, 2>} : tensor<2x3x4xf32> -> tensor<2x2x2xf32>
  // CHECK-NEXT: %p = graph.pad %s {low = array<i64: 0, 1, 0>, high = array<i64: 0, 0, 2>, value = -1.000000e+00 : f32} : tensor<2x2x2xf32> -> tensor<2x3x4xf32>
  // CHECK-NEXT: %c = graph.concat %x, %y, %p {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x3x4xf32>) -> tensor<2x11x4xf32>
  // CHECK-NEXT: %one = graph.concat %y {axis = 0 : i64} : (tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  // CHECK-NEXT: %c2 = graph.concat %x, %y {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x8x4xf32>
  // CHECK-NEXT: func.return %c2 : tensor<2x8x4xf32>
  %t = graph.transpose %x {perm = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %r = graph.reshape %t : tensor<4x2x3xf32> -> tensor<24xf32>
  %s = graph.slice %x {start = array<i64: 0, 1, 0>, stop = array<i64: 2, 3, 4>, step = array<i64: 1, 1, 2>} : tensor<2x3x4xf32> -> tensor<2x2x2xf32>
  %p = graph.pad %s {low = array<i64: 0, 1, 0>, high = array<i64: 0, 0, 2>, value = -1.0 : f32} : tensor<2x2x2xf32> -> tensor<2x3x4xf32>
  %c = graph.concat %x, %y, %p {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x3x4xf32>) -> tensor<2x11x4xf32>
  %one = graph.concat %y {axis = 0 : i64} : (tensor<2x5x4xf32>) -> tensor<2x5x4xf32>
  %c2 = graph.concat %x, %y {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x8x4xf32>
  func.return %c2 : tensor<2x8x4xf32>
}

// GENERIC-LABEL: "func.func"() <{sym_name = "data_movement"
// GENERIC: %p = "graph.pad"(%s) <{low = array<i64: 0, 1, 0>, high = array<i64: 0, 0, 2>, value = -1.000000e+00 : f32}> : (tensor<2x2x2xf32>) -> tensor<2x3x4xf32>
// GENERIC: %c = "graph.concat"(%x, %y, %p) <{axis = 1 : i64}> : (tensor<2x3x4xf32>, tensor<2x5x4xf32>, tensor<2x3x4xf32>) -> tensor<2x11x4xf32>

// CHECK-LABEL: func.func @contractions
func.func @contractions(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %p: tensor<3x4x8xi32>, %q: tensor<3x8x2xi32>) -> tensor<4x16xf32> {
  // CHECK-NEXT: %mm = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  // CHECK-NEXT: %bmm = graph.batch_matmul %p, %q : (tensor<3x4x8xi32>, tensor<3x8x2xi32>) -> tensor<3x4x2xi32>
  // CHECK-NEXT: func.return %mm : tensor<4x16xf32>
  %mm = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %bmm = graph.batch_matmul %p, %q : (tensor<3x4x8xi32>, tensor<3x8x2xi32>) -> tensor<3x4x2xi32>
  func.return %mm : tensor<4x16xf32>
}

// CHECK-LABEL: func.func @constants
func.func @constants() -> tensor<2x2xf32> {
  // CHECK-NEXT: %splat = graph.constant dense<1.500000e+00> : tensor<2x2xf32>
  // CHECK-NEXT: %dense = graph.constant dense<[[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
  // CHECK-NEXT: %ints = graph.constant dense<[1, -2, 3]> : tensor<3xi32>
  // CHECK-NEXT: %bools = graph.constant dense<[true, false]> : tensor<2xi1>
  // CHECK-NEXT: %scalar = graph.constant dense<7> : tensor<i64>
  // CHECK-NEXT: %named = graph.constant {note = "kept"} dense<0.000000e+00> : tensor<2x2xf32>
  // CHECK-NEXT: func.return %dense : tensor<2x2xf32>
  %splat = graph.constant dense<1.5> : tensor<2x2xf32>
  %dense = graph.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %ints = graph.constant dense<[1, -2, 3]> : tensor<3xi32>
  %bools = graph.constant dense<[true, false]> : tensor<2xi1>
  %scalar = graph.constant dense<7> : tensor<i64>
  %named = graph.constant {note = "kept"} dense<0.0> : tensor<2x2xf32>
  func.return %dense : tensor<2x2xf32>
}

// GENERIC-LABEL: "func.func"() <{sym_name = "constants"
// GENERIC: %splat = "graph.constant"() <{value = dense<1.500000e+00> : tensor<2x2xf32>}> : () -> tensor<2x2xf32>
// GENERIC: %named = "graph.constant"() <{value = dense<0.000000e+00> : tensor<2x2xf32>}> {note = "kept"} : () -> tensor<2x2xf32>

// Gathers, remainders and the unsigned and narrow integer types.
// CHECK-LABEL: func.func @gathers
func.func @gathers(%t: tensor<10x4xf32>, %ids: tensor<2x3xi64>, %k: tensor<i32>, %e: tensor<10x2xi64>, %u: tensor<5xui8>, %s: tensor<5xi16>) -> tensor<2x3x4xf32> {
  // CHECK-NEXT: %g = graph.gather %t, %ids {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  // CHECK-NEXT: %col = graph.gather %t, %k {axis = 1 : i64} : (tensor<10x4xf32>, tensor<i32>) -> tensor<10xf32>
  // CHECK-NEXT: %ge = graph.gather_elements %t, %e {axis = 1 : i64} : (tensor<10x4xf32>, tensor<10x2xi64>) -> tensor<10x2xf32>
  // CHECK-NEXT: %mod = graph.rem %u, %u : tensor<5xui8>
  // CHECK-NEXT: %fmod = graph.rem %s, %s {fmod} : tensor<5xi16>
  // CHECK-NEXT: func.return %g : tensor<2x3x4xf32>
  %g = graph.gather %t, %ids {axis = 0} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %col = graph.gather %t, %k {axis = 1} : (tensor<10x4xf32>, tensor<i32>) -> tensor<10xf32>
  %ge = graph.gather_elements %t, %e {axis = 1} : (tensor<10x4xf32>, tensor<10x2xi64>) -> tensor<10x2xf32>
  %mod = graph.rem %u, %u : tensor<5xui8>
  %fmod = graph.rem %s, %s {fmod} : tensor<5xi16>
  func.return %g : tensor<2x3x4xf32>
}

// Infinities, NaN and -0.0 print as hexadecimal bits and read back as themselves.
// CHECK-LABEL: func.func @special_floats
func.func @special_floats() -> tensor<4xf32> {
  // CHECK-NEXT: %c = graph.constant dense<[0xff800000, 0x7f800000, 0x7fc00000, -0.000000e+00]> : tensor<4xf32>
  %c = graph.constant dense<[0xFF800000, 0x7F800000, 0x7FC00000, -0.0]> : tensor<4xf32>
  func.return %c : tensor<4xf32>
}

// Bitwise ops and shifts on integers.
// CHECK-LABEL: func.func @bitwise
func.func @bitwise(%u: tensor<5xui8>, %s: tensor<5xi32>) -> tensor<5xi32> {
  // CHECK-NEXT: %and = graph.bitand %u, %u : tensor<5xui8>
  // CHECK-NEXT: %or = graph.bitor %s, %s : tensor<5xi32>
  // CHECK-NEXT: %xor = graph.bitxor %s, %or : tensor<5xi32>
  // CHECK-NEXT: %not = graph.bitnot %u : tensor<5xui8>
  // CHECK-NEXT: %left = graph.shl %u, %not : tensor<5xui8>
  // CHECK-NEXT: %right = graph.shr %xor, %s : tensor<5xi32>
  // CHECK-NEXT: %bits = graph.bitcast %right : tensor<5xi32> -> tensor<5xf32>
  %and = graph.bitand %u, %u : tensor<5xui8>
  %or = graph.bitor %s, %s : tensor<5xi32>
  %xor = graph.bitxor %s, %or : tensor<5xi32>
  %not = graph.bitnot %u : tensor<5xui8>
  %left = graph.shl %u, %not : tensor<5xui8>
  %right = graph.shr %xor, %s : tensor<5xi32>
  %bits = graph.bitcast %right : tensor<5xi32> -> tensor<5xf32>
  func.return %right : tensor<5xi32>
}

// GENERIC-LABEL: "func.func"() <{sym_name = "gathers"
// GENERIC: %g = "graph.gather"(%t, %ids) <{axis = 0 : i64}> : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
// GENERIC: %fmod = "graph.rem"(%s, %s) <{fmod}> : (tensor<5xi16>, tensor<5xi16>) -> tensor<5xi16>
