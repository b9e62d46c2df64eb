// RUN: mlfuse-opt %s --split-input-file -p expand-math | filecheck %s

// f32 transcendentals become straight-line arith: no math.exp/log/tanh/erf/powf left.
// CHECK-LABEL: func.func @f32_ops
// CHECK-NOT: math.exp
// CHECK-NOT: math.log
// CHECK-NOT: math.tanh
// CHECK-NOT: math.erf
// CHECK-NOT: math.powf
// CHECK: arith.bitcast
// CHECK: func.return
func.func @f32_ops(%x: f32, %y: f32) -> (f32, f32, f32, f32, f32) {
  %e = math.exp %x : f32
  %l = math.log %x : f32
  %t = math.tanh %x : f32
  %r = math.erf %x : f32
  %p = math.powf %x, %y : f32
  func.return %e, %l, %t, %r, %p : f32, f32, f32, f32, f32
}

// -----

// exp: clamp, round x*log2(e) with the 1.5*2^23 trick, Cephes polynomial, scale by 2^n.
// CHECK-LABEL: func.func @exp_shape
// CHECK: arith.maximumf
// CHECK: arith.minimumf
// CHECK: arith.constant 0x4B400000 : f32
// CHECK: arith.shli
func.func @exp_shape(%x: f32) -> f32 {
  %e = math.exp %x : f32
  func.return %e : f32
}

// -----

// tanh keeps the sign of zero: the result takes x's sign last (tanh(-0) = -0).
// CHECK-LABEL: func.func @tanh_sign
// CHECK: %[[R:.*]] = math.copysign %{{.*}}, %x : f32
// CHECK-NEXT: func.return %[[R]]
func.func @tanh_sign(%x: f32) -> f32 {
  %t = math.tanh %x : f32
  func.return %t : f32
}

// -----

// pow's special values by selects: the sign bit of x (so -0.0 counts as negative),
// then 1 for y = 0, x = 1, or |x| = 1 with |y| = inf, last.
// CHECK-LABEL: func.func @pow_specials
// CHECK: arith.cmpi slt
// CHECK: arith.ori
// CHECK-NEXT: arith.ori
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[R:.*]] = arith.select %{{.*}}, %[[ONE]], %{{.*}} : f32
// CHECK-NEXT: func.return %[[R]]
func.func @pow_specials(%x: f32, %y: f32) -> f32 {
  %p = math.powf %x, %y : f32
  func.return %p : f32
}

// -----

// Other element types and other math ops are left for the LLVM lowering.
// CHECK-LABEL: func.func @kept
// CHECK-NEXT: math.exp %{{.*}} : f64
// CHECK-NEXT: math.sqrt %{{.*}} : f32
func.func @kept(%x: f64, %y: f32) -> (f64, f32) {
  %e = math.exp %x : f64
  %s = math.sqrt %y : f32
  func.return %e, %s : f64, f32
}

// -----

// expand-math takes no options.
// RUN: not mlfuse-opt %s -p 'expand-math{degree=3}' 2>&1 | filecheck %s --check-prefix=OPTION
// OPTION: <pass-pipeline>:1:1: error: invalid pass pipeline 'expand-math{degree=3}'
// CHECK-LABEL: func.func @after_options
func.func @after_options() {
  func.return
}
